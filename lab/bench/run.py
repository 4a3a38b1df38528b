"""Running a benchmark's jobs: serially, in local processes or on Ray, with the per-job cache.

Local processes use the spawn context with torch threads per worker = cores // workers; Ray
workers one thread each. With a cache, finished jobs are kept and reused, so an interrupted
benchmark resumes where it stopped.
"""

from __future__ import annotations

import concurrent.futures as cf
import logging
import multiprocessing
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from queue import Empty
from typing import Any

import torch

from engine.model.card import card_path_for
from lab.bench.cache import JobCache, dataset_digest, job_key, model_digest
from lab.bench.job import JobRecords, open_listing, run_job
from lab.bench.plan import BenchError, BenchJob, BenchPlan
from lab.bench.report import BenchResult, summarize

logger = logging.getLogger(__name__)


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
        data_id = dataset_digest(open_listing(str(s.data), plan.positive_class))
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
            root = str(Path(__file__).resolve().parents[2])
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
