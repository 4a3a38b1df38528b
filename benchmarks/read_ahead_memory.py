"""Peak memory of a run over large photographs, by what is kept of the pictures read ahead.

The stream loop reads three batches ahead of the model. The app kept each picture read ahead
whole until the model took it (for the preview it makes of it); it now keeps a preview of
``PREVIEW_SIZE`` (issue 42, item 7). Each setting runs in a process of its own over the same
generated JPEG photographs, with the demo model and the method ``source``, and prints the peak
resident memory and its growth over a batch of 1 keeping the model's pixels only (as ``f2tta run``).

Usage::

    OMP_NUM_THREADS=1 python benchmarks/read_ahead_memory.py [--images 260] [--width 2400]
        [--height 2000] [--batches 1,64]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEMO_MODEL = ROOT / "resources" / "demo" / "model.safetensors"
PREVIEW_SIZE = 384  # app.worker.io.PREVIEW_SIZE (the benchmark does not import the app)
KEEPS = {"model pixels (f2tta run)": "false", "whole (the app before)": "true", "preview (the app)": "384"}


def make_photos(folder: Path, count: int, width: int, height: int) -> None:
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(7)
    for i in range(count):
        base = rng.integers(40, 220, (12, 14, 3), dtype=np.uint8)
        photo = Image.fromarray(base).resize((width, height), Image.Resampling.BICUBIC)
        photo.save(folder / f"photo{i:04d}.jpg", quality=90)


def one_run(folder: str, batch: int, keep: str) -> None:
    """Run the folder in this process and print the peak RSS as JSON."""
    from engine import Session, StreamRun, open_folder

    keep_images: bool | int = {"false": False, "true": True}.get(keep, int(keep) if keep.isdigit() else True)
    session = Session(DEMO_MODEL, method="source", device="cpu")
    source = open_folder(folder, session.card.classes)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    run = StreamRun(session, source.items, batch=batch, keep_images=keep_images, maps="inline")
    count = sum(1 for _ in run.outcomes())
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"outcomes": count, "before_mib": before, "peak_mib": peak}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=260)
    parser.add_argument("--width", type=int, default=2400)
    parser.add_argument("--height", type=int, default=2000)
    parser.add_argument("--batches", default="1,64")
    parser.add_argument("--one", nargs=3, metavar=("FOLDER", "BATCH", "KEEP"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        one_run(args.one[0], int(args.one[1]), args.one[2])
        return
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        make_photos(folder, args.images, args.width, args.height)
        print(
            f"{args.images} JPEG photographs of {args.width} x {args.height}, demo model, method source, cpu"
        )
        baseline: float | None = None
        for batch in (int(b) for b in args.batches.split(",")):
            for name, keep in KEEPS.items():
                if batch == 1 and keep == "384":
                    continue
                argv = [sys.executable, __file__, "--one", str(folder), str(batch), keep]
                done = subprocess.run(argv, capture_output=True, text=True, check=True, cwd=ROOT)
                result = json.loads(done.stdout.strip().splitlines()[-1])
                peak = result["peak_mib"]
                baseline = peak if baseline is None else baseline
                print(
                    f"batch {batch:3d}, kept {name:26s}: peak RSS {peak:7.0f} MiB "
                    f"({peak - baseline:+6.0f} over batch 1 keeping the model's pixels)"
                )


if __name__ == "__main__":
    main()
