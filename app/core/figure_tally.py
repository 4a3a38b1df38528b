"""The two figure sets of :mod:`app.core.figures`, kept up to date one row at a time (Qt-free).

:func:`app.core.figures.figures` measures every row again; called at each refresh of the views
during a run, its cost grew with the rows already shown (issue 30). :class:`FigureTally` keeps the
counts the figures are made of -- confusion matrices, confident errors, reviews -- and changes
them by what one row adds or takes away, so a refresh costs the same at 100 rows as at 100 000.
``tests/test_figure_tally.py`` checks that it always agrees with :func:`~app.core.figures.figures`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from app.core.clinical import CONFIDENT, ClinicalMetrics, metrics_from_pairs
from app.core.figures import Figures, gate_caption
from app.core.filters import PredictionRow
from app.core.review_record import ReviewTally


@dataclass(frozen=True)
class _Entry:
    """What one row adds to a figure set: its truth there, the decisions and the confidence."""

    truth: int
    prediction: int
    source: int
    confident: bool  # the decision was at least CONFIDENT sure


class _Counts:
    """The counts behind one :class:`ClinicalMetrics` (see :func:`app.core.clinical.clinical_metrics`),
    kept as (truth, decision) pairs: no matrix as large as the model's classes squared."""

    def __init__(self, n_classes: int) -> None:
        self.n = n_classes
        self.adapted: Counter[tuple[int, int]] = Counter()
        self.source: Counter[tuple[int, int]] = Counter()
        self.confident_errors = 0

    def add(self, entry: _Entry, sign: int) -> None:
        t, p, s = entry.truth, entry.prediction, entry.source
        if 0 <= t < self.n and 0 <= p < self.n:
            self.adapted[(t, p)] += sign
        if 0 <= t < self.n and 0 <= s < self.n:
            self.source[(t, s)] += sign
        self.confident_errors += sign * (p != t and entry.confident)

    def metrics(self, classes: tuple[str, ...]) -> ClinicalMetrics:
        return metrics_from_pairs(classes, +self.adapted, +self.source, self.confident_errors)


class FigureTally:
    """The figures against the dataset's labels and against the reviewers' marks, by row index.

    Args:
        classes: the model's class names.
    """

    def __init__(self, classes: Sequence[str] = ()) -> None:
        self.classes = tuple(classes)
        self._dataset = _Counts(len(self.classes))
        self._reviewed = _Counts(len(self.classes))
        self._entries: dict[int, tuple[_Entry | None, _Entry | None]] = {}

    def set_row(self, index: int, row: PredictionRow, dataset: int | None, mark: int | None) -> None:
        """The row at ``index`` now shows ``row`` (its decision as shown), with the dataset's label
        ``dataset`` and the reviewer's class ``mark`` (None: none); what it counted before is
        taken away first."""
        old_dataset, old_mark = self._entries.pop(index, (None, None))
        if old_dataset is not None:
            self._dataset.add(old_dataset, -1)
        if old_mark is not None:
            self._reviewed.add(old_mark, -1)
        confident = row.confidence >= CONFIDENT
        decided = (row.prediction, row.source_prediction, confident)
        new_dataset = None if dataset is None else _Entry(dataset, *decided)
        new_mark = None
        if mark is not None and 0 <= mark < len(self.classes):
            new_mark = _Entry(mark, *decided)
        if new_dataset is not None:
            self._dataset.add(new_dataset, 1)
        if new_mark is not None:
            self._reviewed.add(new_mark, 1)
        if new_dataset is not None or new_mark is not None:
            self._entries[index] = (new_dataset, new_mark)

    def figures(
        self, gate: Sequence[str] = (), checks: Sequence[str] = (), review: ReviewTally | None = None
    ) -> Figures:
        """Both sets as :func:`app.core.figures.figures` makes them, with the checks that fired
        and the reviewer's work (``review``: :func:`app.core.review_record.review_tally`)."""
        return Figures(
            self._dataset.metrics(self.classes),
            self._reviewed.metrics(self.classes),
            tuple(gate),
            gate_caption(checks) if gate else "",
            review or ReviewTally(),
        )
