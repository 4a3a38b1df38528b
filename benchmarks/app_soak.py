"""Soak test of the desktop app: one long run through the real window, watching memory and the UI.

Drives the main window + controller + worker thread offscreen (as ``app_overhead.py`` does)
through a folder of generated images and prints:

* the resident memory after warm-up and at the end, and the growth in between (target < 50 MB);
* the throughput of each tenth of the run, so a slowdown shows as a trend;
* the longest stall of the UI event loop (a QTimer pings every 10 ms) and the 99th percentile gap;
* what the app holds at the end (table rows, overlays, cached previews, log lines) and the size of
  the site project on disk (rows file, state);
* reopening the folder afterwards: how long the project's rows take to come back into the table.

Usage::

    QT_QPA_PLATFORM=offscreen OMP_NUM_THREADS=1 python benchmarks/app_soak.py [--images 2000]
        [--warmup 200] [--size 96] [--model CKPT] [--method idipt] [--device cpu] [--tracemalloc]

``--tracemalloc`` traces Python allocations and prints the ten source lines whose memory grew
most between the end of the warm-up and the end of the run (several times slower; torch's and
Qt's own allocations are not traced).
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from app_overhead import DEMO_MODEL, PING_MS, ROOT, make_stream, open_app, wait_for
from soak import peak_rss_mb, print_growth, rss_mb

GROWTH_TARGET_MB = 50.0
STALL_TARGET_MS = 100.0


def folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


class Probe:
    """Pings the event loop every ``PING_MS`` and samples the run's progress at each tick."""

    def __init__(self, controller: object, total: int, warmup: int, traced: bool) -> None:
        from PySide6.QtCore import QTimer

        self.controller = controller
        self.total = total
        self.warmup = warmup
        self.traced = traced
        self.tenth = max(1, total // 10)
        self.gaps: list[float] = []  # ms between pings, whole run
        self.gaps_after_warmup: list[float] = []
        self.marks: list[tuple[int, float, float]] = []  # (images done, seconds, RSS MiB) per tenth
        self.baseline: float | None = None
        self.snapshot: tracemalloc.Snapshot | None = None
        self.start = self.last = time.perf_counter()
        self.timer = QTimer()
        self.timer.setInterval(PING_MS)
        self.timer.timeout.connect(self.ping)

    def begin(self) -> None:
        if self.traced:
            # Traced from the start, so what the warm-up allocated and later frees (evicted
            # previews, say) shows as a decrease rather than hiding in the comparison.
            tracemalloc.start(25)
        self.start = self.last = time.perf_counter()
        self.marks = [(0, 0.0, rss_mb())]
        self.timer.start()

    def ping(self) -> None:
        now = time.perf_counter()
        gap = (now - self.last) * 1000.0
        self.gaps.append(gap)
        if self.baseline is not None:
            self.gaps_after_warmup.append(gap)
        self.last = now
        self.sample(now)

    def sample(self, now: float) -> None:
        done = self.controller.model.progress.done  # type: ignore[attr-defined]
        if self.baseline is None and done >= self.warmup:
            gc.collect()
            self.baseline = rss_mb()
            print(f"after warm-up ({done} images): RSS {self.baseline:.1f} MiB", flush=True)
            if self.traced:
                self.snapshot = tracemalloc.take_snapshot()
            self.last = time.perf_counter()  # the collection above is the probe's, not the app's
        while len(self.marks) <= 10 and done >= min(len(self.marks) * self.tenth, self.total):
            self.marks.append((done, now - self.start, rss_mb()))


def run(args: argparse.Namespace, stream: Path, home: Path) -> int:
    from PySide6.QtCore import QEventLoop
    from PySide6.QtWidgets import QApplication

    from app.core.projects import ProjectStore

    app = QApplication.instance() or QApplication([])
    studio = open_app(args.model, stream, args.method, args.device, home)
    window = studio.window
    total = studio.controller.model.pending
    print(f"RSS before the run: {rss_mb():.1f} MiB", flush=True)

    probe = Probe(studio.controller, total, args.warmup, args.tracemalloc)
    probe.begin()
    loop = QEventLoop()
    studio.runFinished.connect(loop.quit)
    studio.controller.start()
    loop.exec()
    studio.runFinished.disconnect(loop.quit)
    probe.timer.stop()
    probe.sample(time.perf_counter())  # the last results reach the views as the run ends
    elapsed = time.perf_counter() - probe.start
    ended = studio.controller.state.last_run
    gc.collect()
    end = rss_mb()

    print(
        f"run {ended.reason if ended else '?'}: {studio.controller.model.progress.done} images in {elapsed:.0f} s"
    )
    for (done0, t0, _), (done1, t1, rss1) in zip(probe.marks, probe.marks[1:], strict=False):
        rate = (done1 - done0) / (t1 - t0) if t1 > t0 else float("nan")
        print(f"  images {done0:5d}-{done1:5d}: {rate:6.1f} img/s, RSS {rss1:.1f} MiB")
    print(f"steady throughput {studio.controller.model.progress.done / elapsed:.1f} img/s")
    baseline = probe.baseline if probe.baseline is not None else end
    growth = end - baseline
    verdict = "OK" if growth < GROWTH_TARGET_MB else "OVER"
    print(f"RSS after warm-up {baseline:.1f} MiB, at the end {end:.1f} MiB, peak {peak_rss_mb():.1f} MiB")
    print(f"memory growth after warm-up {growth:+.1f} MiB (target < {GROWTH_TARGET_MB:.0f}) -> {verdict}")
    gaps = sorted(probe.gaps)
    late = sorted(probe.gaps_after_warmup) or gaps
    stall = max(gaps) if gaps else 0.0
    print(
        f"longest UI event-loop stall {stall:.1f} ms (after warm-up {max(late):.1f} ms; target < "
        f"{STALL_TARGET_MS:.0f}) -> {'OK' if stall < STALL_TARGET_MS else 'OVER'}; "
        f"p99 gap {gaps[int(0.99 * (len(gaps) - 1))]:.1f} ms (ping every {PING_MS} ms)"
    )
    summary = studio.controller.model.stats.summary()
    print(
        f"adaptation events: collapse guard acted {summary.guard_events} times, "
        f"{summary.skipped_updates} updates skipped"
    )
    table = window.table.model
    print(
        f"held at the end: {table.rowCount()} table rows, {len(studio.controller.model.overlays)} overlays, "
        f"{len(studio.controller.model.previews)} cached previews, {len(window.log.entries)} log entries "
        f"({window.log.text.document().blockCount()} lines shown)"
    )
    project = ProjectStore(home).open(studio.controller.state.settings.project)
    rows_dir = project.path / "rows"
    lines = sum(len(p.read_bytes().splitlines()) for p in rows_dir.glob("*.jsonl"))
    print(
        f"project on disk: rows {folder_bytes(rows_dir) / 2**10:.0f} KiB ({lines} lines), "
        f"state {folder_bytes(project.state_dir) / 2**10:.0f} KiB"
    )
    if probe.snapshot is not None:
        print_growth(probe.snapshot)
        tracemalloc.stop()

    # Reopening the folder brings every processed row back from the project, nothing is left to run.
    start = time.perf_counter()
    studio.controller.open_folder(str(stream))
    wait_for(studio.sourceOpened)
    reopened = time.perf_counter() - start
    gc.collect()
    print(
        f"reopen: {table.rowCount()} rows restored in {reopened:.2f} s, {studio.controller.model.pending} left to "
        f"process, RSS {rss_mb():.1f} MiB"
    )

    studio.shutdown()
    window.close()
    app.processEvents()
    ok = ended is not None and ended.reason == "finished" and studio.controller.model.progress.done == total
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=200, help="images before the baseline memory reading")
    parser.add_argument("--size", type=int, default=96, help="side of the generated images")
    parser.add_argument("--model", type=Path, default=DEMO_MODEL)
    parser.add_argument("--method", default="idipt")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--tracemalloc", action="store_true", help="trace Python allocation growth")
    parser.add_argument(
        "--malloc-arenas",
        type=int,
        default=None,
        metavar="N",
        help="glibc malloc arena cap as the app sets it (default: the app's; 0: glibc's default)",
    )
    args = parser.parse_args()

    from app.runtime.malloc import limit_malloc_arenas

    arenas = limit_malloc_arenas(args.malloc_arenas)  # as app.main does, before anything allocates
    print(f"malloc arena cap: {arenas or 'glibc default'}")

    import torch

    tmp = Path(tempfile.mkdtemp(prefix="f2tta-app-soak-"))
    try:
        started = time.perf_counter()
        stream = make_stream(tmp / "stream", args.images, args.size)
        print(f"generated {args.images} images of {args.size} px in {time.perf_counter() - started:.0f} s")
        print(
            f"model {args.model.relative_to(ROOT) if args.model.is_relative_to(ROOT) else args.model}, "
            f"method {args.method}, device {args.device}, torch threads {torch.get_num_threads()}, "
            f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}"
        )
        return run(args, stream, tmp / "home")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
