"""Running a cohort's sites: one after another here, in local worker processes, or on Ray.

Every way runs each site with :func:`engine.run.cohort_site.run_site` and hands its result to
``done`` as soon as the site ends, in the order sites end. A site runs in one process at a time
(its state's lock), and since each site continues from its own journal, a site whose process dies
(a worker killed, out of memory, a node lost) loses nothing: it is given to a fresh worker and
continues from its last save, at most :data:`MAX_TRIES` times, then reported "worker died".

* Local processes (``--workers N``): N spawned workers, each running one site at a time with
  ``threads`` torch threads, fed one site at a time through a pipe (with several GPUs the
  workers take them in turn: :func:`worker_device`); the driver watches each worker's process,
  so a worker that dies is noticed at once and replaced. On Linux a worker dies with the driver
  (``PR_SET_PDEATHSIG``), so a killed driver leaves no worker writing a site.
* Ray (``--ray [ADDRESS]``): one task per site, ``num_cpus=threads`` (and one GPU with
  ``--device cuda``: one model per GPU); Ray itself runs a task again when its worker or node
  dies (``max_retries``). Without an address a local Ray instance is started and stopped with
  the run.

A stop (Ctrl-C, SIGTERM) starts no further site and asks the running ones to stop after their
current images (they save); a second one ends them at once (their journals keep what was saved).
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import signal
import sys
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection, wait
from pathlib import Path
from types import FrameType
from typing import Any

from engine.run.cohort_site import SiteResult, SiteSettings, SiteTask, run_site
from engine.run.runner import EXIT_FAILED, EXIT_INTERRUPTED
from engine.run.stream import StreamRun

logger = logging.getLogger(__name__)

#: Times a site is given to a worker whose process then died, before it is reported "worker died".
MAX_TRIES = 3

Done = Callable[[SiteTask, SiteResult], None]
Note = Callable[[str], None]


class Stopper:
    """The cohort's stop: no new site once asked, and the running sites asked to stop."""

    def __init__(self) -> None:
        self.requested = False
        self.runs: list[StreamRun] = []  # the site running in this process (serial)
        self.pids: list[int] = []  # the workers running a site
        self.on_stop: list[Callable[[], None]] = []

    def request_stop(self) -> None:
        self.requested = True
        for run in self.runs:
            run.request_stop()
        for pid in self.pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGTERM)  # a worker's SIGTERM asks its site's run to stop
        for hook in self.on_stop:
            hook()


def _guarded(
    settings: SiteSettings, task: SiteTask, started: Callable[[StreamRun], None] | None
) -> SiteResult:
    """:func:`run_site`, with an unexpected error made the site's failure instead of the cohort's."""
    try:
        return run_site(settings, task, started)
    except Exception as exc:
        logger.exception("site %s failed", task.site)
        return SiteResult(
            task.site, "failed", EXIT_FAILED, message=f"{type(exc).__name__}: {exc} (its last save is kept)"
        )


def run_serial(settings: SiteSettings, tasks: Sequence[SiteTask], done: Done, stopper: Stopper) -> None:
    """Each site in this process, in turn."""
    for task in tasks:
        if stopper.requested:
            return
        result = _guarded(settings, task, stopper.runs.append)
        stopper.runs.clear()
        done(task, result)


# -- local worker processes ----------------------------------------------------------------------
def _die_with_parent(parent: int) -> None:
    """Linux: this process is killed when the process that started it dies."""
    if sys.platform.startswith("linux"):
        import ctypes

        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # the parent died before the call above
        os._exit(1)


def _worker_main(conn: Connection, settings: SiteSettings, parent: int) -> None:
    """A worker: sites from ``conn``, one at a time, their results back; None or EOF ends it."""
    _die_with_parent(parent)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    running: list[StreamRun] = []
    stopping = [False]

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stopping[0] = True  # every signal only asks to stop: the driver kills when it must
        for run in running:
            run.request_stop()

    def started(run: StreamRun) -> None:
        running.append(run)
        if stopping[0]:
            run.request_stop()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError):
            return
        if task is None:
            return
        result = _guarded(settings, task, started)
        running.clear()
        conn.send(result)


def worker_device(device: str, index: int) -> str:
    """The device the ``index``-th worker started runs its sites on: with several CUDA devices the
    workers take them in turn, so each device holds one model while there are no more workers than
    devices; otherwise ``device`` (the workers share one GPU, each with its own model and batches)."""
    if device not in ("auto", "cuda"):
        return device
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return f"cuda:{index % count}" if count > 1 else device


@dataclass
class _Worker:
    process: Any  # multiprocessing's SpawnProcess
    conn: Connection
    task: SiteTask | None = None


