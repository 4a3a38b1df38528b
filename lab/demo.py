"""The embedded demo: five generated hospital sites, each a folder, through the shipped demo model.

``python -m lab.demo`` (``make demo``) writes fresh synthetic H&E-like patches from five sites
(never seen in training: another seed), one folder per site as a clinician would load them, and
runs the headless job (``f2tta run``) on each folder in turn with one adaptation state (one
project). It prints, per site, the source model's accuracy, the decisions as they were made and
as the site's operating point decides them once the folder is done, how many decisions adapting
changed and how many of those it fixed and broke — or, where a site changed nothing, why, in one
sentence. Nothing changes before a review (review first). Then a simulated reviewer answers each
site's review queue (uniformly sampled, up to ``--reviews`` answers a site) with the generated
labels; per site it prints the answers given, the rule that decides the site now and the
certificates reached, and at the end the gain with the number of answers it came from (all of it:
without answers no decision changed). Everything is generated here; nothing is downloaded.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from engine.cli import main as cli_main
from engine.io.sources import open_folder
from engine.methods import DEFAULT_METHOD
from engine.model.card import read_card
from engine.run.journal import Journal
from engine.run.review import SiteReview, what_adapting_changed
from engine.run.review_parts import decides_words
from engine.run.rows import PredictionRow
from engine.run.session import Session
from lab.reviewer import answer_queue
from lab.synth import write_synth

REPO = Path(__file__).resolve().parents[1]
DEMO_MODEL = REPO / "resources" / "demo" / "model.safetensors"
REVIEWS = 20  # answers the simulated reviewer gives per site at most, by default (the README says it)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.demo", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(".demo"), help="working folder (replaced)")
    parser.add_argument("--model", type=Path, default=DEMO_MODEL)
    parser.add_argument("--per-site", type=int, default=150, help="images per site (one folder each)")
    parser.add_argument(
        "--seed", type=int, default=1, help="data and arrival-order seed (the demo model used 0)"
    )
    parser.add_argument("--method", default=DEFAULT_METHOD)
    parser.add_argument(
        "--reviews", type=int, default=REVIEWS, help="answers the simulated reviewer gives per site"
    )
    args = parser.parse_args(argv)

    card = read_card(args.model.with_suffix(".json"))
    data, state, preds = args.out / "data", args.out / "state", args.out / "predictions"
    for folder in (data, state, preds):
        shutil.rmtree(folder, ignore_errors=True)
    print(f"generating {args.per_site} images per site (synth histo, seed {args.seed}) in {data}")
    write_synth("histo", data, per_domain=args.per_site, size=card.img_size, seed=args.seed, overwrite=True)
    sites = sorted(p.name for p in data.iterdir() if p.is_dir())
    for site in sites:
        print(f"\nf2tta run on the folder {site} ({args.method})")
        code = cli_main(
            [
                "run",
                "--model",
                str(args.model),
                "--input",
                str(data / site),
                "--state",
                str(state),
                "--out",
                str(preds / f"{site}.csv"),
                "--method",
                args.method,
                "--seed",
                str(args.seed),
                "--order",
                "interleaved",
                "--order-seed",
                str(args.seed),
                "--no-progress",
                "--prompted",  # the reviews below are not the CLI's: I-DiPT's candidate made in the run
                "behind",
            ]
        )
        if code != 0:
            return code
    reviews = _site_reviews(args.model, args.method, state, data, sites, card.classes)
    before = _print_sites(reviews, card.source_domain)
    if args.reviews > 0:
        _print_reviews(reviews, args.reviews, card.source_domain, before)
    print(f"\npredictions: {preds}   state: {state}")
    return 0


def _site_reviews(
    model: Path, method: str, state: Path, data: Path, sites: list[str], classes: tuple[str, ...]
) -> dict[str, SiteReview]:
    """Each site's rows from the journal, in a review of its own (nothing kept on disk)."""
    journal = Journal(state, "lab.demo")
    out: dict[str, SiteReview] = {}
    try:
        journal.restore(Session(model, method=method))
        for site in sites:
            review = SiteReview(None, open_folder(data / site, classes).source_id, len(classes))
            review.open(journal.rows(review.source_id))
            review.complete = True  # the demo decides every image of its folders before reviewing
            out[site] = review
    finally:
        journal.close()
    return out


def _truth(rows: list[PredictionRow]) -> np.ndarray:
    return np.array([-1 if r.ground_truth is None else r.ground_truth for r in rows])


