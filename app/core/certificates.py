"""Review certificates as the app keeps and shows them (Qt-free).

A source's :class:`~engine.review.book.CertificateBook` lives beside its review marks in the
profile, ``<profile>/review/<source hash>.certificates.json``: plain JSON in the engine's own
format (never pickle), written atomically after every review and whenever the state is saved,
read back with the engine's strict checks (which replay every review). What the file holds beyond
the rows and the marks is *when* each verdict was reached (a revert is permanent), so the verdicts
survive a restart. This module also words what the window, the banners and the reports say about
a group: the certificates table, the queue's group column and the note on a reverted row.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from app._engine import (
    UNDECIDED,
    Certificate,
    CertificateBook,
    CertificateError,
    PredictionRow,
    UnsafeFileError,
    atomic_write_bytes,
    read_regular,
)
from app.core.reviews import source_file

SUFFIX = "certificates.json"
MAX_BYTES = 16 << 20  # the engine's own limit on a book's JSON
REVERTED_PATH = "reverted"  # the decision path of a reverted group's rows (as the table and reports show it)
Group = int | None


class CertificateFile:
    """One source's certificates in a profile's review folder.

    Args:
        folder: the profile's review folder.
        source_id: the source's identity (as in the journal).
    """

    def __init__(self, folder: Path, source_id: str) -> None:
        self.path = source_file(folder, source_id, SUFFIX)

    def load(self) -> CertificateBook | None:
        """The saved book (None: none was saved yet).

        Raises:
            CertificateError: the file is not a book the app wrote (damaged, edited, not JSON,
                not a regular file, too large); the message says what.
        """
        if not self.path.exists() and not self.path.is_symlink():
            return None
        try:
            text = read_regular(self.path, MAX_BYTES, "certificates file")
        except (OSError, UnsafeFileError) as exc:
            raise CertificateError(f"cannot be read ({exc})") from exc
        return CertificateBook.from_json(text)

    def save(self, book: CertificateBook) -> None:
        """Write ``book`` atomically (a crash leaves the old file or the new one, never half).

        Raises:
            OSError: it cannot be written.
        """
        self.path.parent.mkdir(exist_ok=True)  # the review folder; never the profile's (see ReviewDesk.close)
        atomic_write_bytes(self.path, (book.to_json() + "\n").encode("utf-8"))


def group_name(group: Group) -> str:
    """A group as the tables show it ("–": the images judged in no site group)."""
    return "–" if group is None else str(group)


def outcomes_of(
    rows: Mapping[str, PredictionRow], marks: Iterable[tuple[str, int]]
) -> dict[Group, list[int]]:
    """The ``z`` of every mark on a disagreement, per group, in the marks' order (what a book holds)."""
    out: dict[Group, list[int]] = {}
    for key, label in marks:
        row = rows.get(key)
        if row is None or not row.changed:
            continue
        z = int(row.prediction == label) - int(row.source_prediction == label)
        out.setdefault(row.site_group, []).append(z)
    return out


def matches(book: CertificateBook, outcomes: Mapping[Group, list[int]]) -> bool:
    """Whether ``book`` holds exactly these reviews, group by group and in this order."""
    held = {g: c.outcomes for g, c in book.certificates.items() if c.outcomes}
    return held == {g: z for g, z in outcomes.items() if z}


def reverted_row(row: PredictionRow, reviews: int, positive_class: int, classes: int) -> PredictionRow:
    """``row`` (the engine's) as shown once its group is reverted: the source model's decision.

    The adapted decision is named in ``decision_reason``, so the table's tooltip and the
    predictions CSV keep both; the journal's row is never changed.
    """
    src = row.source_prediction
    if src == positive_class:
        positive = row.source_confidence
    elif classes == 2:
        positive = 1.0 - row.source_confidence
    else:
        positive = math.nan  # the source model's probability of another class is not recorded
    where = "the images in no site group" if row.site_group is None else f"site group {row.site_group}"
    adapted = f"adapted: {row.prediction_label}, " if row.changed else "adapted: the same, "
    return dataclasses.replace(
        row,
        prediction=src,
        prediction_label=row.source_label,
        confidence=row.source_confidence,
        positive_prob=positive,
        decision_path=REVERTED_PATH,
        decision_threshold=0.0,
        decision_reason=(
            f"{adapted}reverted to the source model's: {row.source_label}; "
            f"{where} reverted after {reviews} reviews"
        ),
    )


@dataclass(frozen=True)
class GroupLine:
    """One line of the certificates table."""

    group: Group
    images: int
    disagreements: int
    reviews: int  # reviews used (of disagreements)
    harm_bound: float  # upper bound on the harm of adapting, share of the group's images (95 %)
    lower: float  # lower bound on the mean gain per changed decision (95 %)
    verdict: str
    decided_at: int | None  # reviews when the verdict was reached
    to_decide: int | None  # reviews that would likely decide it (None: more than the look-ahead)

    @property
    def decision(self) -> str:
        """What the last column says."""
        if self.verdict != UNDECIDED:
            return f"{self.verdict} after {self.decided_at} reviews"
        if not self.disagreements:
            return "nothing to review (no disagreements)"
        if self.to_decide:
            return f"≈{self.to_decide} more review{'s' if self.to_decide > 1 else ''} would likely decide it"
        return "may stay undecided" if self.reviews else "no reviews yet"


class LineCache:
    """:meth:`Certificate.reviews_to_decide` (tens of milliseconds) at most once per group state."""

    def __init__(self) -> None:
        self._seen: dict[tuple[Group, tuple[int, ...], float], int | None] = {}

    def lines(self, book: CertificateBook) -> list[GroupLine]:
        """One line per group: those with disagreements first (the others have nothing to review)."""
        lines = [self._line(c) for c in book.certificates.values()]
        return sorted(lines, key=lambda line: not line.disagreements)

    def _line(self, cert: Certificate) -> GroupLine:
        to_decide = None
        if cert.verdict == UNDECIDED and cert.reviews:  # with no review the projection says nothing
            key = (cert.group, tuple(cert.outcomes), round(cert.share, 2))  # d moves slowly as images arrive
            if key not in self._seen:
                self._seen[key] = cert.reviews_to_decide()
            to_decide = self._seen[key]
        return GroupLine(
            cert.group,
            cert.images,
            cert.disagreements,
            cert.reviews,
            cert.harm_bound,
            cert.lower,
            cert.verdict,
            cert.decided_at,
            to_decide,
        )


@dataclass(frozen=True)
class Reverted:
    """A group turned reverted (for the banner and the log)."""

    group: Group
    reviews: int  # reviews it took
    images: int  # the group's images, now shown with the source model's decisions
    earlier: bool = False  # reverted before the source was opened (a restart)

    def text(self) -> str:
        name = "The images in no site group" if self.group is None else f"Group {self.group}"
        if self.earlier:
            return (
                f"{name} is reverted (after {self.reviews} reviews): its {self.images} images show the "
                "source model's decisions, as adapting harmed there."
            )
        return (
            f"{name} reverted after {self.reviews} reviews: its {self.images} images now show the source "
            "model's decisions (adapting harmed there, as the reviews show)."
        )


@dataclass(frozen=True)
class QueueState:
    """The review queue as the table shows it.

    Attributes:
        ranks: each queued row's place in the queue (0 first), by its index in arrival order.
        verdicts: every group's verdict (the table's group column).
    """

    ranks: dict[int, int]
    verdicts: dict[Group, str]
