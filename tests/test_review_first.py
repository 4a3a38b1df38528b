"""Review first (the default): an accepted operating point is held back as the ``guarded``
candidate, the source model decides until a review certifies a candidate (docs/review-certificates.md)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from review_rows import review_all, site_rows

from engine.methods.idipt_plus import (
    ACCEPTED,
    AWAITING_REVIEW,
    HELD,
    NOT_ACCEPTED,
    Decision,
    IDiPTPlusConfig,
)
from engine.review.ladder import DEFAULT_CANDIDATES, GUARDED, PROMOTED, SOURCE_RULE
from engine.run.review import SiteReview, what_adapting_changed
from engine.vocabulary import Rule


def test_the_default_holds_an_accepted_operating_point_for_review() -> None:
    assert IDiPTPlusConfig().report_operating_point is False
    accepted = Decision(ACCEPTED, 3, -1.25, ACCEPTED, site="a", candidates={GUARDED: -1.25})
    held = accepted.held_for_review()
    assert (held.path, held.threshold, held.group, held.candidates) == (HELD, 0.0, 3, {GUARDED: -1.25})
    assert held.reason.endswith(AWAITING_REVIEW) and "-1.25" in held.reason
    assert held.positive(-0.5) is False and accepted.positive(-0.5) is True  # the source decides
    refused = Decision(NOT_ACCEPTED, 3, 0.0, "unstable")
    assert refused.held_for_review() is refused


def _held(rows: list, threshold: float) -> list:
    """The rows as review first records them: the operating point accepted at ``threshold``, held."""
    reason = f"the site's operating point ({threshold:+.3g} on the source margin) passed its guards; {AWAITING_REVIEW}"
    return [
        dataclasses.replace(
            r,
            decision_path=HELD,
            decision_reason=reason,
            candidates=(*r.candidates, (GUARDED, threshold)),
        )
        for r in rows
    ]


def test_the_guarded_candidate_is_promoted_only_by_reviews_and_the_source_decides_until_then() -> None:
    assert DEFAULT_CANDIDATES.index(GUARDED) > DEFAULT_CANDIDATES.index("prior")
    rows, labels = site_rows(shift=2.0)
    # the guarded threshold at the classes' divide; fit, shift and prior are taken away (nan)
    rows = [dataclasses.replace(r, candidates=(("fit", math.nan), ("prior", math.nan))) for r in rows]
    rows = _held(rows, 2.0)
    review = SiteReview(None, "folder-a", 2)
    review.open(rows)
    source = np.array([r.source_prediction for r in rows])
    assert review.in_use()[0].rule == SOURCE_RULE
    assert np.array_equal(review.decisions(), source)
    sentence = what_adapting_changed(rows, review.decisions())
    assert sentence.startswith(
        "adapting changed no decision yet: the site threshold passed its safety checks"
    )
    assert review_all(review, labels) > 0
    promoted = [c for c in review.comparisons() if c.verdict == PROMOTED]
    assert [c.candidate for c in promoted] == [GUARDED]
    assert review.in_use()[0].rule == GUARDED
    after = review.decisions()
    assert np.mean(after == labels) > np.mean(source == labels)


def test_an_operating_point_reported_without_review_is_named_as_the_rule_in_use() -> None:
    rows, _ = site_rows(shift=2.0)
    rows = [dataclasses.replace(r, decision_path=ACCEPTED, decision_threshold=2.0) for r in rows]
    review = SiteReview(None, "folder-b", 2)
    review.open(rows)
    assert review.in_use()[0].rule == Rule.LABEL_FREE


def test_a_row_decided_by_a_promoted_threshold_shows_that_thresholds_confidence() -> None:
    from app.core.certificates import reviewed_row

    rows, _ = site_rows(shift=2.0)
    row = next(r for r in rows if r.source_margin is not None and 0.5 < r.source_margin < 1.5)
    assert row.source_prediction == 1  # the source calls it tumour; the promoted threshold +2.0 does not
    shown = reviewed_row(row, 0, Rule.FIT, 1, ("normal", "tumor"), threshold=2.0)
    expected = 1.0 / (1.0 + math.exp(-(row.source_margin - 2.0)))  # P(tumour) measured from the threshold
    assert shown.prediction == 0 and math.isclose(shown.positive_prob, expected)
    assert math.isclose(shown.confidence, 1.0 - expected) and shown.confidence > 0.5
