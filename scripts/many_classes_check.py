"""Site rules of a model with more than two classes, checked on data made here (development only).

Two checks behind ``docs/review-certificates.md``, "More than two classes" (issue 39, item 3):

``margins``: generated sites of 300 images, the reference class 60 % of them, reviewed through
:class:`engine.run.review.SiteReview` by a reviewer who knows the labels: the abnormal images'
margins moved below 0 as a group of their own (seeds 0-5, 10 and 20 answers), and 40 sites of
three kinds (the source model right, groups overlapping, moved) at 10 and 20 answers. Per line:
answers used, the rule in use, accuracy, fixed / broken.

Then 40 sites of 300 images whose class balance moved (the source posteriors Bayes under equal
priors, the site's 5 / 90 / 5 %), rows with every class's log-probability, where the class-balance
correction (``engine.review.balance``) is right: at 10 and 20 answers.

``model DIR``: a 3-class ViT trained on generated nuclei patches (grade 1, grade 2, normal; 48 px)
at one site, then three faded sites (35, 45, 55 %) of 200 images run with ``f2tta run`` and
reviewed with 5, 10 and 20 answers (a few minutes on 2 cores; DIR is replaced); per K, the share
of the source model's errors removed pooled over the three sites (fixed less broken)::

    PYTHONPATH=. .venv/bin/python scripts/many_classes_check.py margins
    PYTHONPATH=. .venv/bin/python scripts/many_classes_check.py model /tmp/many-classes [--probe 4] [--oracle-class]

``--probe R`` reviews each faded site again with a ladder that asks R of its K questions first,
drawn uniformly, to fit the threshold it tests first (``LadderRule.probe``; the lab's ladder:
``docs/review-certificates.md``, "A uniform first sample, built"). ``--oracle-class`` reviews each
site again with every threshold calling one class above it, the class with which one threshold
decides the site best (chosen with the labels: what a rule that also chooses the class could reach).
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from many_classes_suite import run_site, state_rows, train_source  # scripts/, beside this one

from engine.methods.decision import DecisionRecord
from engine.review.ladder import LadderRule, SiteLadder
from engine.run.review import SiteReview
from engine.run.review_parts import site_images
from engine.run.rows import PredictionRow, many_class_margin
from engine.vocabulary import Rule
from lab.bench.adversarial import site_rows
from lab.reviewer import ReviewCounts, answer_ladder, answer_queue, review_counts

CLASSES = ("grade 1", "normal", "grade 2")
REF = 1
NUCLEI = {"grade 1": (14, 2.0), "grade 2": (30, 3.2), "normal": (5, 1.5)}  # count, radius


def rows_of(margin: np.ndarray, other: np.ndarray) -> list[PredictionRow]:
    """A site's rows from margins against the reference and the most likely other classes."""
    return site_rows(
        margin, {}, CLASSES, "img{:03d}.png", others=other, reference=REF, decision_path="not-accepted"
    )


@dataclass(frozen=True)
class Reviewed:
    """A site after up to K answers: answers given, the rule in use, the counts against the labels."""

    answers: int
    rule: str
    counts: ReviewCounts

    @property
    def promoted(self) -> bool:
        return self.rule != str(Rule.SOURCE)

    def __str__(self) -> str:
        c = self.counts
        return (
            f"answers {self.answers:2d}  rule {self.rule:8s}  accuracy {c.source_accuracy:.3f} -> "
            f"{c.accuracy:.3f}  fixed {c.fixed} / broken {c.broken}"
        )


def reviewed(rows: list[PredictionRow], labels: np.ndarray, k: int, classes: int = 3) -> Reviewed:
    """Answer up to ``k`` of the queue."""
    review = SiteReview(None, "/data/site", classes)
    review.open(rows)
    made = answer_queue(review, labels, k)
    counts = review_counts(review.decisions(), np.array([r.source_prediction for r in review.rows]), labels)
    return Reviewed(made, ", ".join(str(p.rule) for p in review.in_use()), counts)


def probed(
    rows: list[PredictionRow],
    labels: np.ndarray,
    k: int,
    rule: LadderRule,
    classes: int = 3,
    other: int | None = None,
) -> Reviewed:
    """Answer up to ``k`` questions of one site's ladder that asks ``rule.probe`` drawn uniformly
    first (the lab's ladder only; a run's review refuses it); ``other``: every threshold calls this
    class above it instead of each image's most likely other class (a ceiling when chosen with
    the labels)."""
    images = site_images(rows, classes)
    if other is not None and images.classes is not None:
        pairs = np.column_stack([images.classes[:, 0], np.full(len(images), other)])
        images = dataclasses.replace(images, classes=pairs)
    ladder = SiteLadder("/data/site", rule)
    answered = answer_ladder(ladder, images, labels, k)
    counts = review_counts(ladder.certified(images), images.source, labels)
    # the label-free rule is the source model's here (its rows report no label-free decision)
    rule = Rule.SOURCE if ladder.current == Rule.LABEL_FREE else ladder.current
    return Reviewed(len(answered), str(rule), counts)


