"""The review of the open source: its marks and their undo history, the review queue of
disagreements and the certificates per site group (Qt-free).

A mark is written to the profile before anything else changes (``review/<hash>.marks.jsonl``,
fsync'ed); undoing one writes its removal (or the mark it replaced) the same way. Every mark on
a *disagreement* (an image whose adapted decision differs from the source model's) is a review
for its site group's certificate (:class:`~engine.review.book.CertificateBook`): a new mark is
added to the book as it is made; changing or undoing one builds the book again from the rows and
the marks (``CertificateBook.from_marks``: a revert that rested on the undone mark goes with it).
The book is saved after each change (:class:`~app.core.certificates.CertificateFile`). The queue
(:class:`~engine.review.queue.ReviewQueue`) holds the disagreements not reviewed yet. Reviews
never reach the adaptation method: they only keep a group's decisions or turn them back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from app._engine import REVERTED, CertificateBook, CertificateError, PredictionRow, ReviewQueue, shown
from app.core.certificates import CertificateFile, Group, LineCache, QueueState, matches, outcomes_of
from app.core.reviews import ReviewMark, ReviewStore


@dataclass(frozen=True)
class MarkChange:
    """One change of an image's mark (None: no mark)."""

    key: str
    before: ReviewMark | None
    after: ReviewMark | None


