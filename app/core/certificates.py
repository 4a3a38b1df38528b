"""The site's review certificates as the window, the banners and the reports word them (Qt-free).

The certificates themselves are the engine's (:class:`~engine.run.review.SiteReview`: a ladder of
comparisons per site, each tested on a uniformly random sample of the images it changes,
``docs/review-certificates.md``); they are rebuilt from the marks whenever the source opens, so
nothing here is saved. This module turns them into the certificates table's lines, the queue's
state for the table, the banner sentence of a decided comparison, and the row a decision the
site's review changed is shown as.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from app._engine import NOT_BETTER, PROMOTED, REVERTED, VERIFIED, PredictionRow

PART_RULE = "part "  # the rule of a site split in parts begins "part 1 of 2 (80 images): ..."
REVIEWED_PATH = "reviewed"  # the decision path of a row whose decision the site's review changed
PROVISIONAL_PATH = "provisional"  # a row a promoted rule calls otherwise, not covered by a certificate yet


def rule_name(rule: str) -> str:
    """The rule in use, as a sentence fragment ("the source model", "the shift candidate"); a site
    split in parts already names each part's rule (``part 1 of 2 (80 images): ...``)."""
    if rule.startswith(PART_RULE):
        return rule
    if rule == "source":
        return "the source model"
    if rule == "operating point":
        return "the label-free operating point"
    if rule == "guarded":
        return "the site's operating point (certified)"
    return f"the {rule} candidate"


def provisional_words(
    row: PredictionRow, shown: int, reported: int, rule: str, below: str, classes: Sequence[str], report: bool
) -> str:
    """The reason of a provisional row: the promoted ``rule`` calls it ``shown``, no certificate
    covers it yet, and reports give ``reported`` (the decision of ``below``, the rule under it);
    worded for the window, or for a report (``report``)."""

    def name(c: int) -> str:
        return classes[c] if 0 <= c < len(classes) else str(c)

    if report:
        return (
            f"reported as {name(reported)} ({rule_name(below)}): {rule_name(rule)} calls it {name(shown)}, "
            "provisionally; it arrived after the images your answers covered, and no certificate covers it yet"
        )
    return (
        f"provisional: {rule_name(rule)} calls it {name(shown)}, but it arrived after the images your answers "
        f"covered; reports give {name(reported)} ({rule_name(below)}) until your answers in the review queue "
        "(Q) cover it"
    )


def rule_short(rule: str) -> str:
    """The rule in use in a few words (the table's Decided by column)."""
    if rule.startswith(PART_RULE):
        return rule
    return {"source": "source model", "operating point": "operating point", "guarded": "operating point"}.get(
        rule, f"{rule} candidate"
    )


@dataclass(frozen=True)
class ComparisonLine:
    """One line of the certificates table: one comparison of the site's ladder."""

    number: int  # its place in the ladder (1 first)
    candidate: str  # "operating point" (adapting against the source model) or a candidate's name
    covers: int  # the site's first images it was frozen on
    disagreements: int  # of those, the images whose decision it would change (the ones to review)
    reviews: int  # reviews used, in its random order
    lower: float  # lower confidence bound on the mean gain per changed decision (nan: none yet)
    upper: float
    level: float  # the confidence level it is tested at
    verdict: str  # open, verified, reverted, promoted, not better
    says: str  # the engine's sentence: verdict, level and scope
    part: str = ""  # the part of a folder the method split that it is about ("part 2 of 3 (114 images)")

    @property
    def what(self) -> str:
        name = "adapting (the operating point)" if self.candidate == "operating point" else self.candidate
        return f"{name}, {self.part.partition(' (')[0]}" if self.part else name

    @property
    def bounds(self) -> str:
        if not self.reviews or not (math.isfinite(self.lower) and math.isfinite(self.upper)):
            return "not measured"
        return f"{self.lower:+.2f} … {self.upper:+.2f}"


