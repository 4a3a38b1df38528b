"""Review-certified adaptation: a reviewer's marks on a uniformly random sample of the images a rule
would change certify, per site, whether it is better than the rule in use.

Without labels no method can promise that adapting never harms a site; a few reviews can. A site's
ladder (:mod:`~engine.review.ladder`) tests first whether adapting helps (verified, or reverted to
the source model), then stronger candidates against the rule in use (promoted or not better), each
comparison frozen on the images processed when it started and sampled without replacement in a
random order (:mod:`~engine.review.sampling`: an anytime-valid betting confidence sequence for a
finite population), each at a smaller error level than the one before, so a site's certificates
err together at most ``alpha`` (error control is per site). A promoted rule decides the images
its certificate covers: later images join through blocks of their own, certified together with
the first by one e-process per comparison (:mod:`~engine.review.union`).
The marks are kept bound to their site (:mod:`~engine.review.marks`); the benchmark's simulated
reviewer draws reviews as the ladder asks (:mod:`~lab.reviewer`). The revert rule's
constants: :mod:`~engine.review.rule`, from :mod:`~engine.review.sequence`'s betting sequences.

Plain numpy and the standard library, no torch: the app, the CLI and reports can use it alone.
How the rule and its constants were chosen: ``docs/review-certificates.md``.
"""

from __future__ import annotations

from engine.review._checks import CertificateError
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

__all__ = [
    "DEFAULT_RULE",
    "REVERTED",
    "UNDECIDED",
    "VERDICTS",
    "VERIFIED",
    "BettingSequences",
    "CertificateError",
    "ConfidenceSequence",
    "ReviewRule",
    "disagreement_share",
    "outcome",
    "revert_condition",
    "verdict_paths",
]