class ReviewDesk:
    """Marks, undo and redo, the queue and the certificates of the open source (see the module notes)."""

    def __init__(self) -> None:
        self.marks: dict[str, ReviewMark] = {}  # by item key, in the order they were made
        self.book = CertificateBook()
        self.queue = ReviewQueue()  # items: row indices in arrival order
        self.lines = LineCache()
        self.notes: list[tuple[str, str]] = []  # (level, message) for the log, taken by the controller
        self._store: ReviewStore | None = None
        self._file: CertificateFile | None = None
        self._rows: list[PredictionRow] = []  # the engine's rows in arrival order
        self._index: dict[str, int] = {}
        self._undo: list[MarkChange] = []
        self._redo: list[MarkChange] = []
        self._skip = 0  # rows the saved book counted that the journal dropped (they come again)
        self._unsaved = False  # the book changed since it was saved

    # -- opening and rows ----------------------------------------------------------------------
    def open(self, rows: Sequence[PredictionRow], store: ReviewStore | None) -> None:
        """The marks and certificates of a source whose earlier rows are ``rows`` (arrival order).

        A saved book is used as it is when it holds exactly the marks' reviews; one that is
        missing, damaged, edited or out of step with the marks is built again from the rows and
        the marks, with a line in the log saying why.
        """
        self.close()
        self._store, self.marks = store, store.load() if store is not None else {}
        self._file = CertificateFile(store.folder, store.source_id) if store is not None else None
        self._rows, self._index, self._undo, self._redo, self._skip = [], {}, [], [], 0
        for row in rows:
            self._index[row.key] = len(self._rows)
            self._rows.append(row)
        saved = self._load()
        if saved is None:
            self.book = self._rebuilt()
            if self.marks or self._rows:
                self.save()
        else:
            self.book = saved
            counted = sum(c.images for c in saved.certificates.values())
            for row in self._rows[counted:]:
                self.book.note_image(row.site_group, row.changed)
            self._skip = max(0, counted - len(self._rows))
            self._unsaved = len(self._rows) > counted
        self._requeue()

    def _load(self) -> CertificateBook | None:
        if self._file is None:
            return None
        where = shown(self._file.path)
        marks = f"the {len(self.marks)} review marks" if len(self.marks) != 1 else "the review mark"
        try:
            saved = self._file.load()
        except CertificateError as exc:
            self.notes.append(
                ("warning", f"The review certificates {where} cannot be used ({exc}); rebuilt from {marks}.")
            )
            return None
        if saved is not None and not matches(saved, self._outcomes()):
            self.notes.append(
                (
                    "warning",
                    f"The review certificates {where} do not hold the reviews of {marks} (a mark changed "
                    "while they could not be saved, or either file was edited); rebuilt from the marks.",
                )
            )
            return None
        return saved

    def add_rows(self, rows: Sequence[PredictionRow]) -> None:
        """Newly processed rows: counted in their groups; their disagreements join the queue."""
        self._unsaved |= bool(rows)
        for row in rows:
            index = self._index[row.key] = len(self._rows)
            self._rows.append(row)
            if self._skip:
                self._skip -= 1
            else:
                self.book.note_image(row.site_group, row.changed)
            mark = self.marks.get(row.key)
            if mark is not None:  # a row processed again after a crash: its mark is a review again
                self.book.add_reviewed_image(
                    row.site_group, row.prediction, row.source_prediction, mark.label
                )
            elif row.changed:
                self.queue.add(index, row.site_group)

    def close(self) -> None:
        """Save the book (when it changed since it was saved) and let go of the files.

        Only a changed book is written: after a profile was renamed the old folder is gone, and
        writing there would make it again.
        """
        if self._store is not None:
            if self._unsaved:
                self.save()
            self._store.close()
        self._store = self._file = None

    # -- marks, undo and redo ------------------------------------------------------------------
    def set_mark(self, key: str, label: int | None, reviewer: str = "") -> MarkChange | None:
        """Mark the image ``key`` as of class ``label`` (None: clear its mark); None when nothing changes.

        Raises:
            OSError: the mark cannot be kept (nothing was changed).
        """
        before = self.marks.get(key)
        if (before is None and label is None) or (before is not None and before.label == label):
            return None
        row = self._rows[self._index[key]]
        at = datetime.now().astimezone().isoformat(timespec="seconds")
        after = None if label is None else ReviewMark(key, label, row.prediction, at, reviewer)
        self._apply(key, after)
        change = MarkChange(key, before, after)
        self._undo.append(change)
        self._redo.clear()
        return change

    def undo(self) -> MarkChange | None:
        """Take the last change back (None: nothing to undo).

        Raises:
            OSError: it cannot be written (the change stays, and can be undone again).
        """
        if not self._undo:
            return None
        change = self._undo[-1]
        self._apply(change.key, change.before)
        self._redo.append(self._undo.pop())
        return change

    def redo(self) -> MarkChange | None:
        """Make the last undone change again (None: nothing to redo).

        Raises:
            OSError: it cannot be written.
        """
        if not self._redo:
            return None
        change = self._redo[-1]
        self._apply(change.key, change.after)
        self._undo.append(self._redo.pop())
        return change

    def history(self) -> tuple[str, str]:
        """The image names the next undo and the next redo act on (empty: nothing to do)."""

        def name(stack: list[MarkChange]) -> str:
            return shown(self._rows[self._index[stack[-1].key]].name) if stack else ""

        return name(self._undo), name(self._redo)

    def index_of(self, key: str) -> int:
        """The row's index in arrival order."""
        return self._index[key]

    def _apply(self, key: str, mark: ReviewMark | None) -> None:
        """``mark`` becomes the image's mark: on disk first, then the marks, the book and the queue."""
        if self._store is not None:
            if mark is None:
                self._store.clear(key)
            else:
                self._store.put(mark)
        previous = self.marks.pop(key, None)
        if mark is not None:
            self.marks[key] = mark  # at the end: the marks keep the order the reviews were made
        index = self._index[key]
        row = self._rows[index]
        if previous is None and mark is not None:
            self.book.add_reviewed_image(row.site_group, row.prediction, row.source_prediction, mark.label)
            self.queue.remove(index)
        else:
            self.book = self._rebuilt()
            self._requeue()
        self.save()

    # -- the book and the queue ----------------------------------------------------------------
    def _outcomes(self) -> dict[Group, list[int]]:
        rows = {r.key: r for r in self._rows}
        return outcomes_of(rows, ((k, m.label) for k, m in self.marks.items()))

    def _rebuilt(self) -> CertificateBook:
        self._skip = 0
        rows, index = self._rows, self._index
        marked = [rows[index[k]] for k in self.marks if k in index]
        return CertificateBook.from_marks(
            ((r.site_group, r.changed) for r in rows),
            ((r.site_group, r.prediction, r.source_prediction, self.marks[r.key].label) for r in marked),
        )

    def _requeue(self) -> None:
        self.queue = ReviewQueue()
        for index, row in enumerate(self._rows):
            if row.changed and row.key not in self.marks:
                self.queue.add(index, row.site_group)

    def save(self) -> None:
        """Write the book (a failure is noted for the log; the marks are what counts)."""
        if self._file is None:
            return
        try:
            self._file.save(self.book)
            self._unsaved = False
        except OSError as exc:
            self.notes.append(
                ("warning", f"The review certificates cannot be saved ({exc}); they are rebuilt next time.")
            )

    def reverted(self) -> dict[Group, int]:
        """Reverted groups and the reviews each took."""
        return {g: c.decided_at or 0 for g, c in self.book.certificates.items() if c.verdict == REVERTED}

    def queue_state(self) -> QueueState:
        book = self.book
        order = self.queue.order(book.reviews_per_group(), book.decided_groups())
        verdicts = {g: c.verdict for g, c in book.certificates.items()}
        return QueueState({item: rank for rank, item in enumerate(order)}, verdicts)

    def take_notes(self) -> list[tuple[str, str]]:
        notes, self.notes = self.notes, []
        return notes