def comparison_lines(document: Mapping[str, Any]) -> list[ComparisonLine]:
    """The lines of :func:`engine.run.certify.certificates_json`'s document (one per comparison)."""

    def number(value: object) -> float:
        return float(value) if isinstance(value, int | float) else math.nan

    return [
        ComparisonLine(
            number=i + 1,
            candidate=str(c["candidate"]),
            covers=int(c["covers_images"]),
            disagreements=int(c["disagreements"]),
            reviews=int(c["reviews"]),
            lower=number(c["lower"]),
            upper=number(c["upper"]),
            level=float(c["level"]),
            verdict=str(c["verdict"]),
            says=str(c["says"]),
            part=str(c.get("part", "")),
        )
        for i, c in enumerate(document.get("comparisons", ()))
    ]


def decided_text(line: ComparisonLine) -> str:
    """The banner's sentence when a comparison is decided (capitalised)."""
    text = line.says
    return text[:1].upper() + text[1:] + "."


def is_warning(line: ComparisonLine) -> bool:
    """Whether the decision is one the user should notice (adapting turned back)."""
    return line.verdict == REVERTED


def decided(line: ComparisonLine) -> bool:
    return line.verdict in (VERIFIED, REVERTED, PROMOTED, NOT_BETTER)


def reviewed_row(
    row: PredictionRow,
    decision: int,
    rule: str,
    positive_class: int,
    classes: Sequence[str],
    threshold: float = math.nan,
    part: str = "",
    provisional: str = "",
) -> PredictionRow:
    """``row`` (the engine's, as it was decided) as shown once the site's review decides it
    ``decision`` under ``rule`` (the source model after a revert, or a promoted candidate);
    ``part`` names the part of a folder the method split ("part 2 of 3"), whose own reviews did.
    ``provisional``: the sentence of a row whose decision here is not covered by a certificate
    (the window shows a promoted rule's call, provisionally; reports give the covered decision
    and name the call): it is kept in ``decision_reason`` with path :data:`PROVISIONAL_PATH`.

    The decision made while the image arrived is named in ``decision_reason``, so the table's
    tooltip and the predictions CSV keep both; the journal's row is never changed.
    """
    if provisional:
        row = reviewed_row(row, decision, rule, positive_class, classes, threshold, part)
        return dataclasses.replace(row, decision_path=PROVISIONAL_PATH, decision_reason=provisional)
    if decision == row.prediction:
        return row
    if decision == row.source_prediction:
        confidence = row.source_confidence
        positive = (
            row.source_confidence
            if decision == positive_class
            else (1.0 - row.source_confidence if len(classes) == 2 else math.nan)
        )
    else:  # a threshold candidate on a two-class margin: the source margin measured from its threshold
        margin = row.source_margin
        if margin is not None and math.isfinite(margin) and math.isfinite(threshold):
            z = margin - threshold
            positive = 1.0 / (1.0 + math.exp(-z)) if z >= 0 else math.exp(z) / (1.0 + math.exp(z))
            if positive_class == 0:  # the margin is l_1 - l_0: class 1's side
                positive = 1.0 - positive
        else:
            positive = row.positive_prob
        confidence = positive if decision == positive_class else 1.0 - positive
    label = classes[decision] if 0 <= decision < len(classes) else str(decision)
    whose = f"reviews of {part} of this folder" if part else "site's reviews"
    return dataclasses.replace(
        row,
        prediction=decision,
        prediction_label=label,
        confidence=confidence,
        positive_prob=positive,
        decision_path=REVIEWED_PATH,
        decision_reason=(
            f"decided {row.prediction_label} as it arrived; the {whose} put {rule_name(rule)} in use, "
            "which decides otherwise"
        ),
    )


@dataclass(frozen=True)
class QueueState:
    """The review queue as the table shows it.

    Attributes:
        ranks: each queued row's place in the queue (0 first), by its index in arrival order.
        rule: the rule the site's reviews left in use (the Decided by column).
        rules: in a folder the method split in parts, each row's rule in a few words with its
            part ("fit candidate (part 2 of 3)"), by its index in arrival order (empty otherwise).
    """

    ranks: dict[int, int]
    rule: str = "operating point"
    rules: dict[int, str] = field(default_factory=dict)


def queue_state(order: Sequence[int], rule: str, rules: dict[int, str] | None = None) -> QueueState:
    return QueueState({index: rank for rank, index in enumerate(order)}, rule, rules or {})
