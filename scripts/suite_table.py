"""A committed suite's endpoints as a Markdown table, from the result JSON ``f2tta bench-suite``
wrote (or its summary, ``docs/results/suite-*.json``): one row per protocol and variant.

    python scripts/suite_table.py docs/results/suite-site-adaptation-2.json [--variants idipt+,foa-shift,...]

With ``--by-kind CELLS`` (the cells file written beside it, ``...-cells.json.gz``) the same
endpoints per kind of image (each kind's units alone), one row per protocol, variant and kind.
Every figure is read from the files or computed from them; nothing is typed in.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lab.bench.endpoints import UnitCell, unit_endpoints

DEFAULT = "idipt+,idipt+ final,idipt+ guarded,foa-shift,idipt+ K=5,idipt+ K=10,idipt+ K=20,idipt+ K=20 noise=0.05,idipt+ K=20 noise=0.1"


def pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f} %"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("result", type=Path)
    parser.add_argument("--variants", default=DEFAULT)
    parser.add_argument(
        "--by-kind", type=Path, default=None, metavar="CELLS", help="the cells file: per kind"
    )
    args = parser.parse_args()
    if args.by_kind is not None:
        return by_kind(args.by_kind, args.variants.split(","))
    summary = json.loads(args.result.read_text())["summary"]
    print(
        "| protocol | variant | median error closed (target units) | harmed units | cells below −1 | worst cell "
        "| target mean Δ | fixed / broken | decisions changed | reviews per site | promoted or verified (false) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for protocol, table in summary.items():
        for name in args.variants.split(","):
            v = table.get(name)
            if v is None:
                continue
            harmed = v["harmed_units"]
            worst = ", ".join(f"{h['model']} {h['site']} {h['upper_bound']:+.1f}" for h in harmed[:3])
            more = f" …+{len(harmed) - 3}" if len(harmed) > 3 else ""
            reviews = f"{v['reviews_per_site']:.1f}" if "reviews_per_site" in v else "–"
            checked = (
                f"{v['promoted_or_verified']} ({v['false_verifications']})"
                if "promoted_or_verified" in v
                else "–"
            )
            print(
                f"| {protocol} | {name} | {pct(v['median_error_closed'])} ({v['target_units_with_closable_error']}) "
                f"| {len(harmed)}{' (' + worst + more + ')' if harmed else ''} | {v['cells_below_source_by_1']} of {v['cells']} "
                f"| {v['worst_cell_difference']:+.1f} | {v['target_mean_gain']:+.2f} | {v['fixed']} / {v['broken']} "
                f"| {pct(v['changed_share'])} | {reviews} | {checked} |"
            )
    return 0


def by_kind(path: Path, variants: list[str]) -> int:
    """Per protocol, variant and kind: median closed, harmed units, fixed / broken."""
    with gzip.open(path, "rt") as f:
        cells = json.load(f)
    print(
        "| protocol | variant | kind | median error closed (target units) | harmed units | fixed / broken |"
    )
    print("|---|---|---|---|---|---|")
    for protocol in dict.fromkeys(c["protocol"] for c in cells):
        for name in variants:
            for kind in sorted({c["kind"] for c in cells}):
                mine = [
                    c
                    for c in cells
                    if c["protocol"] == protocol and c["kind"] == kind and name in c["methods"]
                ]
                if not mine:
                    continue
                units = [UnitCell.from_cell_json(c, name) for c in mine]
                e = unit_endpoints(units)
                harmed = ", ".join(f"{h['site']} {h['upper_bound']:+.1f}" for h in e["harmed_units"])
                print(
                    f"| {protocol} | {name} | {kind} | {pct(e['median_error_closed'])} "
                    f"({e['target_units_with_closable_error']}) | {len(e['harmed_units'])}"
                    f"{' (' + harmed + ')' if harmed else ''} | {e['fixed']} / {e['broken']} |"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
