"""The site's review certificates as the window, the banners and the reports word them (Qt-free).

The certificates themselves are the engine's (:class:`~engine.run.review.SiteReview`: a ladder of
comparisons per site, each tested on a uniformly random sample of the images it changes,
``docs/review-certificates.md``), read once into typed records
(:class:`~engine.run.certificates.SiteCertificates`, :class:`~engine.run.certificates.Certificate`)
that the Certificates tab, the banners and the reports share; they are rebuilt from the marks
whenever the source opens, so nothing here is saved. This module words a decided comparison for
the banner, and gives the row a decision the site's review decides is shown as
(:class:`ReviewedRow`, which names its rule).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from app._engine import Certificate, DecisionPath, PredictionRow, Rule, Verdict


@dataclass(frozen=True)
class ReviewedRow(PredictionRow):
    """A row the rules the site's reviews put in use decide (the rule, and the part of a folder the
    method split whose reviews did): the table's Decided by column reads them from here."""

    rule: Rule = Rule.SOURCE
    part: str = ""  # "part 2 of 3" (empty: the folder is one part)

    @property
    def decided_by(self) -> str:
        """``best-fit threshold`` (``(part 2 of 3)``; ``provisional: best-fit threshold`` for a
        provisional call, the word first: the table's column keeps a provisional cell's start, and
        "best-fit th…provisional" hid it at 1280 px): the rule's own name says a review put it in
        use (only answers put these rules in use)."""
        text = self.rule.short + (f" ({self.part})" if self.part else "")
        return f"provisional: {text}" if self.provisional else text

    @property
    def provisional(self) -> bool:
        """Whether the rule's call is provisional (no certificate covers the row yet)."""
        return self.decision_path == DecisionPath.PROVISIONAL


def decided_by(row: PredictionRow) -> str:
    """Who decided ``row``, in the table's words (never a path's name; empty: the method records none)."""
    if isinstance(row, ReviewedRow):
        return row.decided_by
    try:
        return DecisionPath(row.decision_path).words if row.decision_path else ""
    except ValueError:  # a path of a method this app does not know
        return row.decision_path


def provisional_words(
    row: PredictionRow,
    shown: int,
    reported: int,
    rule: Rule,
    below: Rule,
    classes: Sequence[str],
    report: bool,
) -> str:
    """The reason of a provisional row: the promoted ``rule`` calls it ``shown``, no certificate
    covers it yet, and reports give ``reported`` (the decision of ``below``, the rule under it);
    worded for the window, or for a report (``report``)."""

    def name(c: int) -> str:
        return classes[c] if 0 <= c < len(classes) else str(c)

    if report:
        return (
            f"reported as {name(reported)} ({below.words}): {rule.words} calls it {name(shown)}, "
            "provisionally; it arrived after the images your answers covered, and no certificate covers it yet"
        )
    return (
        f"provisional: {rule.words} calls it {name(shown)}, but it arrived after the images your answers "
        f"covered; reports give {name(reported)} ({below.words}) until your answers in the review queue "
        "(Q) cover it"
    )


def decided_text(line: Certificate) -> str:
    """The banner's sentence when a comparison is decided (capitalised)."""
    text = line.says
    return text[:1].upper() + text[1:] + "."


def is_warning(line: Certificate) -> bool:
    """Whether the decision is one the user should notice (adapting turned back)."""
    return line.verdict == Verdict.REVERTED


def reviewed_row(
    row: PredictionRow,
    decision: int,
    rule: Rule,
    positive_class: int,
    classes: Sequence[str],
    threshold: float = math.nan,
    part: str = "",
    provisional: str = "",
    in_use: Rule | None = None,
) -> ReviewedRow:
    """``row`` (the engine's, as it was decided) as shown once the site's review decides it
    ``decision`` under ``rule`` (the source model after a revert, or a promoted candidate);
    ``part`` names the part of a folder the method split ("part 2 of 3"), whose own reviews did.
    ``provisional``: the sentence of a row whose decision here is not covered by a certificate
    (the window shows a promoted rule's call, provisionally; reports give the covered decision
    and name the call): it is kept in ``decision_reason`` with path ``provisional``. ``in_use``:
    the promoted rule that calls the row as ``rule`` (the rule below it) does, where no
    certificate covers the row (it arrived after the images the answers covered).

    The decision made while the image arrived is named in ``decision_reason``, so the table's
    tooltip and the predictions CSV keep both; the journal's row is never changed.
    """
    if provisional:
        shown = reviewed_row(row, decision, rule, positive_class, classes, threshold, part)
        return dataclasses.replace(shown, decision_path=DecisionPath.PROVISIONAL, decision_reason=provisional)
    whose = f"reviews of {part} of this folder" if part else "site's reviews"
    label = classes[decision] if 0 <= decision < len(classes) else str(decision)
    reviewed = ReviewedRow(**{**_fields(row), "decision_path": DecisionPath.REVIEWED}, rule=rule, part=part)
    if in_use is not None:
        reason = (
            f"{rule.words} decides it ({label}): it arrived after the images your answers covered; "
            f"{in_use.words}, which the {whose} put in use, calls it {label} too"
        )
    elif decision == row.prediction:
        reason = f"the {whose} put {rule.words} in use; it calls it {label} too"
    else:
        reason = (
            f"decided {row.prediction_label} as it arrived; the {whose} put {rule.words} in use, "
            "which decides otherwise"
        )
    if decision == row.prediction:  # as it was decided when it arrived
        return dataclasses.replace(reviewed, decision_reason=reason)
    if decision == row.source_prediction:
        confidence = row.source_confidence
        positive = (
            row.source_confidence
            if decision == positive_class
            else (1.0 - row.source_confidence if len(classes) == 2 else math.nan)
        )
    else:  # a threshold candidate: the source margin measured from its threshold
        margin = row.source_margin
        if len(classes) > 2 and rule.is_threshold and margin is not None and math.isfinite(threshold):
            # the margin is between the reference and one other class: the decided one's share of the two
            confidence = 1.0 / (1.0 + math.exp(-abs(margin - threshold)))
            if decision == positive_class:
                positive = confidence
            else:  # the positive class lost to the decided one, or was not among the two (unknown)
                positive = 1.0 - confidence if positive_class in (row.source_classes or ()) else math.nan
        else:
            if margin is not None and math.isfinite(margin) and math.isfinite(threshold):
                z = margin - threshold
                positive = 1.0 / (1.0 + math.exp(-z)) if z >= 0 else math.exp(z) / (1.0 + math.exp(z))
                if positive_class == 0:  # the margin is l_1 - l_0: class 1's side
                    positive = 1.0 - positive
            else:
                positive = row.positive_prob
            confidence = positive if decision == positive_class else 1.0 - positive
    return dataclasses.replace(
        reviewed,
        prediction=decision,
        prediction_label=label,
        confidence=confidence,
        positive_prob=positive,
        decision_reason=reason,
    )


def _fields(row: PredictionRow) -> dict[str, Any]:
    """The fields of the engine's row (a reviewed row is made from them)."""
    return {f.name: getattr(row, f.name) for f in dataclasses.fields(PredictionRow)}


@dataclass(frozen=True)
class QueueState:
    """The review queue as the table shows it.

    Attributes:
        ranks: each queued row's place in the queue (0 first), by its index in arrival order.
    """

    ranks: dict[int, int]


def queue_state(order: Sequence[int]) -> QueueState:
    return QueueState({index: rank for rank, index in enumerate(order)})
