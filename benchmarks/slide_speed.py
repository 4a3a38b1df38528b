"""End-to-end tiles per second of ``f2tta run`` on a whole slide, reading included (issue 28).

Generates (or takes, ``--slide``) a pyramid TIFF whose tissue is ``--tiles`` N tiles of ``--tile``
pixels (default 20 000 at 224 px; generated H&E-like texture, deflate-compressed tiles, 0.5 µm/px,
reduced levels down to an overview; ``--compression none`` writes faster) and runs ``f2tta run``'s job on it -- the slide's tile plan,
the reading threads, the journal and the CSV -- for each method at B = 1 as the loop ran before
batches (each tile read when the model needs it) and at the chosen batch B with tiles read ahead.
The model is the demo model (``--model``), its card given the resolution that makes its tiles
``--tile`` pixels of the slide, or a timm ViT with random weights (``--arch``, nothing is
downloaded). Each configuration runs in a child process of its own (its peak RSS and, on CUDA,
its peak GPU memory are its own) on the first ``--measure`` M tiles (default: all). Then the
whole slide end to end (``--no-whole`` leaves it out), at B with tiles read ahead: the first
method and, when it is listed, the default, whose maps run behind its decisions as ``f2tta run``
runs them; its line gives the plan's time, when the last decision came (tiles per second from the
start, plan and reading included), the maps' rate behind them, the total and the peak RSS. A compiled
forward (``--compile``) is compiled at the batch's shape before the timed run (the time it took
is printed); a last, smaller batch in the timed tiles is compiled in the run.

Prints one line per run, ``speedup METHOD X`` per method (its tiles/s at B over at B = 1 before
batches, measured here) and, as its last line, ``speedup S``: the same for the default method's
decisions. The default (``idipt+``) steps batches: its source pass and I-DiPT's prompt tuning for
the uncertainty maps run on the batch, and its operating point takes the batch's images one by one,
so its decisions are those of B = 1. A method that decides from the source pass and makes maps
(the default) also runs with its maps behind its decisions (``f2tta run --maps behind``, at B,
read ahead): its decisions per second (reading included, until the last decision) and its maps per
second behind them are printed, and, on the line before the last, ``speedup decisions-first S``:
those decisions per second over B = 1 as before. The default runs its site operating point where
the model has a source reference (the demo model has one; a random-weights ``--arch`` model gets
one with ``--reference N``); each of its lines says whether it was on. With the maps behind, the
next batch's decision pass runs on a worker thread while one is decided (``--look-ahead``; by
default on CUDA, ``engine/run/ahead.py``); where it does, the maps-behind run is also taken taking
turns, one line before it, for the comparison.

    python benchmarks/slide_speed.py [--tiles 20000] [--tile 224] [--device cpu|cuda] [--measure M]
        [--methods source,idipt+,idipt] [--batch B] [--arch vit_base_patch16_224 --img-size 224]
        [--reference N] [--no-whole] [--look-ahead auto|on|off]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

DEMO = Path(__file__).resolve().parents[1] / "resources" / "demo" / "model.safetensors"
SLIDE_MPP = 0.5
KINDS = 24  # distinct tissue tiles the slide repeats


def _levels(width: int, height: int) -> int:
    """Pyramid levels (each half the one before) down to one whose longer side is at most 2 048."""
    levels = 1
    while max(width, height) / 2 ** (levels - 1) > 2048:
        levels += 1
    return levels


def write_slide(path: Path, tiles: int, tile: int, seed: int = 0, compression: str | None = "zlib") -> Path:
    """A pyramid TIFF of ``tiles`` tissue tiles of ``tile`` px in a near-square grid, glass around.

    Written tile by tile (never the whole image in memory); each level's TIFF tiles are the
    grid's cells at that level.
    """
    import tifffile

    from lab.synth.generate import generate_arrays

    if tile % 16 or tile < 64:
        raise SystemExit("--tile must be a multiple of 16, at least 64")
    cols = math.ceil(math.sqrt(tiles))
    rows = math.ceil(tiles / cols)
    kinds, _ = generate_arrays("histo", "site2", KINDS, size=tile, seed=seed)
    rng = np.random.default_rng(seed)
    pattern = rng.integers(0, KINDS, size=(rows, cols))
    levels = _levels(cols * tile, rows * tile)

    def cells(level: int) -> Iterator[np.ndarray]:
        f = 2**level
        small = [k[::f, ::f] for k in kinds]  # each cell at this level (a box filter would be finer)
        side = tile // f
        for ty in range(math.ceil(rows / f)):
            for tx in range(math.ceil(cols / f)):
                out = np.full((tile, tile, 3), 242, np.uint8)
                for dy in range(f):
                    for dx in range(f):
                        r, c = ty * f + dy, tx * f + dx
                        if r < rows and c < cols and r * cols + c < tiles:
                            out[dy * side : (dy + 1) * side, dx * side : (dx + 1) * side] = small[
                                pattern[r, c]
                            ]
                yield out

    with tifffile.TiffWriter(path, bigtiff=True) as tw:
        for level in range(levels):
            f = 2**level
            shape = (math.ceil(rows * tile / f), math.ceil(cols * tile / f), 3)
            res = 1e4 / SLIDE_MPP / f
            tw.write(
                cells(level),
                shape=shape,
                dtype=np.uint8,
                tile=(tile, tile),
                photometric="rgb",
                compression=compression,
                subfiletype=int(level > 0),
                resolution=(res, res),
                resolutionunit="CENTIMETER",
            )
    return path


# -- one configuration, in a child process -----------------------------------------------------
def _loaded(spec: dict[str, Any]) -> Any:
    """The model, its card's resolution set so that its tiles are ``tile`` px of the slide."""
    import torch

    from engine import LoadedModel, ModelCard, load_model

    if spec["arch"]:
        card = ModelCard(arch=spec["arch"], classes=("normal", "tumor"), img_size=spec["img_size"])
        torch.manual_seed(0)
        model = card.build().eval()
        loaded = LoadedModel(model, card, fingerprint="benchmark")
    else:
        loaded = load_model(spec["model"])
    card = dataclasses.replace(loaded.card, mpp=SLIDE_MPP * spec["tile"] / loaded.card.img_size)
    return dataclasses.replace(loaded, card=card)


