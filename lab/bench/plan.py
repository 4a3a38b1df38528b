"""Planning a benchmark: its settings, the table's rows and the grid of jobs (nothing heavy runs).

A benchmark is a grid of *jobs*, one per (row, seed): a row is a method with optional config
overrides (ablation ``idipt[use_uom=False]``, sweep ``idipt[k=20]``) and optionally its own stream
δ (``idipt[delta=0.1]``). :func:`plan_bench` checks the model, the data and the rows and lays the
jobs out; :mod:`lab.bench.job` runs one, :mod:`lab.bench.run` all of them (using the cache of
:mod:`lab.bench.cache`), and :mod:`lab.bench.report` turns their records into figures.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine._version import __version__
from engine.config import FieldInfo, coerce, fields_of
from engine.data.readers import Dataset, open_dataset
from engine.errors import F2TTAError
from engine.methods import get_method_class, list_methods, method_config, method_config_class
from engine.model.card import card_path_for, read_card
from lab.bench.protocol import StreamParams, Subset, apply_prior, default_fragments, domain_test_sets

logger = logging.getLogger(__name__)


def default_methods() -> tuple[str, ...]:
    """The default table's rows: the registered methods with a ``bench_order``, in that order.

    The paper's methods come first, then the project's own method and its comparators; a method
    joins the table by setting ``bench_order`` in its own file.
    """
    ranked = [
        (order, name) for name in list_methods() if (order := get_method_class(name).bench_order) is not None
    ]
    return tuple(name for _, name in sorted(ranked))


#: The default table: the paper's methods, then the project's own method and its comparators.
DEFAULT_METHODS = default_methods()
#: The methods the paper compares, in the table's order.
PAPER_METHODS = tuple(name for name in DEFAULT_METHODS if get_method_class(name).in_paper)
SWEEP_ALIASES = {"k": "mask_percent", "bank": "bank_size"}  # --sweep key -> IDiPTConfig field
_DELTA = FieldInfo("delta", float, 1.0, "stream δ", low=0.0)
# The listing plan_bench made, reused by serial jobs in this process (see lab.bench.job).
LISTINGS: dict[tuple[str, int], Dataset] = {}


class BenchError(F2TTAError):
    """The benchmark cannot run as asked (unknown method, bad sweep, model and data disagree)."""


@dataclass(frozen=True)
class BenchSettings:
    """What to benchmark and how to run it."""

    data: Path  # dataset root or CSV (any layout of :func:`engine.data.open_dataset`)
    model: Path  # checkpoint with its card beside it
    methods: tuple[str, ...] | None = None  # None: the paper's methods that are registered
    seeds: tuple[int, ...] = tuple(range(8))  # stream (and method) seeds
    delta: float = 1.0  # stream δ
    fragments: int | None = None  # F per domain; None: :func:`lab.bench.protocol.default_fragments`
    limit: int | None = None  # images per stream (its first N); None: the whole stream
    subset: Subset = "test"  # the split that is streamed ("val" for the paper's K and δ sweeps)
    ablation: bool = False  # add I-DiPT rows without UoM / PGD / both / graphs
    sweep: str | None = None  # "delta=0.1,1", "k=10,20", "bank=5,10" or "<IDiPTConfig field>=..."
    positive_class: str | int | None = None  # None: the dataset's
    split_seed: int | None = None  # None: the model card's training split seed, else 0
    source_domain: str | None = None  # None: the model card's
    device: str = "auto"
    workers: int = 0  # local worker processes (0 or 1: serial, in this process)
    ray: str | None = None  # None: no Ray; "": start a local Ray; else the cluster address
    threads: int | None = None  # torch threads per job; None: cores // workers (Ray: 1; serial: as is)
    cache: Path | None = None  # finished jobs' records are kept here and reused (see lab.bench.cache)
    source_stats: int = 0  # >0: VPTTA/DPCore get this many source train images as their reference
    batch: int = 1  # images per model step (1: each method's own step; docs/method.md, "Batches")
    prior: tuple[tuple[str, float], ...] = ()  # label shift: (domain, positive share), see lab.bench.protocol
    known_sites: bool = False  # each domain's images are given to the method as one site (the app's case)


@dataclass(frozen=True)
class RowSpec:
    """One row of the table: a method, its config overrides and its stream δ."""

    name: str
    method: str
    overrides: tuple[tuple[str, Any], ...] = ()
    delta: float | None = None  # None: the benchmark's δ


@dataclass(frozen=True)
class BenchJob:
    """One (row, seed): everything a worker needs, as plain picklable values."""

    index: int
    row: str
    method: str
    overrides: tuple[tuple[str, Any], ...]
    seed: int
    stream: StreamParams
    data: str
    model: str
    positive_class: int
    device: str = "auto"
    threads: int | None = None
    source_stats: int = 0  # source-domain train images for the methods' statistics reference
    source_domain: str = ""
    known_sites: bool = False  # the method is told each image's domain as its site
    batch: int = 1  # images per model step (within the method's max_batch)


@dataclass
class BenchPlan:
    settings: BenchSettings
    rows: list[RowSpec]
    jobs: list[BenchJob]
    classes: tuple[str, ...]
    domains: tuple[str, ...]
    source_domain: str
    positive_class: int
    config: dict[str, Any]
    images_per_job: int

    @property
    def total_images(self) -> int:
        return self.images_per_job * len(self.jobs)


# ------------------------------------------------------------------------------------ planning
def parse_seeds(text: str) -> tuple[int, ...]:
    """``"0-7"``, ``"0,2,5"`` or ``"0-3,7"`` -> sorted unique seeds."""
    seeds: set[int] = set()
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        try:
            if sep:
                a, b = int(lo), int(hi)
                if b < a:
                    raise ValueError
                seeds.update(range(a, b + 1))
            else:
                seeds.add(int(part))
        except ValueError:
            raise BenchError(f"bad seeds {text!r}: use e.g. 0-7, 0,2,5 or 0-3,7") from None
    if not seeds:
        raise BenchError(f"bad seeds {text!r}: no seed given")
    return tuple(sorted(seeds))


def _coerce(info: FieldInfo, text: str) -> Any:
    try:
        return coerce(info, text)
    except ValueError as exc:
        raise BenchError(f"--sweep {exc}") from None


def parse_sweep(text: str) -> tuple[str, list[tuple[str, Any]]]:
    """``"k=10,20"`` -> ``("mask_percent", [("10", 10.0), ("20", 20.0)])``; key ``delta`` is the stream δ.

    The key is ``delta``, ``k`` (``mask_percent``), ``bank`` (``bank_size``) or any other field of
    the swept method's config (I-DiPT's unless the text starts with ``METHOD:``, e.g.
    ``idipt+:join=1,1.5``; see :func:`split_sweep`). Each value keeps its text for the row name.
    """
    method, text = split_sweep(text)
    key, sep, values = text.partition("=")
    key = key.strip()
    tokens = [v.strip() for v in values.split(",") if v.strip()]
    if not sep or not key or not tokens:
        raise BenchError(f"bad --sweep {text!r}: expected KEY=V1,V2,... e.g. k=10,20,30")
    if key == "delta":
        parsed = [(t, _coerce(_DELTA, t)) for t in tokens]
        if any(not (v > 0 and math.isfinite(v)) for _, v in parsed):
            raise BenchError(f"--sweep {text!r}: δ must be positive")
        return key, parsed
    if method not in list_methods():
        raise BenchError(f"--sweep: unknown method {method!r}; registered: {', '.join(list_methods())}")
    infos = {info.name: info for info in fields_of(method_config_class(method))}
    name = SWEEP_ALIASES.get(key, key) if method == "idipt" else key
    if name not in infos:
        aliases = list(SWEEP_ALIASES) if method == "idipt" else []
        known = ", ".join(["delta", *aliases, *infos])
        raise BenchError(f"--sweep {key!r} is not a sweepable setting of {method}; use one of {known}")
    return name, [(t, _coerce(infos[name], t)) for t in tokens]


def split_sweep(text: str) -> tuple[str, str]:
    """``"idipt+:lr=1,2"`` -> ``("idipt+", "lr=1,2")``; without a ``METHOD:`` prefix the method is I-DiPT."""
    head, sep, rest = text.partition(":")
    if sep and "=" not in head:
        return head.strip(), rest
    return "idipt", text


def make_config(method: str, overrides: Iterable[tuple[str, Any]]) -> Any:
    """The method's config dataclass with ``overrides`` (None for a method without config)."""
    over = dict(overrides)
    try:
        return method_config(method, over)
    except ValueError as exc:
        raise BenchError(f"{method} settings {over}: {exc}") from exc


