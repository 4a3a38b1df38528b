"""The default method's decisions (maps behind) against the source pass's batched rate, round by round (issue 41).

``slide_speed.py`` prints the ratio once, after both methods' B = 1 runs (minutes each on a CPU);
this runs only the two configurations the ratio is made of, in child processes of
``slide_speed.py`` (``--child``) on the same generated slide and tiles: the source method batched
(tiles read ahead) and the default (``idipt+``) with its maps behind its decisions, whose
decisions per second (reading included, until the last decision) are compared with the source's
tiles per second. The two alternate ``--rounds`` times, so a change of the machine's load hits
both alike; each round's ratio and the median are printed, with the load average at the start
and at the end.

``--steps`` times the decision steps alone instead, in one process (no reading, no rows): each
batch of the slide's tissue decided by the source method and then by the default, whatever the
load does between two batches hitting both, the two ``decide`` calls' times summed; the ratio is
that of the steps' rates (below the end-to-end ratio, whose reading and rows cost both alike).

The default's run stops at its first map (``decisions_only``: the maps behind its decisions are
not made, their time is no part of the ratio). ``--root`` names other checkouts (a directory
holding ``benchmarks/slide_speed.py`` and its ``engine``) whose code runs the same rounds,
interleaved with this one's: code before and after a change compared under the same load (their
``slide_speed.py`` must know ``decisions_only``: copy this one's there).

Measured on this 2-core machine (shared: the load varies from round to round, and under a high
load the ratio rises towards 1, the source pass's threads slowing more than the operating point's
one), 600 tiles, B=16, against a copy of the code before 34c06b5 (the bootstrap's mixtures
fitted one by one): end to end at load 0.6-1.8, source 130-135 tiles/s, the default's decisions
111.5, 104.5, 113.7 tiles/s (ratios 0.86, 0.80, 0.84; median 0.84) against 89.5, 82.4, 86.0
(0.65, 0.62, 0.65); the decision steps alone (``--steps``) at load 1.8, 0.79 against 0.58.

``--arch`` runs a timm ViT with random weights instead of the demo model (``--arch
vit_tiny_patch16_224 --img-size 32``: the model's forward small, so that what each tile costs the
host -- its row, its journal line, the operating point's step -- is in view; ``--steps`` keeps the
demo model).

    python benchmarks/decide_cost.py [--tiles 2000] [--measure 600] [--rounds 3] [--batch 16]
        [--root /path/to/other/checkout ...] [--steps] [--arch NAME --img-size S]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parents[1]
if "--worker" not in sys.argv:  # a worker runs the engine of the checkout on its PYTHONPATH
    sys.path.insert(0, str(HERE))


def _last_json(root: Path, argv: list[str], what: str) -> dict[str, Any]:
    """Run ``argv`` in a child process on ``root``'s code; the JSON object its last line prints."""
    proc = subprocess.run(
        [sys.executable, *argv],
        capture_output=True,
        text=True,
        check=False,
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
    if proc.returncode != 0:
        raise SystemExit(f"a run failed ({root}, {what}):\n{proc.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def _child(root: Path, spec: dict[str, Any]) -> dict[str, Any]:
    """One configuration in a child process running ``root``'s code."""
    with tempfile.TemporaryDirectory(prefix="decide-cost-") as work:
        script = str(root / "benchmarks" / "slide_speed.py")
        result = _last_json(root, [script, "--child", json.dumps({**spec, "work": work})], spec["method"])
    if result["failure"]:
        raise SystemExit(f"{spec['method']} ({root}): {result['failure']}")
    return result


def worker(spec: dict[str, Any]) -> dict[str, Any]:
    """The decision steps alone, in one process (``--steps``): each batch of the slide's tiles
    (the same generated tissue, brought to the model's input beforehand) decided by the source
    method, then by the default (its images the slide's, one site), so that whatever the load
    does between two batches hits both; the times of the two ``decide`` calls are summed."""
    import numpy as np
    import torch

    from engine import Session
    from lab.synth.generate import generate_arrays

    if spec["threads"]:
        torch.set_num_threads(spec["threads"])
    kinds, _ = generate_arrays("histo", "site2", 24, size=224, seed=0)  # slide_speed.write_slide's tissue
    cols = math.ceil(math.sqrt(spec["tiles"]))
    pattern = np.random.default_rng(0).integers(0, 24, size=(math.ceil(spec["tiles"] / cols), cols))
    tiles = [kinds[k] for k in pattern.ravel()[: spec["measure"]]]
    model = str(HERE / "resources" / "demo" / "model.safetensors")
    source = Session(model, method="source", device=spec["device"], seed=0)
    default = Session(model, method="idipt+", device=spec["device"], seed=0)
    batch = spec["batch"]
    inputs = [
        source.to_input([source.prepare(t) for t in tiles[i : i + batch]])
        for i in range(0, len(tiles), batch)
    ]
    seconds = {"source": 0.0, "idipt+": 0.0}
    for x in inputs:
        start = time.perf_counter()
        with source.autocast_context():
            source.method.decide(x)
        middle = time.perf_counter()
        default.method.sites = ["slide"] * x.shape[0]
        default.method.site = "slide"
        with default.autocast_context():
            default.method.decide(x)
        seconds["source"] += middle - start
        seconds["idipt+"] += time.perf_counter() - middle
    on = getattr(default.method, "operating_point", None) is not None
    return {"tiles": len(tiles), "seconds": seconds, "operating_point": on}


def _steps(root: Path, spec: dict[str, Any]) -> dict[str, Any]:
    """:func:`worker` in a child process running ``root``'s engine."""
    return _last_json(
        root, [str(HERE / "benchmarks" / "decide_cost.py"), "--worker", json.dumps(spec)], "steps"
    )


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.1f} {five:.1f} {fifteen:.1f} on {os.cpu_count()} cores"


def main() -> None:
    if sys.argv[1:2] == ["--worker"]:
        print(json.dumps(worker(json.loads(sys.argv[2]))))
        return
    sys.path.insert(0, str(HERE / "benchmarks"))
    import slide_speed

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiles", type=int, default=2000, help="tissue tiles of the generated slide")
    parser.add_argument("--measure", type=int, default=600, help="tiles timed per run")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the two configurations")
    parser.add_argument("--batch", type=int, default=16, help="the batch of both")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's)")
    parser.add_argument("--root", type=Path, action="append", default=[], help="another checkout to compare")
    parser.add_argument(
        "--arch",
        default=None,
        help="a timm ViT with random weights instead of the demo model (a source reference fitted on "
        "64 noise images, so that the default's operating point runs); a small one leaves the host's "
        "work per tile in view",
    )
    parser.add_argument("--img-size", type=int, default=224, help="its input size (with --arch)")
    parser.add_argument(
        "--steps",
        action="store_true",
        help="the decision steps alone, interleaved batch by batch in one process",
    )
    args = parser.parse_args()

    work = Path(tempfile.gettempdir()) / "f2tta-slide-speed"
    work.mkdir(parents=True, exist_ok=True)
    slide = work / f"slide-{args.tiles}x224-zlib.tif"
    if not slide.exists():
        slide_speed.write_slide(slide.with_suffix(".partial"), args.tiles, 224).rename(slide)
    roots = [HERE, *(r.resolve() for r in args.root)]
    print(f"slide {slide}; device {args.device}; {_load()}", flush=True)
    base = {
        "slide": str(slide),
        "tile": 224,
        "device": args.device,
        "model": str(slide_speed.DEMO),
        "arch": args.arch,
        "img_size": args.img_size,
        "threads": args.threads,
        "measure": args.measure,
        "precision": "auto",
        "compile": False,
        "reference": 64 if args.arch else 0,
        "batch": args.batch,
        "read_ahead": True,
    }
    ratios: dict[Path, list[float]] = {root: [] for root in roots}
    for r in range(args.rounds):
        for root in roots:
            start = time.perf_counter()
            if args.steps:
                steps = _steps(root, {**base, "tiles": args.tiles})
                rates = {k: steps["tiles"] / v for k, v in steps["seconds"].items()}
                ratios[root].append(rates["idipt+"] / rates["source"])
                print(
                    f"round {r + 1} {root}: decision steps alone, source {rates['source']:.1f} tiles/s, idipt+ "
                    f"(operating point {'on' if steps['operating_point'] else 'off'}) {rates['idipt+']:.1f} "
                    f"tiles/s: ratio {ratios[root][-1]:.2f} ({time.perf_counter() - start:.0f} s; {_load()})",
                    flush=True,
                )
                continue
            source = _child(root, {**base, "method": "source", "maps": "inline"})
            default = _child(root, {**base, "method": "idipt+", "maps": "behind", "decisions_only": True})
            source_rate = source["tiles"] / source["decision_seconds"]
            default_rate = default["tiles"] / default["decision_seconds"]
            ratios[root].append(default_rate / source_rate)
            print(
                f"round {r + 1} {root}: source batched {source_rate:.1f} tiles/s ({1e3 / source_rate:.3f} "
                f"ms a tile), idipt+ decisions (maps behind; operating point "
                f"{'on' if default['operating_point'] else 'off'}) {default_rate:.1f} tiles/s "
                f"({1e3 / default_rate:.3f} ms): ratio {ratios[root][-1]:.2f} "
                f"({time.perf_counter() - start:.0f} s; {_load()})",
                flush=True,
            )
    for root in roots:
        print(f"ratio {root} median {statistics.median(ratios[root]):.2f} of {len(ratios[root])} rounds")
    print(f"end; {_load()}")


if __name__ == "__main__":
    main()
