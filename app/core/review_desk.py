"""The review of the open source, as the window uses it: the engine's site review (Qt-free).

Everything that decides -- the marks kept in the project (``review/<hash>.marks.jsonl``, written
before anything else changes), undo and redo, the ladder of comparisons tested on uniformly random
samples, the decisions of the rule the reviews left in use -- is the engine's
:class:`~engine.run.review.SiteReview`, the component ``f2tta run --reviews`` uses too, so the app
and the command line certify the same marks alike. The desk adds what the window needs around
it: image names for the undo menu, the queue as the table shows it, the certificates table's
lines and the comparisons decided since the last look (for the banner).

The queue is the open comparison's images still to review, in its random order. A comparison
is started only when the reviewer asks for the queue (:meth:`ReviewDesk.start`), frozen on the
images processed by then; marks continue it, and the next one starts when one is decided.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from app._engine import (
    IN_THE_APP,
    Certificate,
    DecisionPath,
    PartRule,
    PredictionRow,
    ReviewMark,
    Rule,
    SiteCertificates,
    SiteReview,
    outlook,
    shown,
    site_certificates,
)
from app.core.certificates import QueueState, provisional_words, queue_state, reviewed_row


@dataclass(frozen=True)
class MarkChange:
    """One change of an image's mark (None: no mark)."""

    key: str
    before: ReviewMark | None
    after: ReviewMark | None