def _row_name(method: str, pairs: Sequence[tuple[str, str]]) -> str:
    return method if not pairs else f"{method}[{','.join(f'{k}={v}' for k, v in pairs)}]"


def plan_rows(
    methods: Sequence[str], methods_given: bool, ablation: bool, sweep: str | None
) -> list[RowSpec]:
    """The table's rows.

    Without ``sweep``: one row per method, then (``ablation``) each listed method's ablation rows
    (:attr:`TTAMethod.ablations`; I-DiPT's when no listed method has any). A sweep of a method's
    setting (``k``/``bank`` or another I-DiPT field, or ``METHOD:FIELD=...``) gives one row of
    that method per value, after reference rows for the methods when they were named explicitly.
    A ``delta`` sweep gives one row per value for every named method (I-DiPT alone when none
    were named).
    """
    rows: list[RowSpec] = []
    if sweep is not None:
        swept, _ = split_sweep(sweep)
        key, values = parse_sweep(sweep)
        if key == "delta":
            for m in methods if methods_given else [swept]:
                rows += [RowSpec(_row_name(m, [("delta", t)]), m, (), v) for t, v in values]
        else:
            label = next((a for a, f in SWEEP_ALIASES.items() if f == key), key) if swept == "idipt" else key
            if methods_given:
                rows += [RowSpec(m, m) for m in methods]
            rows += [RowSpec(_row_name(swept, [(label, t)]), swept, ((key, v),)) for t, v in values]
    else:
        rows += [RowSpec(m, m) for m in methods]
    registered = set(list_methods())
    for r in rows:
        if r.method not in registered:
            raise BenchError(f"unknown method {r.method!r}; registered: {', '.join(sorted(registered))}")
    if ablation:
        ablated = [m for m in dict.fromkeys(r.method for r in rows) if get_method_class(m).ablations]
        if not ablated:
            rows.append(RowSpec("idipt", "idipt"))
            ablated = ["idipt"]
        for m in ablated:
            for over in get_method_class(m).ablations:
                rows.append(RowSpec(_row_name(m, [(k, str(v)) for k, v in over]), m, over))
    unique: list[RowSpec] = []
    for r in rows:
        if r.name not in {u.name for u in unique}:
            unique.append(r)
    for r in unique:
        make_config(r.method, r.overrides)  # fail now, not in a worker
    return unique


