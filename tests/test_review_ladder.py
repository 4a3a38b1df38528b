"""The site ladder: uniformly sampled certificates, valid in any arrival order."""

from __future__ import annotations

import math

import numpy as np
import pytest

from engine.review.ladder import (
    LABEL_FREE,
    NOT_BETTER,
    PROMOTED,
    REVERTED,
    SOURCE_RULE,
    VERIFIED,
    LadderRule,
    SiteImages,
    SiteLadder,
)
from engine.review.sampling import SamplingSequence
from lab.bench.adversarial import adversarial_site
from lab.reviewer import review_stream

STREAMS = 300  # per adversarial order (the issue asks for at least 300)


# ------------------------------------------------------------------------------------ the sequence
@pytest.mark.parametrize(("population", "positives"), [(40, 20), (150, 90), (600, 250)])
def test_the_sampling_sequence_covers_the_population_mean_at_all_times(
    population: int, positives: int
) -> None:
    """Drawn uniformly without replacement, the 95 % bounds exclude the true mean at some time in
    at most 5 % of draws (each side), and are exact once every item is drawn."""
    rng = np.random.default_rng(population)
    values = np.r_[np.ones(positives), -np.ones(population - positives)]
    mean = float(values.mean())
    low_missed = high_missed = 0
    runs = 400
    for _ in range(runs):
        seq = SamplingSequence(population)
        for v in rng.permutation(values)[: min(population, 80)]:
            seq.update(float(v))
            low_missed += seq.lower(0.05) > mean + 1e-12
            high_missed += seq.upper(0.05) < mean - 1e-12
            if seq.lower(0.05) > mean + 1e-12 or seq.upper(0.05) < mean - 1e-12:
                break
    # a one-sided binomial test at 0.1 % of "each side misses in at most 5 %": with the bold bettor
    # (engine.review.sampling) the lower side's true rate is close to 5 % (3.75 % in 2 000 other
    # orders at 600 / 250), so 400 orders alone scatter around it
    for missed in (low_missed, high_missed):
        tail = math.fsum(math.comb(runs, k) * 0.05**k * 0.95 ** (runs - k) for k in range(missed, runs + 1))
        assert tail > 1e-3, (missed, runs)  # (400 runs: every term is a float)
    seq = SamplingSequence(10)
    for v in [1, -1, 1, 1, 0, 1, -1, 1, 1, 1]:
        seq.update(v)
    assert seq.exhausted and seq.lower(0.05) == pytest.approx(0.5) == seq.upper(0.05)
    with pytest.raises(ValueError, match="drawn already"):
        seq.update(1)


def test_the_e_value_is_small_under_the_null_and_large_when_the_candidate_is_better() -> None:
    rng = np.random.default_rng(5)
    null = np.r_[np.ones(50), -np.ones(50)]  # mean 0: the candidate is not better
    crossed = 0
    for _ in range(400):
        seq = SamplingSequence(100)
        for v in rng.permutation(null)[:60]:
            seq.update(float(v))
            if seq.e_value() >= 20:
                crossed += 1
                break
    assert crossed / 400 <= 0.05
    seq = SamplingSequence(100)
    for _ in range(15):
        seq.update(1.0)
    assert seq.e_value() > 20 and seq.lower(0.05) > 0
    with pytest.raises(ValueError, match="outside"):
        seq.update(2.0)
    with pytest.raises(ValueError, match="whole number"):
        SamplingSequence(0)


