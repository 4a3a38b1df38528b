"""The review ladder's variants replayed on a suite that has run: development data only.

Once a committed suite has run, its streams are development data. This script replays its
known-sites streams from the work folder's cached source passes (the suite's own code:
:func:`lab.bench.suite_stream.site_sequences`, ``interleave``, ``replay``), then reviews every
site with the simulated reviewer under each variant of the ladder's testing rule and prints the
pre-registered endpoints (:mod:`lab.bench.endpoints`) per variant. It is how the stakes' hedge
and the patience were chosen after the third suite (``docs/review-certificates.md``, "Cheaper
certificates"):

    PYTHONPATH=. .venv/bin/python scripts/replay_ladder.py benchmarks/suites/site-adaptation-3.json \\
        --work WORK --hedge 0.4,0.5,0.75,0.9 --patience 4,6 --budgets 10,20 --noise 0,0.05,0.1

(``--hedge 0.4`` is a stake of at most 0.8 at the null's boundary, the earlier cap there.) Never
point it at a suite that has not run: what it prints has been looked at.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.methods.idipt_plus import IDiPTPlusConfig
from engine.review import sampling
from engine.review.ladder import LadderRule
from lab.bench.endpoints import UnitCell, best_threshold_errors, unit_endpoints
from lab.bench.paired import paired
from lab.bench.plain_labels import plain_uses
from lab.bench.recipe import Recipe
from lab.bench.replay import replay
from lab.bench.suite import prepare, stream_jobs
from lab.bench.suite_stream import ADAPTIVE, false_verifications, load_stream, noisy
from lab.reviewer import review_stream


@dataclass(frozen=True)
class Stream:
    """One replayed known-sites stream: what the reviewer and the endpoints need."""

    model: str
    source: str
    domains: tuple[str, ...]
    site_of: np.ndarray
    labels: np.ndarray
    margin: np.ndarray
    group: np.ndarray
    candidates: dict[str, np.ndarray]
    told: np.ndarray | None  # the site each image was told to be in (None: free-form)


def replayed_streams(
    recipe_path: Path, work: Path, deltas: Sequence[float], protocol: str, config: IDiPTPlusConfig
) -> list[Stream]:
    """The recipe's streams of one protocol at the given δ, replayed (label-free)."""
    recipe = Recipe.load(recipe_path)
    prepared = prepare(recipe, work, passes=False, log=lambda _: None)
    streams: list[Stream] = []
    for job in stream_jobs(recipe, prepared, work):
        if job.protocol != protocol or job.delta not in deltas:
            continue
        st = load_stream(job)
        r = replay(ADAPTIVE, st.passes, st.ref, st.loaded, config, seed=job.stream_seed, sites=st.told)
        streams.append(
            Stream(
                job.model,
                job.source,
                st.domains,
                st.site_of,
                st.labels,
                r.margin.astype(np.float64),
                r.group.astype(np.int64),
                {k: v.astype(np.float64) for k, v in r.candidates.items()},
                st.told,
            )
        )
        print(f"replayed {job.model} {job.mix} δ {job.delta:g}", file=sys.stderr, flush=True)
    return streams


def site_cells(st: Stream, source: np.ndarray, decisions: np.ndarray) -> list[UnitCell]:
    """One endpoint cell per site of ``st``: ``decisions`` against the source model's, and the
    best threshold's errors on the site's images."""
    cells = []
    for s, name in enumerate(st.domains):
        at = st.site_of == s
        result = paired(st.labels[at], source[at], decisions[at])
        best = best_threshold_errors(st.margin[at], st.labels[at])
        cells.append(UnitCell(st.model, name, name == st.source, result, best))
    return cells


