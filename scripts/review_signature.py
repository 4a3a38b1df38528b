"""A signature of the simulated reviewer's outcomes on random multi-site streams, to compare two
versions of the review code on the same inputs (development check, no data needed).

    PYTHONPATH=OLD_CHECKOUT python scripts/review_signature.py --out old.txt
    PYTHONPATH=.            python scripts/review_signature.py --out new.txt
    diff old.txt new.txt

Each line is one (stream, K) case: a hash of the retroactive decisions, the answers used, and
every comparison's candidate, verdict and reviews. 150 seeded streams of one to four sites (60 to
400 images each, a site shift, four threshold candidates per site, some not fitted at first;
sites told on every other stream), the reviewer after the folder, K = 5, 10, 20, 50. Issue 37
used it to check that a reviewer after the folder decides exactly as before coverage.
"""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path

import numpy as np

try:  # a checkout from before the lab package (its engine first on the path)
    from engine.review.reviewer import review_stream  # type: ignore[import-not-found]
except ImportError:
    from lab.reviewer import review_stream


def streams(count: int) -> list[tuple]:  # type: ignore[type-arg]
    out = []
    for s in range(count):
        rng = np.random.default_rng([s, 99])
        n_sites = int(rng.integers(1, 5))
        n = int(rng.integers(60, 400)) * n_sites
        site = rng.integers(0, n_sites, n)
        shift = rng.normal(0, 1.5, n_sites)[site]
        labels = rng.integers(0, 2, n)
        margin = np.where(labels == 1, rng.normal(2, 1.5, n), rng.normal(-2, 1.5, n)) + shift
        reported = (margin > 0).astype(np.int64)
        candidates = {name: np.full(n, np.nan) for name in ("fit", "shift", "prior", "guarded")}
        for k in range(n_sites):
            at = np.flatnonzero(site == k)
            for name in candidates:
                values = np.full(at.size, shift[at[0]] * rng.uniform(0.3, 1.3) + rng.normal(0, 0.3))
                values[: rng.integers(0, 10)] = np.nan
                candidates[name][at] = values
        out.append((reported, margin, candidates, site.astype(np.int64), labels, site if s % 2 else None, s))
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--streams", type=int, default=150)
    p.add_argument("--out", type=Path, required=True)
    a = p.parse_args()
    lines = []
    for reported, margin, candidates, unit, labels, told, s in streams(a.streams):
        for budget in (5, 10, 20, 50):
            out = review_stream(
                reported,
                reported,
                margin,
                np.zeros(margin.size),
                candidates,
                unit,
                labels,
                budget,
                1.0,
                seed=s,
                site=told,
            )
            tested = ",".join(
                f"{c.candidate}/{c.verdict}/{len(c.reviewed)}"
                for u in sorted(out.ladders)
                for c in out.ladders[u].comparisons
                if c.disagreements
            )
            lines.append(
                f"{hashlib.sha1(out.decisions.tobytes()).hexdigest()[:12]}:{out.reviews_used}:{tested}"
            )
    a.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"{len(lines)} cases, signature {hashlib.sha1(chr(10).join(lines).encode()).hexdigest()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
