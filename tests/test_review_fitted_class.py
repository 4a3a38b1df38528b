"""A threshold fitted to the answers that also chooses the class it calls (issue 39, more than two
classes; ``engine.review.fitted.fitted_rule``, ``docs/review-certificates.md``).

At a site where the model calls almost everything normal, the margin against the reference class
may still rank the abnormal images first while the most likely other class is wrong for them (the
faded sites of ``scripts/many_classes_check.py``: grade 1 for every image, the moved images grade
2). A threshold calling each image's own other class then fixes nothing; the one the answers fit,
calling the class they show, does, and its certificate counts those answers exactly.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from engine.review.fitted import fitted_rule, fitted_threshold, inclusion
from engine.review.images import calls
from engine.review.ladder import LadderRule, SiteLadder
from engine.run.review import SiteReview
from engine.run.review_parts import site_images
from engine.vocabulary import Rule
from lab.bench.adversarial import site_rows
from lab.reviewer import answer_ladder, answer_queue, false_promotions

CLASSES = ("grade 1", "normal", "grade 2")
REF = 1


def _faded(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Margins against "normal" (all below 0: the model calls every image normal), the most likely
    other class grade 1 for every image, labels: 60 % normal, 20 % grade 2 with the highest
    margins, 20 % grade 1 among the normal ones (as at the faded sites)."""
    rng = np.random.default_rng(seed)
    labels = rng.choice([REF, 2, 0], n, p=[0.6, 0.2, 0.2])
    centre = np.where(labels == 2, -0.6, -2.6)
    margin = np.minimum(centre + rng.normal(0.0, 0.15, n), -0.01)
    return margin, np.zeros(n, dtype=np.int64), labels


def test_the_class_a_threshold_calls_moves_only_the_images_it_takes_from_the_reference() -> None:
    margin = np.array([-2.0, -0.5, 0.3, 1.2])
    pairs = np.array([[REF, 0], [REF, 0], [REF, 0], [REF, 2]])
    assert calls(margin, pairs, -1.0).tolist() == [REF, 0, 0, 2]
    # calling grade 2: the image moved from normal is grade 2; those above 0 keep their own call
    assert calls(margin, pairs, -1.0, 2).tolist() == [REF, 2, 0, 2]
    assert calls(margin, pairs, 0.5, 2).tolist() == [REF, REF, REF, 2]
    binary = np.array([-1.0, 0.4])
    assert calls(binary, None, 0.0, 2).tolist() == calls(binary, None, 0.0).tolist() == [0, 1]


def test_the_fit_chooses_the_class_the_answers_show() -> None:
    margin, other, labels = _faded(300, 1)
    pairs = np.column_stack([np.full(300, REF), other])
    in_use = np.full(300, REF)
    drawn = np.full(300, 0.1)
    answers = {p: int(labels[p]) for p in range(0, 300, 10)}
    t, c = fitted_rule(margin, in_use, answers, drawn, pairs)
    assert c == 2 and math.isfinite(t)
    decided = calls(margin, pairs, t, c)
    assert np.mean(decided == labels) > np.mean(in_use == labels) + 0.1
    # each image's own other class (grade 1 at the top margins) fits worse or not at all
    own = fitted_threshold(margin, in_use, answers, drawn, classes=pairs)
    if math.isfinite(own):
        assert np.mean(calls(margin, pairs, own) == labels) < np.mean(decided == labels)
    # two classes: the class plays no part, the fit is the threshold's
    binary = (margin > -1.0).astype(np.int64)
    t2, c2 = fitted_rule(margin, np.zeros(300, dtype=np.int64), {p: int(binary[p]) for p in answers}, drawn)
    assert c2 == -1 and t2 == fitted_threshold(
        margin, np.zeros(300, dtype=np.int64), {p: int(binary[p]) for p in answers}, drawn
    )


