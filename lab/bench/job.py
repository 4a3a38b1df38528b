"""One benchmark job: a method along one seeded stream, through the engine's stream loop.

A job is a pure function of (model path, data root, method, config, seed, stream parameters) ->
per-image records: it opens the dataset, rebuilds its stream (:mod:`lab.bench.protocol`), loads a
fresh copy of the model, seeds Python, numpy and torch with the seed, and adapts image by image in
:class:`engine.run.stream.StreamRun` (the same loop as ``f2tta run`` and the app), reading every image
once, a few ahead on a helper thread. So jobs can run in any order and anywhere and give the same
records; only the timings differ. An unreadable image is skipped and listed; a failure of the
model step stops the benchmark with a message naming the image.
"""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from engine.data.readers import Dataset, Item, open_dataset, read_array, split_dataset
from engine.errors import ImageReadError
from engine.io.sources import StreamItem
from engine.methods.idipt_plus import PATHS, THRESHOLD_CANDIDATES
from engine.model.card import load_model
from engine.run.session import Session
from engine.run.stream import Failed, Picture, Predicted, Skipped, StreamRun
from lab.bench.plan import LISTINGS, BenchError, BenchJob, make_config
from lab.bench.protocol import dataset_stream

logger = logging.getLogger(__name__)

READ_AHEAD = 8  # images decoded ahead of the adapting thread


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
    path: np.ndarray  # (n,) int8 index into engine.methods.idipt_plus.PATHS (-1: no decision record)
    group: np.ndarray  # (n,) int32 site group of the decision (-1: none)
    threshold: np.ndarray  # (n,) float32 threshold on the source margin of the decision (0: source's)
    margin: np.ndarray  # (n,) float32 source margin l_1 - l_0 (nan: no two-class decision record)
    candidates: (
        np.ndarray
    )  # (n, len(THRESHOLD_CANDIDATES)) float32 the site's candidate thresholds (nan: none)
    prompted: np.ndarray  # (n,) int64 I-DiPT's prompted class (-1: not computed)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)


def open_listing(data: str, positive_class: int) -> Dataset:
    key = (data, positive_class)
    if key not in LISTINGS:
        LISTINGS.clear()
        LISTINGS[key] = open_dataset(data, positive_class=positive_class)
    return LISTINGS[key]


def _read(item: Item, size: int) -> np.ndarray | str:
    try:
        return read_array(item.path, size)
    except ImageReadError as exc:
        return str(exc)


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
    ds = open_listing(job.data, job.positive_class)
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
    items = [
        StreamItem(
            pos,
            str(pos),
            str(item.path),
            path=item.path,
            ground_truth=item.label,
            site=item.domain if job.known_sites else None,
        )
        for pos, item in enumerate(stream.items)
    ]

    def reader(item: StreamItem) -> Picture:
        assert item.path is not None
        return read_array(item.path, size)

    run = StreamRun(
        session,
        items,
        reader,
        positive_class=job.positive_class,
        read_ahead=max(READ_AHEAD, 2 * job.batch),
        batch=job.batch,
        keep_images=False,
    )
    kept: list[int] = []
    labels: list[int] = []
    preds: list[int] = []
    source_preds: list[int] = []
    probs: list[np.ndarray] = []
    seconds: list[float] = []
    paths: list[int] = []
    groups: list[int] = []
    thresholds: list[float] = []
    margins: list[float] = []
    candidates: list[list[float]] = []
    prompted: list[int] = []
    skipped: list[tuple[str, str]] = []
    for outcome in run.outcomes():
        if isinstance(outcome, Failed):
            raise BenchError(f"{job.row}, seed {job.seed}: {outcome.message}")
        if isinstance(outcome, Skipped):
            logger.warning("skipping %s: %s", outcome.item.name, outcome.reason)
            skipped.append((outcome.item.name, f"{outcome.item.name}: {outcome.reason}"))
        elif isinstance(outcome, Predicted):
            step = outcome.step
            kept.append(outcome.item.position)
            labels.append(int(outcome.item.ground_truth or 0))
            preds.append(step.prediction)
            source_preds.append(step.source_prediction)
            probs.append(step.probs.astype(np.float32))
            seconds.append(step.seconds)
            decision = step.decision
            paths.append(
                PATHS.index(decision.path) if decision is not None and decision.path in PATHS else -1
            )
            groups.append(decision.group if decision is not None else -1)
            thresholds.append(decision.threshold if decision is not None else 0.0)
            margins.append(decision.margin if decision is not None else math.nan)
            named = dict(decision.candidates) if decision is not None else {}
            candidates.append([named.get(name, math.nan) for name in THRESHOLD_CANDIDATES])
            prompted.append(decision.prompted if decision is not None else -1)
        else:
            continue
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
        path=np.asarray(paths, dtype=np.int8),
        group=np.asarray(groups, dtype=np.int32),
        threshold=np.asarray(thresholds, dtype=np.float32),
        margin=np.asarray(margins, dtype=np.float32),
        candidates=np.asarray(candidates, dtype=np.float32).reshape(-1, len(THRESHOLD_CANDIDATES)),
        prompted=np.asarray(prompted, dtype=np.int64),
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
