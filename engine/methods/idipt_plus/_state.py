"""Saving and restoring I-DiPT+'s site groups (tensors + JSON metadata; no pickle)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import torch

from engine.methods.idipt_plus._groups import SiteGroup
from engine.methods.idipt_plus._operating_point import Fit, OperatingPoint

PREFIX = "op"


def _finite_or_none(value: float) -> float | None:
    return value if math.isfinite(value) else None


def operating_point_state(op: OperatingPoint) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """``(tensors, meta)``: every group's buffers as float64 tensors, its scalars as JSON."""
    tensors: dict[str, torch.Tensor] = {}
    groups: list[dict[str, Any]] = []
    for g in op.groups.groups:
        key = f"{PREFIX}.g{g.ident}"
        tensors[f"{key}.centroid"] = torch.from_numpy(g.centroid.copy())
        tensors[f"{key}.margins"] = torch.from_numpy(g.margins.copy())
        tensors[f"{key}.coords"] = torch.from_numpy(g.coords.copy())
        fit = None
        if isinstance(g.fit, Fit):
            fit = {
                k: (_finite_or_none(v) if isinstance(v, float) else v)
                for k, v in dataclasses.asdict(g.fit).items()
            }
        groups.append(
            {
                "ident": g.ident,
                "count": g.count,
                "last_seen": g.last_seen,
                "threshold": g.threshold,
                "estimates": list(g.estimates),
                "fitted_at": g.fitted_at,
                "fits": g.fits,
                "fit": fit,
            }
        )
    return tensors, {"seen": op.seen, "created": op.groups.created, "groups": groups}


def _fit(data: Any) -> Fit | None:
    if data is None:
        return None
    if not isinstance(data, dict):
        raise ValueError("a saved fit must be an object")
    names = {f.name for f in dataclasses.fields(Fit)}
    if set(data) != names:
        raise ValueError(f"a saved fit has the fields {sorted(data)}, expected {sorted(names)}")
    values = {k: (math.nan if v is None else v) for k, v in data.items()}
    return Fit(
        images=int(values["images"]),
        accepted=bool(values["accepted"]),
        reason=str(values["reason"]),
        **{k: float(values[k]) for k in names - {"images", "accepted", "reason"}},
    )


def load_operating_point(op: OperatingPoint, tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> None:
    """Restore what :func:`operating_point_state` saved; raises ValueError/KeyError/TypeError on a mismatch."""
    groups = op.groups
    restored: list[SiteGroup] = []
    for entry in meta["groups"]:
        ident = int(entry["ident"])
        key = f"{PREFIX}.g{ident}"
        centroid = tensors[f"{key}.centroid"].double().numpy().copy()
        margins = tensors[f"{key}.margins"].double().numpy().copy()
        coords = tensors[f"{key}.coords"].double().numpy().copy()
        if margins.shape != (groups.capacity,) or coords.shape != (groups.capacity, groups.feature_dim):
            raise ValueError(f"site group {ident} was saved with another capacity or feature dimension")
        if centroid.ndim != 1 or not all(np.isfinite(a).all() for a in (centroid, margins, coords)):
            raise ValueError(f"site group {ident} holds non-finite or misshapen data")
        threshold = float(entry["threshold"])
        if not math.isfinite(threshold):
            raise ValueError(f"site group {ident} has a non-finite threshold")
        restored.append(
            SiteGroup(
                ident=ident,
                centroid=centroid,
                count=int(entry["count"]),
                margins=margins,
                coords=coords,
                last_seen=int(entry["last_seen"]),
                threshold=threshold,
                estimates=[float(v) for v in entry["estimates"]],
                fitted_at=int(entry["fitted_at"]),
                fits=int(entry["fits"]),
                fit=_fit(entry["fit"]),
            )
        )
    if len(restored) > groups.max_groups:
        raise ValueError(
            f"the state holds {len(restored)} site groups, more than max_groups={groups.max_groups}"
        )
    groups.groups = restored
    groups.created = int(meta["created"])
    op.seen = int(meta["seen"])