class ReviewDesk:
    """Marks, undo and redo, the queue and the certificates of the open source (module notes)."""

    def __init__(self) -> None:
        self.review: SiteReview | None = None
        self._decisions: np.ndarray | None = None
        self._certified = np.zeros(0, dtype=np.int64)
        self._named: list[Rule] = []  # each row's certified rule as people are told it
        self._decided: set[int] = set()  # comparisons (by number) already announced
        self._fresh: list[Certificate] = []  # decided since they were last taken
        self._undone: list[int] = []  # announced, then taken back by an undo, since last taken
        self.rule_asks = 0  # the rows whose rule was asked of the engine (row_shown)

    # -- opening and rows ----------------------------------------------------------------------
    def open(
        self, rows: Sequence[PredictionRow], folder: Path | None, source_id: str, classes: int, seed: int = 0
    ) -> None:
        """The review of ``source_id``, whose earlier rows are ``rows`` (arrival order); its marks
        and comparison starts are read from ``folder`` (None: nothing is kept)."""
        self.close()
        self.review = SiteReview(folder, source_id, classes, seed)
        self.review.open(rows)
        self._decisions = None
        self._decided = {line.number for line in self.lines() if line.verdict.decided}
        self._fresh, self._undone = [], []

    def set_complete(self, complete: bool) -> None:
        """Whether every image of the open source is decided and mapped (the run has nothing left
        to give it): a promoted comparison's level may then go on to the next one (SiteReview.complete)."""
        if self.review is not None:
            self.review.complete = complete

    def add_rows(self, rows: Sequence[PredictionRow]) -> None:
        if self.review is not None and rows:
            self.review.add_rows(rows)
            self._decisions = None

    def close(self) -> None:
        if self.review is not None:
            self.review.close()
        self.review = None
        self._decisions = None

    @property
    def marks(self) -> dict[str, ReviewMark]:
        return self.review.marks if self.review is not None else {}

    # -- marks, undo and redo ------------------------------------------------------------------
    def set_mark(self, key: str, label: int | None, reviewer: str = "") -> MarkChange | None:
        """Mark ``key`` as of class ``label`` (None clears it); None when nothing changes.

        Raises:
            OSError: the mark cannot be kept (nothing changed).
            ValueError: the image or the class is not this source's (MarkError).
        """
        if self.review is None:
            raise ValueError("no folder or slide is open")
        change = self.review.set_mark(key, label, reviewer)
        self._after_change(change is not None)
        return None if change is None else MarkChange(change.key, change.before, change.after)

    def undo(self, redo: bool = False) -> MarkChange | None:
        """Take the last change back (or, ``redo``, make the last undone one again); None: nothing to do.

        Raises:
            OSError: it cannot be written.
        """
        if self.review is None:
            return None
        change = self.review.redo() if redo else self.review.undo()
        self._after_change(change is not None)
        return None if change is None else MarkChange(change.key, change.before, change.after)

    def history(self) -> tuple[str, str]:
        """The image names the next undo and the next redo act on (empty: nothing to do)."""
        if self.review is None:
            return "", ""
        review = self.review

        def name(key: str) -> str:
            return shown(review.rows[review.index[key]].name) if key else ""

        undo, redo = review.history()
        return name(undo), name(redo)

    def has(self, key: str) -> bool:
        return self.review is not None and key in self.review.index

    def index_of(self, key: str) -> int:
        assert self.review is not None
        return self.review.index[key]

    def _after_change(self, changed: bool) -> None:
        if not changed or self.review is None:
            return
        self._decisions = None
        if self.review.ladder.active is not None or self.review.comparisons():
            self.review.next_item()  # the marks continue the comparison; a decided one starts the next
        self._note_decided()

    # -- the queue -----------------------------------------------------------------------------
    def start(self) -> QueueState:
        """The queue, starting a comparison on the images processed so far when none is open."""
        if self.review is not None and self.review.rows:
            self.review.next_item()
            self._decisions = None
            self._note_decided()
        return self.queue_state()

    def queue_state(self) -> QueueState:
        if self.review is None:
            return QueueState({})
        review = self.review
        # Images marked already are used when the random order reaches them: nothing to do there.
        return queue_state([i for i in review.queue() if review.rows[i].key not in review.marks])

    def why_empty(self) -> str:
        """Why the queue is empty (the status bar's sentence; it reads every row, so it is asked
        for only when the reviewer opens an empty queue)."""
        if self.review is None:
            return "nothing to review: no folder or slide is open"
        return self.review.why_empty()

    # -- decisions and certificates ------------------------------------------------------------
    @property
    def rule(self) -> Rule:
        """The ladder's rule in use (of the part the queue serves next, in a folder the method
        split): :data:`Rule.LABEL_FREE` until a review moves it (:meth:`in_use` says it for people)."""
        return self.review.ladder.current if self.review is not None else Rule.LABEL_FREE

    def in_use(self) -> tuple[PartRule, ...]:
        """The rule that decides each part of the site now (one entry for a folder of one part)."""
        if self.review is None:
            return ()
        return self.review.in_use()

    @property
    def rules_key(self) -> tuple[tuple[Rule, float, int, int, int], ...]:
        """Every part's rule in use, threshold and the images its rules certify and show: changes
        exactly when some part's rule moves or its coverage grows (a folder split in parts moves
        one part's rule while the queue serves another)."""
        return self.review.rules_key() if self.review is not None else ()

    @property
    def moved_rules(self) -> tuple[tuple[int, Rule, float], ...]:
        """The parts whose reviews moved their rule, with the rule and its threshold: a part still
        at the label-free rule shows its rows as they were decided, whether or not it exists yet."""
        return tuple(
            (k, rule, t) for k, (rule, t, *_) in enumerate(self.rules_key) if rule != Rule.LABEL_FREE
        )

    def rule_of(self, index: int) -> tuple[Rule, float, str]:
        """``(rule, threshold, part)`` whose call the row at ``index`` is shown with (its part's: a
        folder the method split has one rule per part; part empty when the folder is one part);
        a promoted rule's call where no certificate covers the row yet is provisional
        (:meth:`provisional`)."""
        if self.review is None:
            return Rule.LABEL_FREE, math.nan, ""
        return self.review.rule_of(index, shown=True)

    @property
    def untested(self) -> bool:
        """No comparison was started at this site: every row is decided by the label-free rule.
        The engine's :meth:`~engine.run.review.SiteReview.rule_of` says so too, but it reads the
        part's images again after every batch of rows (its cache follows the rows), so rows shown
        before a review starts are not asked for it."""
        return self.review is None or not any(p.ladder.comparisons for p in self.review.parts)

    def named_rule(self, index: int) -> Rule:
        """The rule that decides the row at ``index`` in reports, as people are told it (the
        label-free rule is the original model where the method reported nothing with it)."""
        self.decisions()
        return self._named[index] if 0 <= index < len(self._named) else Rule.SOURCE

    def certified_rule_of(self, index: int) -> tuple[Rule, float, str]:
        """``(rule, threshold, part)`` that decides the row at ``index`` in reports (certified)."""
        if self.review is None:
            return Rule.LABEL_FREE, math.nan, ""
        return self.review.rule_of(index)

    def provisional_rows(self) -> np.ndarray:
        """Every row: whether it is shown with a promoted rule's call no certificate covers yet."""
        shown = self.decisions()
        differs: np.ndarray = shown != self._certified
        return differs

    def decisions(self) -> np.ndarray:
        """Every row's decision as the window shows it: the rules the reviews put in use, a
        promoted rule's call provisional where no certificate covers the row yet (the label-free
        rule: each image by the site's latest operating point)."""
        if self.review is None:
            return np.zeros(0, dtype=np.int64)
        if self._decisions is None or len(self._decisions) != len(self.review.rows):
            self._decisions = self.review.shown()
            self._certified = self.review.decisions()
            self._named = self.review.row_rules()
        return self._decisions

    def certified(self) -> np.ndarray:
        """Every row's decision as reports give it: by the rules whose certificates cover it."""
        self.decisions()
        return self._certified

    def provisional(self, index: int) -> bool:
        """Whether the row at ``index`` is shown with a promoted rule's call no certificate covers yet."""
        shown = self.decisions()
        return 0 <= index < len(shown) and bool(shown[index] != self._certified[index])

    # -- rows as the reviews decide them -------------------------------------------------------
    def row_shown(self, row: PredictionRow, classes: Sequence[str], positive: int) -> PredictionRow:
        """``row`` as shown: decided by the rules the site's reviews put in use where they moved it
        (a :class:`~app.core.certificates.ReviewedRow` naming its rule; a promoted rule's call
        marked provisional where no certificate covers the row yet); the dataset's label as ground
        truth, the review mark only where the dataset labels nothing (a mark that disagrees with
        the label is kept beside it, never in its place). ``positive``: the slide map's class."""
        if self.has(row.key) and not self.untested:
            index = self.index_of(row.key)
            self.rule_asks += 1
            rule, threshold, part = self.rule_of(index)
            if rule != Rule.LABEL_FREE:  # the reviews moved this part's rule
                row = self._reviewed(row, index, (rule, threshold, part), classes, positive)
        return self._with_truth(row, classes)

    def _reviewed(
        self,
        row: PredictionRow,
        index: int,
        in_use: tuple[Rule, float, str],
        classes: Sequence[str],
        positive: int,
    ) -> PredictionRow:
        """``row`` once its part's reviews moved the rule (``in_use``: rule, threshold, part): the
        promoted rule's call, provisional where no certificate covers it yet; where the rule in use
        calls it as the rule below it does and no certificate covers it, the rule below it decides
        it (as reports say), and the row says both (it no longer says it awaits review)."""
        rule, threshold, part = in_use
        decision = int(self.decisions()[index])
        if self.provisional(index):
            below, reported = self.named_rule(index), int(self.certified()[index])
            words = provisional_words(row, decision, reported, rule, below, classes, False)
            return reviewed_row(row, decision, rule, positive, classes, threshold, part, words)
        certified, threshold, part = self.certified_rule_of(index)
        if certified != Rule.LABEL_FREE:
            return reviewed_row(row, decision, certified, positive, classes, threshold, part)
        return reviewed_row(row, decision, self.named_rule(index), positive, classes, part=part, in_use=rule)

    def row_reported(
        self, shown: PredictionRow, raw: PredictionRow, classes: Sequence[str], positive: int
    ) -> PredictionRow:
        """The row shown as ``shown`` (the engine made it ``raw``) as reports give it: what the
        certificates cover. A provisional row gets the decision of the rule under the promoted one
        (the source model, by default), its provisional call named in the reason; every other row
        is as shown."""
        if shown.decision_path != DecisionPath.PROVISIONAL:
            return shown
        at = self.index_of(raw.key)
        rule, threshold, part = self.certified_rule_of(at)
        decision = int(self.certified()[at])
        row = (
            raw
            if rule == Rule.LABEL_FREE
            else reviewed_row(raw, decision, rule, positive, classes, threshold, part)
        )
        words = provisional_words(
            raw, shown.prediction, decision, self.rule_of(at)[0], self.named_rule(at), classes, True
        )
        return self._with_truth(
            dataclasses.replace(row, decision_path=DecisionPath.PROVISIONAL, decision_reason=words), classes
        )

    def _with_truth(self, row: PredictionRow, classes: Sequence[str]) -> PredictionRow:
        mark = self.marks.get(row.key)
        if mark is None or row.ground_truth is not None or not 0 <= mark.label < len(classes):
            return row
        return dataclasses.replace(row, ground_truth=mark.label, truth_label=classes[mark.label])

    def document(self) -> SiteCertificates | None:
        """The certificates as ``f2tta run`` writes them (``OUT.certificates.json``); None: no folder is open."""
        return site_certificates(self.review) if self.review is not None else None

    def sentence(self, classes: Sequence[str], where: str = IN_THE_APP) -> str:
        """What decides this folder now and what reviewing could change, in one plain sentence
        (the engine's :func:`~engine.run.review_outlook.outlook`; empty: no folder is open);
        ``where`` says where the reviewer answers (the window names its key Q, a report does not:
        ``IN_A_REPORT``)."""
        return outlook(self.review).sentence(classes, where=where) if self.review is not None else ""

    def lines(self) -> list[Certificate]:
        """The certificates table's lines: one a comparison that had something to test (none
        before a review: the document, read for nothing, costs a pass over every row)."""
        if self.review is None or not self.review.comparisons():
            return []
        document = self.document()
        return list(document.certificates) if document is not None else []

    def _note_decided(self) -> None:
        lines = self.lines()
        now = {line.number for line in lines if line.verdict.decided}
        gone = self._decided - now  # an undo took a decision back: it is announced again when made
        self._undone.extend(sorted(gone))
        self._decided -= gone
        for line in lines:
            if line.number in now and line.number not in self._decided:
                self._decided.add(line.number)
                self._fresh.append(line)

    def take_decided(self) -> list[Certificate]:
        """The comparisons decided since the last call (for the banner and the log)."""
        fresh, self._fresh = self._fresh, []
        return fresh

    def undecided_since(self) -> list[int]:
        """The comparisons (numbers) an undo took back since the last call."""
        undone, self._undone = self._undone, []
        return undone

    def take_notes(self) -> list[tuple[str, str]]:
        """(level, message) lines for the log: marks dropped on reading, starts that could not be kept."""
        if self.review is None:
            return []
        return [("warning", note[:1].upper() + note[1:] + ".") for note in self.review.take_notes()]
