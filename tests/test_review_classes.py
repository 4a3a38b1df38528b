"""Site rules for models with more than two classes (issue 39, item 3; engine/review/classes.py).

A threshold on the margin against the reference class calls the most likely other class above it
and the reference below; the rows keep that margin and the two classes; the best-fit threshold is
fitted where the margins fall into two groups; the same queue and certificates then move a site
where the model calls almost everything normal.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from engine.methods.decision import DecisionRecord
from engine.review.classes import ONE_GROUP, BestFits, best_fit_thresholds, site_fit, two_groups
from engine.review.images import calls
from engine.run.review import SiteReview, what_adapting_changed
from engine.run.review_parts import site_images
from engine.run.rows import PredictionRow, many_class_margin, reference_class
from engine.vocabulary import Rule
from lab.bench.adversarial import site_rows
from lab.reviewer import answer_queue, review_counts

CLASSES = ("grade 1", "normal", "grade 2")
REF = 1  # "normal"


def test_the_reference_class_is_the_one_named_normal_else_class_0() -> None:
    assert reference_class(CLASSES) == 1
    assert reference_class(("a", "Benign ", "c")) == 1
    assert reference_class(("a", "b", "c")) == 0
    assert reference_class(("normal", "normal", "c")) == 0  # two named: none chosen
    assert reference_class(("tumour", "normal")) == 0  # two classes: the margin stays l_1 - l_0


@pytest.mark.parametrize("seed", range(5))
def test_a_threshold_of_zero_calls_what_the_source_model_calls(seed: int) -> None:
    rng = np.random.default_rng(seed)
    record = DecisionRecord("not-accepted")
    for _ in range(200):
        logits = rng.normal(0, 3, 3)
        probs = np.exp(logits - logits.max())
        probs /= probs.sum()
        fields = many_class_margin(probs.astype(np.float32).tolist(), CLASSES, record)
        pair = np.array([fields["source_classes"]])
        call = calls(np.array([fields["source_margin"]]), pair, 0.0)[0]
        assert call == int(np.argmax(probs))
        assert fields["source_classes"][0] == REF and fields["source_classes"][1] != REF
    assert many_class_margin([0.3, 0.7], ("a", "b"), record) == {}  # two classes: the method's margin
    assert many_class_margin([0.2, 0.3, 0.5], CLASSES, None) == {}  # no decision record: no review


def test_a_row_keeps_its_two_classes_through_the_journal() -> None:
    row = _rows(np.array([-2.0]), np.array([0]), np.array([0]))[0]
    back = PredictionRow.from_json(row.to_json())
    assert back.source_classes == (REF, 0) and back.source_margin == row.source_margin
    bad = row.to_json() | {"source_classes": [1, -3]}
    with pytest.raises(ValueError):
        PredictionRow.from_json(bad)


def test_the_best_fit_threshold_needs_two_groups() -> None:
    rng = np.random.default_rng(0)
    two = np.concatenate([rng.normal(-6, 0.7, 300), rng.normal(-2, 0.7, 100)])
    t = two_groups(two)
    assert -5.0 < t < -2.8  # between the groups, nearer the smaller one's side of the middle
    assert math.isnan(two_groups(rng.normal(0, 1, 400)))  # one group: none
    assert math.isnan(two_groups(two[:10]))  # too few images
    values = best_fit_thresholds(rng.permutation(two))
    assert np.isnan(values[:19]).all() and np.isfinite(values[-1])


def _site(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A site where the source model calls almost everything normal: the abnormal images' margins
    fell below 0 but still form their own group. Returns margins, other classes and labels."""
    rng = np.random.default_rng(seed)
    labels = rng.choice([0, 1, 2], n, p=[0.2, 0.6, 0.2])
    abnormal = labels != REF
    margin = np.where(abnormal, rng.normal(-1.5, 0.6, n), rng.normal(-5.0, 0.8, n))
    # the most likely other class: the right one for most abnormal images
    other = np.where(abnormal & (rng.random(n) < 0.9), labels, rng.choice([0, 2], n))
    return margin, other, labels


def _rows(margin: np.ndarray, other: np.ndarray, labels: np.ndarray) -> list[PredictionRow]:
    """The rows the default method makes for the site (every decision the source model's)."""
    return site_rows(
        margin,
        {},
        CLASSES,
        "img{:03d}.png",
        others=other,
        reference=REF,
        decision_path="not-accepted",
        site_group=None,
        decision_reason="more than two classes",
    )


def test_a_site_of_a_three_class_model_has_rules_to_review() -> None:
    margin, other, labels = _site(300, 0)
    images = site_images(_rows(margin, other, labels))
    assert images.classes is not None and Rule.FIT in images.candidates
    assert (images.calls(0.0) == images.source).all()
    t = float(images.candidates[Rule.FIT][-1])
    assert -4.5 < t < -2.0


@pytest.mark.parametrize("seed", range(4))
def test_reviews_certify_a_threshold_for_a_site_called_all_normal(seed: int) -> None:
    """Twenty answers move the site's decisions to a threshold below 0, and what they certify is
    right more often than the source model on the site's images (paired counts)."""
    margin, other, labels = _site(300, seed)
    review = SiteReview(None, "/data/grades", 3)
    review.open(_rows(margin, other, labels))
    answer_queue(review, labels, 20, "ana")
    counts = review_counts(review.decisions(), np.array([r.source_prediction for r in review.rows]), labels)
    assert review.in_use()[0].rule in (Rule.FIT, Rule.ANSWERS)
    assert counts.fixed > 3 * counts.broken and counts.fixed >= 20, counts


