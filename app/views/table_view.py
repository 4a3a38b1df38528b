"""The prediction table with its filter bar; selecting a row asks for that image to be shown."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from PySide6.QtCore import (
    QEvent,
    QItemSelection,
    QModelIndex,
    QObject,
    QPersistentModelIndex,
    QPoint,
    QRect,
    QSize,
    Qt,
    QTimer,
    Signal,
    SignalInstance,
    Slot,
)
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QMenu,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from app.core.certificates import QueueState
from app.core.filters import EMPTY_WHY, FILTER_MODES, PredictionRow, RowFilter
from app.views.table_cells import TableCells
from app.views.table_model import REVIEW_COLUMN, PredictionFilterProxy, PredictionTableModel
from app.views.table_paint import CellTable

#: Characters of the item's name the table keeps room for before it scrolls sideways.
ITEM_MIN_CHARS = 12
#: The longest count the count label keeps room for without laying the window out again.
COUNT_ROOM = "00000 of 00000 rows"
QWIDGETSIZE_MAX = (1 << 24) - 1  # Qt's largest widget size (not exported by PySide6)
UPDATES_DISABLED = Qt.WidgetAttribute.WA_UpdatesDisabled


class _TailInserts:
    """What the shown rows did while rows were appended to the model: :attr:`first` is the first
    row added when they only grew at their end (-1: none was shown), None when anything else
    changed (rows placed among the others, a sort, a filter, a reset, a column's width, the
    viewport's size or scroll)."""

    def __init__(self, proxy: PredictionFilterProxy, view: QTableView) -> None:
        self._proxy, self._view = proxy, view
        self._end = proxy.rowCount()
        self._seen = self._geometry()
        self.first: int | None = -1
        self._links = [
            (proxy.rowsInserted, self._inserted),
            *((signal, self._other) for signal in self._others()),
        ]
        for signal, slot in self._links:
            signal.connect(slot)

    def _others(self) -> tuple[SignalInstance, ...]:
        p, header = self._proxy, self._view.horizontalHeader()
        return (
            p.rowsRemoved,
            p.rowsMoved,
            p.layoutChanged,
            p.modelReset,
            p.dataChanged,
            header.sectionResized,
        )

    def _geometry(self) -> tuple[QSize, int, int]:
        view = self._view
        return view.viewport().size(), view.horizontalScrollBar().value(), view.verticalScrollBar().value()

    def _inserted(self, _parent: QModelIndex, first: int, last: int) -> None:
        if self.first is not None and first == self._end:
            self.first = first if self.first < 0 else self.first
            self._end = last + 1
        else:
            self.first = None

    def _other(self) -> None:
        self.first = None

    def stop(self) -> None:
        for signal, slot in self._links:
            signal.disconnect(slot)
        if self._geometry() != self._seen:
            self.first = None


class PredictionTable(QWidget):
    """Table + filters, and the review keys that act on the selected row.

    Signals:
        rowSelected(int): the source-model row the user selected.
        filterChanged(object): the new :class:`RowFilter`.
        reviewRequested(int, int): stream position and the class the reviewer says is right
            (-1 clears the mark); marking moves on to the next row.
    """

    rowSelected = Signal(int)
    filterChanged = Signal(object)
    reviewRequested = Signal(int, int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._classes: tuple[str, ...] = ()
        self._quiet = 0  # selection changes under way that are not the user's (_quietly)
        self.model = PredictionTableModel(self)
        self.proxy = PredictionFilterProxy(self)
        self.proxy.setSourceModel(self.model)

        self.mode_combo = QComboBox()
        for key, text in FILTER_MODES.items():
            self.mode_combo.addItem(text, key)
        self.threshold_spin = QDoubleSpinBox()
        self.threshold_spin.setRange(0.0, 1.0)
        self.threshold_spin.setSingleStep(0.05)
        self.threshold_spin.setDecimals(2)
        self.threshold_spin.setValue(0.6)
        self.threshold_spin.setPrefix("conf < ")
        self.threshold_spin.setToolTip("Confidence below which a prediction counts as low-confidence")
        self.search = QLineEdit()
        self.search.setPlaceholderText("Filter by name or label…")
        self.search.setClearButtonEnabled(True)
        self.follow_box = QCheckBox("Follow newest")
        self.follow_box.setChecked(True)
        self.follow_box.setToolTip("Show each new image as it is processed")
        self.count_label = QLabel("0 rows")
        # Room for five-digit counts from the start: a label as wide as its text widened the
        # table, and with it a window at its least width, at every new digit (a resize and a
        # repaint of the whole window during a run, issue 30). Its size is fixed while its text
        # fits: a label whose size may change asks its window to lay out again at every new text
        # (6 ms of the GUI thread's time a batch of rows, issue 41); a text that does not fit
        # (the reason an empty view gives) lets it grow.
        self._count_room = self.count_label.fontMetrics().horizontalAdvance(COUNT_ROOM) + 4
        self._count_fixed = False
        self._fit_count("0 rows")

        self.table = CellTable()  # paints its cells in one loop (app/views/table_paint.py)
        # Painted from the model's cells (one call a cell); tooltips hold file and class names.
        self.table.setItemDelegate(TableCells(self.model, self.proxy, self.table))
        self.table.setModel(self.proxy)
        self.table.setSortingEnabled(True)
        self.table.sortByColumn(0, Qt.SortOrder.AscendingOrder)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setAlternatingRowColors(False)
        self.table.setTextElideMode(Qt.TextElideMode.ElideMiddle)  # file names differ at their ends
        self.table.setWordWrap(False)  # wrapped at "/" or " ", names lost their ends (`glaucoma/…`)
        self.table.verticalHeader().setVisible(False)
        self.table.verticalHeader().setDefaultSectionSize(22)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        # The item's name fills what the other columns leave, but never less than ITEM_MIN_CHARS
        # (a stretched section shrank to "…" in a narrow table); then the table scrolls sideways.
        self.table.viewport().installEventFilter(self)
        header.sectionResized.connect(self._on_section_resized)
        header.setMinimumSectionSize(30)
        # Widths from the font, not pixels: the columns fit the table's 790 px of a 1280-px screen.
        em = self.table.fontMetrics().horizontalAdvance("0")
        widths = (4, 0, 8, 5, 8, 17, 6, 7, 12, 18)  # Decided by: "best-fit threshold" whole
        for col, chars in enumerate(widths):
            if chars:
                self.table.setColumnWidth(col, em * chars + 10)
        # The Review column is as wide as its heading until a mark is made: blank, it took the room
        # that tells the file names apart ("histo_…08.jpg" beside an empty column).
        self._review_widths = (
            header.fontMetrics().horizontalAdvance("Review") + 24,
            em * widths[REVIEW_COLUMN] + 10,
        )
        self._review_wide = True
        self._fit_review_column()
        self.search.setMinimumWidth(80)
        # The review mark right after the decision: at the window's least width it scrolled off
        # the right edge (the model's column order, as the CSV's, stays).
        header.moveSection(REVIEW_COLUMN, 4)

        bar = QHBoxLayout()
        bar.addWidget(QLabel("Show"))
        bar.addWidget(self.mode_combo)
        bar.addWidget(self.threshold_spin)
        bar.addWidget(self.search, 1)
        bar.addWidget(self.follow_box)
        bar.addWidget(self.count_label)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.addLayout(bar)
        layout.addWidget(self.table, 1)

        self.mode_combo.currentIndexChanged.connect(self._on_filter_edited)
        self.threshold_spin.valueChanged.connect(self._on_filter_edited)
        self.search.textChanged.connect(self._on_filter_edited)
        self.table.selectionModel().selectionChanged.connect(self._on_table_selection_changed)
        self.table.clicked.connect(self._on_table_clicked)
        # The count follows the rows shown: a filter drops a row when it changes (a mark in "Not
        # reviewed yet"), which the source model's signals do not tell ("1 rows" over an empty table).
        for signal in (
            self.model.rowsInserted,
            self.model.modelReset,
            self.proxy.layoutChanged,
            self.proxy.rowsInserted,
            self.proxy.rowsRemoved,
            self.proxy.modelReset,
        ):
            signal.connect(self._update_count)
        self.model.rowsInserted.connect(self.proxy.keep_order)
        self.model.modelReset.connect(self.proxy.marked_in_queue.clear)  # another folder or slide
        self.model.dataChanged.connect(self._fit_review_column)
        self.model.modelReset.connect(self._fit_review_column)

    # -- public API ---------------------------------------------------------------------------
    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self.table.viewport() and event.type() == QEvent.Type.Resize:
            self.fit_item_column()
        return super().eventFilter(watched, event)

    def _on_section_resized(self, column: int, _old: int, _new: int) -> None:
        if column != 1:  # another column was resized by hand: the name takes what is left
            self.fit_item_column()

    @Slot()
    def _fit_review_column(self) -> None:
        """The Review column narrow while no row has a mark, wide once one has (its width changes
        only then: a width the user chose stays)."""
        wide = self.model.has_reviews
        if wide != self._review_wide:
            self._review_wide = wide
            self.table.setColumnWidth(REVIEW_COLUMN, self._review_widths[wide])

    def fit_item_column(self) -> None:
        """The item's name takes the width the other columns leave, at least ITEM_MIN_CHARS."""
        header = self.table.horizontalHeader()
        others = sum(header.sectionSize(c) for c in range(header.count()) if c != 1)
        em = self.table.fontMetrics().horizontalAdvance("0")
        self.table.setColumnWidth(1, max(em * ITEM_MIN_CHARS, self.table.viewport().width() - others))

    def set_filter(self, row_filter: RowFilter) -> None:
        """Apply a filter (also used by the controller to set the uncertainty threshold)."""
        # Keep the shown row selected if it stays visible; selection moves made by the filter
        # itself are not a user choice and are not announced.
        selection = self.table.selectionModel()
        rows = selection.selectedRows()
        shown = self.proxy.mapToSource(rows[0]).row() if rows else -1
        with self._quietly():
            self.proxy.set_row_filter(row_filter)
            self.table.clearSelection()
        if shown >= 0:
            self.select_source_row(shown)
        self._update_count()

    def select_source_row(self, source_row: int) -> None:
        """Select and scroll to a row without emitting :attr:`rowSelected`."""
        index = self.proxy.mapFromSource(self.model.index(source_row, 0))
        if not index.isValid():
            return
        with self._quietly():
            self.table.selectRow(index.row())
        self.table.scrollTo(index)
        # Rows just appended are laid out later (Qt defers it), so this scroll can stop short of
        # them; scroll again once the layout is done (a screenshot showed the newest rows hidden).
        target = QPersistentModelIndex(index)
        QTimer.singleShot(0, self, lambda: self._scroll_to(target))

    @contextlib.contextmanager
    def _quietly(self) -> Iterator[None]:
        """Selection changes made here are not the user's: they are not announced. The selection
        model's signals are not blocked for that: the view repaints from them, and blocked, the
        rows selected before stayed painted as selected (three rows highlighted at once)."""
        self._quiet += 1
        try:
            yield
        finally:
            self._quiet -= 1

    def _scroll_to(self, target: QPersistentModelIndex) -> None:
        if target.isValid():
            self.table.scrollTo(self.proxy.index(target.row(), target.column()))

    def set_mode(self, mode: str) -> None:
        """Choose a filter mode as the user would (the filter is announced)."""
        index = self.mode_combo.findData(mode)
        if index >= 0:
            self.mode_combo.setCurrentIndex(index)

    def selected_source_row(self) -> int | None:
        rows = self.table.selectionModel().selectedRows()
        return self.proxy.mapToSource(rows[0]).row() if rows else None

    def step(self, offset: int) -> int | None:
        """Select the row ``offset`` rows below (negative: above) the selected one in the shown order.

        Returns the source row now selected (announced through :attr:`rowSelected`), or None at the end.
        """
        rows = self.table.selectionModel().selectedRows()
        current = rows[0].row() if rows else -1
        target = current + offset if current >= 0 else (0 if offset > 0 else self.proxy.rowCount() - 1)
        return self._select_at(target)

    def _select_at(self, target: int) -> int | None:
        """Select the shown row ``target`` (announced); the source row, or None when there is none."""
        if not 0 <= target < self.proxy.rowCount():
            return None
        index = self.proxy.index(target, 0)
        self.table.selectRow(target)  # announced: selecting shows the image
        self.table.scrollTo(index)
        # After a filter change the rows are laid out later: scroll again then (a screenshot of the
        # review queue showed its first image selected but scrolled out of sight).
        kept = QPersistentModelIndex(index)
        QTimer.singleShot(0, self, lambda: self._scroll_to(kept))
        return self.proxy.mapToSource(index).row()

    # -- review keys ----------------------------------------------------------------------------
    def set_classes(self, classes: tuple[str, ...]) -> None:
        self._classes = classes

    def selected_row(self) -> PredictionRow | None:
        source_row = self.selected_source_row()
        return None if source_row is None else self.model.row_at(source_row)

    def mark_selected(self, label: int) -> None:
        """The selected image is of class ``label``; then the next row (in the review queue, the
        reviewed image stays in view with its mark, above the images still to review, and the
        first of those is next). A mark that was not recorded (the reviewer said No to marking
        against the dataset's label) keeps the image selected."""
        source_row = self.selected_source_row()
        if source_row is None or not 0 <= label < len(self._classes):
            return
        row = self.model.row_at(source_row)
        queue = self.in_queue
        if queue:
            self.proxy.keep_in_queue(source_row)
        before = self.model.review_updates
        self.reviewRequested.emit(row.position, label)
        if self.model.review_updates == before:
            return
        if queue:
            self.set_filter(self.proxy.row_filter)  # in the queue's order, the marked row among the done
            left = [
                r
                for r in range(self.proxy.rowCount())
                if not self.proxy.marked_here(
                    self.model, self.proxy.mapToSource(self.proxy.index(r, 0)).row()
                )
            ]
            if left:  # the first image still to review (none left: the marked one stays selected)
                self._select_at(left[0])
            return
        self.step(1)

    @property
    def in_queue(self) -> bool:
        return self.proxy.row_filter.mode == "queue"

    def set_queue(self, queue: QueueState) -> None:
        """The review queue changed (a review, an undo, new disagreements)."""
        self.model.set_queue(queue)
        if self.in_queue:
            self.set_filter(self.proxy.row_filter)  # refiltered and sorted in the queue's order

    def open_queue(self) -> None:
        """Show the review queue and select its first image."""
        self.set_mode("queue")
        self.table.clearSelection()
        self.step(1)

    @Slot()
    def confirm_selected(self) -> None:
        row = self.selected_row()
        if row is not None:
            self.mark_selected(row.prediction)

    @Slot()
    def correct_selected(self) -> None:
        """The other class (two classes), or the one chosen from a menu of the others."""
        row = self.selected_row()
        if row is None or len(self._classes) < 2:
            return
        others = [k for k in range(len(self._classes)) if k != row.prediction]
        if len(others) == 1:
            self.mark_selected(others[0])
            return
        menu = QMenu(self)
        for k in others:
            menu.addAction(f"{k + 1}  {self._classes[k]}").setData(k)
        rect = self.table.visualRect(self.table.selectionModel().selectedRows()[0])
        chosen = menu.exec(self.table.viewport().mapToGlobal(rect.bottomLeft() + QPoint(40, 0)))
        if chosen is not None:
            self.mark_selected(int(chosen.data()))

    @Slot()
    def clear_selected_mark(self) -> None:
        row = self.selected_row()
        if row is not None:
            self.reviewRequested.emit(row.position, -1)

    def scroll_to_newest(self) -> None:
        if self.model.rowCount():
            self.select_source_row(self.model.rowCount() - 1)

    def append_rows(self, rows: list[PredictionRow]) -> None:
        """Show ``rows``; while following the newest, the view scrolls to them at once, so the
        rows and the scroll are painted together (the scroll that came with the newest image
        repainted the table a second time).

        Only the rows appended are painted: Qt repaints every visible cell when the row count
        changes (the largest paint of the GUI thread during a run, issue 41), though rows added below
        the last change nothing above them. The viewport ignores the updates of the insertion
        (:class:`_TailInserts` tells whether the shown rows only grew at their end; anything else,
        a sort or a filter placing them among the others, repaints it all), following scrolls the
        pixels already drawn, and what the new rows cover is painted."""
        if not rows:
            return
        viewport = self.table.viewport()
        inserts = _TailInserts(self.proxy, self.table)
        was_blocked = viewport.testAttribute(UPDATES_DISABLED)
        # The attribute, not setUpdatesEnabled: enabling updates again repaints the whole widget.
        viewport.setAttribute(UPDATES_DISABLED, True)
        try:
            self.model.append_rows(rows)
            self.table.executeDelayedItemsLayout()  # Qt lays new rows out later (and repaints all): now
        finally:
            viewport.setAttribute(UPDATES_DISABLED, was_blocked)
            inserts.stop()
        if self.follow:
            index = self.proxy.mapFromSource(self.model.index(self.model.rowCount() - 1, 0))
            if index.isValid():
                self.table.scrollTo(index)
        if inserts.first is None:
            viewport.update()
        elif inserts.first >= 0:
            top = max(self.table.rowViewportPosition(inserts.first), 0)
            if top < viewport.height():
                viewport.update(QRect(0, top, viewport.width(), viewport.height() - top))

    @property
    def follow(self) -> bool:
        return self.follow_box.isChecked()

    def current_filter(self) -> RowFilter:
        return RowFilter(
            mode=str(self.mode_combo.currentData()),
            low_confidence=self.threshold_spin.value(),
            high_uncertainty=self.proxy.row_filter.high_uncertainty,
            text=self.search.text().strip(),
        )

    # -- slots --------------------------------------------------------------------------------
    @Slot()
    def _on_filter_edited(self) -> None:
        row_filter = self.current_filter()
        self.threshold_spin.setEnabled(row_filter.mode == "low_confidence")
        queue = row_filter.mode == "queue"
        self.table.horizontalHeader().setSortIndicatorShown(not queue)  # the queue has its own order
        if queue:
            self.table.sortByColumn(0, Qt.SortOrder.AscendingOrder)
        self.set_filter(row_filter)
        self.filterChanged.emit(row_filter)

    @Slot(QItemSelection, QItemSelection)
    def _on_table_selection_changed(self, selected: QItemSelection, _deselected: QItemSelection) -> None:
        indexes = selected.indexes()
        if indexes and not self._quiet:
            self._emit_row(indexes[0])

    @Slot(QModelIndex)
    def _on_table_clicked(self, index: QModelIndex) -> None:
        self._emit_row(index)

    def _emit_row(self, proxy_index: QModelIndex) -> None:
        source = self.proxy.mapToSource(proxy_index)
        if source.isValid():
            self.follow_box.setChecked(False)  # the user looks at something: stop jumping to the newest
            self.rowSelected.emit(source.row())

    @Slot()
    def _update_count(self) -> None:
        shown, total = self.proxy.rowCount(), self.model.rowCount()
        rows = "row" if total == 1 else "rows"
        text = f"{total} {rows}" if shown == total else f"{shown} of {total} {rows}"
        filtered = self.proxy.row_filter
        if not shown and total and not filtered.text and filtered.mode in EMPTY_WHY:
            text += f": {EMPTY_WHY[filtered.mode]}"  # an empty view says why
        if text != self.count_label.text():
            self._fit_count(text)
            self.count_label.setText(text)

    def _fit_count(self, text: str) -> None:
        """The count label's size fixed while ``text`` fits its room, free to grow otherwise."""
        fixed = self.count_label.fontMetrics().horizontalAdvance(text) <= self._count_room
        if fixed == self._count_fixed:
            return
        self._count_fixed = fixed
        if fixed:
            self.count_label.setFixedSize(self._count_room, self.count_label.sizeHint().height())
        else:
            self.count_label.setMinimumWidth(self._count_room)
            self.count_label.setMaximumWidth(QWIDGETSIZE_MAX)
