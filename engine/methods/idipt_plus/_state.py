"""Saving and restoring I-DiPT+'s units (tensors + JSON metadata; no pickle)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import torch

from engine.methods.idipt_plus._fit import Fit
from engine.methods.idipt_plus._groups import Pooled
from engine.methods.idipt_plus._operating_point import OperatingPoint
from engine.methods.idipt_plus._units import Unit

PREFIX = "op"
FORMAT = 2  # 1: groups by appearance only (before sites were named); refused with a clear message
# A state saved before named sites could split has no ``held``, ``appearance``, ``parent``, ``parts``
# or ``splittable``: its sites load as they were, and never split (their samples hold no appearance).


def _finite_or_none(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _unit_state(u: Unit, tensors: dict[str, torch.Tensor]) -> dict[str, Any]:
    key = f"{PREFIX}.u{u.ident}"
    tensors[f"{key}.margins"] = torch.from_numpy(u.margins.copy())
    tensors[f"{key}.coords"] = torch.from_numpy(u.coords.copy())
    tensors[f"{key}.centroid"] = torch.from_numpy(u.centroid.copy())
    if u.appearance.size:
        tensors[f"{key}.appearance"] = torch.from_numpy(u.appearance.copy())
    fit = None
    if isinstance(u.fit, Fit):
        fit = {
            k: (_finite_or_none(v) if isinstance(v, float) else v)
            for k, v in dataclasses.asdict(u.fit).items()
        }
    return {
        "ident": u.ident,
        "site": u.site,
        "count": u.count,
        "margin_sum": u.margin_sum,
        "last_seen": u.last_seen,
        "threshold": u.threshold,
        "estimates": list(u.estimates),
        "fitted_at": u.fitted_at,
        "fits": u.fits,
        "fit": fit,
        "prior": _finite_or_none(u.prior),
        "held": u.held,
        "parent": u.parent,
        "parts": list(u.parts),
        "splittable": u.splittable,
    }


def operating_point_state(op: OperatingPoint) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """``(tensors, meta)``: every unit's sample as float64 tensors, its scalars as JSON."""
    tensors: dict[str, torch.Tensor] = {}
    sites = [_unit_state(u, tensors) for u in op.sites.values()]
    parts = [_unit_state(p, tensors) for pair in op.parts.values() for p in pair]
    groups = [_unit_state(u, tensors) for u in op.groups.groups]
    pool = op.groups.pool
    if pool:
        tensors[f"{PREFIX}.pool.appearance"] = torch.from_numpy(np.stack([p.appearance for p in pool]))
        tensors[f"{PREFIX}.pool.coords"] = torch.from_numpy(np.stack([p.coords for p in pool]))
        tensors[f"{PREFIX}.pool.margins"] = torch.tensor([p.margin for p in pool], dtype=torch.float64)
    meta = {
        "format": FORMAT,
        "seen": op.seen,
        "units_created": op.units_created,
        "groups_created": op.groups.created,
        "groups_merged": op.groups.merged,
        "sites": sites,
        "parts": parts,
        "groups": groups,
        "pool": [p.index for p in pool],
    }
    return tensors, meta


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


def _finite(array: np.ndarray, what: str) -> np.ndarray:
    if not np.isfinite(array).all():
        raise ValueError(f"{what} holds non-finite data")
    return array


