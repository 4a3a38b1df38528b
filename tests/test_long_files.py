"""JSON-lines files are read as streams, and a marks file is bounded (issue 42, item 8).

60 MB of junk in a marks or rows file cost +1.4 GB and 5-7 minutes, with no warning: each file was
read whole, and the nesting of each junk line was measured before it was parsed (the app reads
marks on its GUI thread). A store now reads a line at a time, junk fails in the C parser, the lines
skipped are said in one warning naming the file, and a file larger than its store's bound (a
project's marks: 16 MiB) is refused before it is read, left as it is.
"""

from __future__ import annotations

import json
import logging
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from engine import Journal, Session, StreamRun
from engine.io.sources import StreamItem
from engine.review.marks import MarkStore, ReviewMark
from engine.util.jsonlines import MAX_FILE_BYTES, MAX_LINE_CHARS, MAX_LINE_DEPTH, KeyedJsonLines

JUNK_BYTES = 60 << 20
TRACED_LIMIT = 16 << 20  # what reading may hold at most beyond the records kept


def _junk(path: Path, size: int = JUNK_BYTES) -> None:
    """``size`` bytes of lines that are not records (text, as a file pasted over a marks file)."""
    line = b"not a record: " + b"x" * 100 + b"\n"
    with path.open("ab") as fh:
        fh.write(line * (size // len(line)))


def _peak(call: Callable[[], object]) -> tuple[object, int]:
    tracemalloc.start()
    try:
        result = call()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_marks_file_of_60_mb_is_refused_unread_with_a_message(tmp_path: Path) -> None:
    store = MarkStore(tmp_path, "source", 2)
    store.put(ReviewMark("a.png", 1, 0, "2026-11-26T10:00:00+00:00"))
    _junk(store.path)
    before = store.path.stat().st_size
    loaded, peak = _peak(lambda: MarkStore(tmp_path, "source", 2).load())
    # load() gives (marks, blocks, notes), as a tuple or as an object with those names
    marks, notes = (loaded.marks, loaded.notes) if hasattr(loaded, "notes") else (loaded[0], loaded[-1])  # type: ignore[index]
    assert marks == {} and any("MiB" in n and "not read" in n for n in notes), notes
    assert peak < TRACED_LIMIT, f"{peak / 2**20:.1f} MiB traced"
    assert store.path.stat().st_size == before, "the file is left as it is"


def test_a_rows_file_with_60_mb_of_junk_is_streamed_and_said(
    tiny_model_path: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    journal = Journal(tmp_path / "state")
    session = Session(tiny_model_path, method="source")
    items = [StreamItem(i, f"im{i}.png", f"im{i}.png") for i in range(3)]
    rng = np.random.default_rng(0)
    images = [rng.integers(0, 256, (32, 32, 3), dtype=np.uint8) for _ in items]
    list(
        StreamRun(
            session, items, lambda item: images[item.position], source_id="s", journal=journal
        ).outcomes()
    )
    journal.close()
    journal = Journal(tmp_path / "state")
    journal.restore(Session(tiny_model_path, method="source"))
    _junk(journal.rows_file("s"))
    with caplog.at_level(logging.WARNING):
        rows, peak = _peak(lambda: journal.rows("s"))
    assert [r.key for r in rows] == ["im0.png", "im1.png", "im2.png"]  # type: ignore[attr-defined]
    assert peak < TRACED_LIMIT, f"{peak / 2**20:.1f} MiB traced"
    assert any("are not records" in r.getMessage() and r.getMessage().startswith(str(journal.rows_file("s")))
               for r in caplog.records)  # fmt: skip
    assert journal.rows_file("s").stat().st_size < 4096, "the journal's own file is compacted"
    journal.close()


def test_lines_that_cannot_be_records_are_skipped_the_others_kept(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "f.jsonl"
    deep_ok = {"k": "deep", "v": json.loads("[" * (MAX_LINE_DEPTH - 1) + "]" * (MAX_LINE_DEPTH - 1))}
    lines = [
        json.dumps({"k": "a", "v": 1}),
        "[" * 200_000,  # json.loads recursed until RecursionError
        "[" * 40 + "]" * 40,  # valid JSON, not an object
        json.dumps({"k": "too-deep", "v": json.loads("[" * MAX_LINE_DEPTH + "]" * MAX_LINE_DEPTH)}),
        json.dumps(deep_ok),
        json.dumps({"k": "long", "v": "x" * MAX_LINE_CHARS}),
        json.dumps({"k": "b", "v": 2}),
        json.dumps({"no key": 1}),
    ]
    path.write_text("\n".join(lines) + '\n{"k": "torn", "v"')
    with caplog.at_level(logging.WARNING):
        store = KeyedJsonLines(path, key="k")
        records, count = store.read()
    assert list(records) == ["a", "deep", "b"] and records["deep"] == deep_ok
    assert count == len(lines) + 1 and store.skipped == 6
    assert [r.getMessage() for r in caplog.records] == [
        f"{path}: 6 of its 9 lines are not records (damaged, or not written by f2tta); they were not used"
    ]


def test_a_torn_last_line_alone_is_not_warned_about(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "f.jsonl"
    path.write_text('{"k": "a"}\n{"k": "b", "v"')
    with caplog.at_level(logging.WARNING):
        assert list(KeyedJsonLines(path, key="k").read()[0]) == ["a"]
    assert not caplog.records


def test_the_bound_is_the_stores(tmp_path: Path) -> None:
    """The control: a store without a bound reads a file over the default's, a line at a time."""
    path = tmp_path / "f.jsonl"
    _junk(path, MAX_FILE_BYTES + 1024)
    path.open("a").write(json.dumps({"k": "a"}) + "\n")
    records, peak = _peak(lambda: KeyedJsonLines(path, key="k", max_bytes=None).read())
    assert list(records[0]) == ["a"] and peak < TRACED_LIMIT  # type: ignore[index]


def test_a_predictions_csv_is_read_back_no_further_than_the_journals_rows(
    tiny_model_path: Path, tmp_path: Path
) -> None:
    """``f2tta run`` reads its ``--out`` back on resume to check it is the state's: 60 MB of junk
    after its rows were read whole (3.5 GB, two minutes). Only the rows the journal has are read."""
    from cli_helpers import read_rows, run_argv

    from engine.cli import main as f2tta
    from engine.run.rows import CSV_COLUMNS, LEGACY_CSV_HEADERS, read_csv_records

    folder = tmp_path / "site"
    folder.mkdir()
    rng = np.random.default_rng(1)
    for i in range(4):
        Image.fromarray(rng.integers(0, 256, (40, 40, 3), dtype=np.uint8)).save(folder / f"im{i}.png")
    out = tmp_path / "out.csv"
    argv = run_argv(
        tiny_model_path, folder, out, tmp_path / "state", "--method", "source", "--accept-warnings"
    )
    assert f2tta(argv) == 0
    rows = read_rows(out)
    with out.open("a") as fh:
        fh.write("x,x,x,x,x,y\n" * ((6 << 20) // 12))
    records, peak = _peak(lambda: read_csv_records(out, CSV_COLUMNS, LEGACY_CSV_HEADERS, limit=4))
    assert records == rows and peak < 2 << 20, f"{peak / 2**20:.1f} MiB traced"
    assert f2tta(argv) == 0 and read_rows(out) == rows, "rewritten from the journal, as before"