# ------------------------------------------------------------------------------- adversarial orders
def _adversarial_site(order: str, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """A site of 400 images where the ``fit`` candidate is, over all its 120 changed decisions,
    slightly *harmful* (mean z = -0.1), but the images it gets right arrive first
    (:func:`lab.bench.adversarial.adversarial_site`); ``(margin, labels, reported)``."""
    margin, labels, _ = adversarial_site(order, rng)
    return margin, labels, (margin > 0).astype(np.int64)


@pytest.mark.parametrize("order", ["help-then-harm", "drift", "scan-region-last"])
def test_a_harmful_candidate_is_promoted_in_at_most_5_percent_of_streams_in_any_arrival_order(
    order: str,
) -> None:
    """The issue's adversarial orders, through the engine's own reviewer and ladder: reviews drawn
    uniformly from the site's disagreements keep false promotion at most 5 % (the arrival-order
    queue promoted such candidates in 55-95 % of streams)."""
    promoted = 0
    for seed in range(STREAMS):
        rng = np.random.default_rng([seed, 17])
        margin, labels, reported = _adversarial_site(order, rng)
        n = margin.shape[0]
        out = review_stream(
            reported=reported,
            source=reported,
            margin=margin,
            threshold=np.zeros(n),
            candidates={"fit": np.ones(n)},
            unit=np.zeros(n, dtype=np.int64),
            labels=labels,
            budget=50,
            rule=LadderRule(candidates=("fit",)),
            seed=seed,
        )
        ladder = out.ladders[0]
        promoted += any(c.verdict == PROMOTED for c in ladder.comparisons)
    assert promoted / STREAMS <= 0.05


def test_arrival_order_review_would_have_promoted_it() -> None:
    """The same sites reviewed in arrival order (the earlier queue): the first reviews are all
    the candidate's successes, and a sequence fed them calls it better — the defect the uniform
    order removes."""
    rng = np.random.default_rng(3)
    margin, labels, _ = _adversarial_site("help-then-harm", rng)
    changed = np.flatnonzero((margin > 0) & (margin <= 1.0))
    seq = SamplingSequence(changed.size, alpha=0.025)
    for i in changed[:20]:
        seq.update(float(labels[i] == 0) - float(labels[i] == 1))
    assert seq.lower(0.025) > 0  # "better", about a candidate that is worse overall


# ------------------------------------------------------------------------------------ the ladder
def _images(n: int, seed: int = 0, shift: float = 2.0) -> tuple[SiteImages, np.ndarray]:
    """A site whose true threshold is ``shift``: the source (threshold 0) over-calls positives."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, n)
    margin = np.where(labels == 1, rng.normal(shift + 3, 1, n), rng.normal(shift - 3, 1, n))
    source = (margin > 0).astype(np.int64)
    images = SiteImages(
        reported=source.copy(),
        source=source,
        margin=margin,
        threshold=np.zeros(n),
        candidates={"fit": np.full(n, shift), "shift": np.full(n, -3.0)},
    )
    return images, labels


def test_a_better_candidate_is_promoted_and_decides_the_images_its_certificate_covers() -> None:
    images, labels = _images(300)
    ladder = SiteLadder("folder", LadderRule(candidates=("shift", "fit")))
    marks: dict[int, int] = {}
    while (c := ladder.active or ladder.open_next(images.head(200))) is not None:
        position = c.next_position
        assert position is not None and position < 200  # only images processed when it started
        marks[position] = int(labels[position])
        ladder.review(marks)
    tested = [c for c in ladder.comparisons if c.disagreements]  # A1 changed nothing: no comparison
    assert [(c.candidate, c.verdict) for c in tested] == [("shift", NOT_BETTER), ("fit", PROMOTED)]
    assert ladder.current == "fit" and tested[1].alpha == pytest.approx(LadderRule().level(2))
    fit = (images.margin > 2.0).astype(np.int64)
    covered = ladder.coverage(tested[1], images)
    assert 200 <= covered < 300  # its first 200 images and, counted at their worst, a few after
    certified, shown = ladder.certified(images), ladder.shown(images)
    assert np.array_equal(certified[:covered], fit[:covered])  # covered: the promoted rule decides
    assert np.array_equal(certified[covered:], images.source[covered:])  # later: the rule below it
    assert np.array_equal(shown, fit)  # shown as they arrive: provisionally, the rule in use
    assert np.mean(certified == labels) > np.mean(images.source == labels) + 0.01
    text = tested[1].describe(300)
    assert "among the first 200" in text and f"{300 - covered} later images not covered yet" in text
    level = f"{100 * (1 - LadderRule().level(2)):.1f} %"  # 99.8 % (98.8 % before issue 39's item 2)
    assert level in tested[1].details() and "%" not in text, "the level is a detail"
    # the queue then covers the later images with a block of their own, and only then goes on
    while (c := ladder.active or ladder.open_next(images)) is not None:
        position = c.next_position
        assert position is not None
        marks[position] = int(labels[position])
        ladder.review(marks)
    assert [(b.start, b.end) for b in tested[1].blocks] == [(0, 200), (200, 300)]
    assert ladder.coverage(tested[1], images) == 300 and np.array_equal(ladder.certified(images), fit)


def test_a_harmful_operating_point_is_reverted_to_the_source_model() -> None:
    images, labels = _images(200, shift=0.0)  # the source threshold is right...
    images = SiteImages(
        images.reported, images.source, images.margin, np.full(200, -2.5), images.candidates
    )  # ...but the label-free operating point moved it down
    ladder = SiteLadder("folder", LadderRule(candidates=()))
    c = ladder.start(images)
    assert c is not None and c.candidate == LABEL_FREE
    marks = {p: int(labels[p]) for p in c.order}
    ladder.review(marks)
    assert c.verdict == REVERTED and ladder.current == SOURCE_RULE
    assert np.array_equal(ladder.decide(images), images.source)


def test_marks_made_out_of_order_wait_for_the_sampled_order() -> None:
    """A reviewer who marks whatever they like does not bias the sample: a mark is used only when
    the random order reaches its image."""
    images, labels = _images(200)
    ladder = SiteLadder("folder", LadderRule(candidates=("fit",)))
    c = ladder.start(images)
    assert c is not None
    late = c.order[-1]
    ladder.review({late: int(labels[late])})
    assert c.reviewed == [] and c.sequence.count == 0
    first = c.order[0]
    ladder.review({late: int(labels[late]), first: int(labels[first])})
    assert c.reviewed == [first]


def test_an_operating_point_that_helps_is_verified_and_stays() -> None:
    images, labels = _images(300)
    images = SiteImages(images.reported, images.source, images.margin, np.full(300, 2.0), images.candidates)
    ladder = SiteLadder("folder", LadderRule(candidates=()))
    c = ladder.start(images)
    assert c is not None
    ladder.review({p: int(labels[p]) for p in c.order})
    assert c.verdict == VERIFIED and ladder.current == LABEL_FREE
    assert math.isfinite(c.e_value()) and c.e_value() >= 1 / c.alpha


def test_the_reviewer_reports_online_and_retroactive_decisions_apart() -> None:
    images, labels = _images(400)
    n = 400
    out = review_stream(
        images.reported,
        images.source,
        images.margin,
        images.threshold,
        dict(images.candidates),
        np.zeros(n, dtype=np.int64),
        labels,
        budget=20,
        review_at=0.5,
        rule=LadderRule(candidates=("fit",)),
    )
    assert 0 < out.reviews_used <= 20 and out.reviewed.sum() == out.reviews_used
    assert not out.reviewed[200:].any()  # only images processed when the reviewer came
    assert np.array_equal(out.online_decisions[:200], images.reported[:200])  # what was seen then
    assert out.counts.accuracy > out.online_counts.accuracy > out.adapted_counts.accuracy
    zero = review_stream(
        images.reported,
        images.source,
        images.margin,
        images.threshold,
        {},
        np.zeros(n, dtype=np.int64),
        labels,
        0,
    )
    assert zero.reviews_used == 0 and np.array_equal(zero.decisions, images.reported)
    with pytest.raises(ValueError, match="review_at"):
        review_stream(images.reported, images.source, images.margin, None, {}, np.zeros(n), labels, 5, 0.0)
