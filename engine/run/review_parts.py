"""The parts of a site's review: one ladder for each unit the site's images were decided in.

A folder the method split in two (it mixed two appearances: ``engine.methods.idipt_plus._split``)
carries more than one ``site_group`` in its rows: the images decided before the split, and each
part's. Each unit gets its own ladder, so each certificate is about one part, from a uniformly
random sample of that part; the review queue serves the part whose reviews are fewest relative
to its share of the site's images (:func:`serving_order`). A site of one unit (every site that
did not split, and every journal written before splits) is one part, reviewed exactly as before.

Rows without a group (the source model decided them before any unit did) belong to the first
part. The first part's ladder is named by the site, as the single ladder always was, and its
block records name no part (as marks files always kept the site's starts); the other parts'
ladders and records are named by their group.

Here too: :func:`site_images` (what a ladder needs of rows) and :func:`what_adapting_changed`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from engine.methods.idipt_plus import ACCEPTED, HELD, THRESHOLD_CANDIDATES
from engine.review.balance import Balanced
from engine.review.classes import ONE_GROUP, BestFits, best_fit_thresholds
from engine.review.images import PROMPTED_PENDING
from engine.review.ladder import LABEL_FREE, SOURCE_RULE, Comparison, SiteImages, SiteLadder
from engine.review.marks import BlockRecord
from engine.run.rows import MAP_PENDING, PredictionRow
from engine.vocabulary import NoSiteRule, QueueEmpty, Rule


class Decider(NamedTuple):
    """What decides one row: the rule, its threshold on the source margin (nan: not a threshold
    rule) and its part's short name ("part 2 of 3"; empty when the site has one part)."""

    rule: Rule
    threshold: float
    part: str


@dataclass(frozen=True)
class PartRule:
    """The rule that decides one part of a site now (the site's only part: ``part`` empty)."""

    part: str  # "part 2 of 3"
    images: int
    rule: Rule

    def to_json(self) -> dict[str, object]:
        return {"part": self.part, "images": self.images, "rule": str(self.rule)}


def decides_words(in_use: Sequence[PartRule]) -> str:
    """Who decides the site now, in words: "the best-fit threshold decides this folder"; a site
    split in parts names each part's ("part 1 of 2 (80 images): the original model decides; ...")."""
    if len(in_use) == 1:
        return f"{in_use[0].rule.words} decides this folder"
    return "; ".join(f"{p.part} ({p.images} images): {p.rule.words} decides" for p in in_use)


def site_images(
    rows: Sequence[PredictionRow],
    classes: int | None = None,
    fits: BestFits | None = None,
    balanced: Balanced | None = None,
) -> SiteImages:
    """What the ladder needs of a site's rows (arrival order); rows without a source margin (a
    method that keeps none, or a journal written before margins were kept) make A1 the reported
    decisions. With more than two classes (rows with ``source_classes``) the margin is against the
    reference class and the best-fit threshold is fitted here (``engine.review.classes``); with
    ``classes`` (the model's number of classes) given, rows naming a class beyond it (a journal
    changed by hand) make the site's margins unusable, never a decision for a class that is not;
    ``fits`` keeps the best-fit thresholds of the site's rows between calls as rows arrive. Where
    every row keeps the source model's log-probabilities of all classes (``source_log_probs``, as
    many as ``classes``), the class-balance correction decides each image too
    (``engine.review.balance``; ``balanced`` keeps its decisions between calls)."""
    n = len(rows)
    margin = np.array(
        [math.nan if r.source_margin is None else r.source_margin for r in rows], dtype=np.float64
    )
    thresholded = n > 0 and bool(np.isfinite(margin).all())
    pairs = [r.source_classes for r in rows]
    many = thresholded and all(p is not None for p in pairs)
    if many and classes is not None and any(max(p) >= classes for p in pairs if p is not None):
        thresholded = many = False  # a class the model does not have: no threshold decides here
        margin = np.full(n, math.nan)
    threshold = (
        np.array([r.decision_threshold or 0.0 for r in rows], dtype=np.float64) if thresholded else None
    )
    two = np.array(pairs, dtype=np.int64).reshape(n, 2) if many else None
    candidates: dict[str, np.ndarray] = {}
    if thresholded:
        named = [dict(r.candidates) for r in rows]
        for name in THRESHOLD_CANDIDATES:
            values = np.array([c.get(name, math.nan) for c in named], dtype=np.float64)
            if np.isfinite(values).any():
                candidates[name] = values
        if many and Rule.FIT not in candidates:
            best = fits.of(margin) if fits is not None else best_fit_thresholds(margin)
            if np.isfinite(best).any():
                candidates[Rule.FIT] = best
    decided: dict[str, np.ndarray] = {}
    logs = [r.source_log_probs for r in rows]
    width = {len(v) for v in logs if v is not None}
    if many and Rule.PRIOR not in candidates and None not in logs and len(width) == 1:
        if classes is None or width == {classes}:  # a row of another length: none (a journal changed by hand)
            log_probs = np.array(logs, dtype=np.float64)
            source = np.array([r.source_prediction for r in rows], dtype=np.int64)
            decided[Rule.PRIOR] = (balanced or Balanced()).of(log_probs, source)
    pending = PROMPTED_PENDING  # a row's prompted decision still to be made (on demand): see SiteImages
    prompted = np.array(
        [
            (pending if r.prompted_status == MAP_PENDING else -1)
            if r.prompted_prediction is None
            else r.prompted_prediction
            for r in rows
        ],
        dtype=np.int64,
    )
    return SiteImages(
        reported=np.array([r.prediction for r in rows], dtype=np.int64),
        source=np.array([r.source_prediction for r in rows], dtype=np.int64),
        margin=margin,
        threshold=threshold,
        candidates=candidates,
        prompted=prompted if bool((prompted != -1).any()) else None,
        classes=two,
        decided=decided,
    )