def endpoints(
    streams: Sequence[Stream],
    rule: LadderRule,
    budget: int,
    noise: float,
    seed: int,
    at: float = 1.0,
    figures: dict[str, dict[str, Any]] | None = None,
) -> dict[str, str]:
    """The endpoints after ``budget`` reviews per site, the reviewer coming once ``at`` of each
    site's images are processed: one table row's cells per variant (the ladder retroactive and
    online, and the plain uses of the same labels), each stream reviewed as the suite reviews it
    (:func:`lab.bench.suite_stream.run_stream`). ``figures`` given: each variant's endpoints
    (``lab.bench.endpoints.unit_endpoints``) are put in it too, the ladder's with ``promotions``
    and ``false`` (comparisons promoted or verified, and those not better)."""
    cells: dict[str, list[UnitCell]] = {}
    made = false = used = sites = provisional = 0
    for st in streams:
        n = st.labels.shape[0]
        source = (st.margin > 0).astype(np.int64)
        marks = noisy(st.labels, noise, 2, np.random.default_rng([seed, 31, budget, round(noise * 1000)]))
        reviewed = review_stream(
            source,
            source,
            st.margin,
            np.zeros(n),
            st.candidates,
            st.group,
            marks,
            budget,
            review_at=at,
            rule=rule,
            seed=seed,
            site=st.told,  # as the suite reviews: a told site split in parts shares its K answers
        )
        a, b = false_verifications(reviewed, st.group, st.labels)
        made, false = made + a, false + b
        used, sites = used + reviewed.reviews_used, sites + len(st.domains)
        provisional += int(reviewed.provisional.sum())
        variants = {"ladder": reviewed.decisions, "ladder online": reviewed.online_decisions}
        plain = plain_uses(source, st.margin, st.candidates, None, st.group, marks, budget, at, seed, st.told)
        variants |= {use: retro for use, (retro, _) in plain.items()}
        for name, decided in variants.items():
            cells.setdefault(name, []).extend(site_cells(st, source, decided))
    out = {}
    for name, mine in cells.items():
        e = unit_endpoints(mine)
        if figures is not None:
            figures[name] = {**e, "promotions": made, "false": false}
        harmed = ", ".join(f"{h['model']} {h['site']} {h['upper_bound']:.1f}" for h in e["harmed_units"][:3])
        promotions = f"{false} of {made}" if name == "ladder" else "–"
        out[name] = (
            f"{100 * e['median_error_closed']:.1f} % | {len(e['harmed_units'])}{f' ({harmed})' if harmed else ''} | "
            f"{e['target_mean_gain']:+.2f} / {e['median_unit_gain']:+.2f} | "
            f"{100 * e['errors_removed_pooled']:.1f} % / {100 * e['errors_removed_median']:.1f} % | "
            f"{e['fixed']} / {e['broken']} | "
            + (f"{used / max(sites, 1):.1f}" if name.startswith("ladder") else f"{budget}")
            + f" | {promotions}"
            + (f" | {provisional / max(sites, 1):.1f}" if name == "ladder" else " | –")
        )
    return out


def split_sites(streams: Sequence[Stream]) -> str:
    """How many told sites were decided in more than one unit (split), of how many."""
    split = total = 0
    for st in streams:
        if st.told is None:
            continue
        for name in np.unique(st.told):
            units = np.unique(st.group[(st.told == name) & (st.group >= 0)])
            total += 1
            split += units.size > 1
    return f"{split} of {total}"


def floats(text: str) -> list[float]:
    """A comma-separated list of numbers."""
    return [float(x) for x in text.split(",")]


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("recipe", type=Path)
    p.add_argument("--work", type=Path, required=True, help="the suite's work folder (already prepared)")
    p.add_argument("--deltas", default="1", help="the streams' δ (comma-separated)")
    p.add_argument("--hedge", default=str(sampling.HEDGE), help="hedges of the stakes (comma-separated)")
    p.add_argument("--patience", default=str(LadderRule().patience), help="patiences (comma-separated)")
    p.add_argument("--budgets", default="20", help="K, reviews per site (comma-separated)")
    p.add_argument("--noise", default="0", help="the reviewer's error shares (comma-separated)")
    p.add_argument(
        "--at", default="1", help="shares of a site processed when the reviewer comes (comma-separated)"
    )
    p.add_argument("--seed", type=int, default=None, help="the reviews' seed (the recipe's stream seed)")
    p.add_argument("--protocol", default="known-sites", choices=("known-sites", "mixed-folders"))
    p.add_argument(
        "--split",
        default="default",
        help="named sites' split settings, comma-separated: default, off, or SEPARATION/STABILITY (e.g. 2.5/0.995)",
    )
    a = p.parse_args(argv)
    seed = a.seed if a.seed is not None else Recipe.load(a.recipe).stream_seed
    print(
        "| split | sites split | hedge | patience | K | reviewer wrong | at | variant | median closed | harmed units "
        "| mean / median unit Δ (points) | source errors removed, pooled / median unit | fixed / broken "
        "| answers per site | false promotions | provisional per site |"
    )
    print("|" + "---|" * 16)
    for split in a.split.split(","):
        config = IDiPTPlusConfig()
        if split == "off":
            config = IDiPTPlusConfig(split_separation=100.0)
        elif split != "default":
            separation, stability = (float(x) for x in split.split("/"))
            config = IDiPTPlusConfig(split_separation=separation, split_stability=stability)
        streams = replayed_streams(a.recipe, a.work, floats(a.deltas), a.protocol, config)
        for hedge in floats(a.hedge):
            sampling.HEDGE = hedge
            for patience in (int(x) for x in a.patience.split(",")):
                for budget in (int(x) for x in a.budgets.split(",")):
                    for noise in floats(a.noise):
                        for at in floats(a.at):
                            rows = endpoints(streams, LadderRule(patience=patience), budget, noise, seed, at)
                            for variant, row in rows.items():
                                print(
                                    f"| {split} | {split_sites(streams)} | {hedge:g} | {patience} | {budget} "
                                    f"| {100 * noise:g} % | {at:g} | {variant} | {row} |",
                                    flush=True,
                                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
