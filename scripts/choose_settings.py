"""Choose I-DiPT+'s settings on simulated shifts of the source validation split (no target labels).

For each development model (a checkpoint with its source reference, and the dataset it was
trained on: only its *source validation split* is read), the simulated sites of
``lab.bench.shifts`` are built once and cached; every setting of the grid is replayed on the
same simulated streams (``lab.bench.tuning``). The chosen setting is the one with the largest
mean gain among those with no harmful simulated site (paired difference below -1 point, or the
lower end of its exact 95 % interval below -2); the JSON written to ``--out`` holds every
setting's summary and the choice.

    python scripts/choose_settings.py \\
        --dev resources/demo/model.safetensors DATA/histo0 \\
        --dev resources/demo-fundus/model.safetensors DATA/fundus0 \\
        --dev MODELS/lesion0.safetensors DATA/lesion0 \\
        --dev MODELS/histo1.safetensors DATA/histo1 \\
        --grid join=1,1.5,2 --grid min_edge=2,2.5,3 --grid quantile=0.05,0.1,0.2 \\
        --cache .cache/choose --out docs/results/settings-choice.json --workers 2
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from engine.util.atomic import atomic_write_bytes
from lab.bench.tuning import DevModel, choose, load_dev_model, parse_grid, score, summarise, to_json

_DEV: list[DevModel] = []


def _init(specs: list[tuple[str, str]], args: dict[str, Any]) -> None:
    torch.set_num_threads(1)
    _DEV.clear()
    for model, data in specs:
        _DEV.append(
            load_dev_model(
                Path(model),
                Path(data),
                args["variants"],
                args["seed"],
                args["cache"],
                args["streams"],
                args["sites"],
                args["per_site"],
            )
        )


def _score(overrides: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    return overrides, summarise(score(_DEV, overrides))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dev", nargs=2, action="append", metavar=("MODEL", "DATA"), required=True)
    parser.add_argument("--grid", action="append", default=[], metavar="FIELD=V1,V2")
    parser.add_argument("--variants", type=int, default=4, help="copies of each validation image per site")
    parser.add_argument("--streams", type=int, default=3, help="simulated streams per model")
    parser.add_argument(
        "--sites", type=int, default=8, help="simulated sites per stream (plus the clean one)"
    )
    parser.add_argument("--per-site", type=int, default=300, help="images per simulated site")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cache", type=Path, default=Path(".cache/choose"))
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    grid = parse_grid(args.grid)
    specs = [(m, d) for m, d in args.dev]
    shared = {
        "variants": args.variants,
        "seed": args.seed,
        "cache": args.cache,
        "streams": args.streams,
        "sites": args.sites,
        "per_site": args.per_site,
    }
    start = time.perf_counter()
    _init(specs, shared)  # builds (and caches) the pools once, before the workers read them
    print(f"pools ready in {time.perf_counter() - start:.0f} s; {len(grid)} settings", flush=True)
    results: list[tuple[dict[str, Any], dict[str, Any]]] = []
    if args.workers > 1:
        with ProcessPoolExecutor(args.workers, initializer=_init, initargs=(specs, shared)) as pool:
            for overrides, summary in pool.map(_score, grid):
                results.append((overrides, summary))
                print(_line(overrides, summary), flush=True)
    else:
        for overrides in grid:
            results.append(_score(overrides))
            print(_line(*results[-1]), flush=True)
    chosen, summary = choose(results)
    print(f"chosen: {chosen} -> {_line(chosen, summary)}")
    record = {
        "command": " ".join(sys.argv),
        "dev_models": [{"model": m, "data": d} for m, d in specs],
        "settings": shared | {"cache": str(args.cache)},
        "results": [{"overrides": o, "summary": s} for o, s in results],
        "chosen": chosen,
        "seconds": time.perf_counter() - start,
    }
    atomic_write_bytes(args.out, (to_json(record) + "\n").encode())
    return 0


def _line(overrides: dict[str, Any], s: dict[str, Any]) -> str:
    return (
        f"{overrides}: harmful {s['harmful']}/{s['cells']}, worst {s['worst_delta']:+.1f} "
        f"(low {s['lowest_low']:+.1f}), mean gain {s['mean_gain']:+.2f}, error closed "
        f"{100 * s['error_closed']:.1f} %, fixed/broken {s['fixed']}/{s['broken']}"
    )


if __name__ == "__main__":
    raise SystemExit(main())
