"""Choosing I-DiPT+'s settings without target labels: simulated shifts of the source validation split.

For every development model: its source validation split (never trained on, never streamed in a
test table) is seen through each simulated site of :mod:`lab.bench.shifts` (8 corruption
families × 3 strengths, plus the clean split), several randomly flipped/jittered copies per
image; the source passes of these pools are computed once (:func:`simulated_pool`). Streams are
then drawn from the pools (:func:`simulated_streams`): the clean site and a few simulated sites,
each at a positive share drawn from {0.1, 0.2, 0.5, 0.8, 0.9}, interleaved with δ ∈ {0.1, 1, 10}.
A setting is scored by replaying I-DiPT+ on every stream (:func:`score`): its worst site
(paired difference and the lower end of its exact 95 % interval) and its mean gain. Only source
labels are used; no target site of any dataset enters.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from safetensors import SafetensorError

from engine.config import FieldInfo, coerce, fields_of
from engine.data.readers import open_dataset, read_array, split_dataset
from engine.methods.idipt_plus import IDiPTPlusConfig
from engine.model.card import LoadedModel, _sha256_file, load_model
from engine.model.prompted_vit import PromptedViT
from engine.model.source_reference import SourceReference, find_reference
from engine.run.session import Session
from lab.bench.paired import Paired, paired
from lab.bench.replay import SourcePasses, compute_passes, read_passes, replay, write_passes
from lab.bench.shifts import FAMILIES, LEVELS, _flip, corrupt, draw_site
from lab.bench.streams import interleave, resample_site

SHARES = (0.1, 0.2, 0.5, 0.8, 0.9)
DELTAS = (0.1, 1.0, 10.0)


@dataclass(frozen=True)
class SimulatedPool:
    """One development model's simulated sites.

    Attributes:
        passes: source passes of every pool image.
        labels: ``(N,)`` their class indices.
        positive: ``(N,)`` whether each is of the positive class.
        site_of: ``(N,)`` index into ``names``.
        names: ``clean`` and ``FAMILYLEVEL`` (e.g. ``blur2``).
    """

    passes: SourcePasses
    labels: np.ndarray
    positive: np.ndarray
    site_of: np.ndarray
    names: tuple[str, ...]


def site_names() -> tuple[str, ...]:
    return ("clean", *(f"{f}{lvl}" for f in FAMILIES for lvl in LEVELS))


def simulated_pool(
    model: Path, data: Path, variants: int, seed: int, cache: Path | None, device: str = "cpu"
) -> SimulatedPool:
    """The simulated sites of ``model``'s source validation split (computed once, then cached)."""
    loaded = load_model(model)
    card = loaded.card
    training = card.training if isinstance(card.training, dict) else {}
    split_seed = int(training.get("split_seed", 0))
    ds = open_dataset(data, positive_class=card.positive_class)
    val = split_dataset(ds, split_seed)[card.source_domain].val
    names = site_names()
    h = hashlib.sha256(f"pool1\0{variants}\0{seed}\0{device}\0{_sha256_file(model)}".encode())
    h.update(Path(__file__).with_name("shifts.py").read_bytes())
    for item in val:
        h.update(f"{item.path}\0{item.label}\n".encode())
    key = h.hexdigest()
    path = (cache / f"pool-{key[:32]}.safetensors") if cache is not None else None
    positive = ds.positive_class
    labels_val = np.array([it.label for it in val], dtype=np.int64)
    n = len(val) * variants
    site_of = np.repeat(np.arange(len(names)), n)
    labels = np.tile(np.tile(labels_val, variants), len(names))
    if path is not None and path.is_file():
        try:
            return SimulatedPool(
                read_passes(path, key, len(names) * n), labels, labels == positive, site_of, names
            )
        except (OSError, ValueError, KeyError, SafetensorError):
            pass
    images = [read_array(it.path, card.img_size) for it in val]
    arrays: list[np.ndarray] = []
    for s, name in enumerate(names):
        rng = np.random.default_rng([seed, s])
        site = None if name == "clean" else draw_site(name[:-1], int(name[-1]), rng)
        for _ in range(variants):
            arrays += [_flip(im, rng) if site is None else corrupt(im, site, rng) for im in images]
    session = Session(loaded, method="source", device=device)
    passes = compute_passes(session, arrays)
    if path is not None:
        write_passes(path, key, passes)
    return SimulatedPool(passes, labels, labels == positive, site_of, names)


@dataclass(frozen=True)
class SimStream:
    """One simulated stream: pool indices in arrival order and each position's site label."""

    order: np.ndarray
    site_of: np.ndarray
    sites: tuple[str, ...]  # "name@share" per site number
    delta: float