def plan_bench(settings: BenchSettings) -> BenchPlan:
    """Check the model, the data and the rows, and lay out the jobs (nothing heavy is loaded).

    Raises:
        BenchError, DatasetError, ModelLoadError: the inputs cannot be benchmarked.
    """
    if settings.batch < 1:
        raise BenchError("--batch must be at least 1")
    card = read_card(card_path_for(settings.model))
    ds = open_dataset(settings.data, positive_class=settings.positive_class)
    LISTINGS.clear()
    LISTINGS[(str(settings.data), ds.positive_class)] = ds  # serial jobs reuse this listing
    if tuple(card.classes) != tuple(ds.classes):
        raise BenchError(
            f"the model's classes {list(card.classes)} differ from the dataset's {list(ds.classes)}"
        )
    source = settings.source_domain or card.source_domain
    if not source:
        raise BenchError(f"{settings.model}: the model card names no source domain; pass --source-domain")
    if source not in ds.domains:
        raise BenchError(
            f"source domain {source!r} (from {'--source-domain' if settings.source_domain else 'the model card'})"
            f" is not a domain of {ds.root}: {', '.join(ds.domains)}"
        )
    split_seed = settings.split_seed
    if split_seed is None:
        split_seed = int(card.training.get("split_seed", 0)) if isinstance(card.training, dict) else 0
    sets = domain_test_sets(ds, split_seed, settings.subset)
    if settings.prior:
        try:
            sets = apply_prior(sets, settings.prior, ds.positive_class, split_seed)
        except ValueError as exc:
            raise BenchError(f"--prior: {exc}") from None
    if settings.fragments is None:
        fragments, rule = default_fragments(ds, sets)
    else:
        fragments, rule = settings.fragments, "given"
    methods_given = settings.methods is not None
    if settings.methods is not None:
        methods = list(settings.methods)
    else:
        methods = list(default_methods())
    rows = plan_rows(methods, methods_given, settings.ablation, settings.sweep)
    if not settings.seeds:
        raise BenchError("no seeds given")
    if settings.source_stats < 0:
        raise BenchError("--source-stats must be 0 or more")
    threads = settings.threads
    if threads is None and settings.ray is not None:
        threads = 1
    elif threads is None and settings.workers > 1:
        threads = max(1, _cores() // settings.workers)
    jobs: list[BenchJob] = []
    for row in rows:
        params = StreamParams(
            delta=row.delta if row.delta is not None else settings.delta,
            fragments=fragments,
            split_seed=split_seed,
            limit=settings.limit,
            subset=settings.subset,
            prior=settings.prior,
        )
        for seed in settings.seeds:
            job = BenchJob(
                index=len(jobs),
                row=row.name,
                method=row.method,
                overrides=row.overrides,
                seed=seed,
                stream=params,
                data=str(settings.data),
                model=str(settings.model),
                positive_class=ds.positive_class,
                device=settings.device,
                threads=threads,
                source_stats=settings.source_stats,
                source_domain=source,
                known_sites=settings.known_sites,
                batch=settings.batch,
            )
            jobs.append(job)
    total = sum(len(v) for v in sets.values())
    per_job = min(total, settings.limit) if settings.limit else total
    config: dict[str, Any] = {
        "software_version": __version__,
        "data": str(settings.data),
        "model": str(settings.model),
        "model_arch": card.arch,
        "rows": [
            {"name": r.name, "method": r.method, "overrides": dict(r.overrides), "delta": r.delta}
            for r in rows
        ],
        "seeds": list(settings.seeds),
        "delta": settings.delta,
        "fragments": fragments,
        "fragments_rule": rule,
        "split_seed": split_seed,
        "limit": settings.limit,
        "subset": settings.subset,
        "prior": dict(settings.prior),
        "known_sites": settings.known_sites,
        "images_per_stream": per_job,
        "images_per_domain": {d: len(v) for d, v in sets.items()},
        "positive_class": ds.classes[ds.positive_class],
        "positive_class_index": ds.positive_class,
        "ablation": settings.ablation,
        "sweep": settings.sweep,
        "device": settings.device,
        "workers": settings.workers,
        "ray": settings.ray,
        "threads_per_job": threads,
        "cache": None if settings.cache is None else str(settings.cache),
        "source_stats": settings.source_stats,
        "batch": settings.batch,
        "std": "population standard deviation over seeds (ddof=0); seeds where a figure is undefined are left out",
        "units": "percent, except seconds_per_image",
    }
    return BenchPlan(settings, rows, jobs, ds.classes, ds.domains, source, ds.positive_class, config, per_job)


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1
