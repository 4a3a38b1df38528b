"""The F²TTA benchmark: every method on the same seeded streams, mean ± std over seeds.

A benchmark is a grid of *jobs*, one per (row, seed): a row is a method with optional config
overrides (ablation ``idipt[use_uom=False]``, sweep ``idipt[k=20]``) and optionally its own stream
δ (``idipt[delta=0.1]``). Each job is a pure function of (model path, data root, method, config,
seed, stream parameters) -> per-image records: it opens the dataset, rebuilds its stream
(:mod:`engine.protocol`), loads a fresh copy of the model, seeds Python, numpy and torch with the
seed, and adapts image by image, reading every image once (a background thread reads ahead).
So the jobs can run in any order and anywhere -- serially, in local processes
(``workers``; spawn context, torch threads per worker = cores // workers) or on a Ray cluster --
and give the same records; only the timings differ.

:func:`plan_bench` checks the inputs and lays out the jobs; :func:`run_plan` executes them and
:func:`summarize` turns the records into the figures of :mod:`engine.metrics`.
"""

from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import logging
import math
import multiprocessing
import os
import random
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from queue import Empty
from typing import Any

import numpy as np
import torch

from engine._bench_cache import JobCache, dataset_digest, job_key, model_digest
from engine._version import __version__
from engine.data.readers import Dataset, Item, open_dataset, read_array, split_dataset
from engine.errors import F2TTAError, ImageReadError
from engine.methods import get_method_class, list_methods, method_config_class
from engine.metrics import aggregate, run_metrics, running_accuracy, undefined_notes
from engine.model_card import card_path_for, load_model, read_card
from engine.protocol import (
    StreamParams,
    Subset,
    apply_prior,
    dataset_stream,
    default_fragments,
    domain_test_sets,
)
from engine.session import Session

logger = logging.getLogger(__name__)

PAPER_METHODS = ("source", "tent", "dltta", "sar", "cotta", "vptta", "cmae", "dpcore", "idipt")
SWEEP_ALIASES = {"k": "mask_percent", "bank": "bank_size"}  # --sweep key -> IDiPTConfig field
_READ_AHEAD = 8  # images decoded ahead of the adapting thread


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
    fragments: int | None = None  # F per domain; None: :func:`engine.protocol.default_fragments`
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
    cache: Path | None = None  # finished jobs' records are kept here and reused (see engine._bench_cache)
    source_stats: int = 0  # >0: VPTTA/DPCore get this many source train images as their reference
    prior: tuple[tuple[str, float], ...] = ()  # label shift: (domain, positive share), see engine.protocol


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


@dataclass
class JobRecords:
    """Per-image records of one job, in stream order (unreadable images left out)."""

    index: int
    row: str
    seed: int
    domains: tuple[str, ...]  # the dataset's domains; ``domain`` indexes them
    labels: np.ndarray  # (n,) int64
    preds: np.ndarray  # (n,) int64, adapted model
    source_preds: np.ndarray  # (n,) int64, frozen source model
    probs: np.ndarray  # (n, C) float32, adapted model
    domain: np.ndarray  # (n,) int32
    fragment: np.ndarray  # (n,) int32 fragment number in the stream
    seconds: np.ndarray  # (n,) float64 wall time of each step
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)


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


@dataclass
class BenchResult:
    plan: BenchPlan
    records: dict[str, list[JobRecords]]  # row -> one per seed, in seed order
    runs: dict[str, list[dict[str, Any]]]  # row -> run_metrics per seed
    methods: dict[str, dict[str, Any]]  # row -> aggregate

    def to_json(self) -> dict[str, Any]:
        """The benchmark JSON: config, classes, source_domain, domains, methods."""
        return {
            "config": self.plan.config,
            "classes": list(self.plan.classes),
            "source_domain": self.plan.source_domain,
            "domains": list(self.plan.domains),
            "methods": self.methods,
        }

    def running_curves(self) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """Row -> running accuracy (%) averaged over seeds, and its std (streams cut to the shortest)."""
        means: dict[str, np.ndarray] = {}
        stds: dict[str, np.ndarray] = {}
        for row, recs in self.records.items():
            curves = [running_accuracy(r.labels == r.preds) for r in recs if r.labels.size]
            if not curves:
                continue
            n = min(c.size for c in curves)
            stacked = np.stack([c[:n] for c in curves])
            means[row], stds[row] = stacked.mean(axis=0), stacked.std(axis=0)
        return means, stds


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