@dataclass(frozen=True)
class EmptyQueue:
    """Why a site's review queue is empty (:meth:`SiteReview.empty_queue`): the facts, which each
    place words its own way (:meth:`SiteReview.why_empty`, :mod:`engine.run.review_outlook`)."""

    stage: QueueEmpty
    tested: tuple[Comparison, ...] = ()  # the comparisons with images to test, all settled
    alike: tuple[Rule, ...] = ()  # other rules that call every image as it is decided now
    unproposed: str | None = None  # the method proposed no site threshold: why ("": not said); None: it did
    prompted: bool = False  # I-DiPT's own rule can decide the folder's images


def prompted_next(parts: Sequence[ReviewPart], upcoming: Callable[[int], object]) -> bool:
    """Whether a part's ladder waits for I-DiPT's decisions, or would at its next start (``upcoming``:
    :meth:`SiteReview.upcoming`, the look ahead that says so)."""
    return any(
        p.ladder.waits_for_prompted or (upcoming(k) is None and p.ladder.would_wait)
        for k, p in enumerate(parts)
    )


def prompted_words(parts: Sequence[ReviewPart]) -> str:
    """Why the queue waits, I-DiPT's decisions next: being made (a start reached them) or made once
    the review reaches them (a look ahead, before any start)."""
    if any(p.ladder.waits_for_prompted for p in parts):
        return f"next: {Rule.PROMPTED.words}, whose decisions are being made now that the review reached it"
    return f"next: {Rule.PROMPTED.words}, whose decisions are made once the review reaches it"


def first_pending(rows: Sequence[PredictionRow], prompted: bool) -> int:
    """The first row whose map (``prompted``: or I-DiPT's prompted decision) is still to come."""
    for i, r in enumerate(rows):
        if r.map_status == MAP_PENDING or (prompted and r.prompted_status == MAP_PENDING):
            return i
    return len(rows)


@dataclass(eq=False)  # parts are compared by identity (they hold ladders)
class ReviewPart:
    """One part of a site's review.

    Attributes:
        group: the unit its images were decided in (None: rows that name none).
        positions: its rows' indices in the site's rows, in arrival order.
        ladder: its ladder of comparisons.
        records: the blocks its comparisons froze, as the marks file keeps them, in order.
        pending: those the ladder has not reached yet (after the last replay).
    """

    group: int | None
    positions: list[int]
    ladder: SiteLadder
    records: list[BlockRecord] = field(default_factory=list)
    pending: list[BlockRecord] = field(default_factory=list)
    # label_free's reading so far: its positions read, and whether one was accepted (rows are
    # appended, and a row's decision path is kept when its map is added; a row processed again
    # after a crash replaces its earlier one: SiteReview then calls reread)
    _read: int = field(default=0, repr=False)
    _accepted: bool = field(default=False, repr=False)

    @property
    def starts(self) -> list[int]:
        """The images each comparison it started was frozen on (its first blocks), in order."""
        return [r.end for r in self.records if r.number == 0]

    def rows(self, rows: Sequence[PredictionRow]) -> list[PredictionRow]:
        return [rows[i] for i in self.positions]

    def labels(self, marks: Mapping[int, int]) -> dict[int, int]:
        """The marks (site row index -> class) as its ladder reads them (its own row index -> class)."""
        return {k: marks[i] for k, i in enumerate(self.positions) if i in marks}

    def reviews(self) -> int:
        """Reviews its comparisons have used."""
        return sum(len(c.reviewed) for c in self.ladder.comparisons)

    def label_free(self, rows: Sequence[PredictionRow]) -> bool:
        """Whether the method reported a label-free decision here (the operating point accepted).
        Asked for every batch of rows shown, so only the positions not read before are read."""
        if not self._accepted:
            new = self.positions[self._read :]
            self._accepted = any(rows[i].decision_path == ACCEPTED for i in new)
            self._read += len(new)
        return self._accepted

    def reread(self) -> None:
        """Forget what :meth:`label_free` read (a row was replaced)."""
        self._read, self._accepted = 0, False

    def rule(self, rows: Sequence[PredictionRow]) -> Rule:
        """The rule that decides it now, as people are told it (``SiteReview.in_use``): the
        ladder's, the label-free rule read as the source model where it reported no decision."""
        current = self.ladder.current
        return SOURCE_RULE if current == LABEL_FREE and not self.label_free(rows) else current


