"""Review-certified adaptation: a few reviewed disagreements verify adapting per site group, or revert it.

Without labels no method can promise that adapting never harms a site; a reviewer's marks on the
images whose decision adapting changed can. This package turns those marks into a certificate
per site group (:mod:`~engine.review.certificate`: *verified*, *reverted* or *undecided* by the
rule of :mod:`~engine.review.rule`, from anytime-valid betting confidence sequences,
:mod:`~engine.review.sequence`), keeps a site's
certificates and applies them to decisions (:mod:`~engine.review.book`), orders the review
queue (:mod:`~engine.review.queue`) and simulates a reviewer with a budget for the benchmark
(:mod:`~engine.review.simulate`). Reviews never reach the label-free method: they only keep its
decisions or turn a group back to the source model's.

Plain numpy and the standard library, no torch: the app, the CLI and reports can use it alone.
The rule and how its constants were chosen: ``docs/review-certificates.md``.
"""

from __future__ import annotations

from engine.review._checks import CertificateError
from engine.review.book import CertificateBook
from engine.review.certificate import Certificate
from engine.review.queue import QueueItem, ReviewQueue, review_order
from engine.review.rule import (
    DEFAULT_RULE,
    REVERTED,
    UNDECIDED,
    VERDICTS,
    VERIFIED,
    ReviewRule,
    disagreement_share,
    outcome,
    revert_condition,
    verdict_paths,
)
from engine.review.sequence import BettingSequences, ConfidenceSequence
from engine.review.simulate import ReviewCounts, SimulatedReview, review_counts, simulate_reviews

__all__ = [
    "DEFAULT_RULE",
    "REVERTED",
    "UNDECIDED",
    "VERDICTS",
    "VERIFIED",
    "BettingSequences",
    "Certificate",
    "CertificateBook",
    "CertificateError",
    "ConfidenceSequence",
    "QueueItem",
    "ReviewCounts",
    "ReviewQueue",
    "ReviewRule",
    "SimulatedReview",
    "disagreement_share",
    "outcome",
    "revert_condition",
    "review_counts",
    "review_order",
    "simulate_reviews",
    "verdict_paths",
]