def _coerce(default: Any, text: str, name: str) -> Any:
    try:
        if isinstance(default, bool):
            low = text.lower()
            if low in ("1", "true", "yes", "on"):
                return True
            if low in ("0", "false", "no", "off"):
                return False
            raise ValueError(text)
        if isinstance(default, int):
            return int(text)
        if isinstance(default, float):
            return float(text)
    except ValueError:
        raise BenchError(f"--sweep {name}: {text!r} is not a valid {type(default).__name__}") from None
    return text


def parse_sweep(text: str) -> tuple[str, list[tuple[str, Any]]]:
    """``"k=10,20"`` -> ``("mask_percent", [("10", 10.0), ("20", 20.0)])``; key ``delta`` is the stream δ.

    The key is ``delta``, ``k`` (``mask_percent``), ``bank`` (``bank_size``) or any other field of
    the swept method's config (I-DiPT's unless the text starts with ``METHOD:``, e.g.
    ``idipt+:neighbours=50,100``; see :func:`split_sweep`). Each value keeps its text for the row name.
    """
    method, text = split_sweep(text)
    key, sep, values = text.partition("=")
    key = key.strip()
    tokens = [v.strip() for v in values.split(",") if v.strip()]
    if not sep or not key or not tokens:
        raise BenchError(f"bad --sweep {text!r}: expected KEY=V1,V2,... e.g. k=10,20,30")
    if key == "delta":
        parsed = [(t, _coerce(1.0, t, key)) for t in tokens]
        if any(not (v > 0 and math.isfinite(v)) for _, v in parsed):
            raise BenchError(f"--sweep {text!r}: δ must be positive")
        return key, parsed
    if method not in list_methods():
        raise BenchError(f"--sweep: unknown method {method!r}; registered: {', '.join(list_methods())}")
    cls = method_config_class(method)
    defaults = {f.name: f.default for f in dataclasses.fields(cls)} if cls is not None else {}
    name = SWEEP_ALIASES.get(key, key) if method == "idipt" else key
    if name not in defaults:
        aliases = list(SWEEP_ALIASES) if method == "idipt" else []
        known = ", ".join(["delta", *aliases, *defaults])
        raise BenchError(f"--sweep {key!r} is not a sweepable setting of {method}; use one of {known}")
    return name, [(t, _coerce(defaults[name], t, key)) for t in tokens]


def split_sweep(text: str) -> tuple[str, str]:
    """``"idipt+:lr=1,2"`` -> ``("idipt+", "lr=1,2")``; without a ``METHOD:`` prefix the method is I-DiPT."""
    head, sep, rest = text.partition(":")
    if sep and "=" not in head:
        return head.strip(), rest
    return "idipt", text


def make_config(method: str, overrides: Iterable[tuple[str, Any]]) -> Any:
    """The method's config dataclass with ``overrides`` (None for a method without config)."""
    over = dict(overrides)
    cls = method_config_class(method)
    if cls is None:
        if over:
            raise BenchError(f"method {method!r} has no settings to change ({', '.join(over)})")
        return None
    try:
        return cls(**over)
    except (TypeError, ValueError) as exc:
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
    card = read_card(card_path_for(settings.model))
    ds = open_dataset(settings.data, positive_class=settings.positive_class)
    _DATASETS.clear()
    _DATASETS[(str(settings.data), ds.positive_class)] = ds  # serial jobs reuse this listing
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
        registered = set(list_methods())
        methods = [m for m in PAPER_METHODS if m in registered]
        missing = [m for m in PAPER_METHODS if m not in registered]
        if missing:
            logger.warning("methods not registered, left out: %s", ", ".join(missing))
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
        "std": "population standard deviation over seeds (ddof=0); seeds where a figure is undefined are left out",
        "units": "percent, except seconds_per_image",
    }
    return BenchPlan(settings, rows, jobs, ds.classes, ds.domains, source, ds.positive_class, config, per_job)


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


