"""Clinical figures where ground truth exists: the confusion matrix and per-class sensitivity/specificity."""

from __future__ import annotations

import math

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QSizePolicy,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.core.clinical import CONFIDENT, ClinicalMetrics

NO_TRUTH = (
    "No ground truth yet. It comes from class sub-folders named after the model's classes, a labels.csv "
    "in the folder, or your review marks (C confirms, X corrects the selected image)."
)


EXPAND = QSizePolicy.Policy.Expanding  # the empty tab's message takes the room, centred


def _pct(value: float) -> str:
    return "–" if not math.isfinite(value) else f"{value:.1%}"


def _table(rows: int, cols: int) -> QTableWidget:
    table = QTableWidget(rows, cols)
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    table.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
    table.verticalHeader().setDefaultSectionSize(22)
    table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
    return table


class MetricsView(QWidget):
    """Confusion matrix (rows: truth, columns: prediction) and per-class figures.

    Signals:
        confidentErrorsRequested(): show the confident errors in the table.
    """

    confidentErrorsRequested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.summary = QLabel(NO_TRUTH)
        self.summary.setWordWrap(True)
        self.confusion = _table(0, 0)
        self.per_class = _table(0, 5)
        self.per_class.setHorizontalHeaderLabels(
            ["Class", "Images", "Sensitivity", "Specificity", "Precision"]
        )
        self.per_class.verticalHeader().setVisible(False)
        self.errors_button = QPushButton("Show confident errors")
        self.errors_button.setToolTip(f"Wrong predictions made with confidence ≥ {CONFIDENT:.1f}")
        self.errors_button.clicked.connect(self.confidentErrorsRequested)
        self.metrics: ClinicalMetrics | None = None
        # Shown only with figures: an empty tab says what to do, without headings over nothing.
        self.headings = (
            QLabel("Confusion matrix (rows: truth, columns: prediction)"),
            QLabel("Per class (this class against the others)"),
        )
        left = QVBoxLayout()
        left.addWidget(self.headings[0])
        left.addWidget(self.confusion, 1)
        right = QVBoxLayout()
        right.addWidget(self.headings[1])
        right.addWidget(self.per_class, 1)
        tables = QHBoxLayout()
        tables.addLayout(left, 1)
        tables.addLayout(right, 1)
        bar = QHBoxLayout()
        bar.addWidget(self.summary, 1)
        bar.addWidget(self.errors_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(bar)
        layout.addLayout(tables, 1)
        self.set_metrics(None)

    def set_metrics(self, metrics: ClinicalMetrics | None) -> None:
        self.metrics = metrics
        has = metrics is not None and metrics.labelled > 0
        for widget in (self.confusion, self.per_class, self.errors_button, *self.headings):
            widget.setVisible(has)
        self.summary.setAlignment(Qt.AlignmentFlag.AlignLeft if has else Qt.AlignmentFlag.AlignCenter)
        self.summary.setSizePolicy(
            QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Preferred if has else EXPAND
        )
        self.errors_button.setEnabled(has and metrics is not None and metrics.confident_errors > 0)
        if metrics is None or not has:
            self.summary.setText(NO_TRUTH)
            return
        n = len(metrics.classes)
        text = (
            f"{metrics.labelled} images with ground truth · accuracy {_pct(metrics.accuracy)} · "
            f"confident errors (≥ {CONFIDENT:.1f}): {metrics.confident_errors}"
        )
        if metrics.reviewed:
            text += (
                f" · reviewed: {metrics.reviewed}, agreement with the model: {_pct(metrics.review_agreement)}"
            )
        self.summary.setText(text)
        self.confusion.setRowCount(n)
        self.confusion.setColumnCount(n)
        self.confusion.setHorizontalHeaderLabels([f"→ {c}" for c in metrics.classes])
        self.confusion.setVerticalHeaderLabels(list(metrics.classes))
        for t in range(n):
            total = int(metrics.confusion[t].sum())
            for p in range(n):
                count = int(metrics.confusion[t, p])
                share = count / total if total else 0.0
                item = QTableWidgetItem(f"{count}  ({share:.0%})" if total else "0")
                item.setTextAlignment(Qt.AlignmentFlag.AlignCenter)
                base = (49, 104, 200) if t == p else (214, 39, 40)
                tint = [round(255 - share * (255 - v)) for v in base]
                item.setBackground(QBrush(QColor(*tint)))
                item.setForeground(QBrush(QColor(255, 255, 255) if share > 0.6 else QColor(0, 0, 0)))
                self.confusion.setItem(t, p, item)
        self.per_class.setRowCount(n)
        for k, m in enumerate(metrics.per_class):
            values = [m.name, str(m.support), _pct(m.sensitivity), _pct(m.specificity), _pct(m.precision)]
            for col, value in enumerate(values):
                item = QTableWidgetItem(value)
                if col:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                self.per_class.setItem(k, col, item)
