"""``f2tta run``: the headless version of the app's job."""

from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path
from types import FrameType
from typing import Any

from tqdm import tqdm

from engine._atomic import atomic_write_bytes
from engine.cli._common import add_method_arguments, method_config_from_args
from engine.errors import F2TTAError
from engine.images import list_images
from engine.runner import run_config, run_stream, skipped_path
from engine.session import Session, StepResult


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model", required=True, type=Path, help="checkpoint (.safetensors) with its .json card"
    )
    parser.add_argument("--input", required=True, type=Path, help="folder of images (searched recursively)")
    parser.add_argument(
        "--state", required=True, type=Path, help="adaptation state directory (resumed if present)"
    )
    parser.add_argument(
        "--out", required=True, type=Path, help="predictions CSV (appended as images are processed)"
    )
    parser.add_argument(
        "--order", choices=("name", "mtime"), default="name", help="arrival order (default: name)"
    )
    parser.add_argument(
        "--save-every", type=int, default=50, metavar="N", help="save the state every N images"
    )
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:1, mps")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_method_arguments(parser)


def main(args: argparse.Namespace) -> int:
    if not args.input.is_dir():
        print(f"error: input folder not found: {args.input}", file=sys.stderr)
        return 2
    stop = {"requested": False}

    def on_signal(signum: int, frame: FrameType | None) -> None:
        if stop["requested"]:  # second Ctrl-C: give up at once (the last saved state is intact)
            raise KeyboardInterrupt
        stop["requested"] = True
        print("\nstopping after the current image (Ctrl-C again to abort)...", file=sys.stderr)

    try:
        config = method_config_from_args(args)
        session = Session(
            args.model, method=args.method, method_config=config, device=args.device, seed=args.seed
        )
        images = list_images(args.input, order=args.order)
    except (F2TTAError, ValueError, KeyError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not images:
        print(f"error: no images found in {args.input}", file=sys.stderr)
        return 2
    args.out.parent.mkdir(parents=True, exist_ok=True)
    record: dict[str, Any] = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}
    atomic_write_bytes(
        args.out.with_suffix(".config.json"),
        (json.dumps(run_config(session, record), indent=2) + "\n").encode(),
    )

    bar = tqdm(total=len(images), disable=args.no_progress, unit="img", file=sys.stderr, dynamic_ncols=True)

    def on_result(result: StepResult, rel: str) -> None:
        bar.update(1)

    def on_start(done: int) -> None:
        bar.update(done)

    def on_skip(rel: str, reason: str) -> None:
        bar.update(1)
        tqdm.write(f"skipped {rel}: {reason}", file=sys.stderr)

    old_int = signal.signal(signal.SIGINT, on_signal)
    old_term = signal.signal(signal.SIGTERM, on_signal)
    try:
        summary = run_stream(
            session,
            args.input,
            images,
            args.out,
            args.state,
            save_every=max(1, args.save_every),
            should_stop=lambda: stop["requested"],
            on_result=on_result,
            on_skip=on_skip,
            on_start=on_start,
        )
    except F2TTAError as exc:
        bar.close()
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        signal.signal(signal.SIGINT, old_int)
        signal.signal(signal.SIGTERM, old_term)
    bar.close()
    print(
        f"{summary.resumed_from + summary.processed} of {summary.total} images processed "
        f"({summary.processed} now, {summary.resumed_from} before), {len(summary.skipped)} skipped; "
        f"predictions: {args.out}; skipped: {skipped_path(args.out)}; state: {args.state}",
        file=sys.stderr,
    )
    return 130 if summary.interrupted else 0
