"""The review of one site in a project: its marks with undo, its ladder of certificates, its queue.

One component for the app, ``f2tta run`` and the benchmark's reader of a project
(``docs/review-certificates.md``). A site is a source: the folder or slide the clinician loaded.
:class:`SiteReview` holds the site's rows (the journal's, in arrival order), the reviewer's marks
(:mod:`engine.review.marks`, on disk as they are made) and the site's ladder
(:mod:`engine.review.ladder`), which it rebuilds from the rows, the marks and the recorded
moments its comparisons started whenever a mark is taken back: the certificates are derived,
never read from a file that could have been edited.

The queue is the active comparison's order: the disagreements between the rule in use and the
candidate under test, in the seeded random order the certificate needs. Asking for the next item
when no comparison is open starts the next one on the images processed so far (and records that
moment). Marks made on other images stay marks (the truth beside the dataset's label); the
ladder uses them when its order reaches them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.io.sources import source_hash
from engine.methods.idipt_plus import ACCEPTED, AWAITING_REVIEW, THRESHOLD_CANDIDATES
from engine.review.ladder import LABEL_FREE, SOURCE_RULE, Comparison, LadderRule, SiteImages, SiteLadder
from engine.review.marks import MarkError, MarkStore, ReviewMark, now
from engine.run.rows import MAP_PENDING, PredictionRow


def site_images(rows: Sequence[PredictionRow]) -> SiteImages:
    """What the ladder needs of a site's rows (arrival order); rows without a source margin (more
    than two classes, or a journal written before margins were kept) make A1 the reported decisions."""
    n = len(rows)
    margin = np.array(
        [math.nan if r.source_margin is None else r.source_margin for r in rows], dtype=np.float64
    )
    two_class = n > 0 and bool(np.isfinite(margin).all())
    threshold = np.array([r.decision_threshold or 0.0 for r in rows], dtype=np.float64) if two_class else None
    candidates: dict[str, np.ndarray] = {}
    if two_class:
        named = [dict(r.candidates) for r in rows]
        for name in THRESHOLD_CANDIDATES:
            values = np.array([c.get(name, math.nan) for c in named], dtype=np.float64)
            if np.isfinite(values).any():
                candidates[name] = values
    prompted = np.array(
        [-1 if r.prompted_prediction is None else r.prompted_prediction for r in rows], dtype=np.int64
    )
    return SiteImages(
        reported=np.array([r.prediction for r in rows], dtype=np.int64),
        source=np.array([r.source_prediction for r in rows], dtype=np.int64),
        margin=margin,
        threshold=threshold,
        candidates=candidates,
        prompted=prompted if bool((prompted >= 0).any()) else None,
    )


@dataclass(frozen=True)
class MarkChange:
    """One change of an image's mark (None: no mark)."""

    key: str
    before: ReviewMark | None
    after: ReviewMark | None