def test_a_faded_site_is_moved_by_the_review_queue() -> None:
    """Through the run's review (the product's queue): twenty answers at ten faded sites; where the
    fitted rule is promoted it calls grade 2, counts its fitted-on answers exactly and decides
    better; no site ends worse than the source model."""
    promoted = 0
    for seed in range(10):
        margin, other, labels = _faded(240, seed)
        rows = site_rows(
            margin, {}, CLASSES, "img{:03d}.png", others=other, reference=REF, decision_path="not-accepted"
        )
        review = SiteReview(None, f"/data/faded{seed}", 3, seed=seed)
        review.open(rows)
        answer_queue(review, labels, 20)
        decisions = review.decisions()
        source = np.array([r.source_prediction for r in rows])
        assert np.sum(decisions == labels) >= np.sum(source == labels)
        ladder = review.parts[0].ladder
        if ladder.current == Rule.ANSWERS:
            promoted += 1
            fitted = [c for c in ladder.chain() if c.candidate == Rule.ANSWERS]
            assert all(c.other == 2 for c in fitted)
            # the first was fitted on answers it counts exactly; a later one may be the step past
            # it (fitted.py: the threshold in use moved again, where no answer was yet)
            assert fitted[0].blocks[0].known and fitted[0].known_total > 0
            assert np.mean(decisions == labels) > np.mean(source == labels) + 0.1
    assert promoted >= 8, f"promoted at {promoted} of 10 sites"


def test_a_class_fitted_rule_is_promoted_falsely_at_most_at_its_level() -> None:
    """Three classes whose labels do not depend on the margin: the fit finds a class and a threshold
    that win on the answers by chance, yet counted exactly they cannot carry a certificate."""
    sites, false, promoted = 300, 0, 0
    for s in range(sites):
        rng = np.random.default_rng([3940, s])
        n = 160
        margin = rng.uniform(-3.0, -0.01, n)
        pairs = np.column_stack([np.full(n, REF), np.zeros(n, dtype=np.int64)])
        labels = rng.choice([0, REF, 2], n)
        images = site_images(
            site_rows(
                margin,
                {},
                CLASSES,
                "i{:03d}.png",
                others=pairs[:, 1],
                reference=REF,
                decision_path="not-accepted",
            ),
            3,
        )
        ladder = SiteLadder("folder", LadderRule(), seed=s)
        answer_ladder(ladder, images, labels, 20)
        counts = false_promotions(ladder.comparisons, labels)
        promoted, false = promoted + counts[0], false + counts[1]
    assert promoted > 0, "something was promoted (the test can see a false one)"
    assert false / sites <= 0.05, f"{false} false promotions of {sites} sites"


def test_inclusion_is_unchanged_by_the_class() -> None:
    assert inclusion(4, [([0, 1], 1)]).tolist() == [0.5, 0.5, 0.0, 0.0]


def test_undo_redo_and_reopen_keep_the_class_the_rule_calls(tmp_path: Path) -> None:
    """The class-chosen rule through the product's marks: undoing the answer that promoted it puts
    the source model back; redoing it and reopening the site from its marks file give the same rule,
    class and decisions."""
    margin, other, labels = _faded(240, 3)
    rows = site_rows(
        margin, {}, CLASSES, "img{:03d}.png", others=other, reference=REF, decision_path="not-accepted"
    )
    review = SiteReview(tmp_path, "/data/faded3", 3, seed=3)
    review.open(rows)
    answered = 0
    while review.parts[0].ladder.current != Rule.ANSWERS and (index := review.next_item()) is not None:
        review.set_mark(rows[index].key, int(labels[index]), "ana")
        answered += 1
    ladder = review.parts[0].ladder
    assert ladder.current == Rule.ANSWERS and ladder.current_other == 2, f"after {answered} answers"
    promoted = review.decisions().copy()
    assert np.sum(promoted == labels) > np.sum(np.array([r.source_prediction for r in rows]) == labels)
    assert review.undo() is not None
    assert review.parts[0].ladder.current != Rule.ANSWERS
    assert review.parts[0].ladder.current_other == -1
    assert review.redo() is not None
    assert review.parts[0].ladder.current == Rule.ANSWERS and review.parts[0].ladder.current_other == 2
    assert np.array_equal(review.decisions(), promoted)
    again = SiteReview(tmp_path, "/data/faded3", 3, seed=3)
    again.open(rows)
    assert again.parts[0].ladder.current == Rule.ANSWERS and again.parts[0].ladder.current_other == 2
    assert np.array_equal(again.decisions(), promoted)
    assert again.rules_key() == review.rules_key()
