"""One site's review in the engine: marks bound to their folder, a derived ladder, undo, the queue."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from engine.review.ladder import PROMOTED
from engine.review.marks import MarkError, MarkStore, ReviewMark, marks_path, parse_time
from engine.run.review import SiteReview
from engine.run.rows import PredictionRow
from tests.review_rows import review_all, site_rows


def test_the_queue_samples_a_frozen_population_and_a_restart_rebuilds_the_same_ladder(tmp_path: Path) -> None:
    rows, labels = site_rows()
    review = SiteReview(tmp_path, "/data/folder A", 2)
    review.open(rows[:200])
    first = review.next_item()
    assert first is not None and first < 200 and review.starts == [200]
    review.add_rows(rows[200:])  # more images arrive while the review goes on
    made = review_all(review, labels)
    assert 0 < made < 60
    promoted = [c for c in review.comparisons() if c.verdict == PROMOTED]
    assert [c.candidate for c in promoted] == ["fit"] and promoted[0].population == 200
    # the later images were covered by a block of their own, frozen once the first was decided
    assert [(b.start, b.end) for b in promoted[0].blocks] == [(0, 200), (200, 240)]
    assert promoted[0].covered == 240 and not review.provisional().any()
    decided = review.decisions()
    assert np.mean(decided == labels) > np.mean(np.array([r.source_prediction for r in rows]) == labels)
    assert not (tmp_path / "certificates.json").exists()  # nothing to edit: certificates are derived
    again = SiteReview(tmp_path, "/data/folder A", 2)
    again.open(rows)
    assert [(c.candidate, c.verdict, len(c.reviewed)) for c in again.comparisons()] == [
        (c.candidate, c.verdict, len(c.reviewed)) for c in review.comparisons()
    ]
    assert np.array_equal(again.decisions(), decided)


def test_undoing_the_deciding_mark_reopens_the_comparison(tmp_path: Path) -> None:
    rows, labels = site_rows()
    review = SiteReview(tmp_path, "folder", 2)
    review.open(rows)
    review_all(review, labels)
    decided = review.comparisons()[-1]  # the last mark decided the last comparison
    assert decided.verdict != "open" and review.ladder.active is None
    assert review.undo() is not None
    reopened = review.ladder.active
    assert reopened is not None and reopened.candidate == decided.candidate and reopened.verdict == "open"
    # the mark taken back and, where an answer given to an earlier comparison came next in this
    # one's order, the answers it had used after it
    assert 0 < len(reopened.reviewed) < len(decided.reviewed)
    assert reopened.reviewed == decided.reviewed[: len(reopened.reviewed)]
    assert review.redo() is not None and review.ladder.active is None
    assert review.history() == (review.rows[decided.reviewed[-1]].key, "")


def test_marks_from_another_folder_are_refused_with_a_message(tmp_path: Path) -> None:
    """A marks file copied from another folder with the same file names is never used (issue 29, 7)."""
    rows, labels = site_rows()
    other = SiteReview(tmp_path / "b", "/data/folder B", 2)
    other.open(rows)
    review_all(other, 1 - labels)  # contradicting marks
    mine = tmp_path / "a"
    mine.mkdir()
    marks_path(tmp_path / "b", "/data/folder B").rename(marks_path(mine, "/data/folder A"))
    review = SiteReview(mine, "/data/folder A", 2)
    review.open(rows)
    assert review.marks == {} and review.starts == []
    notes = review.take_notes()
    assert any("another folder" in n for n in notes)


def test_marks_naming_classes_that_do_not_exist_are_refused(tmp_path: Path) -> None:
    """Issue 29, 13: a mark of class 99 or -1 for a two-class model is refused when made and when read."""
    rows, _ = site_rows(20)
    review = SiteReview(tmp_path, "folder", 2)
    review.open(rows)
    for bad in (99, -1):
        with pytest.raises(MarkError, match="not one of the model's 2 classes"):
            review.set_mark(rows[0].key, bad)
    assert review.marks == {}
    with pytest.raises(MarkError, match="not an image"):
        review.set_mark("elsewhere.png", 1)
    path = marks_path(tmp_path, "folder")
    store = MarkStore(tmp_path, "folder", 2)
    record = {
        "k": rows[1].key,
        "site": store.site,
        "label": 99,
        "prediction": 0,
        "at": "2026-11-27T09:00:00+01:00",
    }
    path.write_text(json.dumps(record) + "\n")
    again = SiteReview(tmp_path, "folder", 2)
    again.open(rows)
    assert again.marks == {} and any("classes" in n for n in again.take_notes())


def test_times_are_compared_as_times_not_text(tmp_path: Path) -> None:
    """Issue 29, 6: marks written under different UTC offsets keep the order they were made in."""
    rows, _ = site_rows(10)
    store = MarkStore(tmp_path, "folder", 2)
    # 09:30 at +02:00 is 07:30 UTC, earlier than 08:00 at +00:00, though it sorts later as text
    store.put(ReviewMark(rows[0].key, 1, 0, "2026-03-29T08:00:00+00:00", "b"))
    store.put(ReviewMark(rows[1].key, 0, 0, "2026-03-29T09:30:00+02:00", "a"))
    marks = store.load().marks
    assert list(marks) == [rows[1].key, rows[0].key]
    assert parse_time("2026-03-29T09:30:00+02:00") < parse_time("2026-03-29T08:00:00+00:00")
    with pytest.raises(MarkError, match="not a time"):
        parse_time("yesterday")


def test_tampered_starts_are_ignored_and_the_review_goes_on(tmp_path: Path) -> None:
    rows, _labels = site_rows()
    review = SiteReview(tmp_path, "folder", 2)
    review.open(rows)
    assert review.next_item() is not None
    store = MarkStore(tmp_path, "folder", 2)
    store._file.append({"k": "\u0000start", "site": store.site, "starts": [500, 3]})
    again = SiteReview(tmp_path, "folder", 2)
    again.open(rows)
    # the tampered record is set aside with a note; the block the first review recorded stands
    assert again.starts == [240] and any("out of order" in n for n in again.take_notes())
    assert again.next_item() == review.next_item()  # the same comparison, the same order


def test_nothing_to_review_says_why(tmp_path: Path) -> None:
    review = SiteReview(None, "folder", 2)
    review.open([])
    assert review.next_item() is None and "no image" in review.why_empty()
    rows, _ = site_rows(30)
    same = [
        PredictionRow(**{**r.__dict__, "candidates": (("fit", 0.0), ("prior", math.nan), ("shift", 0.0))})
        for r in rows
    ]
    review.open(same)
    assert review.next_item() is None and "nothing left to review" in review.why_empty()