class SiteReview:
    """The review of one site (see the module docstring).

    Args:
        folder: the project's review folder (None: nothing is kept on disk).
        source_id: the site's source identity (as in the journal).
        classes: the model's number of classes.
        seed: the run's seed (the ladder's random orders).
        rule: the ladder's testing rule.
    """

    def __init__(
        self,
        folder: Path | None,
        source_id: str,
        classes: int,
        seed: int = 0,
        rule: LadderRule | None = None,
    ) -> None:
        self.source_id, self.classes, self.seed = source_id, classes, seed
        self.rule = rule if rule is not None else LadderRule()
        self._store = MarkStore(folder, source_id, classes) if folder is not None else None
        self.marks: dict[str, ReviewMark] = {}  # by key, in the order they were made
        self.starts: list[int] = []  # images covered by each comparison started, in order
        self.rows: list[PredictionRow] = []
        self.index: dict[str, int] = {}
        self.notes: list[str] = []  # for the log and the window; taken by the caller
        self.ladder = SiteLadder(self.site, self.rule, seed)
        self._images: SiteImages | None = None
        self._label_free = False  # a row was decided by an operating point reported without review
        self._undo: list[MarkChange] = []
        self._redo: list[MarkChange] = []

    @property
    def site(self) -> str:
        """The site's name for its random orders: its source's hash, with or without a folder."""
        return source_hash(self.source_id)

    # -- rows and marks ------------------------------------------------------------------------
    def open(self, rows: Sequence[PredictionRow]) -> None:
        """The site's earlier rows (arrival order) with the marks and starts kept for it."""
        if self._store is not None:
            self.marks, self.starts, notes = self._store.load()
            self.notes += notes
        self.rows, self.index = [], {}
        self._label_free = False
        self._undo, self._redo = [], []
        self.add_rows(rows)
        self._rebuild()

    def add_rows(self, rows: Sequence[PredictionRow]) -> None:
        """Newly processed rows (a row processed again after a crash replaces its earlier one).

        The comparisons are frozen on the images they started with, so new rows change only what
        the rule in use decides for them: nothing is rebuilt, whatever the site's size.
        """
        for row in rows:
            if row.key in self.index:
                self.rows[self.index[row.key]] = row
            else:
                self.index[row.key] = len(self.rows)
                self.rows.append(row)
            self._label_free = self._label_free or row.decision_path == ACCEPTED
        self._images = None

    @property
    def rule_in_use(self) -> str:
        """The rule that decides the site now, as people are told it: the ladder's, except that
        where no operating point was reported without review (review first, the default) and no
        review moved the rule, that is the source model (:data:`SOURCE_RULE`)."""
        current = self.ladder.current
        return SOURCE_RULE if current == LABEL_FREE and not self._label_free else current

    def set_mark(
        self, key: str, label: int | None, reviewer: str = "", at: str | None = None
    ) -> MarkChange | None:
        """Mark the image ``key`` as of class ``label`` (None: clear its mark); None when nothing changes.

        Raises:
            MarkError: the image is not one of the site's, or the class is not the model's.
            OSError: the mark cannot be kept (nothing was changed).
        """
        if key not in self.index:
            raise MarkError(f"{key!r} is not an image of this folder or slide")
        before = self.marks.get(key)
        if (before is None and label is None) or (before is not None and before.label == label):
            return None
        shown = self.decision(self.index[key])
        after = None if label is None else ReviewMark(key, label, shown, at or now(), reviewer)
        self._apply(key, after)
        change = MarkChange(key, before, after)
        self._undo.append(change)
        self._redo.clear()
        return change

    def undo(self) -> MarkChange | None:
        """Take the last change back (None: nothing to undo). Raises OSError when it cannot be written."""
        if not self._undo:
            return None
        change = self._undo[-1]
        self._apply(change.key, change.before)
        self._redo.append(self._undo.pop())
        return change

    def redo(self) -> MarkChange | None:
        """Make the last undone change again (None: nothing to redo). Raises OSError when it cannot be written."""
        if not self._redo:
            return None
        change = self._redo[-1]
        self._apply(change.key, change.after)
        self._undo.append(self._redo.pop())
        return change

    def history(self) -> tuple[str, str]:
        """The keys the next undo and the next redo act on (empty: nothing to do)."""
        return (self._undo[-1].key if self._undo else "", self._redo[-1].key if self._redo else "")

    def _apply(self, key: str, mark: ReviewMark | None) -> None:
        """``mark`` becomes the image's mark: on disk first, then in memory and in the ladder."""
        if self._store is not None:
            if mark is None:
                self._store.clear(key)
            else:
                self._store.put(mark)
        self.marks.pop(key, None)
        if mark is not None:
            self.marks[key] = mark
        self._rebuild()

    # -- the ladder and the queue --------------------------------------------------------------
    def images(self) -> SiteImages:
        if self._images is None:
            self._images = site_images(self.rows)
        return self._images

    def labels(self) -> dict[int, int]:
        """The marks as the ladder reads them: row index -> class."""
        return {self.index[k]: m.label for k, m in self.marks.items() if k in self.index}

    def _rebuild(self) -> None:
        """The ladder again from the rows, the marks and the recorded starts."""
        self.ladder = SiteLadder(self.site, self.rule, self.seed)
        if not self.starts:
            return
        images, labels = self.images(), self.labels()
        kept: list[int] = []
        for n in self.starts:
            if n > len(images):
                self.notes.append(
                    f"a comparison was started on {n} images but the site now has {len(images)}; it starts again"
                )
                break
            if self.ladder.active is None and self.ladder.start(images.head(n)) is not None:
                kept.append(n)
            self.ladder.review(labels)
        if kept != self.starts:
            self.starts = kept
            self._save_starts()

    def next_item(self) -> int | None:
        """The row index to review next: the open comparison's next image, or the first of a
        comparison started now on the images processed so far (None: nothing left to test).

        Marks made before a comparison started are used as its order reaches them, so a
        comparison can be decided at once and the next one started.
        """
        while True:
            if self.ladder.active is None:
                started = self.ladder.start(self._decided_and_mapped()) if self.rows else None
                if started is None:
                    return None
                self.starts.append(started.covered)
                self._save_starts()
            self.ladder.review(self.labels())
            active = self.ladder.active
            if active is not None:
                return active.next_position

    def _decided_and_mapped(self) -> SiteImages:
        """The images a comparison may start on: those before the first whose map (and I-DiPT's
        prompted decision) is still pending, so a comparison never changes when maps arrive."""
        pending = next((i for i, r in enumerate(self.rows) if r.map_status == MAP_PENDING), len(self.rows))
        images = self.images()
        return images if pending == len(self.rows) else images.head(pending)

    def _save_starts(self) -> None:
        if self._store is None:
            return
        try:
            self._store.put_starts(self.starts)
        except OSError as exc:
            self.notes.append(f"the moments the comparisons started cannot be kept ({exc})")

    def queue(self) -> list[int]:
        """The open comparison's images still to review, in review order (row indices)."""
        comparison = self.ladder.active
        if comparison is None:
            return []
        return comparison.order[len(comparison.reviewed) :]

    def decisions(self) -> np.ndarray:
        """Every row's decision under the rule the site's reviews left in use."""
        return self.ladder.decide(self.images()) if self.rows else np.zeros(0, dtype=np.int64)

    def decision(self, index: int) -> int:
        return int(self.decisions()[index])

    def comparisons(self) -> list[Comparison]:
        """The comparisons that had something to test, in order."""
        return [c for c in self.ladder.comparisons if c.disagreements]

    def why_empty(self) -> str:
        """One sentence: why there is nothing to review at this site (empty when there is)."""
        if self.ladder.active is not None:
            return ""
        if not self.rows:
            return "nothing to review yet: no image of this folder has been processed"
        images = self.images()
        if images.threshold is None and images.prompted is None:
            return (
                "nothing to review: adaptation changes no decision of this folder (the model has more than two "
                "classes or the run kept no source margins)"
            )
        return (
            "nothing left to review: every candidate of this folder was tested, or none decides any of its "
            f"{len(images)} images differently from the rule in use"
        )

    def close(self) -> None:
        if self._store is not None:
            self._store.close()

    def take_notes(self) -> list[str]:
        notes, self.notes = self.notes, []
        return notes


def what_adapting_changed(rows: Sequence[PredictionRow], decisions: np.ndarray | None = None) -> str:
    """One sentence for a site: how many decisions adapting changed, or why it changed none.

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
    reason = rows[-1].decision_reason
    if reason.endswith(AWAITING_REVIEW):
        proposal = reason.partition("; ")[0]
        return (
            f"adapting changed no decision yet: {proposal}, and the source model decides until "
            "reviews of this folder certify it or another candidate"
        )
    if reason.startswith("too few images"):
        needed = reason.partition("(")[2].rstrip(")")
        return f"adapting changed no decision: {needed}; this folder has {len(rows)}"
    if reason:
        return (
            f"adapting changed no decision: the site's operating point was not accepted ({reason}), "
            "so the source model's decisions stand"
        )
    return "adapting changed no decision: the method records no decision path, its decisions are the source model's"


__all__ = ["MarkChange", "MarkError", "SiteReview", "site_images", "what_adapting_changed"]