# ------------------------------------------------------------------------------------ one job
_DATASETS: dict[tuple[str, int], Dataset] = {}  # per process: a job reuses the listing of the last one


def _open_cached(data: str, positive_class: int) -> Dataset:
    key = (data, positive_class)
    if key not in _DATASETS:
        _DATASETS.clear()
        _DATASETS[key] = open_dataset(data, positive_class=positive_class)
    return _DATASETS[key]


def _read(item: Item, size: int) -> np.ndarray | str:
    try:
        return read_array(item.path, size)
    except ImageReadError as exc:
        return str(exc)


def _read_ahead(items: Sequence[Item], size: int) -> Iterator[np.ndarray | str]:
    """Decode the images in order, ``_READ_AHEAD`` ahead of the consumer, each exactly once."""
    with cf.ThreadPoolExecutor(max_workers=1, thread_name_prefix="bench-read") as pool:
        pending: deque[cf.Future[np.ndarray | str]] = deque()
        it = iter(items)
        for item in it:
            pending.append(pool.submit(_read, item, size))
            if len(pending) >= _READ_AHEAD:
                break
        while pending:
            yield pending.popleft().result()
            nxt = next(it, None)
            if nxt is not None:
                pending.append(pool.submit(_read, nxt, size))


def run_job(job: BenchJob, on_image: Callable[[], None] | None = None) -> JobRecords:
    """Adapt ``job.method`` along stream ``job.seed`` and record every image's outcome.

    Seeds Python's, numpy's and torch's global generators with ``job.seed`` first, so the
    records never depend on what ran before in the same process.
    """
    threads = torch.get_num_threads()
    if job.threads:
        torch.set_num_threads(job.threads)
    try:
        return _run_job(job, on_image)
    finally:
        torch.set_num_threads(threads)


def _run_job(job: BenchJob, on_image: Callable[[], None] | None) -> JobRecords:
    random.seed(job.seed)
    np.random.seed(job.seed % 2**32)
    torch.manual_seed(job.seed)
    ds = _open_cached(job.data, job.positive_class)
    stream = dataset_stream(ds, job.seed, job.stream)
    session = Session(
        load_model(job.model),
        method=job.method,
        method_config=make_config(job.method, job.overrides),
        device=job.device,
        seed=job.seed,
    )
    size = session.card.img_size
    if job.source_stats > 0 and session.uses_source_statistics:
        _fit_source_statistics(session, ds, job, size)
    dom_index = {d: i for i, d in enumerate(ds.domains)}
    frag_of = stream.fragment_index()
    kept: list[int] = []
    labels: list[int] = []
    preds: list[int] = []
    source_preds: list[int] = []
    probs: list[np.ndarray] = []
    seconds: list[float] = []
    skipped: list[tuple[str, str]] = []
    for pos, (item, image) in enumerate(zip(stream.items, _read_ahead(stream.items, size), strict=True)):
        if isinstance(image, str):
            logger.warning("skipping %s", image)
            skipped.append((str(item.path), image))
        else:
            result = session.step(image)
            kept.append(pos)
            labels.append(item.label)
            preds.append(result.prediction)
            source_preds.append(result.source_prediction)
            probs.append(result.probs.astype(np.float32))
            seconds.append(result.seconds)
        if on_image is not None:
            on_image()
    n_cls = len(ds.classes)
    return JobRecords(
        index=job.index,
        row=job.row,
        seed=job.seed,
        domains=tuple(ds.domains),
        labels=np.asarray(labels, dtype=np.int64),
        preds=np.asarray(preds, dtype=np.int64),
        source_preds=np.asarray(source_preds, dtype=np.int64),
        probs=np.stack(probs) if probs else np.zeros((0, n_cls), dtype=np.float32),
        domain=np.asarray([dom_index[stream.items[p].domain] for p in kept], dtype=np.int32),
        fragment=frag_of[kept].astype(np.int32) if kept else np.zeros(0, dtype=np.int32),
        seconds=np.asarray(seconds, dtype=np.float64),
        skipped=skipped,
    )


