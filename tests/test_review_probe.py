"""A first uniform sample (``LadderRule.probe``, issue 39): answers that only fit the first threshold.

Lab only (``docs/review-certificates.md``, "A uniform first sample, built"): the run's review
refuses it, since its block is not in the journal's records.
"""

from __future__ import annotations

import numpy as np
import pytest

from engine.review.ladder import NOT_BETTER, PROMOTED, LadderRule, SiteImages, SiteLadder
from engine.run.review import SiteReview
from engine.vocabulary import Rule
from lab.bench.reviews import tested as with_disagreements
from lab.reviewer import answer_ladder, false_promotions
from tests.review_rows import null_site


def _site(n: int, seed: int, turn: float = -1.5) -> tuple[SiteImages, np.ndarray]:
    """Source margins uniform on [-3, 3]; the truth turns at ``turn`` (the source model at 0)."""
    rng = np.random.default_rng(seed)
    margin = rng.uniform(-3.0, 3.0, n)
    source = (margin > 0).astype(np.int64)
    labels = (margin > turn).astype(np.int64)
    return SiteImages(source, source, margin, candidates={"fit": np.full(n, 2.0)}), labels


def test_the_probe_asks_first_about_images_drawn_uniformly_and_tests_nothing() -> None:
    images, labels = _site(400, 1)
    ladder = SiteLadder("folder", LadderRule(probe=4), seed=3)
    first = ladder.open_next(images)
    assert first is not None and first.probe and first.index == 0
    order = first.order
    assert len(order) == 4 == len(set(order)) and all(0 <= p < 400 for p in order)
    assert first.disagreements == 0 and not with_disagreements([ladder])
    # not drawn from the images' order or margins: other seeds, other samples, spread over the site
    others = {
        tuple(SiteLadder("folder", LadderRule(probe=4), seed=s).open_next(images).order) for s in range(20)
    }  # type: ignore[union-attr]
    assert len(others) == 20
    drawn = np.concatenate([np.asarray(o) for o in others])
    assert drawn.min() < 100 and drawn.max() >= 300
    answered = {p: int(labels[p]) for p in order[:3]}
    ladder.review(answered)
    assert ladder.active is first and first.verdict != PROMOTED
    answered[order[3]] = int(labels[order[3]])
    ladder.review(answered)
    assert ladder.active is None and first.verdict == NOT_BETTER
    assert ladder.answers == answered
    # the next comparison is the threshold fitted on them (no other answer exists), its answered
    # disagreements counted exactly and never drawn again
    second = ladder.open_next(images)
    if second is not None and second.candidate == Rule.ANSWERS:
        block = second.blocks[0]
        assert set(block.known) <= set(order) and not set(block.known) & set(block.order)
        assert second.index == 1
    assert ladder.reviews() == 4


def test_a_stratified_probe_draws_one_image_from_each_run_along_the_margin() -> None:
    """``probe_strata``: four images, one from each quarter of the site by margin, asked in a
    random order; other seeds draw other images from the same quarters."""
    images, _ = _site(400, 2)
    rank = np.empty(400, dtype=np.int64)
    rank[np.argsort(images.margin, kind="stable")] = np.arange(400)
    orders = []
    for seed in range(12):
        first = SiteLadder("folder", LadderRule(probe=4, probe_strata=True), seed=seed).open_next(images)
        assert first is not None and first.probe and first.disagreements == 0
        quarters = [int(rank[p]) // 100 for p in first.order]
        assert sorted(quarters) == [0, 1, 2, 3]
        orders.append(tuple(first.order))
    assert len(set(orders)) == 12
    # asked in a random order, not by margin
    assert any([int(rank[p]) // 100 for p in o] != [0, 1, 2, 3] for o in orders)
    # a plain probe of the same site lands in some quarter twice for some seed
    plain = [SiteLadder("folder", LadderRule(probe=4), seed=s).open_next(images) for s in range(12)]
    assert any(len({int(rank[p]) // 100 for p in c.order}) < 4 for c in plain if c is not None)


def test_the_probe_finds_a_moved_threshold_that_the_label_free_candidates_miss() -> None:
    """Sites whose truth turns at -1.5 and whose only label-free candidate moves the wrong way
    (+2): without a probe ten answers certify nothing; with four probed first, the threshold
    fitted on them is promoted at many sites (where a probed answer fell between the two turns:
    about two thirds of them), counting them exactly, and decides better."""
    without = with_probe = 0
    for seed in range(40):
        images, labels = _site(400, seed)
        plain = SiteLadder("folder", LadderRule(), seed=seed)
        answer_ladder(plain, images, labels, 10)
        without += plain.current != Rule.LABEL_FREE
        ladder = SiteLadder("folder", LadderRule(probe=4), seed=seed)
        answer_ladder(ladder, images, labels, 10)
        if ladder.current == Rule.ANSWERS:
            with_probe += 1
            c = ladder.chain()[0]
            assert c.candidate == Rule.ANSWERS and -3.0 < c.threshold < 0.0
            # the probed answers it was fitted on are counted exactly (net gain), never drawn again
            known = c.blocks[0].known
            assert known and set(known) <= set(ladder.comparisons[0].order) and c.known_total > 0
            assert not set(known) & set(c.blocks[0].order)
            certified = ladder.certified(images)
            assert np.mean(certified == labels) > np.mean(images.source == labels)
    assert without == 0
    assert with_probe >= 12, f"promoted at {with_probe} of 40 sites"


def test_a_probe_fitted_threshold_is_promoted_falsely_at_most_at_its_level() -> None:
    """Labels that do not depend on the margin: the probe's answers show a gain by chance, yet
    counted exactly they cannot carry a certificate: false promotions stay under 5 % of sites."""
    sites, false, promoted = 300, 0, 0
    for s in range(sites):
        comparisons, labels = null_site(3939, s, LadderRule(probe=4), 20)
        counts = false_promotions(comparisons, labels)
        promoted, false = promoted + counts[0], false + counts[1]
    assert promoted > 0, "something was promoted (the test can see a false one)"
    assert false / sites <= 0.05, f"{false} false promotions of {sites} sites"


def test_a_run_refuses_a_probe_its_journal_could_not_replay() -> None:
    with pytest.raises(ValueError, match="probe"):
        SiteReview(None, "src", 2, rule=LadderRule(probe=4))
