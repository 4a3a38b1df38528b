"""Clinical figures where ground truth exists, in two sets never mixed: against the dataset's
labels and against the reviewers' marks (:mod:`app.core.figures`), each with its confusion matrix
and per-class sensitivity/specificity; when the applicability gate fired, every set says at its
figures that the model may not apply."""

from __future__ import annotations

import math

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush, QColor, QResizeEvent, QShowEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFrame,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.core.clinical import CONFIDENT, MATRIX_UP_TO, ClinicalMetrics, top_confusions
from app.core.figures import DATASET, GATE_CAPTION, REVIEWED, Figures, dataset_title, reviewed_title
from app.views._plain import plain_label, plain_tooltip

NO_TRUTH = (
    "No ground truth yet. It comes from class sub-folders named after the model's classes, a labels.csv "
    "in the folder, or your review marks (C confirms, X corrects the selected image)."
)
GATE_STYLE = "color: #b3261e; background: #fdecea; border: 1px solid #b3261e; padding: 2px;"

PER_CLASS_ROWS = 40  # the per-class table shows the classes with the most images, at most this many
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


def _fit_rows(table: QTableWidget, rows: int) -> None:
    """Make ``table`` exactly as tall as its header and ``rows`` rows (at most 8 before it scrolls):
    stretched tables left the second figure set below the fold at 1920×1080."""
    shown = min(rows, 8)
    height = (
        table.horizontalHeader().sizeHint().height() + shown * table.verticalHeader().defaultSectionSize()
    )
    table.setFixedHeight(height + 2 * table.frameWidth() + 2)


class FigureSet(QFrame):
    """One set of figures under its title: the accuracy line, the confusion matrix and the per-class table."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.title = QLabel()
        self.title.setStyleSheet("font-weight: bold;")
        self.caption = QLabel(f"⚠ {GATE_CAPTION}")  # shown only when the gate fired
        self.caption.setStyleSheet(GATE_STYLE)
        self.line = QLabel()
        self.line.setWordWrap(True)
        self.confusion = _table(0, 0)
        self.per_class = _table(0, 5)
        self.per_class.setHorizontalHeaderLabels(
            ["Class", "Images", "Sensitivity", "Specificity", "Precision"]
        )
        self.per_class.verticalHeader().setVisible(False)
        self.headings = (
            QLabel("Confusion matrix (rows: truth, columns: prediction)"),
            QLabel("Per class (this class against the others)"),
        )
        left = QVBoxLayout()
        left.addWidget(self.headings[0])
        left.addWidget(self.confusion)
        right = QVBoxLayout()
        right.addWidget(self.headings[1])
        right.addWidget(self.per_class)
        tables = QHBoxLayout()
        tables.addLayout(left, 1)
        tables.addLayout(right, 1)
        self.head = QHBoxLayout()  # the title, the gate's caption; the view may add a button
        self.head.addWidget(self.title)
        self.head.addWidget(self.caption)
        self.head.addStretch(1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 2, 0, 6)
        layout.addLayout(self.head)
        layout.addWidget(self.line)
        layout.addLayout(tables)

    def show_metrics(self, title: str, metrics: ClinicalMetrics, caption: str, review: str = "") -> None:
        """``caption``: what the figures say under a fired applicability gate (empty: none fired);
        ``review``: the reviewer's work in a sentence (:meth:`ReviewTally.sentence`; empty: not shown)."""
        gate = bool(caption)
        self.title.setText(title)
        # Beside the title only the caption's first words (the box above the sets has the rest):
        # the whole caption pushed the set's button out of a 700-px tab.
        self.caption.setText(f"⚠ {caption.split(' — ')[0]}")
        self.caption.setToolTip(plain_tooltip(caption))
        self.caption.setVisible(gate)
        self.setStyleSheet("FigureSet { border-left: 4px solid #b3261e; }" if gate else "")
        text = (
            f"accuracy {_pct(metrics.accuracy)} (original model "
            f"{_pct(float(metrics.source_confusion.trace()) / metrics.labelled)}) · "
            f"confident errors (≥ {CONFIDENT:.1f}): {metrics.confident_errors}"
        )
        if review:
            text += f" · {review}"
        self.line.setText(text)
        n = len(metrics.classes)
        if n > MATRIX_UP_TO:
            self._show_confusions(metrics)
        else:
            self._show_matrix(metrics)
        # In the model's class order, as the matrix beside it and the other set (each set sorted by
        # its own counts put the classes in two orders); only a long list keeps its largest classes.
        shown = list(metrics.per_class)
        if n > PER_CLASS_ROWS:
            shown = sorted(shown, key=lambda m: -m.support)[:PER_CLASS_ROWS]
        self.headings[1].setText(
            "Per class (this class against the others)"
            if n <= PER_CLASS_ROWS
            else f"Per class: the {PER_CLASS_ROWS} with the most images of {n} (all in the reports)"
        )
        self.per_class.setRowCount(len(shown))
        for k, m in enumerate(shown):
            values = [m.name, str(m.support), _pct(m.sensitivity), _pct(m.specificity), _pct(m.precision)]
            for col, value in enumerate(values):
                item = QTableWidgetItem(value)
                if col:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                self.per_class.setItem(k, col, item)
        _fit_rows(self.per_class, len(shown))

    def _show_confusions(self, metrics: ClinicalMetrics) -> None:
        """More classes than a matrix can show: the most frequent confusions instead."""
        pairs = top_confusions(metrics.confusion, metrics.classes, PER_CLASS_ROWS)
        self.headings[0].setText(f"Most frequent confusions ({len(metrics.classes)} classes)")
        self.confusion.clear()
        self.confusion.setRowCount(len(pairs))
        self.confusion.setColumnCount(3)
        self.confusion.setHorizontalHeaderLabels(["Truth", "Predicted", "Images"])
        self.confusion.verticalHeader().setVisible(False)
        for row, (truth, predicted, count) in enumerate(pairs):
            for col, value in enumerate((truth, predicted, str(count))):
                self.confusion.setItem(row, col, QTableWidgetItem(value))
        _fit_rows(self.confusion, len(pairs))

    def _show_matrix(self, metrics: ClinicalMetrics) -> None:
        n = len(metrics.classes)
        self.headings[0].setText("Confusion matrix (rows: truth, columns: prediction)")
        self.confusion.clear()
        self.confusion.verticalHeader().setVisible(True)
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
        _fit_rows(self.confusion, n)  # as tall as its rows: both sets in view


