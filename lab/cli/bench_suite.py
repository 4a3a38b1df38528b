"""``f2tta bench-suite RECIPE``: run a committed evaluation suite and print every cell.

Generates the recipe's data, trains its source models and computes their source passes once
(kept in ``--work``), then replays every method over every (kind, model, class mix, δ) stream
(``lab.bench.suite``). Prints one line per (kind, model, mix, δ, site) cell with each method's
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

from engine.errors import F2TTAError
from engine.util.atomic import atomic_write_bytes
from engine.util.files import check_outputs
from engine.util.text import shown
from lab.bench.paired import NO_HARM_LOW, NO_HARM_POINT
from lab.bench.plots import review_budget_figure
from lab.bench.reviews import SERIES_UNITS, parse_budgets, review_series
from lab.bench.suite import Recipe, prepare, run_suite, summary

#: The variants printed per cell (every variant is in the JSON).
_SHOWN = ("idipt+ final", "idipt+ K=20")


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
            figure = bool(budgets or recipe.review_budgets)
            check_outputs([args.out, *([args.out.with_suffix(".reviews.png")] if figure else [])])
    except (F2TTAError, OSError, ValueError) as exc:
        print(f"error: {shown(exc)}", file=sys.stderr)
        return 2
    try:
        prepared = prepare(recipe, args.work, args.device, passes=not args.models_only)
        prepared_s = time.perf_counter() - started
        print(f"prepared in {prepared_s:.0f} s", flush=True)
        if args.prepare_only or args.models_only:
            return 0
        results = run_suite(recipe, prepared, args.work, max(1, args.workers), review_budgets=budgets)
    except (F2TTAError, OSError, ValueError) as exc:
        print(f"error: {shown(exc)}", file=sys.stderr)
        return 1
    methods = [m for m in recipe.methods if m != "source"]
    cells = [c for r in results for c in r.cells]
    shown_keys = [k for k in (cells[0].results if cells else {}) if k in _SHOWN or k in methods]
    print(
        f"\n{'kind':10} {'model':22} {'protocol':13} {'mix':5} {'delta':>5} {'site':7} {'source':>6}  "
        + "  ".join(f"{k:>32}" for k in shown_keys)
    )
    for c in cells:
        cols = []
        for k in shown_keys:
            r = c.results[k]
            mark = "!" if c.harmful(k) else " "
            cols.append(f"{r.delta:+6.1f} ({r.fixed:3d}/{r.broken:3d}) [{r.low:+5.1f},{r.high:+5.1f}]{mark}")
        src = next(iter(c.results.values())).source_acc
        tag = "*" if c.source else " "
        print(
            f"{c.kind:10} {c.model:22} {c.protocol:13} {c.mix:5} {c.delta:5g} {c.site:6}{tag} {src:6.1f}  "
            + "  ".join(f"{x:>32}" for x in cols)
        )
    result = summary(results, recipe.methods)
    print(
        f"\n* the model's source site; ! a harmful cell (difference < {NO_HARM_POINT:g} or interval < {NO_HARM_LOW:g} points)"
    )
    for protocol, entry in result.items():
        units = entry["site_units_per_stream"]
        print(
            f"\n{protocol}: {entry['streams']} streams; sites or site groups per stream: median "
            f"{units['median']:g}, most {units['max']}"
        )
        for key, s in entry.items():
            if not isinstance(s, dict) or "median_error_closed" not in s:
                continue
            harmed = s["harmed_units"]
            extra = ""
            if "false_verifications" in s:
                extra = (
                    f"; reviews per site {s['reviews_per_site']:.1f}; promoted or verified "
                    f"{s['promoted_or_verified']}, of which false {s['false_verifications']}"
                )
            print(
                f"  {key}: median error closed {100 * s['median_error_closed']:.1f} % of the closable error "
                f"({s['target_units_with_closable_error']} target units); harmed units {len(harmed)}"
                + (
                    " ("
                    + ", ".join(f"{h['model']} {h['site']} {h['upper_bound']:+.1f}" for h in harmed[:6])
                    + ")"
                    if harmed
                    else ""
                )
                + f"; cells below the source by > 1 point {s['cells_below_source_by_1']} of {s['cells']}, worst "
                f"{s['worst_cell_difference']:+.1f}; target mean gain {s['target_mean_gain']:+.2f}; fixed/broken "
                f"{s['fixed']}/{s['broken']}; decisions changed {100 * s['changed_share']:.1f} %{extra}"
            )
    seconds = time.perf_counter() - started
    print(f"suite wall time {seconds:.0f} s (preparation {prepared_s:.0f} s)")
    if args.out is not None:
        record = {
            "recipe": str(args.recipe),
            "name": recipe.name,
            "summary": result,
            "cells": [c.to_json() for c in cells],
            "streams": [
                {
                    "kind": r.job.kind,
                    "model": r.job.model,
                    "protocol": r.job.protocol,
                    "mix": str(r.job.mix),
                    "delta": r.job.delta,
                    "site_units": r.units,
                    "verdicts": {
                        k: {"promoted_or_verified": v[0], "false": v[1]} for k, v in r.verdicts.items()
                    },
                }
                for r in results
            ],
            "seconds": seconds,
            "preparation_seconds": prepared_s,
        }
        try:
            atomic_write_bytes(args.out, (json.dumps(record, indent=1, default=float) + "\n").encode())
            figure_budgets = sorted({0, *(recipe.review_budgets or budgets)})
            if len(figure_budgets) > 1:
                first = next(iter(result.values()))
                series = review_series(first, methods, figure_budgets)
                figure = args.out.with_suffix(".reviews.png")
                review_budget_figure(figure_budgets, series, figure, units=SERIES_UNITS)
        except OSError as exc:
            print(f"error: cannot write {args.out}: {exc}", file=sys.stderr)
            return 1
    return 0