@dataclass
class _Tally:
    """Decisions against the source model's over the sites: the target gain, changed, fixed, broken."""

    gains: list[float] = field(default_factory=list)
    total: int = 0
    changed: int = 0
    fixed: int = 0
    broken: int = 0

    def add(self, source: np.ndarray, final: np.ndarray, truth: np.ndarray, target: bool) -> tuple[int, int]:
        """One site's decisions; returns its (fixed, broken)."""
        changed = final != source
        fixed = int(np.sum(changed & (final == truth)))
        broken = int(np.sum(changed & (source == truth)))
        if target:
            self.gains.append(100 * (float(np.mean(final == truth)) - float(np.mean(source == truth))))
        self.total += int(final.shape[0])
        self.changed += int(changed.sum())
        self.fixed, self.broken = self.fixed + fixed, self.broken + broken
        return fixed, broken

    def summary(self) -> str:
        return (
            f"target mean gain {np.mean(self.gains):+.1f} points; {100 * self.changed / max(self.total, 1):.1f} % "
            f"of the decisions changed, {self.fixed} fixed / {self.broken} broken"
        )


def _print_sites(reviews: dict[str, SiteReview], source_domain: str) -> _Tally:
    """The per-site table before any review; returns its tally (the gain without answers)."""
    print("\nper site (folder): accuracy %; adapting's decisions as made and as the site's operating point")
    print("decides them once the folder is done; changed decisions with the images they fixed/broke")
    print(
        f"{'site':<16} {'images':>6} {'source':>7} {'as made':>8} {'final':>7} {'changed':>8} {'fixed/broken':>13}"
    )
    tally = _Tally()
    for site, review in reviews.items():
        rows = review.rows
        truth = _truth(rows)
        source = np.array([r.source_prediction for r in rows])
        made = np.array([r.prediction for r in rows])
        final = review.decisions()
        fixed, broken = tally.add(source, final, truth, site != source_domain)
        acc = [100 * float(np.mean(d == truth)) for d in (source, made, final)]
        tag = f"{site} (source)" if site == source_domain else site
        changed = final != source
        print(
            f"{tag:<16} {len(rows):>6} {acc[0]:>7.1f} {acc[1]:>8.1f} {acc[2]:>7.1f} "
            f"{100 * changed.mean():>7.1f}% {fixed:>6}/{broken:<6}"
        )
        if not changed.any():
            print(f"{'':<16} {what_adapting_changed(rows, final)}")
    print(f"{'all':<16} {tally.total:>6} {tally.summary()}")
    return tally


def _decider(review: SiteReview) -> str:
    """Who decides the site now, in words ("the appearance correction decides this folder"; each part's)."""
    return decides_words(review.in_use())


def _print_reviews(reviews: dict[str, SiteReview], budget: int, source_domain: str, before: _Tally) -> None:
    tally = _Tally()
    given: dict[str, int] = {}
    print(f"\na simulated reviewer answers up to {budget} items of each site's review queue (uniformly")
    print("sampled among the images the rule in use and a candidate decide differently), with the labels:")
    for site, review in reviews.items():
        truth = _truth(review.rows)
        answered = answer_queue(review, truth, budget)
        given[site] = answered
        print(f"{site}: {answered} answer(s); now {_decider(review)}")
        for comparison in review.comparisons():
            print(f"  {review.describe(comparison)}")
        if not review.comparisons():
            print(f"  {review.why_empty()}")
        final = review.decisions()
        print(f"  the site's decisions now: {100 * float(np.mean(final == truth)):.1f} % correct")
        tally.add(np.array([r.source_prediction for r in review.rows]), final, truth, site != source_domain)
    print(f"after the reviews, all {tally.total} images: {tally.summary()}")
    answers = f"the simulated reviewer's {sum(given.values())} answers ("
    answers += ", ".join(f"{site} {n}" for site, n in given.items()) + "), given with the generated labels"
    if before.changed == 0:
        print(f"all of it comes from {answers}: before them no decision had changed")
    else:
        print(f"from {answers}; before them: {before.summary()}")


if __name__ == "__main__":
    sys.exit(main())


def install_demo_model(model: Path, out_dir: Path, dataset: str) -> None:
    """Copy a checkpoint written by ``f2tta train-source`` (``NAME.safetensors``, its card
    ``NAME.json`` and its source reference ``NAME.reference.safetensors``) into ``out_dir`` as
    ``model.*``, the card naming ``dataset`` instead of the temporary folder it was trained from
    and the reference by its new name (the shipped demo models, ``scripts/make_*_demo*.py``)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(model, out_dir / "model.safetensors")
    shutil.copyfile(model.with_suffix(".reference.safetensors"), out_dir / "model.reference.safetensors")
    card = json.loads(model.with_suffix(".json").read_text())
    card["training"]["dataset"]["root"] = dataset
    card["training"]["source_reference"]["file"] = "model.reference.safetensors"
    (out_dir / "model.json").write_text(json.dumps(card, indent=2) + "\n")
    for path in out_dir.glob("model.*"):
        path.chmod(0o644)