class MetricsView(QWidget):
    """The figures against the dataset's labels and against the reviewers' marks, one set above
    the other, each titled with its truth and image count.

    Signals:
        confidentErrorsRequested(): show the confident errors in the table.
    """

    confidentErrorsRequested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.summary = QLabel(NO_TRUTH)
        self.summary.setWordWrap(True)
        self.outlook = plain_label("")  # what decides the folder now (the status area's sentence)
        self.outlook.setWordWrap(True)
        self.outlook.setStyleSheet("font-weight: bold;")
        self.outlook.setVisible(False)
        self.gate = plain_label("")  # the warnings name folders and classes
        self.gate.setWordWrap(True)
        self.gate.setStyleSheet(GATE_STYLE)
        self.errors_button = QPushButton("Show confident errors")
        self.errors_button.setToolTip(
            f"Wrong predictions (against the dataset's labels) made with confidence ≥ {CONFIDENT:.1f}"
        )
        self.errors_button.clicked.connect(self.confidentErrorsRequested)
        self.figures: Figures | None = None
        self._waiting = False  # figures set behind another tab, shown with it
        self.dataset, self.reviewed = FigureSet(), FigureSet()
        sets = QWidget()
        column = QVBoxLayout(sets)
        column.setContentsMargins(0, 0, 0, 0)
        column.addWidget(self.dataset)
        column.addWidget(self.reviewed)
        column.addStretch(1)  # the sets keep their height; the space left stays below them
        self.sets_area = QScrollArea()
        self.sets_area.setWidgetResizable(True)
        self.sets_area.setFrameShape(QFrame.Shape.NoFrame)
        self.sets_area.setWidget(sets)
        # The button belongs to the dataset's figures (its errors are against the dataset's labels);
        # the summary gets a row of its own: a wrapped label beside a button was cut at 1280x800.
        self.dataset.head.addWidget(self.errors_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.outlook)
        layout.addWidget(self.gate)
        layout.addWidget(self.summary)
        layout.addWidget(self.sets_area, 1)
        self.set_metrics(None)

    def set_metrics(self, figures: Figures | None) -> None:
        """Show ``figures`` (None: nothing open). Behind another tab the newest figures wait and
        are shown with the tab (:meth:`showEvent`): the sets' labels and tables were filled and
        laid out again at every batch of rows nobody saw (0.6 ms of the GUI thread's time in the
        plots' turn of the views' timer during a run, issue 41)."""
        self.figures = figures
        self._waiting = figures is not None and self._behind()
        if not self._waiting:
            self._show_figures(figures)

    def _behind(self) -> bool:
        """The window is on screen and this tab is not (another tab in front, its pane collapsed)."""
        return self.window().isVisible() and not self.isVisible()

    def showEvent(self, event: QShowEvent) -> None:
        if self._waiting:
            self._waiting = False
            self._show_figures(self.figures)
        super().showEvent(event)

    def _show_figures(self, figures: Figures | None) -> None:
        has = figures is not None and figures.any
        gate = figures.gate if figures is not None else ()
        self.gate.setVisible(has and bool(gate))
        caption = figures.caption if figures is not None else ""
        self.gate.setText(f"⚠ {caption}: " + " ".join(gate))
        self.sets_area.setVisible(has)
        self.errors_button.setVisible(has)
        top_left = Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop
        self.summary.setAlignment(top_left if has else Qt.AlignmentFlag.AlignCenter)
        # With figures the line takes the height of its text, no more (it kept ~80 px at 1920 px).
        self.summary.setSizePolicy(
            QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Maximum if has else EXPAND
        )
        if figures is None or not has:
            self.summary.setText(NO_TRUTH)
            self.errors_button.setEnabled(False)
            return
        dataset, reviewed = figures.dataset, figures.reviewed
        self.errors_button.setEnabled(dataset.confident_errors > 0)
        self.dataset.setVisible(dataset.labelled > 0)
        if dataset.labelled:
            self.dataset.show_metrics(dataset_title(dataset.labelled), dataset, caption if gate else "")
        self.reviewed.setVisible(reviewed.labelled > 0)
        if reviewed.labelled:
            self.reviewed.show_metrics(
                reviewed_title(reviewed.labelled),
                reviewed,
                caption if gate else "",
                figures.review.sentence(),
            )
        text = f"The reports lead with the figures against {figures.lead_truth}"
        if dataset.labelled and reviewed.labelled:
            text += f" and carry those against {REVIEWED} beside them"
        elif dataset.labelled:
            text += " (no image reviewed yet)"
        else:
            text += f" ({DATASET} label none of these images)"
        self.summary.setText(text + ". A review mark never changes the dataset's label.")
        self._fit_lines()

    def set_outlook(self, text: str) -> None:
        """What decides the folder now and what reviewing could change (empty: nothing is open)."""
        self.outlook.setText(text)
        self.outlook.setVisible(bool(text))
        self._fit_lines()

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._fit_lines()

    def _fit_lines(self) -> None:
        """The sentence, the gate's warning and the summary line take the height of their wrapped
        text at the tab's width: a wrapped label's own size hint assumes a narrow width, which left
        ~80 px of empty space above the figures at 1920×1080."""
        width = self.width() - 8  # the layout's margins
        if width > 0 and self.outlook.text():
            self.outlook.setFixedHeight(self.outlook.heightForWidth(width))
        if self.figures is None or not self.figures.any:
            self.summary.setMinimumHeight(0)
            self.summary.setMaximumHeight(16_777_215)  # the empty state fills the tab
            return
        for label in (self.gate, self.summary):
            if width > 0:
                label.setFixedHeight(label.heightForWidth(width))
