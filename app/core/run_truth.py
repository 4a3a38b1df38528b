"""What the run model measures its rows against (Qt-free, part of :class:`~app.core.run_model.RunModel`).

The dataset's label (class sub-folders or a labels file) and the reviewer's mark are two truths
kept side by side: a mark never replaces the label (:mod:`app.core.figures`). The plots measure
against the dataset's labels where the source labels any image, else against the marks; a mark
that disagrees with the label is asked about before it is kept (:meth:`Truths.disagreement`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from app._engine import DecisionPath, ReviewMark, Rule
from app.core.applicability import Collapse, CollapseWatch
from app.core.certificates import provisional_words, reviewed_row
from app.core.figure_tally import FigureTally
from app.core.figures import Figures
from app.core.filters import PredictionRow
from app.core.review_desk import ReviewDesk
from app.core.review_record import review_tally
from app.core.run_items import Notifier, ReviewNote, review_note
from app.core.stats import PlotData, RunStatistics


class Truths:
    """The truths of the run model's rows (the attributes are the run model's)."""

    rows: list[PredictionRow]
    raw_rows: list[PredictionRow]
    classes: tuple[str, ...]
    desk: ReviewDesk
    gate: list[str]
    collapse: Collapse | None
    dataset_labelled: bool
    stats: RunStatistics
    tally: FigureTally
    watch: CollapseWatch
    metrics_changed: Notifier[Figures]
    plots_changed: Notifier[PlotData]
    _row_of_position: dict[int, int]

    @property
    def marks(self) -> dict[str, ReviewMark]:
        return self.desk.marks  # review marks by item key, in the order they were made

    def _plot_truth(self, raw: PredictionRow) -> int | None:
        """The truth the plots measure ``raw`` against: the dataset's where it labels any image, else the mark."""
        if self.dataset_labelled:
            return raw.ground_truth
        mark = self.marks.get(raw.key)
        return None if mark is None else mark.label

    def set_gate(self, warnings: Sequence[tuple[str, str]]) -> None:
        """The engine's applicability gate fired with ``warnings`` (``(check, message)`` pairs) for
        this source (none: it did not); the figures shown so far are shown again, marked."""
        self.gate = [message for _, message in warnings]
        self.gate_checks = [check for check, _ in warnings]
        if self.rows:
            self.metrics_changed.emit(self.figures())
            self.plots_changed.emit(self.plot_data())  # the plots carry the mark too

    def _measure_against_dataset(self) -> None:
        """The rows carry dataset labels after all: the plots measure against them from now on."""
        self.dataset_labelled, self.stats.truth = True, "dataset labels"
        self.stats.clear()
        self.stats.extend(self.rows, [self._plot_truth(r) for r in self.raw_rows])

    def plot_data(self) -> PlotData:
        """What the plots draw, with the caption every figure carries when the gate fired."""
        return dataclasses.replace(self.stats.plot_data(), caption=self.figures().caption)

    def figures(self) -> Figures:
        """The figures against the dataset's labels and against the reviewers' marks, kept apart,
        with the applicability warnings that fired (the gate's and a one-class collapse)."""
        collapsed = self.collapse is not None
        gate = [*self.gate, *([self.collapse.text()] if self.collapse is not None else [])]
        checks = [*self.gate_checks, *(["collapse"] if collapsed else [])]
        return self.tally.figures(gate, checks, review_tally(self.marks.values(), self._decision_now))

    def _decision_now(self, key: str) -> int | None:
        """The decision the row of ``key`` shows now (None: no such row)."""
        return self.rows[self.desk.index_of(key)].prediction if self.desk.has(key) else None

    def _tally(self, index: int) -> None:
        """The figures count the row at ``index`` as it is shown now (its decision, its dataset
        label and its mark): what it counted before is taken away (O(1), see :mod:`app.core.figure_tally`)."""
        raw = self.raw_rows[index]
        mark = self.marks.get(raw.key)
        self.tally.set_row(index, self.rows[index], raw.ground_truth, None if mark is None else mark.label)
        self.watch.set_row(index, self.rows[index])

    def disagreement(self, position: int, label: int) -> tuple[str, str] | None:
        """``(dataset's class, marked class)`` when marking the image at ``position`` as ``label``
        would disagree with its dataset label; None when it agrees, the image has no label, or the
        image already carries that mark."""
        index = self._row_of_position.get(position)
        if index is None or not 0 <= label < len(self.classes):
            return None
        raw = self.raw_rows[index]
        mark = self.marks.get(raw.key)
        if (
            raw.ground_truth is None
            or raw.ground_truth == label
            or (mark is not None and mark.label == label)
        ):
            return None
        return raw.truth_label or str(raw.ground_truth), self.classes[label]

    def effective(self, row: PredictionRow) -> PredictionRow:
        """``row`` as shown: decided by the rules the site's reviews put in use where they moved it
        (a :class:`~app.core.certificates.ReviewedRow` naming its rule; a promoted rule's call
        marked provisional where no certificate covers the row yet); the dataset's label as ground
        truth, the review mark only where the dataset labels nothing (a mark that disagrees with
        the label is kept beside it, never in its place)."""
        if self.desk.has(row.key):
            index = self.desk.index_of(row.key)
            rule, threshold, part = self.desk.rule_of(index)
            if rule != Rule.LABEL_FREE:  # the reviews moved this part's rule
                row = self._reviewed(row, index, rule, threshold, part)
        return self._with_truth(row)

    def _reviewed(
        self, row: PredictionRow, index: int, rule: Rule, threshold: float, part: str
    ) -> PredictionRow:
        """``row`` once its part's reviews moved the rule: the promoted rule's call, provisional
        where no certificate covers it yet; where the rule in use calls it as the rule below it
        does and no certificate covers it, the rule below it decides it (as reports say), and the
        row says both (it no longer says it awaits review)."""
        decision = int(self.desk.decisions()[index])
        positive = self.stats.positive_class
        if self.desk.provisional(index):
            below, reported = self.desk.named_rule(index), int(self.desk.certified()[index])
            words = provisional_words(row, decision, reported, rule, below, self.classes, False)
            return reviewed_row(row, decision, rule, positive, self.classes, threshold, part, words)
        certified, threshold, part = self.desk.certified_rule_of(index)
        if certified != Rule.LABEL_FREE:
            return reviewed_row(row, decision, certified, positive, self.classes, threshold, part)
        return reviewed_row(
            row, decision, self.desk.named_rule(index), positive, self.classes, part=part, in_use=rule
        )

    def reported(self, index: int) -> PredictionRow:
        """The row at ``index`` as reports give it: what the certificates cover. A provisional row
        gets the decision of the rule under the promoted one (the source model, by default), its
        provisional call named in the reason; every other row is as shown."""
        shown = self.rows[index]
        if shown.decision_path != DecisionPath.PROVISIONAL:
            return shown
        raw = self.raw_rows[index]
        at = self.desk.index_of(raw.key)
        rule, threshold, part = self.desk.certified_rule_of(at)
        decision = int(self.desk.certified()[at])
        row = (
            raw
            if rule == Rule.LABEL_FREE
            else reviewed_row(raw, decision, rule, self.stats.positive_class, self.classes, threshold, part)
        )
        words = provisional_words(
            raw,
            shown.prediction,
            decision,
            self.desk.rule_of(at)[0],
            self.desk.named_rule(at),
            self.classes,
            True,
        )
        return self._with_truth(
            dataclasses.replace(row, decision_path=DecisionPath.PROVISIONAL, decision_reason=words)
        )

    def _with_truth(self, row: PredictionRow) -> PredictionRow:
        mark = self.marks.get(row.key)
        if mark is None or row.ground_truth is not None or not 0 <= mark.label < len(self.classes):
            return row
        return dataclasses.replace(row, ground_truth=mark.label, truth_label=self.classes[mark.label])

    def review_of(self, position: int) -> ReviewNote:
        """The review column's text and tooltip for the row at ``position``."""
        index = self._row_of_position.get(position)
        if index is None:
            return ReviewNote()
        raw = self.raw_rows[index]
        return review_note(
            self.marks.get(raw.key), self.classes, self.rows[index].prediction, raw.truth_label
        )
