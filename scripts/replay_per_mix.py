"""Per class mix and site: what a reviewer arriving mid-folder was shown and what the report kept.

Development data only, like ``scripts/replay_ladder.py`` (whose replay it uses): for each
known-sites stream of a suite that has run, the simulated reviewer answers up to K queued images
after a share of the folder has arrived, and each site's accuracy change against the source model
is printed twice, as shown while the folder arrived (provisional calls included) and as reported
(certified decisions only): ``site:+shown/+reported`` in points. It is how the label-free stop of
provisional calls (``SiteLadder.alike``) was checked on the fifth suite's OCT kind
(``docs/review-certificates.md``, "Shown and reported")::

    PYTHONPATH=. .venv/bin/python scripts/replay_per_mix.py RECIPE --work WORK [--budget 20] [--at 0.25,0.5]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from replay_ladder import replayed_streams

from engine.methods.idipt_plus import IDiPTPlusConfig
from lab.bench.recipe import Recipe
from lab.bench.suite import prepare, stream_jobs
from lab.reviewer import review_stream


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("recipe", type=Path, help="a suite recipe that has run (development data)")
    parser.add_argument("--work", type=Path, required=True, help="the suite's work folder")
    parser.add_argument("--budget", type=int, default=20, help="answers offered per folder (K)")
    parser.add_argument(
        "--at", default="0.25,0.5", help="shares of the folder after which the reviewer comes"
    )
    parser.add_argument("--seed", type=int, default=12, help="the simulated reviewer's seed")
    args = parser.parse_args()
    shares = [float(a) for a in args.at.split(",")]
    streams = replayed_streams(args.recipe, args.work, [1.0], "known-sites", IDiPTPlusConfig())
    recipe = Recipe.load(args.recipe)
    prepared = prepare(recipe, args.work, passes=False, log=lambda _: None)
    jobs = [
        j for j in stream_jobs(recipe, prepared, args.work) if j.protocol == "known-sites" and j.delta == 1.0
    ]
    for st, job in zip(streams, jobs, strict=True):
        n = st.labels.shape[0]
        source = (st.margin > 0).astype(np.int64)
        for at in shares:
            out = review_stream(
                source, source, st.margin, np.zeros(n), st.candidates, st.group, st.labels,
                args.budget, review_at=at, seed=args.seed, site=st.told,
            )  # fmt: skip
            cells = []
            for s, name in enumerate(st.domains):
                m = st.site_of == s
                base = np.mean(source[m] == st.labels[m])
                shown = np.mean(out.online_decisions[m] == st.labels[m]) - base
                kept = np.mean(out.decisions[m] == st.labels[m]) - base
                cells.append(f"{name}:{100 * shown:+.1f}/{100 * kept:+.1f}")
            print(st.model, job.mix, at, " ".join(cells), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
