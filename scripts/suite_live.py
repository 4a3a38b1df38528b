"""The live-review targets of a suite with a reviewer mid-run (issue 37), from its cells file.

    python scripts/suite_live.py RESULT.json [--protocol known-sites] [--budget 20]

Written and committed with the sixth suite's recipe, before the suite ran
(``benchmarks/suites/site-adaptation-6.json``); every figure is computed from the cells file
``f2tta bench-suite --out RESULT.json`` writes (its ``cells``, or the gzipped cells file kept in
``docs/results/``), nothing is typed in:

1. **Mid-run, adversarial orders** (drift, scan, help-then-harm; the reviewer after 25 % and
   50 % of each site, K answers): the share of target site cells that end below the source
   model's accuracy, in the report (retroactive) and as shown while they arrived (online), and
   the units harmed (the endpoints' rule, on those cells).
2. **The reviewer at the end**: the ladder against the plain uses of the same K labels
   (best-of-K, threshold-on-K) in the endpoints' units.
3. **Ordinary streams** (the fixed class mixes), the reviewer at 50 %: the mean gain over the
   target cells shown while they arrived against the report's, and the units harmed online.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lab.bench.endpoints import UnitCell, unit_endpoints

ADVERSARIAL = ("drift", "scan", "help-then-harm")
METHOD = "idipt+"


def unit_cells(cells: Sequence[dict[str, Any]], variant: str) -> list[UnitCell]:
    return [UnitCell.from_cell_json(c, variant) for c in cells if variant in c["methods"]]


def read_cells(path: Path) -> list[dict[str, Any]]:
    """The cells of a suite: a gzipped list (``...-cells.json.gz``) or the result JSON's ``cells``."""
    if path.suffix == ".gz":
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            data = json.load(fh)
    else:
        data = json.loads(path.read_text(encoding="utf-8"))
    cells: list[dict[str, Any]] = data["cells"] if isinstance(data, dict) else data
    return cells


def worse_share(cells: Sequence[dict[str, Any]], variant: str) -> tuple[int, int]:
    """``(target cells below the source model's accuracy, target cells)``."""
    mine = [c for c in cells if not c["source_site"] and variant in c["methods"]]
    return sum(c["methods"][variant]["delta"] < 0 for c in mine), len(mine)


def harmed(cells: Sequence[dict[str, Any]], variant: str) -> int:
    return len(unit_endpoints(unit_cells(cells, variant))["harmed_units"])


def mean_gain(cells: Sequence[dict[str, Any]], variant: str) -> float:
    deltas = [
        c["methods"][variant]["delta"] for c in cells if not c["source_site"] and variant in c["methods"]
    ]
    return float(np.mean(deltas)) if deltas else float("nan")


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("cells", type=Path)
    p.add_argument("--protocol", default="known-sites")
    p.add_argument("--budget", type=int, default=20)
    a = p.parse_args(argv)
    cells = [c for c in read_cells(a.cells) if c["protocol"] == a.protocol]
    k = a.budget
    met: list[bool] = []
    print(f"## 1. The reviewer mid-run, adversarial orders ({a.protocol}, K = {k})\n")
    print(
        "| order | reviewer after | cells below the source, report | shown while arriving | units harmed, report |"
    )
    print("|---|---|---|---|---|")
    for mix in ADVERSARIAL:
        mine = [c for c in cells if c["mix"] == mix]
        for at in ("0.25", "0.5"):
            variant = f"{METHOD} K={k} at={at}"
            below, total = worse_share(mine, variant)
            shown, _ = worse_share(mine, f"{variant} online")
            units = harmed(mine, variant)
            met.append(total > 0 and below <= 0.05 * total and units == 0)
            print(
                f"| {mix} | {100 * float(at):g} % | {below} of {total} ({100 * below / max(total, 1):.1f} %) "
                f"| {shown} of {total} ({100 * shown / max(total, 1):.1f} %) | {units} |"
            )
    print(f"\nTarget 1 (at most 5 % of cells below the source in the report, no unit harmed): {all(met)}\n")
    print(
        f"## 2. The reviewer at the end: the ladder and the plain uses of the same labels ({a.protocol}, K = {k})\n"
    )
    print(
        "| variant | median error closed | harmed units | mean / median unit Δ (points) "
        "| source errors removed, pooled / median unit | fixed / broken |"
    )
    print("|---|---|---|---|---|---|")
    ends = {}
    for variant in (f"{METHOD} K={k}", f"{METHOD} K={k} best-of-K", f"{METHOD} K={k} threshold-on-K"):
        e = unit_endpoints(unit_cells(cells, variant))
        ends[variant] = e
        print(
            f"| {variant} | {100 * e['median_error_closed']:.1f} % | {len(e['harmed_units'])} "
            f"| {e['target_mean_gain']:+.2f} / {e['median_unit_gain']:+.2f} "
            f"| {100 * e['errors_removed_pooled']:.1f} % / {100 * e['errors_removed_median']:.1f} % "
            f"| {e['fixed']} / {e['broken']} |"
        )
    ladder = ends[f"{METHOD} K={k}"]
    plain = [ends[f"{METHOD} K={k} {use}"] for use in ("best-of-K", "threshold-on-K")]
    at_least = all(
        not ladder["harmed_units"]
        and (len(p["harmed_units"]) > 0 or ladder["median_error_closed"] >= p["median_error_closed"])
        for p in plain
    )
    print(
        "\nTarget 2 (no unit harmed; the ladder at least as good as each plain use: a plain use that harms "
        f"a unit is not better, else by the median error closed): {at_least}"
        " (false promotions: the result's summary, promoted_or_verified and false_verifications)\n"
    )
    print(f"## 3. Ordinary streams (fixed mixes), the reviewer at 50 % ({a.protocol}, K = {k})\n")
    ordinary = [c for c in cells if c["mix"] not in (*ADVERSARIAL,)]
    variant = f"{METHOD} K={k} at=0.5"
    online, retro = mean_gain(ordinary, f"{variant} online"), mean_gain(ordinary, variant)
    units = harmed(ordinary, f"{variant} online")
    ok = bool(retro > 0 and online >= 0.5 * retro and units == 0)
    print(
        f"- mean gain over the target cells: shown while arriving {online:+.2f} points, in the report "
        f"{retro:+.2f} (ratio {online / retro if retro else float('nan'):.2f}); units harmed online: {units}"
    )
    print(f"\nTarget 3 (online at least half the retroactive gain, no unit harmed online): {ok}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