def run_processes(
    settings: SiteSettings,
    tasks: Sequence[SiteTask],
    workers: int,
    done: Done,
    stopper: Stopper,
    note: Note,
) -> None:
    """The sites in ``workers`` spawned processes; see the module."""
    ctx = multiprocessing.get_context("spawn")
    queue = deque(tasks)
    tries: Counter[str] = Counter()

    started = [0]

    def start() -> _Worker:
        mine, theirs = ctx.Pipe()
        mine_settings = replace(settings, device=worker_device(settings.device, started[0]))
        started[0] += 1
        process = ctx.Process(target=_worker_main, args=(theirs, mine_settings, os.getpid()), daemon=True)
        process.start()
        theirs.close()
        return _Worker(process, mine)

    pool = [start() for _ in range(max(1, min(workers, len(queue))))]

    def killed() -> None:
        for w in pool:
            if w.process.is_alive():
                w.process.kill()

    try:
        while True:
            for k, w in enumerate(pool):
                if w.task is None and queue and not stopper.requested:
                    if not w.process.is_alive():  # a worker that died: a fresh one in its place
                        pool[k] = w = start()
                    w.task = queue.popleft()
                    w.conn.send(w.task)
            busy = [w for w in pool if w.task is not None]
            stopper.pids = [w.process.pid for w in busy]
            if not busy:
                return
            wait([w.conn for w in busy] + [w.process.sentinel for w in busy], timeout=0.5)
            for w in pool:
                if w.task is None:
                    continue
                result = _received(w)
                if result is not None:
                    task, w.task = w.task, None
                    done(task, result)
                elif not w.process.is_alive():
                    task, w.task = w.task, None
                    w.process.join()
                    w.conn.close()  # replaced when a site is next given to it (above), if one is
                    _died(task, w.process.exitcode, tries, queue, stopper, done, note)
    except BaseException:
        killed()  # a second Ctrl-C, or the driver failing: the journals keep what was saved
        raise
    finally:
        for w in pool:
            with contextlib.suppress(OSError, ValueError):
                w.conn.send(None)
        for w in pool:
            w.process.join(timeout=30)
            if w.process.is_alive():
                w.process.kill()
                w.process.join()


def _received(w: _Worker) -> SiteResult | None:
    """The worker's result, when it sent one."""
    try:
        if w.conn.poll():
            result = w.conn.recv()
            return result if isinstance(result, SiteResult) else None
    except (EOFError, OSError):
        return None
    return None


def _died(
    task: SiteTask,
    exitcode: int | None,
    tries: Counter[str],
    queue: deque[SiteTask],
    stopper: Stopper,
    done: Done,
    note: Note,
) -> None:
    """A site whose worker died: given to a worker again, or reported when it died too often."""
    tries[task.site] += 1
    how = f"signal {-exitcode}" if exitcode is not None and exitcode < 0 else f"exit code {exitcode}"
    if tries[task.site] < MAX_TRIES and not stopper.requested:
        queue.appendleft(task)
        note(f"{task.site}: its worker died ({how}); the site continues from its last save in a new worker")
        return
    why = "the run was stopped" if stopper.requested else f"it died {tries[task.site]} times"
    done(
        task,
        SiteResult(
            task.site,
            "worker died",
            EXIT_INTERRUPTED if stopper.requested else EXIT_FAILED,
            message=f"its worker died ({how}; {why}); the next run continues it from its last save",
        ),
    )


# -- Ray ----------------------------------------------------------------------------------------
def _ray_site(settings: SiteSettings, task: SiteTask) -> SiteResult:
    return _guarded(settings, task, None)


def run_ray(
    settings: SiteSettings,
    tasks: Sequence[SiteTask],
    address: str,
    cpus: int,
    done: Done,
    stopper: Stopper,
) -> None:
    """One Ray task per site, on the cluster at ``address`` or a local instance ("": started here
    with ``cpus`` CPUs, all of them when 0); results as the tasks end."""
    import ray
    from ray.exceptions import RayError, TaskCancelledError

    started = False
    if not ray.is_initialized():
        if address:
            ray.init(address=address, logging_level=logging.WARNING)
        else:  # local workers import the engine from where this process does
            root = str(Path(__file__).resolve().parents[2])
            path = os.pathsep.join([root, *filter(None, [os.environ.get("PYTHONPATH")])])
            ray.init(
                num_cpus=cpus or None,
                include_dashboard=False,
                logging_level=logging.WARNING,
                runtime_env={"env_vars": {"PYTHONPATH": path}},
            )
        started = True
    cancelled = [False, False]  # asked, done
    try:
        gpus = 1 if settings.device.startswith("cuda") else 0  # Ray hides the GPUs from tasks that ask none
        remote = ray.remote(num_cpus=settings.threads or 1, num_gpus=gpus, max_retries=MAX_TRIES)(_ray_site)
        refs = {remote.remote(settings, task): task for task in tasks}

        def cancel() -> None:
            cancelled[0] = True

        stopper.on_stop.append(cancel)
        while refs:
            if cancelled[0] and not cancelled[1]:
                cancelled[1] = True
                for ref in refs:
                    ray.cancel(ref)
            ready, _ = ray.wait(list(refs), num_returns=1, timeout=0.5)
            for ref in ready:
                task = refs.pop(ref)
                try:
                    result = ray.get(ref)
                except TaskCancelledError:
                    result = SiteResult(
                        task.site,
                        "interrupted",
                        EXIT_INTERRUPTED,
                        message="stopped; the next run continues it",
                    )
                except RayError as exc:
                    result = SiteResult(
                        task.site,
                        "worker died",
                        EXIT_FAILED,
                        message=f"its Ray task failed ({type(exc).__name__}); the next run continues it "
                        "from its last save",
                    )
                done(task, result)
    finally:
        if started:
            ray.shutdown()