def _fit_source_statistics(session: Session, ds: Dataset, job: BenchJob, size: int) -> None:
    """The first ``job.source_stats`` readable images of the source train split as the reference."""
    train = split_dataset(ds, job.stream.split_seed)[job.source_domain].train
    images: list[np.ndarray] = []
    for item in train:
        if len(images) == job.source_stats:
            break
        image = _read(item, size)
        if isinstance(image, str):
            logger.warning("source statistics: skipping %s", image)
        else:
            images.append(image)
    if not images:
        raise BenchError(f"no readable training image of {job.source_domain!r} for the source statistics")
    session.fit_source_statistics(images)


# ------------------------------------------------------------------------------------ execution
def _init_worker(threads: int | None) -> None:
    if threads:
        torch.set_num_threads(threads)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")


def _ray_job(job: BenchJob) -> JobRecords:
    return run_job(job)


def run_plan(plan: BenchPlan, progress: Callable[[int], None] | None = None) -> BenchResult:
    """Run every job of ``plan`` (serially, in processes or on Ray) and summarise.

    With ``settings.cache`` set, jobs whose records are cached are not run again, and each job
    that finishes is cached at once, so an interrupted benchmark resumes where it stopped.

    Args:
        plan: from :func:`plan_bench`.
        progress: called with the number of images just finished: per image when serial, every
            half second per worker process with ``workers``, per job on Ray; cached jobs count
            at once.
    """
    s = plan.settings
    start = time.perf_counter()
    records: list[JobRecords] = []
    todo = list(plan.jobs)
    keys: dict[int, str] = {}
    cache = JobCache(s.cache) if s.cache is not None else None
    if cache is not None:
        data_id = dataset_digest(_open_cached(str(s.data), plan.positive_class))
        model_id = model_digest(s.model, card_path_for(s.model))
        todo = []
        for job in plan.jobs:
            keys[job.index] = job_key(job, model_id, data_id)
            rec = cache.load(keys[job.index], job)
            if rec is None:
                todo.append(job)
            else:
                records.append(rec)
                if progress is not None:
                    progress(rec.labels.size + len(rec.skipped))
        plan.config["jobs_from_cache"] = len(records)
        if records:
            logger.info("%d of %d jobs read from the cache %s", len(records), len(plan.jobs), s.cache)

    def finished(rec: JobRecords) -> None:
        records.append(rec)
        if cache is not None:
            cache.store(keys[rec.index], rec)

    def job_done(rec: JobRecords) -> None:  # Ray reports progress per job
        finished(rec)
        if progress is not None:
            progress(rec.labels.size + len(rec.skipped))

    if s.ray is not None:
        _run_ray(todo, s.ray, s.workers, job_done)
    elif s.workers > 1:
        _run_processes(todo, s.workers, finished, progress)
    else:
        tick = (lambda: progress(1)) if progress is not None else None
        for job in todo:
            finished(run_job(job, tick))
    plan.config["seconds"] = round(time.perf_counter() - start, 3)
    return summarize(plan, records)


class _ImageTicker:
    """Counts a worker's images and sends the count to the parent at most every ``every`` seconds."""

    def __init__(self, queue: Any, every: float = 0.5) -> None:
        self.queue, self.every = queue, every
        self.count, self.last = 0, time.monotonic()

    def __call__(self) -> None:
        self.count += 1
        if time.monotonic() - self.last >= self.every:
            self.flush()

    def flush(self) -> None:
        if self.count:
            self.queue.put(self.count)
            self.count, self.last = 0, time.monotonic()


def _run_job_reporting(job: BenchJob, queue: Any) -> JobRecords:
    """:func:`run_job` in a worker process, reporting finished images through ``queue``."""
    ticker = _ImageTicker(queue)
    try:
        return run_job(job, ticker)
    finally:
        ticker.flush()


