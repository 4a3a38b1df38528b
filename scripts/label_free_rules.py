"""Label-free rules made of the ladder's candidates, replayed on a suite that has run: development data only.

Each candidate reported without review (its threshold on the source margin when each image was
decided), and consensus rules that change a decision only where every candidate with a threshold
changes it, at least ``need`` of them: the pre-registered endpoints for each, on the suite's
known-sites streams at δ 1 (``scripts/replay_ladder.py``'s replay). It asks whether any label-free
rule built from the candidates closes error without harming a unit:

    PYTHONPATH=. .venv/bin/python scripts/label_free_rules.py benchmarks/suites/site-adaptation-5.json --work WORK

Never point it at a suite that has not run: what it prints has been looked at.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from replay_ladder import Stream, replayed_streams, site_cells

from engine.methods.idipt_plus import IDiPTPlusConfig
from lab.bench.endpoints import unit_endpoints


def decisions(stream: Stream, need: int, names: Sequence[str]) -> np.ndarray:
    """The source decision, changed where every named candidate with a threshold (``need`` at
    least) changes it."""
    source = stream.margin > 0
    votes = np.zeros(source.shape[0], dtype=np.int64)
    present = np.zeros(source.shape[0], dtype=np.int64)
    for name in names:
        t = stream.candidates[name]
        has = np.isfinite(t)
        present += has
        votes += has & ((stream.margin > np.where(has, t, 0.0)) != source)
    change = (present >= need) & (votes == present)
    return np.where(change, ~source, source).astype(np.int64)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("recipe", type=Path)
    p.add_argument("--work", type=Path, required=True, help="the suite's work folder (already prepared)")
    a = p.parse_args(argv)
    streams = replayed_streams(a.recipe, a.work, [1.0], "known-sites", IDiPTPlusConfig())
    names = sorted(streams[0].candidates)
    rules = [(f"{n} alone", 1, [n]) for n in names]
    rules += [(f"all agree, at least {k}", k, names) for k in range(2, len(names) + 1)]
    print("| rule (label-free) | median closed | harmed units | fixed / broken |")
    print("|---|---|---|---|")
    for label, need, which in rules:
        cells = []
        for st in streams:
            cells += site_cells(st, (st.margin > 0).astype(np.int64), decisions(st, need, which))
        e = unit_endpoints(cells)
        print(
            f"| {label} | {100 * e['median_error_closed']:.1f} % | {len(e['harmed_units'])} "
            f"| {e['fixed']} / {e['broken']} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
