"""Wall time of ``f2tta run`` over a cohort of generated slides: ``--workers N`` against one site after another.

Issue 43's target: with ``--workers 2`` at most 0.6 x the serial wall time on 2 cores, for the
source model on the CPU. The script writes ``--slides`` pyramid TIFFs (0.5 µm/px, an elliptic
tissue region each, seeded), then runs the same ``f2tta run --input FOLDER`` command once serially
(torch's own thread count) and once with ``--workers N`` (cores / N threads each), each in a fresh
process with a fresh state, and prints both wall times (the whole command: start-up, the
workers' start-up and every site) and their ratio, measured in this one run. With ``--rounds R``
the two alternate R times (serial, workers, workers, serial, ...) and the ratio is of the totals.
The load average before and after and the CPU time of each command (user + system, all its
processes) are printed: on a machine shared with other work the ratio says as much about the
neighbours as about the cohort, and the CPU times show what running in workers costs besides.

Usage::

    python benchmarks/cohort_speed.py [--slides 20] [--size 2048x1536] [--workers 2] [--rounds 1]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DEMO_MODEL = ROOT / "resources" / "demo" / "model.safetensors"


def make_slide(path: Path, seed: int, width: int, height: int) -> None:
    """A 3-level tiled pyramid TIFF with resolution tags (0.5 µm/px) and a seeded tissue ellipse."""
    import tifffile

    rng = np.random.default_rng(seed)
    img = np.full((height, width, 3), 242, np.uint8)
    yy, xx = np.mgrid[0:height, 0:width]
    cy, cx = height * rng.uniform(0.4, 0.6), width * rng.uniform(0.4, 0.6)
    tissue = ((yy - cy) / (height * 0.35)) ** 2 + ((xx - cx) / (width * 0.38)) ** 2 < 1
    stain = np.clip(np.array([170, 80, 160]) + rng.normal(0, 25, (height, width, 3)), 0, 255)
    img[tissue] = stain.astype(np.uint8)[tissue]
    with tifffile.TiffWriter(path) as tw:
        for level in range(3):
            f = 2**level
            tw.write(
                img[::f, ::f],
                tile=(256, 256),
                photometric="rgb",
                subfiletype=int(level > 0),
                resolution=(2e4 / f, 2e4 / f),
                resolutionunit="CENTIMETER",
            )


def timed(work: Path, slides: Path, name: str, extra: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds (user + system, of every process of the command) of one ``f2tta run``
    over the cohort, in a fresh state."""
    state, out = work / f"{name}-state", work / f"{name}-out"
    shutil.rmtree(state, ignore_errors=True)
    shutil.rmtree(out, ignore_errors=True)
    command = [
        sys.executable, "-m", "engine.cli", "run", "--model", str(DEMO_MODEL), "--input", str(slides),
        "--state", str(state), "--out", str(out), "--method", "source", "--device", "cpu",
        "--accept-warnings", "--no-progress", *extra,
    ]  # fmt: skip
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    if done.returncode != 0:
        raise SystemExit(f"{name} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    tiles = sum(len(p.read_text().splitlines()) - 1 for p in out.glob("*/predictions.csv"))
    print(f"  {name}: {seconds:.1f} s wall, {cpu:.1f} s CPU, {tiles} tiles", flush=True)
    return seconds, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slides", type=int, default=20)
    parser.add_argument("--size", default="2048x1536", help="width x height of level 0")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument(
        "--work", type=Path, default=None, help="folder for the slides and runs (default: a temp)"
    )
    args = parser.parse_args()
    width, height = (int(v) for v in args.size.lower().split("x"))
    work = args.work or Path(tempfile.mkdtemp(prefix="cohort-speed-"))
    slides = work / "slides"
    slides.mkdir(parents=True, exist_ok=True)
    for i in range(args.slides):
        if not (slides / f"slide{i:02d}.tif").exists():
            make_slide(slides / f"slide{i:02d}.tif", i, width, height)
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"{args.slides} slides of {width} x {height} in {slides}; {cpus} CPUs; load average before: "
          f"{os.getloadavg()[0]:.2f}")  # fmt: skip
    totals = {"serial": [0.0, 0.0], "workers": [0.0, 0.0]}
    for r in range(args.rounds):
        pair = [("serial", []), ("workers", ["--workers", str(args.workers)])]
        for name, extra in pair if r % 2 == 0 else pair[::-1]:
            for k, value in enumerate(timed(work, slides, name, extra)):
                totals[name][k] += value
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    (serial, serial_cpu), (parallel, parallel_cpu) = totals["serial"], totals["workers"]
    print(
        f"wall time: serial {serial:.1f} s, --workers {args.workers} {parallel:.1f} s; ratio "
        f"{parallel / serial:.2f} (CPU time: {serial_cpu:.1f} s and {parallel_cpu:.1f} s)"
    )
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