def _give_reference(session: Any, images: int) -> None:
    """A source reference for a random-weights model (``--arch``), fitted on ``images`` seeded noise
    images with alternating labels, so that a method that reads one (the default's per-site
    operating point) runs its whole decision path, fits included; without it the operating point
    is off and every decision is the source model's."""
    import torch

    from engine import get_method_class
    from engine.model.source_reference import fit_reference

    if not get_method_class(session.method_name).uses_reference:
        return
    generator = torch.Generator().manual_seed(0)
    size = session.card.img_size
    x = torch.randn(images, 3, size, size, generator=generator).to(session.device)
    y = torch.arange(images) % 2
    batches = [(x[i : i + 64], y[i : i + 64].to(session.device)) for i in range(0, images, 64)]
    session.reference = fit_reference(session.model, batches, session.card.num_classes, "benchmark")
    session.method.use_reference(session.reference)


def child(spec: dict[str, Any]) -> dict[str, Any]:
    import torch

    from engine import Mapped, Predicted, Session, get_method_class
    from engine.run.outcomes import Prompted
    from engine.run.runner import JobOptions, open_slide_job

    if spec["threads"]:
        torch.set_num_threads(spec["threads"])
    session = Session(
        _loaded(spec),
        method=spec["method"],
        device=spec["device"],
        seed=0,
        precision=spec["precision"],
        compiled=spec["compile"] and get_method_class(spec["method"]).compile_ok,
    )
    if spec.get("reference") and spec["arch"] and session.reference is None:
        _give_reference(session, int(spec["reference"]))
    work = Path(spec["work"])
    start = time.perf_counter()
    job = open_slide_job(
        session,
        Path(spec["slide"]),
        work / "state",
        work / "out.csv",
        JobOptions(
            batch=spec["batch"],
            accept_warnings=True,
            maps=spec.get("maps", "inline"),
            prompted=spec.get("prompted", "on-demand"),  # as f2tta run without review marks
        ),
    )
    planned = time.perf_counter() - start
    run = job.run
    warm = 0.0
    if session.compiled is not None:  # compiled at the batch's shape before the timed run
        start = time.perf_counter()
        size = session.card.img_size
        x = torch.zeros(run.batch, 3, size, size, device=session.device)
        autocast = (
            torch.autocast(session.device.type, dtype=session.autocast)
            if session.autocast is not None
            else contextlib.nullcontext()
        )
        with torch.no_grad(), autocast:
            session.model(x)
        warm = time.perf_counter() - start
    if not spec["read_ahead"]:
        run.read_ahead = 0  # as the loop ran before batches: each tile read when the model needs it
    if spec.get("look_ahead") is not None:  # the next batch's decision pass on a worker thread
        run.look_ahead = bool(spec["look_ahead"])
    run.pending = run.pending[: spec["measure"]] if spec["measure"] else run.pending
    if session.device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    tiles = maps = prompted = 0
    start = time.perf_counter()
    decided = mapped = start
    for outcome in run.outcomes():
        if isinstance(outcome, Predicted):
            tiles += 1
            decided = time.perf_counter()  # with the maps behind: the last decision's time
        if isinstance(outcome, Mapped):
            maps += 1
            mapped = time.perf_counter()  # the last map's
        prompted += isinstance(outcome, Prompted)  # I-DiPT's decisions behind the maps, when asked for
        if maps and spec.get("decisions_only"):
            break  # the decisions' rate only (benchmarks/decide_cost.py): the maps behind are not made
    seconds = time.perf_counter() - start
    mapped = max(mapped, decided)
    job.close()
    return {
        "method": spec["method"],
        "batch": run.batch,
        "read_ahead": run.read_ahead,
        "tiles": tiles,
        "planned_tiles": len(job.source.items),
        "plan_seconds": planned,
        "compile_seconds": warm,
        "seconds": seconds,
        "tiles_per_second": tiles / seconds if seconds else 0.0,
        "decision_seconds": decided - start,
        "maps": maps,
        "map_seconds": mapped - decided,
        "prompted": prompted,
        "prompt_seconds": seconds - (mapped - start) if prompted else 0.0,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "peak_gpu_mib": torch.cuda.max_memory_allocated() / 2**20 if session.device.type == "cuda" else None,
        "device": str(session.device),
        "precision": session.config_dict()["precision"],
        "compiled": session.compiled is not None and session.compiled.active,
        "threads": torch.get_num_threads(),
        "failure": None if run.summary.failure is None else run.summary.failure.message,
        "operating_point": getattr(session.method, "operating_point", None) is not None,
        "looked_ahead": run.look_ahead and run.behind,
    }