def test_a_site_in_one_group_says_why_nothing_is_reviewed() -> None:
    rng = np.random.default_rng(3)
    margin = rng.normal(-4.0, 1.0, 120)  # one group: every image called normal, no threshold fitted
    labels = np.full(120, REF)
    review = SiteReview(None, "/data/one group", 3)
    review.open(_rows(margin, np.zeros(120, dtype=np.int64), labels))
    assert review.next_item() is None
    assert ONE_GROUP in review.why_empty()
    assert ONE_GROUP in what_adapting_changed(review.rows)
    assert "more than two classes" not in review.why_empty()


def test_where_the_groups_of_all_margins_change_no_call_the_larger_side_is_fitted() -> None:
    """A site whose model calls one class's images another abnormal class (above 0) and the next
    class's images normal (below 0, a group of their own): the split of all margins falls near 0
    and changes nothing; the split below 0, where most images are, is the candidate."""
    rng = np.random.default_rng(5)
    margin = np.concatenate([rng.normal(2.8, 0.7, 40), rng.normal(-1.9, 0.3, 40), rng.normal(-2.9, 0.1, 120)])
    t = site_fit(rng.permutation(margin))
    assert -2.6 < t < -2.1
    assert math.isnan(site_fit(rng.normal(-2.9, 0.1, 200)))


def test_a_split_of_all_margins_that_moves_a_few_images_is_the_models_own() -> None:
    """The same kind of site with the abnormal images above 0 spread widely: the split of all
    margins falls just above 0 and calls 2 of the 200 images otherwise than the model (the
    seventh suite's faded sites, where that split was reviewed and nothing else was). Fewer than a
    twentieth of the images is no group the model missed (a group the mixture keeps holds a
    twentieth at least): the split below 0 is the candidate. Where the split of all margins moves
    more, it stays the candidate."""
    rng = np.random.default_rng(7)
    margin = np.concatenate(
        [rng.normal(3.6, 0.5, 40), rng.normal(-2.1, 0.4, 40), rng.normal(-2.9, 0.15, 120)]
    )
    margin = rng.permutation(np.concatenate([margin[:-2], [0.2, 0.3]]))  # two close to the model's split
    whole = two_groups(margin)
    moved = int(np.sum((margin > whole) != (margin > 0)))
    assert math.isfinite(whole) and 0 < moved < 0.05 * margin.size, (whole, moved)
    t = site_fit(margin)
    assert -2.7 < t < -2.3, t
    assert int(np.sum((margin > t) != (margin > 0))) >= 30
    straddling = np.concatenate([rng.normal(0.3, 0.5, 60), rng.normal(-3.0, 0.3, 140)])  # a group across 0
    whole = two_groups(straddling)
    assert int(np.sum((straddling > whole) != (straddling > 0))) >= 0.05 * straddling.size
    assert site_fit(straddling) == whole


def test_a_row_the_threshold_decides_otherwise_shows_the_two_classes_share() -> None:
    """The app's row for an image a promoted threshold calls otherwise: its confidence is the decided
    class's share of the two the threshold chooses between, and the positive class's probability
    is known only where the positive class is one of them."""
    from app.core.certificates import reviewed_row

    row = _rows(np.array([-1.0]), np.array([2]), np.array([2]))[0]  # called normal, grade 2 next
    shown = reviewed_row(row, 2, Rule.FIT, 2, CLASSES, threshold=-2.0)
    assert shown.prediction == 2 and shown.confidence == pytest.approx(1 / (1 + math.exp(-1.0)))
    assert shown.positive_prob == pytest.approx(shown.confidence)
    assert reviewed_row(row, 2, Rule.FIT, REF, CLASSES, threshold=-2.0).positive_prob == pytest.approx(
        1 - shown.confidence
    )
    assert math.isnan(reviewed_row(row, 2, Rule.FIT, 0, CLASSES, threshold=-2.0).positive_prob)


def test_a_journal_naming_a_class_the_model_lacks_decides_nothing_with_it() -> None:
    """Rows changed by hand to name class 99 of a three-class model: the site's threshold rules are
    dropped (nothing calls class 99), the review says there is no other rule, nothing raises."""
    margin, other, labels = _site(120, 1)
    rows = [dataclasses.replace(r, source_classes=(REF, 99)) for r in _rows(margin, other, labels)]
    review = SiteReview(None, "/data/tampered", 3)
    review.open(rows)
    assert review.next_item() is None
    assert set(review.decisions().tolist()) <= {0, 1, 2}
    assert "no other rule" in review.why_empty()
    with pytest.raises(ValueError):
        PredictionRow.from_json(rows[0].to_json() | {"source_classes": [1, 1]})


def test_best_fits_kept_between_batches_are_those_fitted_from_the_start() -> None:
    """A site whose rows arrive in batches refits only beyond the images it had (the app adds rows
    at every batch); the values equal those fitted on the whole site at once, and a site whose
    earlier margins changed is fitted again from the start."""
    margin, other, labels = _site(400, 2)
    rows = _rows(margin, other, labels)
    kept = BestFits()
    for end in (15, 57, 58, 200, 333, 400):
        assert np.array_equal(kept.of(margin[:end]), best_fit_thresholds(margin[:end]), equal_nan=True)
    changed = margin.copy()
    changed[30] += 2.0
    assert np.array_equal(kept.of(changed), best_fit_thresholds(changed), equal_nan=True)
    review = SiteReview(None, "/data/batches", 3)
    review.open(rows[:100])
    for start in range(100, 400, 75):
        review.add_rows(rows[start : start + 75])
    whole = site_images(rows, 3)
    assert np.array_equal(review.images().candidates[Rule.FIT], whole.candidates[Rule.FIT], equal_nan=True)
