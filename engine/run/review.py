"""The review of one site in a project: its marks with undo, its ladder of certificates, its queue.

One component for the app, ``f2tta run`` and the benchmark's reader of a project
(``docs/review-certificates.md``). A site is a source: the folder or slide the clinician loaded.
:class:`SiteReview` holds the site's rows (the journal's, in arrival order), the reviewer's marks
(:mod:`engine.review.marks`, on disk as they are made) and the site's ladder
(:mod:`engine.review.ladder`), which it rebuilds from the rows, the marks and the blocks its
comparisons froze (recorded once, never drawn again: :mod:`engine.run.review_blocks`) whenever
the site is opened or a mark is taken back: the certificates are derived, never read from a
file that could have been edited.

The queue is the open block's order: the disagreements between the rule in use and the candidate
under test, in the seeded random order the certificate needs. Asking for the next item when no
block is open first extends the coverage of the rules in use to the images processed since (a
promoted rule decides an image only where its certificate covers it: :meth:`SiteReview.decisions`;
:meth:`SiteReview.shown` is what a reader sees while the folder arrives, later images
provisional), then starts the next candidate on the images they cover; each block is recorded
before the queue shows it. Marks made on other images stay marks (the truth beside the dataset's
label); the ladder uses them when its order reaches them.

A site whose rows were decided in more than one unit (a folder the method split in two parts)
has one ladder per unit, and the queue serves them stratified (:mod:`engine.run.review_parts`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.io.sources import source_hash
from engine.review.balance import Balanced
from engine.review.classes import ONE_GROUP, BestFits
from engine.review.ladder import (
    LABEL_FREE,
    PROMOTED,
    SOURCE_RULE,
    Comparison,
    LadderRule,
    SiteImages,
    SiteLadder,
)
from engine.review.marks import BlockRecord, MarkError, MarkStore, ReviewMark, now
from engine.run.review_blocks import record_of, replay
from engine.run.review_parts import (
    Decider,
    EmptyQueue,
    PartRule,
    ReviewPart,
    decides_words,
    first_pending,
    no_site_rule,
    part_label,
    part_name,
    prompted_next,
    prompted_words,
    served,
    serving_order,
    site_images,
    what_adapting_changed,
)
from engine.run.rows import PredictionRow
from engine.vocabulary import QueueEmpty, Rule


@dataclass(frozen=True)
class MarkChange:
    """One change of an image's mark (None: no mark)."""

    key: str
    before: ReviewMark | None
    after: ReviewMark | None


