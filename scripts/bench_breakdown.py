"""Per-domain class histograms and prediction changes of a benchmark, read from its job cache.

    python scripts/bench_breakdown.py OUT.jobs [--positive 1] [--rows source,sar,idipt]

For every row (method) and domain, averaged over the cached seeds: accuracy, the share of
predictions of the positive class against its true share, and how the adapted predictions
differ from the frozen source model's on the same images: the share changed, and the images it
fixed (source wrong, adapted right) and broke (source right, adapted wrong). A method that
never changes a prediction shows 0 changed; a per-site bias shows as a predicted share far from
the true one.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lab.bench import PAPER_METHODS, JobRecords
from lab.bench.cache import JobCache


def breakdown(recs: list[JobRecords], positive: int) -> dict[str, dict[str, float]]:
    """Domain -> figures (percent, mean over the records), plus ``"all"``."""
    acc: dict[str, list[list[float]]] = defaultdict(list)
    for rec in recs:
        names = np.asarray(rec.domains, dtype=object)[rec.domain]
        for dom in [*rec.domains, "all"]:
            m = np.ones(names.shape, bool) if dom == "all" else names == dom
            if not m.any():
                continue
            y, p, s = rec.labels[m], rec.preds[m], rec.source_preds[m]
            acc[dom].append(
                [
                    100 * float(np.mean(p == y)),
                    100 * float(np.mean(p == positive)),
                    100 * float(np.mean(y == positive)),
                    100 * float(np.mean(p != s)),
                    float(np.sum((s != y) & (p == y))),
                    float(np.sum((s == y) & (p != y))),
                ]
            )
    keys = ("acc", "pred_pos", "true_pos", "changed", "fixed", "broken")
    return {d: dict(zip(keys, np.mean(v, axis=0).tolist(), strict=True)) for d, v in acc.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cache", type=Path, help="the job cache folder (OUT.jobs beside the JSON)")
    parser.add_argument("--positive", type=int, default=1, help="positive class index (default 1)")
    parser.add_argument("--rows", default=None, help="comma-separated rows (default: all cached)")
    args = parser.parse_args()
    by_row: dict[str, list[JobRecords]] = defaultdict(list)
    for rec in JobCache(args.cache).entries():
        by_row[rec.row].append(rec)
    if not by_row:
        sys.exit(f"no readable cache files in {args.cache}")
    order = {m: i for i, m in enumerate(PAPER_METHODS)}
    rows = args.rows.split(",") if args.rows else sorted(by_row, key=lambda r: (order.get(r, 99), r))
    print(
        "row | seeds | domain | acc % | pred pos % | true pos % | changed vs source % | fixed | broken"
        "  (fixed/broken: images per stream, mean over seeds)"
    )
    for row in rows:
        recs = by_row.get(row, [])
        if not recs:
            print(f"{row}: not in the cache")
            continue
        for dom, f in breakdown(recs, args.positive).items():
            print(
                f"{row} | {len(recs)} | {dom} | {f['acc']:.1f} | {f['pred_pos']:.1f} | {f['true_pos']:.1f} | "
                f"{f['changed']:.1f} | {f['fixed']:.1f} | {f['broken']:.1f}"
            )


if __name__ == "__main__":
    main()