def _run_child(spec: dict[str, Any]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="slide-speed-") as work:
        spec = {**spec, "work": work}
        proc = subprocess.run(
            [sys.executable, __file__, "--child", json.dumps(spec)],
            capture_output=True,
            text=True,
            check=False,
        )
    if proc.returncode != 0:
        raise SystemExit(f"a run failed ({spec['method']}, batch {spec['batch']}):\n{proc.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    if result["failure"]:
        raise SystemExit(f"{spec['method']} at batch {spec['batch']}: {result['failure']}")
    return result


def _line(label: str, r: dict[str, Any]) -> str:
    from engine import DEFAULT_METHOD

    gpu = f", peak GPU {r['peak_gpu_mib']:.0f} MiB" if r["peak_gpu_mib"] is not None else ""
    gpu += f"; {r['precision']}" + (f", compiled in {r['compile_seconds']:.0f} s" if r["compiled"] else "")
    if r["method"] == DEFAULT_METHOD:
        gpu += "; site operating point " + ("on" if r["operating_point"] else "off (no source reference)")
    return (
        f"{label:<26} B={r['batch']:<3} read-ahead {r['read_ahead']:<3} {r['tiles']:>6} tiles in "
        f"{r['seconds']:7.1f} s: {r['tiles_per_second']:8.1f} tiles/s; peak RSS {r['peak_rss_mib']:.0f} MiB{gpu}"
    )


def _whole_line(r: dict[str, Any]) -> str:
    """The whole slide end to end: its plan, its decisions and, behind them, its maps."""
    from engine import DEFAULT_METHOD

    gpu = f", peak GPU {r['peak_gpu_mib']:.0f} MiB" if r["peak_gpu_mib"] is not None else ""
    head = f"whole slide, {r['method']}"
    if r["method"] == DEFAULT_METHOD:
        head += ", site operating point " + ("on" if r["operating_point"] else "off (no source reference)")
    head += ", passes looking ahead" if r["looked_ahead"] else ""
    plan = r["plan_seconds"]
    total = plan + r["seconds"]
    if r["maps"]:  # maps behind the decisions
        decided = plan + r["decision_seconds"]
        maps_rate = r["maps"] / r["map_seconds"] if r["map_seconds"] else 0.0
        return (
            f"{head}, maps behind, B={r['batch']}: {r['planned_tiles']} tiles planned in {plan:.1f} s; "
            f"{r['tiles']} decided {decided:.1f} s from the start ({r['tiles'] / decided:.1f} tiles/s end to "
            f"end, plan and reading included); {r['maps']} maps behind in {r['map_seconds']:.1f} s "
            f"({maps_rate:.1f} maps/s){_prompted_part(r)}; all done in {total:.1f} s; "
            f"peak RSS {r['peak_rss_mib']:.0f} MiB{gpu}"
        )
    return (
        f"{head}, B={r['batch']}: {r['planned_tiles']} tiles planned in {plan:.1f} s, processed in "
        f"{r['seconds']:.1f} s ({r['tiles_per_second']:.1f} tiles/s; {r['tiles'] / total:.1f} tiles/s end to "
        f"end, plan included); peak RSS {r['peak_rss_mib']:.0f} MiB{gpu}"
    )


def _prompted_part(r: dict[str, Any]) -> str:
    """``; 300 prompted decisions behind the maps in 6.1 s (48.9/s)`` (empty: none was asked for)."""
    if not r["prompted"]:
        return ""
    rate = r["prompted"] / r["prompt_seconds"] if r["prompt_seconds"] else 0.0
    return f"; {r['prompted']} prompted decisions behind them in {r['prompt_seconds']:.1f} s ({rate:.1f}/s)"


def _chosen_batch(device: Any, method: str, batch: int | None) -> int:
    """The batch a method runs at: ``batch``, or the device's default, within the method's limit."""
    from engine import get_method_class
    from engine.run.batch import default_batch

    limit = get_method_class(method).max_batch
    return default_batch(device, limit) if batch is None else min(batch, limit or batch)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiles", type=int, default=20_000, help="tissue tiles of the generated slide")
    parser.add_argument("--tile", type=int, default=224, help="tile side in slide pixels")
    parser.add_argument("--slide", type=Path, default=None, help="take this slide instead of generating one")
    parser.add_argument("--work", type=Path, default=None, help="where the generated slide is kept")
    parser.add_argument(
        "--compression", choices=("zlib", "none"), default="zlib", help="of the generated slide's tiles"
    )
    parser.add_argument(
        "--no-whole", action="store_true", help="leave out the run over the whole slide (its time and RSS)"
    )
    parser.add_argument("--device", default="auto")
    parser.add_argument(
        "--model", type=Path, default=DEMO, help="checkpoint with its card (default: the demo)"
    )
    parser.add_argument("--arch", default=None, help="a timm ViT with random weights instead of --model")
    parser.add_argument("--img-size", type=int, default=224, help="its input size (with --arch)")
    parser.add_argument(
        "--methods", default="source,idipt+,idipt", help="the first also runs over the whole slide"
    )
    parser.add_argument("--batch", type=int, default=None, help="the chosen batch (default: the device's)")
    parser.add_argument("--measure", type=int, default=0, help="tiles timed per run (default 0: all)")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's)")
    parser.add_argument("--precision", default="auto", help="auto, fp32 or bf16 (engine/run/accel.py)")
    parser.add_argument("--compile", action="store_true", help="the model's forward compiled (source only)")
    parser.add_argument(
        "--reference",
        type=int,
        default=0,
        help="with --arch: fit a source reference on this many noise images, so that the default "
        "method's site operating point runs (0: none, the operating point off)",
    )
    parser.add_argument(
        "--prompted",
        choices=("on-demand", "behind"),
        default="on-demand",
        help="with the maps behind: I-DiPT's prompted decisions made on demand (none here, as f2tta run "
        "without review marks: the default) or behind the maps (as when a review reaches them)",
    )
    parser.add_argument(
        "--look-ahead",
        choices=("auto", "on", "off"),
        default="auto",
        help="with the maps behind: the next batch's decision pass on a worker thread while one is "
        "decided (auto: on CUDA; engine/run/ahead.py); where a run looks ahead, its maps-behind run "
        "is also taken taking turns, for the comparison",
    )
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(child(json.loads(args.child))))
        return

    from engine import DEFAULT_METHOD, get_method_class
    from engine.util.device import select_device

    device = select_device(args.device)
    slide = args.slide
    if slide is None:
        work = args.work or Path(tempfile.gettempdir()) / "f2tta-slide-speed"
        work.mkdir(parents=True, exist_ok=True)
        slide = work / f"slide-{args.tiles}x{args.tile}-{args.compression}.tif"
        if not slide.exists():
            start = time.perf_counter()
            compression = None if args.compression == "none" else args.compression
            write_slide(slide.with_suffix(".partial"), args.tiles, args.tile, compression=compression).rename(
                slide
            )
            print(
                f"wrote {slide} ({slide.stat().st_size / 2**20:.0f} MiB) in {time.perf_counter() - start:.0f} s"
            )
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    load = os.getloadavg()
    print(
        f"slide {slide}; device {device}; model {args.arch or args.model}; load average "
        f"{load[0]:.1f} {load[1]:.1f} {load[2]:.1f} on {os.cpu_count()} cores"
    )
    base = {
        "slide": str(slide),
        "tile": args.tile,
        "device": str(device),
        "model": str(args.model),
        "arch": args.arch,
        "img_size": args.img_size,
        "threads": args.threads,
        "measure": args.measure,
        "precision": args.precision,
        "compile": args.compile,
        "reference": args.reference,
        "prompted": args.prompted,
        "look_ahead": {"auto": None, "on": True, "off": False}[args.look_ahead],
    }
    rates: dict[str, float] = {}
    first_rates: dict[str, float] = {}  # decisions first, maps behind: decisions/s over B = 1 inline
    for method in methods:
        chosen = _chosen_batch(device, method, args.batch)
        before = _run_child({**base, "method": method, "batch": 1, "read_ahead": False})
        print(_line(f"{method}, as before", before), flush=True)
        now = _run_child({**base, "method": method, "batch": chosen, "read_ahead": True})
        print(_line(f"{method}, batched", now), flush=True)
        rates[method] = now["tiles_per_second"] / before["tiles_per_second"]
        if get_method_class(method).decides_from_source_pass and get_method_class(method).has_map_step:
            behind = _run_child(
                {**base, "method": method, "batch": chosen, "read_ahead": True, "maps": "behind"}
            )
            if behind["looked_ahead"]:  # the same run taking turns, for the comparison
                turns = _run_child(
                    {**base, "method": method, "batch": chosen, "read_ahead": True, "maps": "behind"}
                    | {"look_ahead": False, "decisions_only": True}
                )
                print(
                    f"{method + ', taking turns':<26} B={turns['batch']:<3} {turns['tiles']:>6} decisions in "
                    f"{turns['decision_seconds']:7.1f} s: {turns['tiles'] / turns['decision_seconds']:8.1f} "
                    "tiles/s, each batch's pass after the decisions before it (the maps-behind line below "
                    "looks ahead)",
                    flush=True,
                )
            first_rate = behind["tiles"] / behind["decision_seconds"]
            maps_rate = behind["maps"] / behind["map_seconds"] if behind["map_seconds"] else 0.0
            print(
                f"{method + ', maps behind':<26} B={behind['batch']:<3} {behind['tiles']:>6} decisions in "
                f"{behind['decision_seconds']:7.1f} s: {first_rate:8.1f} tiles/s (reading included); "
                f"{behind['maps']} maps behind in {behind['map_seconds']:.1f} s: {maps_rate:.1f} maps/s "
                f"({maps_rate / before['tiles_per_second']:.2f} x its B = 1 rate as before); "
                f"peak RSS {behind['peak_rss_mib']:.0f} MiB",
                flush=True,
            )
            if behind["prompted"]:
                rate = behind["prompted"] / behind["prompt_seconds"] if behind["prompt_seconds"] else 0.0
                print(
                    f"{method + ', prompted behind':<26} B={behind['batch']:<3} {behind['prompted']:>6} "
                    f"prompted decisions behind the maps in {behind['prompt_seconds']:.1f} s: {rate:.1f}/s",
                    flush=True,
                )
            first_rates[method] = first_rate / before["tiles_per_second"]
    if not args.no_whole:
        # The first method over the whole slide and, when it is in the list, the default too: a
        # method with a map step runs it behind its decisions, as f2tta run does by default.
        for method in dict.fromkeys([methods[0]] + [m for m in methods if m == DEFAULT_METHOD]):
            cls = get_method_class(method)
            maps = "behind" if cls.decides_from_source_pass and cls.has_map_step else "inline"
            chosen = _chosen_batch(device, method, args.batch)
            whole = _run_child(
                {**base, "method": method, "batch": chosen, "read_ahead": True, "measure": 0, "maps": maps}
            )
            print(_whole_line(whole), flush=True)
    for method in methods:
        print(f"speedup {method} {rates[method]:.2f}")
    if DEFAULT_METHOD in first_rates:
        print(f"speedup decisions-first {first_rates[DEFAULT_METHOD]:.2f}")
    if DEFAULT_METHOD in rates:
        print(f"speedup {rates[DEFAULT_METHOD]:.2f}")


if __name__ == "__main__":
    main()
