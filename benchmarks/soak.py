"""Soak test of the engine: stream many small images through one session, watch memory and speed.

Reports the resident memory after warm-up and at the end (growth target: < 50 MB), the peak, and
the throughput of each tenth of the run, so a leak or a slowdown shows as a trend. Images are
generated in memory (seeded), so the run measures the engine, not the disk.

    OMP_NUM_THREADS=1 python benchmarks/soak.py [--images 20000] [--model resources/demo/model.safetensors]
        [--method idipt] [--device auto] [--tracemalloc]

``--tracemalloc`` traces Python allocations and prints the ten source lines whose memory grew most
between the end of the warm-up and the end of the run (slower; torch's own allocations are not
traced).
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine import Session

REPO = Path(__file__).resolve().parents[1]


def rss_mb() -> float:
    """Current resident set size in MiB (Linux /proc; falls back to peak RSS elsewhere)."""
    try:
        with open("/proc/self/statm") as fh:
            pages = int(fh.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:
        return peak_rss_mb()


def peak_rss_mb() -> float:
    """Peak resident set size of the process in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def print_growth(snapshot: tracemalloc.Snapshot, count: int = 10) -> None:
    """The source lines whose traced Python memory grew most since ``snapshot``."""
    top = tracemalloc.take_snapshot().compare_to(snapshot, "lineno")
    print("largest Python allocation growth after warm-up (tracemalloc):")
    for stat in top[:count]:
        print(f"  {stat.size_diff / 2**10:+9.1f} KiB {stat.count_diff:+7d} blocks  {stat.traceback[0]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=20_000)
    parser.add_argument("--warmup", type=int, default=1_000, help="images before the baseline memory reading")
    parser.add_argument("--model", type=Path, default=REPO / "resources" / "demo" / "model.safetensors")
    parser.add_argument("--method", default="idipt")
    parser.add_argument("--size", type=int, default=96, help="side of the generated images")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="auto", help="auto (CUDA, MPS, CPU), cpu, cuda, ...")
    parser.add_argument("--tracemalloc", action="store_true", help="trace Python allocation growth")
    args = parser.parse_args()

    session = Session(args.model, method=args.method, seed=args.seed, device=args.device)
    rng = np.random.default_rng(args.seed)
    pool = [rng.integers(0, 256, (args.size, args.size, 3), dtype=np.uint8) for _ in range(64)]
    tenth = max(1, args.images // 10)
    baseline = None
    snapshot = None
    if args.tracemalloc:
        tracemalloc.start(25)  # from the start, so what the warm-up frees later shows as a decrease
    start = time.perf_counter()
    chunk_start = start
    print(
        f"{args.images} images of {args.size} px, method {args.method}, model {args.model.name}, "
        f"device {session.device}, torch threads {torch.get_num_threads()}, {os.cpu_count()} CPUs"
    )
    for i in range(args.images):
        img = pool[i % len(pool)] ^ np.uint8(i % 251)  # cheap variation, no allocation growth
        session.step(img)
        if i + 1 == args.warmup:
            gc.collect()
            baseline = rss_mb()
            print(f"after warm-up ({args.warmup} images): RSS {baseline:.1f} MiB", flush=True)
            if args.tracemalloc:
                snapshot = tracemalloc.take_snapshot()
        if (i + 1) % tenth == 0:
            now = time.perf_counter()
            print(
                f"  images {i + 1 - tenth:6d}-{i + 1:6d}: {tenth / (now - chunk_start):7.1f} img/s, RSS {rss_mb():.1f} MiB",
                flush=True,
            )
            chunk_start = now
    gc.collect()
    end = rss_mb()
    total = time.perf_counter() - start
    print(f"steady throughput {args.images / total:.1f} img/s over {total:.0f} s")
    print(f"RSS at the end {end:.1f} MiB, peak {peak_rss_mb():.1f} MiB")
    if baseline is not None:
        growth = end - baseline
        print(
            f"memory growth after warm-up {growth:+.1f} MiB (target < 50) -> {'OK' if growth < 50 else 'OVER'}"
        )
        if snapshot is not None:
            print_growth(snapshot)
        elif growth >= 50:
            print("rerun with --tracemalloc to see which Python source lines grew")


if __name__ == "__main__":
    main()