def serving_order(parts: Sequence[ReviewPart]) -> list[ReviewPart]:
    """The parts in the order the queue serves them: fewest reviews relative to their share of the
    site's images first (the earlier part on a tie), so K answers fall on the parts in proportion."""
    total = sum(len(p.positions) for p in parts) or 1
    return sorted(
        parts,
        key=lambda p: (p.reviews() * total / max(1, len(p.positions)), parts.index(p)),
    )


def served(parts: Sequence[ReviewPart]) -> ReviewPart | None:
    """The part with an open comparison that the queue serves first (None: no comparison is open)."""
    open_parts = [p for p in parts if p.ladder.active is not None]
    return serving_order(open_parts)[0] if open_parts else None


def part_label(parts: Sequence[ReviewPart], part: ReviewPart) -> str:
    """``part 2 of 2``."""
    return f"part {parts.index(part) + 1} of {len(parts)}"


def part_name(parts: Sequence[ReviewPart], part: ReviewPart) -> str:
    """``part 2 of 2 (131 images)``."""
    return f"{part_label(parts, part)} ({len(part.positions)} images)"


def no_site_rule(rows: Sequence[PredictionRow]) -> NoSiteRule | None:
    """Why the method proposed no site threshold for the site, as its rows record it (a member of
    the vocabulary, read back by identifier; None: it records none of those reasons)."""
    if not rows:
        return None
    try:
        return NoSiteRule(rows[-1].decision_reason)
    except ValueError:
        return None


def rules_calling_otherwise(images: SiteImages) -> list[Rule]:
    """The rules the method proposed that call some image otherwise than the original model does
    (a threshold on the source margin, where it has a value; I-DiPT's prompted class)."""
    out: list[Rule] = []
    if images.threshold is not None:
        for rule, values in images.candidates.items():
            finite = np.isfinite(values)
            calls = images.calls(np.where(finite, values, 0.0))
            if bool(np.any(finite & (calls != images.source))):
                out.append(Rule(rule))
    for rule, decisions in images.decided.items():
        if bool(np.any(decisions != images.source)):
            out.append(Rule(rule))
    if images.prompted is not None and bool(
        np.any((images.prompted >= 0) & (images.prompted != images.source))
    ):
        out.append(Rule.PROMPTED)
    return out


def what_adapting_changed(rows: Sequence[PredictionRow], decisions: np.ndarray | None = None) -> str:
    """One sentence for a site: how many decisions adapting changed, or why it changed none.

    The reason is read from what the rows record, typed: the rules the method proposed (their
    thresholds, I-DiPT's class), the decision path, the vocabulary's reason for proposing none; a
    method's message is quoted, never parsed. It said "too few images" from the last row's message
    where the folder had a rule fitted to all its images and only that image's group was new.

    Args:
        rows: the site's rows in arrival order.
        decisions: the decisions to compare with the source model's (the site's review's
            :meth:`SiteReview.decisions`; None: the rows' own, as they were made).
    """
    if not rows:
        return "no image of this folder was processed"
    final = np.array([r.prediction for r in rows]) if decisions is None else decisions
    source = np.array([r.source_prediction for r in rows])
    changed = int(np.sum(final != source))
    if changed:
        return f"adapting changed {changed} of the {len(rows)} decisions of this folder"
    images = site_images(rows)
    if images.threshold is None and images.prompted is None:
        return (
            "adapting changed no decision: no other rule can decide these images (the run kept no source "
            "margins: a method that keeps none, or a journal written before they were kept)"
        )
    otherwise = rules_calling_otherwise(images)
    if not images.candidates and not images.decided:  # no site threshold at all
        why = no_site_rule(rows)
        reason = why.words if why is not None else rows[-1].decision_reason
        if images.classes is not None:  # more than two classes: the best-fit threshold found no groups
            reason = ONE_GROUP
        text = "adapting changed no decision: it proposed no site threshold" + (
            f" ({reason})" if reason else ""
        )
        if images.prompted is None:
            return text
        if otherwise:
            return f"{text}; {Rule.PROMPTED.words} calls some images otherwise and decides once reviews show it better"
        return f"{text}, and {Rule.PROMPTED.words} calls every image as the original model does"
    if rows[-1].decision_path == HELD:
        return (
            "adapting changed no decision yet: the site threshold passed its safety checks, and the "
            "original model decides until reviews of this folder show it or another rule better"
        )
    if not otherwise:
        fitted = bool(images.decided) or bool(
            np.isfinite(images.candidates.get(Rule.FIT, np.full(1, math.nan))).any()
        )
        if not fitted:  # no site threshold fitted yet: the method says why (how many images it needs)
            why_not = rows[-1].decision_reason
            return (
                f"adapting changed no decision: no site threshold is fitted to this folder's {len(rows)} images"
                + (f" yet: {why_not}" if why_not else " yet")
            )
        return (
            "adapting changed no decision: every rule it proposed calls each image as the original model does"
        )
    named = ", ".join(r.words for r in otherwise)
    return (
        f"adapting changed no decision: {named} would call some images otherwise, and the original model "
        "decides until reviews of this folder show one of them better"
    )
