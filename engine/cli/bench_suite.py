"""``f2tta bench-suite RECIPE``: run a committed evaluation suite and print every cell.

Generates the recipe's data, trains its source models and computes their source passes once
(kept in ``--work``), then replays every method over every (kind, model, class mix, δ) stream
(``engine.bench.suite``). Prints one line per (kind, model, mix, δ, site) cell with each method's
paired difference against the source model (fixed/broken images and the exact 95 % interval),
then per method the worst cell, the harmful cells (difference below -1 point or interval below
-2) and the share of the target error closed; ``--out`` gets all of it as JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from engine.bench.paired import NO_HARM_LOW, NO_HARM_POINT
from engine.bench.plots import review_budget_figure
from engine.bench.reviews import SERIES_UNITS, parse_budgets, review_series
from engine.bench.suite import Recipe, prepare, run_suite, summary
from engine.errors import F2TTAError
from engine.util.atomic import atomic_write_bytes
from engine.util.files import check_outputs
from engine.util.text import shown


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "recipe", type=Path, help="suite recipe (JSON), e.g. benchmarks/suites/safe-adaptation-1.json"
    )
    parser.add_argument(
        "--work", type=Path, required=True, help="folder for the data, models and source passes"
    )
    parser.add_argument("--out", type=Path, default=None, help="write every cell and the summary as JSON")
    parser.add_argument("--workers", type=int, default=1, help="processes replaying streams (default 1)")
    parser.add_argument("--device", default="cpu", help="device for training and source passes (default cpu)")
    parser.add_argument(
        "--prepare-only", action="store_true", help="make the data, models and passes, then stop"
    )
    parser.add_argument(
        "--review-budgets",
        default=None,
        metavar="K[,K...]",
        help="also each method's decisions after K simulated reviews per site (e.g. 0,5,10,20,50); "
        "with --out, a figure of the figures against K beside it (OUT.reviews.png)",
    )
    parser.add_argument(
        "--models-only",
        action="store_true",
        help="make the data and train the models, compute no source passes (train where a GPU is, replay elsewhere)",
    )


def main(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    try:  # everything that can be refused is refused before any data, model or pass is made
        recipe = Recipe.load(args.recipe)
        budgets = parse_budgets(args.review_budgets) if args.review_budgets else ()
        if args.out is not None:
            check_outputs([args.out, *([args.out.with_suffix(".reviews.png")] if budgets else [])])
    except (F2TTAError, OSError, ValueError) as exc:
        print(f"error: {shown(exc)}", file=sys.stderr)
        return 2
    try:
        prepared = prepare(recipe, args.work, args.device, passes=not args.models_only)
        prepared_s = time.perf_counter() - started
        print(f"prepared in {prepared_s:.0f} s", flush=True)
        if args.prepare_only or args.models_only:
            return 0
        cells = run_suite(recipe, prepared, args.work, max(1, args.workers), review_budgets=budgets)
    except (F2TTAError, OSError, ValueError) as exc:
        print(f"error: {shown(exc)}", file=sys.stderr)
        return 1
    methods = [m for m in recipe.methods if m != "source"]
    print(
        f"\n{'kind':7} {'model':10} {'mix':5} {'delta':>5} {'site':7} {'source':>6}  "
        + "  ".join(f"{m:>32}" for m in methods)
    )
    for c in cells:
        cols = []
        for m in methods:
            r = c.results[m]
            mark = "!" if c.harmful(m) else " "
            cols.append(f"{r.delta:+6.1f} ({r.fixed:3d}/{r.broken:3d}) [{r.low:+5.1f},{r.high:+5.1f}]{mark}")
        src = next(iter(c.results.values())).source_acc
        tag = "*" if c.source else " "
        print(
            f"{c.kind:7} {c.model:10} {c.mix:5} {c.delta:5g} {c.site:6}{tag} {src:6.1f}  "
            + "  ".join(f"{x:>32}" for x in cols)
        )
    result = summary(cells, recipe.methods)
    print(
        f"\n* the model's source site; ! a harmful cell (difference < {NO_HARM_POINT:g} or interval < {NO_HARM_LOW:g} points)"
    )
    for m, s in result.items():
        w = s["worst_cell"]
        lo = s["lowest_interval"]
        print(
            f"{m}: {s['harmful_cells']} harmful of {s['cells']} cells; worst cell {w['kind']} {w['model']} "
            f"mix {w['mix']} δ {w['delta']:g} {w['site']}: {w['difference']:+.1f}; lowest interval end "
            f"{lo['low']:+.1f} ({lo['kind']} {lo['model']} mix {lo['mix']} δ {lo['delta']:g} {lo['site']}); "
            f"source site worst {s['source_site_worst']:+.1f}; target mean gain {s['target_mean_gain']:+.2f} "
            f"points, target error closed {100 * s['target_error_closed']:.1f} %; fixed/broken {s['fixed']}/{s['broken']}; "
            f"cells below the source by more than 1 point: {s['cells_below_source_by_1']}"
            + (f"; reviews per site {s['reviews_per_site']:.1f}" if "reviews_per_site" in s else "")
        )
    seconds = time.perf_counter() - started
    print(f"suite wall time {seconds:.0f} s (preparation {prepared_s:.0f} s)")
    if args.out is not None:
        record = {
            "recipe": str(args.recipe),
            "name": recipe.name,
            "summary": result,
            "cells": [c.to_json() for c in cells],
            "seconds": seconds,
            "preparation_seconds": prepared_s,
        }
        try:
            atomic_write_bytes(args.out, (json.dumps(record, indent=1, default=float) + "\n").encode())
            if budgets:
                series = review_series(result, methods, budgets)
                figure = args.out.with_suffix(".reviews.png")
                review_budget_figure(list(budgets), series, figure, units=SERIES_UNITS)
        except OSError as exc:
            print(f"error: cannot write {args.out}: {exc}", file=sys.stderr)
            return 1
    return 0