class SiteReview:
    """The review of one site (see the module docstring).

    A site decided in more than one unit (a folder the method split in two parts) keeps one
    ladder per unit (:mod:`engine.run.review_parts`); :attr:`ladder` is then the ladder of the part
    the queue serves next, and :meth:`in_use` names each part's rule.

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
        if self.rule.probe:  # not in the journal's records: never replayed
            raise ValueError("a ladder with uniform samples (probe) is for the lab's replays only")
        self._store = MarkStore(folder, source_id, classes) if folder is not None else None
        self.marks: dict[str, ReviewMark] = {}  # by key, in the order they were made
        self.rows: list[PredictionRow] = []
        self.index: dict[str, int] = {}
        self.notes: list[str] = []  # for the log and the window; taken by the caller
        self.parts: list[ReviewPart] = []
        self._loaded: dict[int | None, list[BlockRecord]] = {}  # block records read, by part group
        self._noted: set[str] = set()  # set-aside records already named in a note
        self._cache: dict[tuple[int, bool], list[tuple[Rule, float, int]]] = {}  # each part's layers
        self._row_parts: dict[int, tuple[int, int]] = {}
        self._images: dict[int, SiteImages] = {}  # by part number
        self._fits: dict[int, BestFits] = {}  # each part's best-fit thresholds, more than two classes
        self._balanced: dict[int, Balanced] = {}  # each part's class-balance corrections, the same
        self._undo: list[MarkChange] = []
        self._redo: list[MarkChange] = []
        # every image of the site has been decided (the caller says so when the run has decided
        # all it was given): a promoted comparison's level may then go on to the next (SiteLadder.start)
        self.complete = False

    @property
    def site(self) -> str:
        """The site's name for its random orders: its source's hash, with or without a folder."""
        return source_hash(self.source_id)

    @property
    def ladder(self) -> SiteLadder:
        """The ladder of the part the queue serves next (the site's only ladder when it has one)."""
        part = served(self.parts) or (self.parts[0] if self.parts else None)
        return part.ladder if part is not None else SiteLadder(self.site, self.rule, self.seed)

    @property
    def starts(self) -> list[int]:
        """The images each comparison of the first part (the site's only one, unsplit) was started on."""
        return (
            self.parts[0].starts
            if self.parts
            else [r.end for r in self._loaded.get(None, []) if r.number == 0]
        )

    # -- rows and marks ------------------------------------------------------------------------
    def open(self, rows: Sequence[PredictionRow]) -> None:
        """The site's earlier rows (arrival order) with the marks and starts kept for it."""
        self._loaded, self._noted = {}, set()
        if self._store is not None:
            loaded = self._store.load()
            self.marks = loaded.marks
            for record in loaded.blocks:
                self._loaded.setdefault(record.part, []).append(record)
            self.notes += loaded.notes
        self.rows, self.index, self.parts, self._fits, self._balanced = [], {}, [], {}, {}
        self._undo, self._redo = [], []
        self.add_rows(rows)
        self._rebuild()

    def add_rows(self, rows: Sequence[PredictionRow]) -> None:
        """Newly processed rows (a row processed again after a crash replaces its earlier one).

        The comparisons are frozen on the images they started with, so new rows change only what
        the rule in use decides for them: nothing is rebuilt, whatever the site's size (unless a
        row processed again was decided in another unit: then the parts are made again).
        """
        regroup = replaced = False
        for row in rows:
            if row.key in self.index:
                at = self.index[row.key]
                regroup = regroup or self.rows[at].site_group != row.site_group
                self.rows[at], replaced = row, True
            else:
                self.index[row.key] = len(self.rows)
                self.rows.append(row)
                if not regroup:
                    self._part_for(row.site_group).positions.append(len(self.rows) - 1)
        self._images, self._cache, self._row_parts = {}, {}, {}
        for part in self.parts if replaced else ():
            part.reread()
        if regroup:
            self._loaded = {(None if k == 0 else p.group): p.records for k, p in enumerate(self.parts)}
            self.parts = []
            for i, row in enumerate(self.rows):
                self._part_for(row.site_group).positions.append(i)
            self._rebuild()

    def _part_for(self, group: int | None) -> ReviewPart:
        """The part a row decided in ``group`` belongs to (a new part for a new group)."""
        if not self.parts:
            self.parts.append(ReviewPart(group, [], SiteLadder(self.site, self.rule, self.seed)))
            self.parts[0].records = list(self._loaded.get(None, []))
            return self.parts[0]
        first = self.parts[0]
        if group is None or group == first.group:
            return first
        if first.group is None:  # rows so far named no unit: this group is the first part's
            first.group = group
            return first
        for part in self.parts[1:]:
            if part.group == group:
                return part
        ladder = SiteLadder(f"{self.site}/{group}", self.rule, self.seed)
        part = ReviewPart(group, [], ladder, list(self._loaded.get(group, [])))
        self.parts.append(part)
        return part

    def in_use(self) -> tuple[PartRule, ...]:
        """The rule that decides each part now, as people are told it: the ladder's, except that
        where no operating point was reported without review (review first, the default) and no
        review moved the rule, that is the source model (:data:`SOURCE_RULE`). A site of one part
        has one entry, its part named by no name."""
        if not self.parts:
            return (PartRule("", len(self.rows), SOURCE_RULE),)
        several = len(self.parts) > 1
        return tuple(
            PartRule(part_label(self.parts, p) if several else "", len(p.positions), p.rule(self.rows))
            for p in self.parts
        )

    def row_rules(self, shown: bool = False) -> list[Rule]:
        """The rule that decides each row (certified; ``shown``: as a reader is shown it), the
        label-free rule read as the source model where the method reported no decision with it."""
        out = [SOURCE_RULE] * len(self.rows)
        for k, part in enumerate(self.parts):
            layers = self._layers(k, shown)
            label_free = part.label_free(self.rows)
            for local, i in enumerate(part.positions):
                rule = _layer_at(layers, local)[0]
                out[i] = SOURCE_RULE if rule == LABEL_FREE and not label_free else rule
        return out

    def row_parts(self) -> list[str]:
        """Each row's part's short name ("part 2 of 3"; empty when the site has one part)."""
        if len(self.parts) <= 1:
            return [""] * len(self.rows)
        out = [""] * len(self.rows)
        for part in self.parts:
            label = part_label(self.parts, part)
            for i in part.positions:
                out[i] = label
        return out

    def rules_key(self) -> tuple[tuple[Rule, float, int, int, int], ...]:
        """Each part's rule in use, its threshold, the images its rules certify and show and the
        class it calls (-1: the model's): changes exactly when some part's rule moves or grows."""
        return tuple(
            (
                p.ladder.current,
                p.ladder.current_threshold,
                self._layers(k, False)[-1][2],
                self._layers(k, True)[-1][2],
                p.ladder.current_other,
            )
            for k, p in enumerate(self.parts)
        )

    def rule_of(self, index: int, shown: bool = False) -> Decider:
        """What decides the row at ``index`` (certified; ``shown``: as a reader is shown it): the
        highest rule in use that decides it (:data:`LABEL_FREE` where no review moved the rule),
        the rule's threshold on the source margin (nan: not a threshold rule) and the part's short
        name ("part 2 of 3"; empty when the site has one part)."""
        k, local = self._where()[index]
        part = self.parts[k]
        label = part_label(self.parts, part) if len(self.parts) > 1 else ""
        rule, threshold, _ = _layer_at(self._layers(k, shown), local)
        return Decider(rule, threshold, label)

    def _layers(self, k: int, shown: bool) -> list[tuple[Rule, float, int]]:
        key = (k, shown)
        if key not in self._cache:
            self._cache[key] = self.parts[k].ladder.layers(self.images(k), shown)
        return self._cache[key]

    def _where(self) -> dict[int, tuple[int, int]]:
        """Each row's part and place in it."""
        if not self._row_parts:
            self._row_parts = {
                i: (k, local) for k, p in enumerate(self.parts) for local, i in enumerate(p.positions)
            }
        return self._row_parts

    def describe(self, comparison: Comparison) -> str:
        """The comparison's sentence (``Comparison.describe``), naming its part when the site was
        split, and the rule that replaced it where a later promotion did (one rule decides)."""
        name, images = self.part_of(comparison)
        part = next((p for p in self.parts if any(c is comparison for c in p.ladder.comparisons)), None)
        replaced = None
        if part is not None and comparison.verdict == PROMOTED:
            chain = part.ladder.chain()
            if any(c is comparison for c in chain) and chain[-1] is not comparison:
                replaced = chain[-1].candidate
        label_free = part is not None and part.label_free(self.rows)
        return comparison.describe(images, name.partition(" (")[0], replaced, label_free)

    def part_of(self, comparison: Comparison) -> tuple[str, int]:
        """``(name, images)`` of the part a comparison is about (name empty: the site has one part)."""
        for part in self.parts:
            if any(c is comparison for c in part.ladder.comparisons):
                return (part_name(self.parts, part) if len(self.parts) > 1 else "", len(part.positions))
        return "", len(self.rows)

    def set_mark(
        self, key: str, label: int | None, reviewer: str = "", at: str | None = None, shown: int | None = None
    ) -> MarkChange | None:
        """Mark the image ``key`` as of class ``label`` (None: clear its mark); None when nothing changes.
        ``shown``: the decision on screen when the mark was made, where a record says it (a
        reviews file's ``shown`` column); None: the decision shown now.

        Raises:
            MarkError: the image is not one of the site's, or the class is not the model's.
            OSError: the mark cannot be kept (nothing was changed).
        """
        if key not in self.index:
            raise MarkError(f"{key!r} is not an image of this folder or slide")
        before = self.marks.get(key)
        if (before is None and label is None) or (before is not None and before.label == label):
            return None
        if shown is None or not 0 <= shown < self.classes:
            shown = self.decision(self.index[key])
        after = None if label is None else ReviewMark(key, label, shown, at or now(), reviewer)
        self._apply(key, after)
        change = MarkChange(key, before, after)
        self._undo.append(change)
        self._redo.clear()
        return change

    def undo(self) -> MarkChange | None:
        """Take the last change back (None: nothing to undo). Raises OSError when it cannot be written."""
        return self._move(self._undo, self._redo, undo=True)

    def redo(self) -> MarkChange | None:
        """Make the last undone change again (None: nothing to redo). Raises OSError when it cannot be written."""
        return self._move(self._redo, self._undo, undo=False)

    def _move(self, taken: list[MarkChange], kept: list[MarkChange], undo: bool) -> MarkChange | None:
        """The last change of ``taken`` applied (its ``before`` to undo it, its ``after`` to redo it),
        then moved onto ``kept``; the lists are left as they were when it cannot be written."""
        if not taken:
            return None
        change = taken[-1]
        self._apply(change.key, change.before if undo else change.after)
        kept.append(taken.pop())
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

    # -- the ladders and the queue -------------------------------------------------------------
    def images(self, part: int = 0) -> SiteImages:
        """The images of part ``part`` (the site's, when it has one part)."""
        if part not in self._images:
            self._images[part] = site_images(
                self.parts[part].rows(self.rows) if self.parts else [],
                self.classes,
                self._fits.setdefault(part, BestFits()),
                self._balanced.setdefault(part, Balanced()),
            )
        return self._images[part]

    def labels(self) -> dict[int, int]:
        """The marks as the ladders read them: row index -> class."""
        return {self.index[k]: m.label for k, m in self.marks.items() if k in self.index}

    def _rebuild(self) -> None:
        """The ladders again from the rows, the marks and the recorded blocks."""
        self._cache = {}
        labels = self.labels()
        for k, part in enumerate(self.parts):
            part.ladder = SiteLadder(part.ladder.site, self.rule, self.seed)
            part.pending = list(part.records)
            self._replay(k, part.labels(labels))

    def _replay(self, k: int, labels: dict[int, int]) -> None:
        """Take part ``k``'s pending records as far as the marks reach (each set aside named once)."""
        self._cache = {}
        part = self.parts[k]
        aside = replay(part.ladder, self.images(k), part.rows(self.rows), part.pending, labels)
        for record, why in aside:
            if record.key not in self._noted:
                self._noted.add(record.key)
                self.notes.append(
                    f"a recorded comparison block ({record.candidate or 'a comparison'}, images "
                    f"{record.start + 1} to {record.end}) was set aside: {why}; it stays in the marks file"
                )

    def next_item(self) -> int | None:
        """The row index to review next: the open block's next image, or the first of a block opened
        now (the coverage of a rule in use extended to the images processed since, or the next
        candidate started on the images the rules in use cover); None: nothing left to test. Of a
        site in several parts, the part whose reviews are fewest relative to its share is served.

        Marks made before a block was frozen are used as its order reaches them, so a block can
        be decided at once and the next one opened.
        """
        labels = self.labels()
        for part in serving_order(self.parts):
            k = self.parts.index(part)
            position = self._next_in(k, part.labels(labels))
            if position is not None:
                return part.positions[position]
        return None

    def _next_in(self, k: int, labels: dict[int, int]) -> int | None:
        part = self.parts[k]
        for _ in range(4 * len(self.rule.candidates) + 16):  # each pass opens one block or ends
            self._replay(k, labels)
            active = part.ladder.active
            if active is not None:
                return active.next_position
            self._cache = {}
            decided = self._decided_and_mapped(k) if part.positions else None
            part.ladder.complete = (
                self.complete and decided is not None and len(decided) == len(part.positions)
            )
            if decided is None or part.ladder.open_next(decided) is None:
                self._record_frozen(k)
                return None
            self._record_frozen(k)
        return None

    def upcoming(self, k: int) -> tuple[Rule, np.ndarray, np.ndarray] | None:
        """What the queue would start next in part ``k`` if asked now, without starting it (the
        candidate, the decisions it would be tested against and its own: ``SiteLadder.upcoming``)."""
        return self.parts[k].ladder.upcoming(self._decided_and_mapped(k))

    def _decided_and_mapped(self, k: int) -> SiteImages:
        """The images a block may be frozen on: those before the first whose map (and, once I-DiPT's
        candidate is tested, prompted decision) is pending, so a block never changes when they arrive."""
        part, images = self.parts[k], self.images(k)
        settled = first_pending(part.rows(self.rows), part.ladder.uses_prompted)
        return images if settled == len(images) else images.head(settled)

    @property
    def wants_prompted(self) -> bool:
        """I-DiPT's prompted decisions are wanted (its prompt step to run): a ladder reached them."""
        return any(p.ladder.waits_for_prompted or p.ladder.uses_prompted for p in self.parts)

    def _record_frozen(self, k: int) -> None:
        """Record the blocks the ladder of part ``k`` just froze (before the queue shows them)."""
        part = self.parts[k]
        rows = part.rows(self.rows)
        for c, number in part.ladder.frozen:
            record = record_of(None if k == 0 else part.group, c, number, rows)
            part.records.append(record)
            if self._store is not None:
                try:
                    self._store.put_block(record)
                except OSError as exc:
                    self.notes.append(
                        f"a comparison's block cannot be kept ({exc}); it is drawn again when reopened"
                    )
        part.ladder.frozen.clear()

    def queue(self) -> list[int]:
        """The open block's images still to review, in review order (row indices); of a site in
        several parts, the open block of the part served first."""
        part = served(self.parts)
        comparison = part.ladder.active if part is not None else None
        block = comparison.open_block if comparison is not None else None
        if part is None or block is None:
            return []
        return [part.positions[i] for i in block.order[len(block.reviewed) :]]

    def decisions(self) -> np.ndarray:
        """Every row's certified decision: by the highest rule its part's reviews put in use whose
        certificate covers it (what reports say)."""
        return self._per_part(shown=False)

    def shown(self) -> np.ndarray:
        """Every row's decision as a reader is shown it: the rules in use, later images provisional."""
        return self._per_part(shown=True)

    def provisional(self) -> np.ndarray:
        """Rows shown with a promoted rule's call that no certificate covers yet."""
        differs: np.ndarray = self.shown() != self.decisions()
        return differs

    def _per_part(self, shown: bool) -> np.ndarray:
        out = np.zeros(len(self.rows), dtype=np.int64)
        for k, part in enumerate(self.parts):
            if part.positions:
                images = self.images(k)
                out[part.positions] = part.ladder.shown(images) if shown else part.ladder.certified(images)
        return out

    def decision(self, index: int) -> int:
        return int(self.shown()[index])

    def comparisons(self) -> list[Comparison]:
        """The comparisons that had something to test, part by part, in order."""
        return [c for p in self.parts for c in p.ladder.comparisons if c.disagreements]

    def empty_queue(self) -> EmptyQueue | None:
        """Why there is nothing to review at this site, as facts (None: there is something)."""
        if any(p.ladder.active is not None for p in self.parts):
            return None
        if not self.rows:
            return EmptyQueue(QueueEmpty.NOT_PROCESSED)
        images = self.images()
        if images.threshold is None and images.prompted is None:
            return EmptyQueue(QueueEmpty.NO_OTHER_RULE)
        if prompted_next(self.parts, self.upcoming):
            return EmptyQueue(QueueEmpty.PROMPTED_PENDING)
        mapped = any(len(self._decided_and_mapped(k)) for k in range(len(self.parts)))
        unproposed = None
        if not images.candidates and not images.decided and images.classes is not None:  # no two groups
            unproposed = ONE_GROUP
        elif not images.candidates and not images.decided:  # no site threshold proposed: its typed reason
            why = no_site_rule(self.rows)
            unproposed = why.words if why is not None else self.rows[-1].decision_reason
        return EmptyQueue(
            QueueEmpty.SETTLED if mapped else QueueEmpty.NO_MAPS_YET,
            tested=tuple(self.comparisons()),
            alike=tuple(  # A1 changed nothing: no rule to name
                c.candidate
                for p in self.parts
                for c in p.ladder.comparisons
                if not c.disagreements and c.candidate != LABEL_FREE
            ),
            unproposed=unproposed,
            prompted=images.prompted is not None,
        )

    def why_empty(self) -> str:
        """One sentence: why there is nothing to review at this site (empty when there is). Read
        by the review queue's empty view, the status bar and ``f2tta run``."""
        empty = self.empty_queue()
        if empty is None:
            return ""
        if empty.stage is QueueEmpty.NOT_PROCESSED:
            return "nothing to review yet: no image of this folder has been processed"
        if empty.stage is QueueEmpty.NO_OTHER_RULE:
            return (
                "nothing to review: no other rule can decide this folder's images (the run kept no "
                "source margins: a method that keeps none, or a journal written before they were kept)"
            )
        if empty.stage is QueueEmpty.NO_MAPS_YET:
            return "nothing to review yet: the review starts on images whose uncertainty maps are made"
        if empty.stage is QueueEmpty.PROMPTED_PENDING:
            return prompted_words(self.parts)
        decider = decides_words(self.in_use())
        said = []
        if empty.tested:
            said.append(
                "your answers settled every rule that decides some image differently ("
                + "; ".join(f"{c.candidate.words}: {c.verdict.words}" for c in empty.tested)
                + ")"
            )
        if empty.alike:
            said.append(
                f"{_listed([r.words for r in empty.alike])} would decide every image as it is decided now"
            )
        if not said and empty.unproposed is not None:
            because = f" ({empty.unproposed})" if empty.unproposed else ""
            if not empty.prompted:
                said.append(f"adapting proposed no other rule for this folder{because}")
            else:
                said.append(
                    f"adapting proposed no site threshold for this folder{because}, and "
                    f"{Rule.PROMPTED.words} calls every image as it is decided now"
                )
        elif not said:  # the rules it proposed call every image as the rule in use does
            said.append("no other rule would decide any of its images differently")
        return f"nothing left to review: {decider}; {'; '.join(said)}"

    def close(self) -> None:
        if self._store is not None:
            self._store.close()

    def take_notes(self) -> list[str]:
        notes, self.notes = self.notes, []
        return notes


__all__ = ["EmptyQueue", "MarkChange", "MarkError", "SiteReview", "site_images", "what_adapting_changed"]


def _listed(words: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def _layer_at(layers: Sequence[tuple[Rule, float, int]], local: int) -> tuple[Rule, float, int]:
    """The highest layer whose reach covers the image at ``local`` (the base reaches every one)."""
    for layer in reversed(layers):
        if layer[2] > local:
            return layer
    return layers[0]
