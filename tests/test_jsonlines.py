"""The one keyed JSON-lines store (engine.util.jsonlines): last record wins, torn lines skipped,
compaction, and a FIFO in its place never blocks a reader."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from engine.review.marks import MarkStore, ReviewMark
from engine.util.files import UnsafeFileError
from engine.util.jsonlines import KeyedJsonLines


def test_last_record_of_a_key_wins_and_a_torn_line_is_skipped(tmp_path: Path) -> None:
    store = KeyedJsonLines(tmp_path / "sub" / "f.jsonl", key="k")
    store.append({"k": "a", "v": 1})
    store.append({"k": "b", "v": 2})
    store.append({"k": "a", "v": 3}, durable=True)
    with open(store.path, "a", encoding="utf-8") as fh:
        fh.write('{"k": "c", "v"')  # cut short by a crash
    records, lines = store.read()
    assert records == {"b": {"k": "b", "v": 2}, "a": {"k": "a", "v": 3}}
    assert list(records) == ["b", "a"], "in the order of each key's last line"
    assert lines == 4
    store.rewrite(records.values())
    assert store.read() == (records, 2)


def test_a_fifo_in_place_of_the_file_is_refused_without_blocking(tmp_path: Path) -> None:
    path = tmp_path / "f.jsonl"
    os.mkfifo(path)
    with pytest.raises(UnsafeFileError):
        KeyedJsonLines(path, key="k").read()


def test_review_marks_survive_a_torn_line_and_a_fifo_reads_as_no_marks(tmp_path: Path) -> None:
    marks = MarkStore(tmp_path, "source", 2)
    marks.put(ReviewMark("a.png", 1, 0, "2026-11-26T10:00:00+00:00"))
    marks.put(ReviewMark("b.png", 0, 0, "2026-11-26T10:01:00+00:00"))
    marks.clear("b.png")
    with open(marks.path, "a", encoding="utf-8") as fh:
        fh.write('{"k": "c.png", "lab')
    before = marks.path.read_bytes()
    assert set(MarkStore(tmp_path, "source", 2).load().marks) == {"a.png"}
    assert marks.path.read_bytes() == before, "reading never rewrites the marks (issue 42, item 1)"
    other = MarkStore(tmp_path, "other", 2)
    os.mkfifo(other.path)
    loaded = other.load()
    marks_read, notes = loaded.marks, loaded.notes
    assert marks_read == {} and notes, "a FIFO is read as no marks with a note, never waited on"