def _unit(entry: dict[str, Any], tensors: dict[str, torch.Tensor], op: OperatingPoint) -> Unit:
    ident = int(entry["ident"])
    key = f"{PREFIX}.u{ident}"
    margins = tensors[f"{key}.margins"].double().numpy().copy()
    coords = tensors[f"{key}.coords"].double().numpy().copy()
    centroid = tensors[f"{key}.centroid"].double().numpy().copy()
    cfg = op.settings
    if margins.shape != (cfg.capacity,) or coords.shape != (cfg.capacity, cfg.feature_dims):
        raise ValueError(f"unit {ident} was saved with another capacity or feature dimension")
    for array, what in ((margins, "margins"), (coords, "coords"), (centroid, "centroid")):
        _finite(array, f"unit {ident}'s {what}")
    threshold = float(entry["threshold"])
    margin_sum = float(entry["margin_sum"])
    if not (math.isfinite(threshold) and math.isfinite(margin_sum)):
        raise ValueError(f"unit {ident} has a non-finite threshold or margin sum")
    count = int(entry["count"])
    if count < 0:
        raise ValueError(f"unit {ident} has a negative count")
    held = int(entry.get("held", min(count, cfg.capacity)))
    if not 0 <= held <= min(count, cfg.capacity):
        raise ValueError(f"unit {ident} holds {held} sampled images of {count} (capacity {cfg.capacity})")
    appearance = np.zeros((0, 0))
    if f"{key}.appearance" in tensors:
        appearance = _finite(
            tensors[f"{key}.appearance"].double().numpy().copy(), f"unit {ident}'s appearance"
        )
        if appearance.ndim != 2 or appearance.shape[0] != cfg.capacity:
            raise ValueError(f"unit {ident}'s appearance sample has the shape {tuple(appearance.shape)}")
    splittable = bool(entry.get("splittable", False)) and appearance.shape[0] == cfg.capacity
    prior = entry.get("prior")
    return Unit(
        ident=ident,
        site=str(entry["site"]),
        count=count,
        margins=margins,
        coords=coords,
        margin_sum=margin_sum,
        last_seen=int(entry["last_seen"]),
        centroid=centroid,
        threshold=threshold,
        estimates=[float(v) for v in entry["estimates"]],
        fitted_at=int(entry["fitted_at"]),
        fits=int(entry["fits"]),
        fit=_fit(entry["fit"]),
        prior=math.nan if prior is None else float(prior),
        held=held,
        appearance=appearance,
        parent=int(entry.get("parent", -1)),
        parts=[int(i) for i in entry.get("parts", [])],
        splittable=splittable,
    )


def _parts(sites: dict[str, Unit], parts: list[Unit]) -> dict[str, list[Unit]]:
    """The parts by site, checked against their parents (each split site has its two, in order)."""
    out: dict[str, list[Unit]] = {}
    for part in parts:
        parent = sites.get(part.site)
        if parent is None or part.parent != parent.ident or part.ident not in parent.parts:
            raise ValueError(f"unit {part.ident} is a part of no split site of the state")
        out.setdefault(part.site, []).append(part)
    for site, parent in sites.items():
        if [p.ident for p in out.get(site, [])] != parent.parts:
            raise ValueError(f"the site {site!r} was split, but its parts are not all in the state")
    return out


def load_operating_point(op: OperatingPoint, tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> None:
    """Restore what :func:`operating_point_state` saved; raises ValueError/KeyError/TypeError on a mismatch."""
    if meta.get("format") != FORMAT:
        raise ValueError(
            "the state's site operating points were saved by an earlier version (site groups by "
            "appearance only); reset the method's state to continue"
        )
    sites = [_unit(e, tensors, op) for e in meta["sites"]]
    groups = [_unit(e, tensors, op) for e in meta["groups"]]
    if len(groups) > op.settings.max_groups:
        raise ValueError(
            f"the state holds {len(groups)} site groups, more than max_groups={op.settings.max_groups}"
        )
    indices = [int(i) for i in meta["pool"]]
    pool: list[Pooled] = []
    if indices:
        app = _finite(tensors[f"{PREFIX}.pool.appearance"].double().numpy(), "the pool's appearance")
        coords = _finite(tensors[f"{PREFIX}.pool.coords"].double().numpy(), "the pool's coordinates")
        margins = _finite(tensors[f"{PREFIX}.pool.margins"].double().numpy(), "the pool's margins")
        if not (app.shape[0] == coords.shape[0] == margins.shape[0] == len(indices)):
            raise ValueError("the pool's arrays differ in length")
        pool = [
            Pooled(app[k].copy(), float(margins[k]), coords[k].copy(), indices[k])
            for k in range(len(indices))
        ]
    op.sites = {u.site: u for u in sites}
    if len(op.sites) != len(sites):
        raise ValueError("the state names one site twice")
    op.parts = _parts(op.sites, [_unit(e, tensors, op) for e in meta.get("parts", [])])
    op.groups.groups = groups
    op.groups.pool = pool
    op.groups.created = int(meta["groups_created"])
    op.groups.merged = int(meta["groups_merged"])
    op.units_created = int(meta["units_created"])
    op.seen = int(meta["seen"])
