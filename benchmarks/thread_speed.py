"""``Session.step`` on the main thread vs a second thread, each order in a fresh process.

Shows why the app's worker thread is as fast as ``f2tta run``'s main thread, and why it was not
in a process whose main thread had run torch first (libgomp throttles spin-waiting once the
threads of all OpenMP teams outnumber the CPUs; see docs/reliability.md, "Speed of the worker
thread")::

    python benchmarks/thread_speed.py [--images 30] [--repeats 2] [--variants default,OMP_WAIT_POLICY=PASSIVE]

Prints milliseconds per image for: the main thread; a second thread in a process whose main
thread never ran torch (the app); a second thread after the main thread ran the loop (the old
benchmark). The torch thread count is printed as each thread sees it, and the load average after
each measurement. ``--variants`` runs every order under each environment variant listed
(``benchmarks/_variants.py``), interleaved, so machine noise hits them alike.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from _variants import parse_variants, variant_env

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
ORDERS = {"main thread": "main", "second thread": "thread", "second thread after main": "main,thread"}


def loop(images: int) -> str:
    from engine import Session  # first, as in f2tta run: the engine picks OpenMP's wait policy
    from lab.synth.generate import generate_arrays

    # isort: split
    import torch

    arrays, _ = generate_arrays("histo", "site4", images + 5, size=96, seed=1)
    session = Session(ROOT / "resources" / "demo" / "model.safetensors", device="cpu")
    for image in arrays[:5]:
        session.step(image)
    start = time.perf_counter()
    for image in arrays[5:]:
        session.step(image)
    return (
        f"{(time.perf_counter() - start) / images * 1000:.1f} ms/img, {torch.get_num_threads()} torch threads"
    )


def child(order: str, images: int) -> None:
    result = ""
    for where in order.split(","):
        if where == "main":
            result = loop(images)
        else:
            out: list[str] = []
            worker = threading.Thread(target=lambda sink=out: sink.append(loop(images)))
            worker.start()
            worker.join()
            result = out[0]
    print(result)  # the last loop's figure: the one the order is about


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--images", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--variants", default="default", help="comma-separated: default or NAME=VALUE")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.images)
        return 0
    variants = parse_variants(args.variants)
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
    for _ in range(args.repeats):
        for variant in variants:
            env = variant_env(variant, variants)
            for label, order in ORDERS.items():
                cmd = [sys.executable, __file__, "--child", order, "--images", str(args.images)]
                out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout.strip()
                print(f"{variant} | {label}: {out}; load {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