def _run_processes(
    jobs: Sequence[BenchJob],
    workers: int,
    finished: Callable[[JobRecords], None],
    progress: Callable[[int], None] | None,
) -> None:
    """Run ``jobs`` in spawned processes; ``progress`` hears of images as the workers finish them."""
    if not jobs:
        return
    threads = jobs[0].threads
    ctx = multiprocessing.get_context("spawn")
    manager = ctx.Manager() if progress is not None else None
    queue = manager.Queue() if manager is not None else None

    def drain() -> None:
        while queue is not None and progress is not None:
            try:
                progress(queue.get_nowait())
            except Empty:
                return

    pool = cf.ProcessPoolExecutor(
        max_workers=max(1, min(workers, len(jobs))),
        mp_context=ctx,
        initializer=_init_worker,
        initargs=(threads,),
    )
    try:
        if queue is not None:
            pending = {pool.submit(_run_job_reporting, job, queue) for job in jobs}
        else:
            pending = {pool.submit(run_job, job) for job in jobs}
        while pending:
            done, pending = cf.wait(pending, timeout=0.25, return_when=cf.FIRST_COMPLETED)
            drain()
            for fut in done:
                finished(fut.result())
        drain()
    except BaseException:
        # A failed job or Ctrl-C: drop the queued jobs and do not wait for the running ones.
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    finally:
        if manager is not None:
            manager.shutdown()
    pool.shutdown(wait=True)


def _run_ray(
    jobs: Sequence[BenchJob], address: str, workers: int, job_done: Callable[[JobRecords], None]
) -> None:
    if not jobs:
        return
    try:
        import ray
    except ImportError as exc:
        raise BenchError("--ray needs the ray package: pip install 'f2tta-studio[ray]'") from exc
    started = False
    if not ray.is_initialized():
        if address:
            ray.init(address=address, logging_level=logging.WARNING)
        else:
            # Local workers import the engine from the same place as this process.
            root = str(Path(__file__).resolve().parents[1])
            path = os.pathsep.join([root, *filter(None, [os.environ.get("PYTHONPATH")])])
            ray.init(
                num_cpus=workers if workers > 0 else None,
                include_dashboard=False,
                logging_level=logging.WARNING,
                runtime_env={"env_vars": {"PYTHONPATH": path}},
            )
        started = True
    try:
        threads = jobs[0].threads if jobs else None
        remote = ray.remote(num_cpus=threads or 1)(_ray_job)
        pending = [remote.remote(job) for job in jobs]
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            job_done(ray.get(done[0]))
    finally:
        if started:
            ray.shutdown()


# ------------------------------------------------------------------------------------ summary
def summarize(plan: BenchPlan, records: Sequence[JobRecords]) -> BenchResult:
    """Per-seed metrics and their mean ± std per row, in the plan's row and seed order."""
    ordered = sorted(records, key=lambda r: r.index)
    by_row: dict[str, list[JobRecords]] = {r.name: [] for r in plan.rows}
    for rec in ordered:
        by_row[rec.row].append(rec)
    runs: dict[str, list[dict[str, Any]]] = {}
    methods: dict[str, dict[str, Any]] = {}
    notes: dict[str, list[str]] = {}
    skipped: dict[str, str] = {}
    pos = plan.positive_class
    for row, recs in by_row.items():
        runs[row] = []
        for rec in recs:
            domain_names = np.asarray(rec.domains, dtype=object)[rec.domain]
            metrics = run_metrics(
                labels=rec.labels,
                preds=rec.preds,
                pos_scores=rec.probs[:, pos],
                domain_of=domain_names,
                domains=plan.domains,
                source_domain=plan.source_domain,
                positive=pos,
                seconds=rec.seconds,
            )
            runs[row].append(metrics)
            for note in undefined_notes(rec.labels, rec.preds, pos):
                notes.setdefault(row, []).append(f"seed {rec.seed}: {note}")
            skipped.update(rec.skipped)
        methods[row] = aggregate(runs[row])
    for row, lines in notes.items():
        for line in lines:
            logger.warning("%s, %s", row, line)
    plan.config["notes"] = notes
    plan.config["skipped_images"] = [{"path": p, "reason": r} for p, r in sorted(skipped.items())]
    return BenchResult(plan, by_row, runs, methods)