def best_other_class(rows: list[PredictionRow], labels: np.ndarray, classes: int = 3) -> int:
    """The class that one threshold calling it (above the threshold; the reference below) decides
    the site's images best with, threshold and class chosen with every label (a ceiling)."""
    images = site_images(rows, classes)
    assert images.classes is not None
    reference = images.classes[:, 0]
    cuts = np.unique(images.margin)
    best, best_class = -1, int(images.classes[0, 1])
    for c in sorted(set(range(classes)) - set(reference.tolist())):
        for t in (cuts[1:] + cuts[:-1]) / 2.0:
            right = int(np.sum(np.where(images.margin > t, c, reference) == labels))
            if right > best:
                best, best_class = right, c
    return best_class


def margin_site(
    n: int, seed: int, abnormal_at: float, normal_at: float, sd: float, sd_normal: float | None = None
) -> tuple[np.ndarray, ...]:
    """Margins, most likely other classes and labels of a generated site (the reference 60 %)."""
    rng = np.random.default_rng(seed)
    labels = rng.choice([0, 1, 2], n, p=[0.2, 0.6, 0.2])
    abnormal = labels != REF
    spread = sd if sd_normal is None else sd_normal
    margin = np.where(abnormal, rng.normal(abnormal_at, sd, n), rng.normal(normal_at, spread, n))
    other = np.where(abnormal & (rng.random(n) < 0.9), labels, rng.choice([0, 2], n))
    return margin, other, labels


def margins() -> None:
    for seed in range(6):
        for k in (10, 20):
            # the moved site of tests/test_review_classes.py
            margin, other, labels = margin_site(300, seed, -1.5, -5.0, 0.6, 0.8)
            print(f"moved site, seed {seed}, K = {k}: {reviewed(rows_of(margin, other), labels, k)}")
    kinds = {"source right": (2.0, -2.0, 1.2), "overlapping": (0.5, -0.5, 1.0), "moved": (-1.0, -4.0, 1.0)}
    for kind, (at_abnormal, at_normal, sd) in kinds.items():
        for k in (10, 20):
            promoted = harmed = fixed = broken = 0
            for seed in range(40):
                margin, other, labels = margin_site(300, 1000 + seed, at_abnormal, at_normal, sd)
                site = reviewed(rows_of(margin, other), labels, k)
                fixed, broken = fixed + site.counts.fixed, broken + site.counts.broken
                promoted += site.promoted
                harmed += site.counts.broken > site.counts.fixed
            print(
                f"{kind}, K = {k}: {promoted}/40 promoted, {harmed} harmed, fixed {fixed} / broken {broken}"
            )
    for k in (10, 20):
        promoted = harmed = fixed = broken = 0
        for seed in range(40):
            logs, labels = label_shift_site(300, 2000 + seed, (0.05, 0.9, 0.05))
            site = reviewed(log_prob_rows(logs), labels, k)
            fixed, broken = fixed + site.counts.fixed, broken + site.counts.broken
            promoted += site.rule == str(Rule.PRIOR)
            harmed += site.counts.broken > site.counts.fixed
        print(
            f"class balance moved, K = {k}: class-balance correction in use at {promoted}/40, "
            f"{harmed} harmed, fixed {fixed} / broken {broken}"
        )


def label_shift_site(n: int, seed: int, priors: tuple[float, ...]) -> tuple[np.ndarray, np.ndarray]:
    """``(log_probs, labels)``: features N(class mean, 1) in two dimensions, the source posteriors
    Bayes under equal priors, the site's labels drawn with ``priors`` (the classes of CLASSES)."""
    means = np.array([[2.0, 0.0], [0.0, 0.0], [0.0, 2.0]])
    rng = np.random.default_rng(seed)
    labels = rng.choice(len(priors), n, p=list(priors))
    x = means[labels] + rng.normal(0, 1, (n, 2))
    loglik = -0.5 * ((x[:, None, :] - means[None]) ** 2).sum(axis=2)
    top = loglik.max(axis=1, keepdims=True)
    return loglik - top - np.log(np.exp(loglik - top).sum(axis=1, keepdims=True)), labels