def simulated_streams(
    pool: SimulatedPool, streams: int, sites: int, per_site: int, seed: int
) -> list[SimStream]:
    """Streams of the clean site and ``sites`` simulated sites at random shares (see the module docstring)."""
    rng = np.random.default_rng([seed, 11])
    out: list[SimStream] = []
    for k in range(streams):
        chosen = ["clean", *rng.choice(list(pool.names[1:]), sites, replace=False).tolist()]
        seqs, labels = [], []
        for name in chosen:
            share = float(rng.choice(SHARES))
            candidates = np.flatnonzero(pool.site_of == pool.names.index(name))
            seqs.append(resample_site(candidates, pool.positive, share, per_site, rng))
            labels.append(f"{name}@{share:g}")
        delta = DELTAS[k % len(DELTAS)]
        order, site_of = interleave(seqs, delta, 10, seed * 1000 + k)
        out.append(SimStream(order, site_of, tuple(labels), delta))
    return out


@dataclass
class DevModel:
    """A development model with its pools and streams."""

    name: str
    loaded: LoadedModel
    reference: SourceReference
    pool: SimulatedPool
    streams: list[SimStream] = field(default_factory=list)


def load_dev_model(
    model: Path,
    data: Path,
    variants: int,
    seed: int,
    cache: Path | None,
    streams: int,
    sites: int,
    per_site: int,
) -> DevModel:
    loaded = load_model(model)
    ref = find_reference(loaded.path, loaded.fingerprint, loaded.card.num_classes, PromptedViT(loaded.model))
    if ref is None:
        raise ValueError(f"{model} has no usable source reference (run `f2tta reference`)")
    pool = simulated_pool(model, data, variants, seed, cache)
    return DevModel(model.stem, loaded, ref, pool, simulated_streams(pool, streams, sites, per_site, seed))


@dataclass(frozen=True)
class Cell:
    """One simulated site of one stream under one setting."""

    model: str
    stream: int
    site: str
    delta: float
    result: Paired

    @property
    def harmful(self) -> bool:
        return self.result.harmful


def score(dev: Sequence[DevModel], overrides: Mapping[str, Any]) -> list[Cell]:
    """Replay I-DiPT+ with ``overrides`` on every development stream; one :class:`Cell` per site."""
    config = IDiPTPlusConfig(**dict(overrides))
    cells: list[Cell] = []
    for d in dev:
        for k, s in enumerate(d.streams):
            r = replay("idipt+", d.pool.passes.take(s.order), d.reference, d.loaded, config, seed=k)
            labels = d.pool.labels[s.order]
            for j, site in enumerate(s.sites):
                mask = s.site_of == j
                cells.append(
                    Cell(d.name, k, site, s.delta, paired(labels[mask], r.source_preds[mask], r.preds[mask]))
                )
    return cells


def summarise(cells: Sequence[Cell]) -> dict[str, Any]:
    """Worst cell, harmful cells and the mean gain over the simulated (non-clean) sites."""
    shifted = [c for c in cells if not c.site.startswith("clean@")]
    worst = min(cells, key=lambda c: (c.result.delta, c.result.low))
    lowest = min(cells, key=lambda c: c.result.low)
    errors = [100.0 - c.result.source_acc for c in shifted]
    gains = [c.result.delta for c in shifted]
    return {
        "cells": len(cells),
        "harmful": sum(c.harmful for c in cells),
        "worst_delta": worst.result.delta,
        "worst_cell": f"{worst.model} stream {worst.stream} {worst.site}",
        "lowest_low": lowest.result.low,
        "mean_gain": float(np.mean(gains)) if gains else 0.0,
        "error_closed": float(np.sum(gains) / np.sum(errors)) if errors and np.sum(errors) > 0 else 0.0,
        "fixed": sum(c.result.fixed for c in cells),
        "broken": sum(c.result.broken for c in cells),
    }


def parse_grid(items: Sequence[str]) -> list[dict[str, Any]]:
    """``["join=1,1.5", "quantile=0.1,0.2"]`` -> every combination as config overrides."""
    infos: dict[str, FieldInfo] = {f.name: f for f in fields_of(IDiPTPlusConfig)}
    axes: list[list[tuple[str, Any]]] = []
    for item in items:
        name, sep, values = item.partition("=")
        if not sep or name not in infos:
            raise ValueError(f"bad grid item {item!r}: expected FIELD=V1,V2 with a field of idipt+")
        axes.append([(name, coerce(infos[name], v.strip())) for v in values.split(",") if v.strip()])
    return [dict(combo) for combo in itertools.product(*axes)] if axes else [{}]


def choose(results: Sequence[tuple[dict[str, Any], dict[str, Any]]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The safe setting (no harmful cell) with the largest mean gain; the least harmful when none is safe."""
    safe = [r for r in results if r[1]["harmful"] == 0]
    pool = safe or sorted(results, key=lambda r: (r[1]["harmful"], -r[1]["lowest_low"]))[:1]
    return max(pool, key=lambda r: (r[1]["mean_gain"], r[1]["lowest_low"]))


def to_json(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, default=float)
