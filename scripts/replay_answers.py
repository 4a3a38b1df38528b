"""The threshold fitted to the answers, replayed on a suite that has run: development data only.

How issue 39's candidate (``engine/review/fitted.py``, the rule ``answers``) was placed and set:
the suite's known-sites streams are replayed from its work folder's cached source passes (as
``scripts/replay_ladder.py`` does), every site is reviewed by the simulated reviewer under each
ladder below, and the pre-registered endpoints are printed per ladder
(``docs/review-certificates.md``, "Answers that fit"):

    PYTHONPATH=. .venv/bin/python scripts/replay_answers.py benchmarks/suites/site-adaptation-6.json \\
        --work WORK --budgets 20,10,5 --at 1

Never point it at a suite that has not run: what it prints has been looked at. ``--cache FILE``
keeps the replayed streams (an ``.npz`` of plain arrays) so that further ladders skip the replay
(``--work`` is then not needed). How issue 39's item 2 set the first comparison's level, the
patience and the bold bettor's share (``docs/review-certificates.md``, "Fewer answers to the first
certificate"; ladder names are separated by semicolons, as they hold commas):

    PYTHONPATH=. .venv/bin/python scripts/replay_answers.py benchmarks/suites/site-adaptation-6.json \
        --cache S6.npz --budgets 20,10,5 --at 1 \
        --ladders "first 0.5, patience 4, no bold;first 0.9, patience 4, bold 0.4;first 0.9, patience 3, bold 0.4"

The ladders of issue 39's first item keep the levels, patience and stakes they were chosen with
(``EARLIER``, no bold share), so their rows differ from the earlier ones only by the exact finite
population bound (``engine/review/sampling.py``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from replay_ladder import Stream, endpoints, replayed_streams

from engine.methods.idipt_plus import IDiPTPlusConfig
from engine.review import sampling
from engine.review.ladder import DEFAULT_CANDIDATES, LadderRule
from engine.vocabulary import Rule
from lab.bench.recipe import Recipe

LABEL_FREE = tuple(r for r in DEFAULT_CANDIDATES if r != Rule.ANSWERS)  # the rules the method proposes
AFTER_FIT = (LABEL_FREE[0], Rule.ANSWERS, *LABEL_FREE[1:])
#: issue 39's ladders were chosen with the levels, patience and stakes of their time: kept so here
EARLIER = {"first_share": 0.5, "patience": 4}
LADDERS = {
    "before": LadderRule(candidates=LABEL_FREE, refits=1, step=0.0, **EARLIER),
    "answers once after fit": LadderRule(candidates=AFTER_FIT, refits=1, step=0.0, **EARLIER),
    "answers once after prior": LadderRule(
        candidates=(*LABEL_FREE[:3], Rule.ANSWERS, *LABEL_FREE[3:]), refits=1, step=0.0, **EARLIER
    ),
    "answers once last": LadderRule(candidates=(*LABEL_FREE, Rule.ANSWERS), refits=1, step=0.0, **EARLIER),
    "answers first, 3 tries": LadderRule(refits=3, step=0.0, **EARLIER),
    "answers first, 3 tries, step 1": LadderRule(refits=3, step=1.0, **EARLIER),
    "answers first, 3 tries, step 2": LadderRule(refits=3, step=2.0, **EARLIER),
    "answers first, 3 tries, step 0.5": LadderRule(refits=3, step=0.5, **EARLIER),
    "answers first, 3 tries, step 1, patience 3": LadderRule(refits=3, step=1.0, first_share=0.5, patience=3),
    "answers first, 3 tries, step 1, first 0.8": LadderRule(refits=3, step=1.0, first_share=0.8, patience=4),
    "before, first 0.8": LadderRule(candidates=LABEL_FREE, refits=1, step=0.0, first_share=0.8, patience=4),
    # issue 39, item 2 (docs/review-certificates.md, "Fewer answers to the first certificate"):
    # the first comparison's share of alpha, the patience and the bold bettor's share (SAMPLING)
    "first 0.5, patience 4, no bold": LadderRule(**EARLIER),
    "first 0.8, patience 4, no bold": LadderRule(first_share=0.8, patience=4),
    "first 0.5, patience 4, bold 0.5": LadderRule(**EARLIER),
    "first 0.8, patience 4, bold 0.6": LadderRule(first_share=0.8, patience=4),
    "first 0.9, patience 4, bold 0.4": LadderRule(first_share=0.9, patience=4),
    "first 0.9, patience 4, bold 0.5": LadderRule(first_share=0.9, patience=4),
    "first 0.9, patience 3, bold 0.5": LadderRule(first_share=0.9, patience=3),
    "first 0.9, patience 3, bold 0.4": LadderRule(first_share=0.9, patience=3),  # item 2's proposal
}
# every ladder above was chosen without a promoted comparison's level going on to the next one
LADDERS = {name: dataclasses.replace(rule, pass_level=False) for name, rule in LADDERS.items()} | {
    "default": LadderRule(),  # with sampling.BOLD as it is
    "level passed on": LadderRule(pass_level=True),  # docs/review-certificates.md, "A level passed on"
    # four answers drawn uniformly first, that only fit (docs/review-certificates.md, "A uniform first sample")
    "probe 4": LadderRule(probe=4),
    "probe 4, level passed on": LadderRule(probe=4, pass_level=True),
    **{f"probe {r}, strata": LadderRule(probe=r, probe_strata=True) for r in (3, 4, 5)},
    # not candidates: how far a weaker certificate (a 20 % error per folder) would reach
    "alpha 0.2": LadderRule(alpha=0.2),
    "alpha 0.2, level passed on": LadderRule(alpha=0.2, pass_level=True),
    "alpha 0.2, probe 4, strata": LadderRule(alpha=0.2, probe=4, probe_strata=True),
}
#: the bold bettor's share of the capital each ladder is replayed with (absent: ``sampling.BOLD``)
SAMPLING = {name: 0.0 for name in list(LADDERS)[:11]} | {
    "first 0.5, patience 4, no bold": 0.0,
    "first 0.8, patience 4, no bold": 0.0,
    "first 0.5, patience 4, bold 0.5": 0.5,
    "first 0.8, patience 4, bold 0.6": 0.6,
    "first 0.9, patience 4, bold 0.4": 0.4,
    "first 0.9, patience 4, bold 0.5": 0.5,
    "first 0.9, patience 3, bold 0.5": 0.5,
    "first 0.9, patience 3, bold 0.4": 0.4,
}


def save(streams: Sequence[Stream], path: Path) -> None:
    arrays: dict[str, np.ndarray] = {}
    meta = []
    for i, st in enumerate(streams):
        meta.append(
            {
                "model": st.model,
                "source": st.source,
                "domains": list(st.domains),
                "candidates": list(st.candidates),
            }
        )
        arrays |= {f"{i}.site_of": st.site_of, f"{i}.labels": st.labels, f"{i}.margin": st.margin}
        arrays[f"{i}.group"] = st.group
        if st.told is not None:
            arrays[f"{i}.told"] = np.asarray(st.told).astype(str)
        arrays |= {f"{i}.candidate.{k}": v for k, v in st.candidates.items()}
    np.savez(path, meta=np.asarray(json.dumps(meta)), **arrays)


def load(path: Path) -> list[Stream]:
    with np.load(path, allow_pickle=False) as z:
        meta = json.loads(str(z["meta"]))
        return [
            Stream(
                m["model"],
                m["source"],
                tuple(m["domains"]),
                z[f"{i}.site_of"],
                z[f"{i}.labels"],
                z[f"{i}.margin"],
                z[f"{i}.group"],
                {k: z[f"{i}.candidate.{k}"] for k in m["candidates"]},
                z[f"{i}.told"] if f"{i}.told" in z.files else None,
            )
            for i, m in enumerate(meta)
        ]


def spread(streams: Sequence[Stream], rule: LadderRule, budget: int, seed: int, at: float, seeds: int) -> str:
    """The ladder's row over ``seeds`` seeds of its random draws (``seed`` first, then the next
    ones; the streams and answers the same): the source model's errors removed pooled, mean, its
    spread and each seed's, then fixed / broken, harmed units and false promotions summed."""
    pooled, fixed, broken, harmed, made, false = [], 0, 0, 0, 0, 0
    for k in range(seeds):
        figures: dict[str, dict[str, Any]] = {}
        endpoints(streams, rule, budget, 0.0, seed + k, at, figures)
        e = figures["ladder"]
        pooled.append(100.0 * e["errors_removed_pooled"])
        fixed, broken, harmed = fixed + e["fixed"], broken + e["broken"], harmed + len(e["harmed_units"])
        made, false = made + e["promotions"], false + e["false"]
    each = " ".join(f"{x:.1f}" for x in pooled)
    return (
        f"ladder, {seeds} seeds | {float(np.mean(pooled)):.1f} % pooled (sd {float(np.std(pooled)):.1f}; {each}) "
        f"| {fixed} / {broken} | {harmed} harmed | {false} of {made} false"
    )


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("recipe", type=Path)
    p.add_argument(
        "--work",
        type=Path,
        default=None,
        help="the suite's work folder (already prepared; not needed with a --cache that exists)",
    )
    p.add_argument("--budgets", default="20,10,5", help="K, answers per site (comma-separated)")
    p.add_argument(
        "--at", default="1", help="shares of a site processed when the reviewer comes (comma-separated)"
    )
    p.add_argument(
        "--ladders",
        default=";".join(LADDERS),
        help="the ladders to replay, by name (semicolon-separated: names hold commas)",
    )
    p.add_argument("--cache", type=Path, default=None, help="an .npz keeping the replayed streams")
    p.add_argument(
        "--seeds",
        type=int,
        default=1,
        help="review every site again with this many seeds of the ladders' random draws (the "
        "recipe's stream seed, then the next ones) and add a row of their spread per ladder",
    )
    a = p.parse_args(argv)
    if a.cache is not None and a.cache.exists():
        streams = load(a.cache)
    elif a.work is None:
        p.error("--work is needed unless --cache names streams replayed before")
    else:
        streams = replayed_streams(a.recipe, a.work, [1.0], "known-sites", IDiPTPlusConfig())
        if a.cache is not None:
            save(streams, a.cache)
    seed = Recipe.load(a.recipe).stream_seed
    bold = sampling.BOLD
    print(
        "| K | at | ladder | variant | median closed | harmed units | mean / median unit Δ (points) "
        "| source errors removed, pooled / median unit | fixed / broken | answers per site | false promotions "
        "| provisional per site |"
    )
    print("|" + "---|" * 12)
    for budget in (int(x) for x in a.budgets.split(",")):
        for at in (float(x) for x in a.at.split(",")):
            for i, name in enumerate(a.ladders.split(";")):
                sampling.BOLD = SAMPLING.get(name, bold)
                rows = endpoints(streams, LADDERS[name], budget, 0.0, seed, at)
                for variant, row in rows.items():
                    if variant.startswith("ladder") or i == 0:  # the plain uses once
                        print(f"| {budget} | {at:g} | {name} | {variant} | {row} |", flush=True)
                if a.seeds > 1:
                    print(
                        f"| {budget} | {at:g} | {name} | {spread(streams, LADDERS[name], budget, seed, at, a.seeds)} |"
                    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