def log_prob_rows(logs: np.ndarray) -> list[PredictionRow]:
    """The rows of the default method for a site with these source log-probabilities."""
    record = DecisionRecord("not-accepted")
    fields = [many_class_margin(np.exp(v).tolist(), CLASSES, record) for v in logs]
    rows = rows_of(
        np.array([f["source_margin"] for f in fields]), np.array([f["source_classes"][1] for f in fields])
    )
    return [
        dataclasses.replace(r, source_log_probs=f.get("source_log_probs"))
        for r, f in zip(rows, fields, strict=True)
    ]


def patch(rng: np.random.Generator, cls: str, fade: float) -> np.ndarray:
    count, radius = NUCLEI[cls]
    side = 48
    yy, xx = np.mgrid[:side, :side]
    image = np.ones((side, side, 3)) * (np.array([235, 175, 205.0]) + rng.normal(0, 6, 3))
    image += rng.normal(0, 8, (side, side, 3))
    for _ in range(rng.poisson(count)):
        cy, cx = rng.uniform(0, side, 2)
        r = radius * rng.uniform(0.7, 1.3)
        image[((yy - cy) ** 2 + (xx - cx) ** 2) < r**2] = np.array([90, 40, 130]) + rng.normal(0, 10, 3)
    return np.clip(image * (1 - fade) + 255 * fade, 0, 255).astype(np.uint8)


def model(out: Path, probes: dict[str, LadderRule] | None = None, oracle_class: bool = False) -> None:
    from PIL import Image

    shutil.rmtree(out, ignore_errors=True)
    rng = np.random.default_rng(0)
    sites = {"site0": (0.0, 150, 150, 150), "site1": (0.55, 40, 40, 120)}
    sites |= {"site2": (0.35, 40, 40, 120), "site3": (0.45, 40, 40, 120)}
    for site, (fade, *counts) in sites.items():
        for cls, count in zip(("grade 1", "grade 2", "normal"), counts, strict=True):
            folder = out / "data" / site / cls
            folder.mkdir(parents=True)
            for i in range(count):
                Image.fromarray(patch(rng, cls, fade)).save(folder / f"{site}-{cls[0]}{cls[-1]}-{i:03d}.png")
    weights = out / "model.safetensors"
    training = {"model_kwargs": {"patch_size": 8, "depth": 2}, "epochs": 12, "patience": 4, "batch_size": 32}
    train_source(out / "data", weights, 48, training, 0, "--eval-domains")
    pooled: dict[int | str, list[Reviewed]] = {}
    for site in ("site2", "site3", "site1"):
        state = out / f"state-{site}"
        run_site(weights, out / "data" / site, state, out / f"{site}.csv")
        rows = state_rows(state)
        labels = np.array([r.ground_truth for r in rows])
        for k in (5, 10, 20):
            site_k = reviewed(rows, labels, k)
            pooled.setdefault(k, []).append(site_k)
            print(f"{site} (faded {sites[site][0]:.0%}), K = {k}: {site_k}")
            for name, rule in (probes or {}).items():
                site_k = probed(rows, labels, k, rule)
                pooled.setdefault(f"{k}, {name}", []).append(site_k)
                print(f"{site} (faded {sites[site][0]:.0%}), K = {k}, {name}: {site_k}")
            if oracle_class:
                other = best_other_class(rows, labels)
                for name, rule in {"default": LadderRule(), **(probes or {})}.items():
                    site_k = probed(rows, labels, k, rule, other=other)
                    pooled.setdefault(f"{k}, {name}, oracle class", []).append(site_k)
                    print(f"{site}, K = {k}, {name}, every threshold calling class {other}: {site_k}")
    for k, units in pooled.items():
        errors = sum(round(u.counts.images * (1 - u.counts.source_accuracy)) for u in units)
        removed = sum(u.counts.fixed - u.counts.broken for u in units)
        harmed = sum(u.counts.broken > u.counts.fixed for u in units)
        print(
            f"pooled, K = {k}: {removed} of the source model's {errors} errors removed "
            f"({removed / max(errors, 1):.1%}), {harmed} of {len(units)} sites harmed, "
            f"answers used {sum(u.answers for u in units)}"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("check", choices=("margins", "model"))
    parser.add_argument("out", nargs="?", type=Path, default=Path("/tmp/many-classes"))
    parser.add_argument(
        "--probe", type=int, default=0, help="model: also review with R answers drawn uniformly first (0: no)"
    )
    parser.add_argument(
        "--oracle-class",
        action="store_true",
        help="model: also review with every threshold calling the one class most abnormal images are (a ceiling)",
    )
    args = parser.parse_args()
    if args.check == "margins":
        margins()
    else:
        probes = {f"probe {args.probe}": LadderRule(probe=args.probe)} if args.probe else {}
        model(args.out, probes, args.oracle_class)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
