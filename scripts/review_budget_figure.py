"""Redraw the review-budget figure of a ``f2tta bench-suite --review-budgets`` result, and keep
its summary (the per-method figures, without the per-cell table) for ``docs/results/``.

    python scripts/review_budget_figure.py SUITE.json --figure OUT.png --summary OUT.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from lab.bench.plots import review_budget_figure
from lab.bench.reviews import SERIES_UNITS, review_series


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("suite", type=Path, help="the JSON bench-suite --out wrote")
    parser.add_argument("--figure", type=Path, required=True)
    parser.add_argument(
        "--summary", type=Path, default=None, help="write the summary and below-source cells here"
    )
    args = parser.parse_args()
    data = json.loads(args.suite.read_text(encoding="utf-8"))
    summary = data["summary"]
    keys = [k for k in summary if " K=" in k]
    methods = list(dict.fromkeys(k.split(" K=")[0] for k in keys))
    budgets = sorted({int(k.split(" K=")[1]) for k in keys})
    review_budget_figure(budgets, review_series(summary, methods, budgets), args.figure, units=SERIES_UNITS)
    if args.summary is not None:
        below = [
            {**{k: c[k] for k in ("kind", "model", "mix", "site", "source_site")}, "stream_delta": c["delta"]}
            | {"method": m, **r}
            for c in data["cells"]
            for m, r in c["methods"].items()
            if " K=" in m and r["delta"] < -1.0
        ]
        record = {k: data[k] for k in ("recipe", "name", "seconds")}
        record |= {"summary": summary, "cells_below_source_by_1": below}
        args.summary.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
