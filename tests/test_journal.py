"""The journal and the stream loop: rows before state, cut back on load, one failure policy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image
from support import failing_reader, random_images

from engine import (
    ImageReadError,
    Journal,
    Predicted,
    Saved,
    Session,
    Skipped,
    StateError,
    StreamRun,
    open_folder,
)
from engine.run.lock import LockedError
from engine.run.record import parse_record


def _folder(root: Path, n: int) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for i, img in enumerate(random_images(n, seed=3)):
        Image.fromarray(img).save(root / f"img{i}.png")
    return root


def test_rows_after_the_last_save_are_cut_back_and_the_file_compacted(
    tiny_model_path: Path, tmp_path: Path
) -> None:
    source = open_folder(_folder(tmp_path / "in", 6), ("normal", "tumor"))
    journal = Journal(tmp_path / "st")
    run = StreamRun(
        Session(tiny_model_path), source.items, source_id=source.source_id, journal=journal, save_every=3
    )
    outcomes = run.outcomes()
    predicted = 0
    for outcome in outcomes:  # stop right after the fifth row, two rows after the save at 3
        predicted += isinstance(outcome, Predicted)
        if predicted == 5:
            break
    journal.close()  # as a crash would leave it: 5 rows on disk, the state after 3 images
    rows_file = journal.rows_file(source.source_id)
    with rows_file.open("a") as fh:
        fh.write('{"index": 9, "key": "img9.p')  # a line cut short
    assert len(rows_file.read_text().splitlines()) == 6

    again = Journal(tmp_path / "st")
    session = Session(tiny_model_path)
    assert again.restore(session) and session.images_seen == 3
    assert [r.key for r in again.rows(source.source_id)] == ["img0.png", "img1.png", "img2.png"]
    assert len(rows_file.read_text().splitlines()) == 3, "rows the state does not list are dropped"
    rest = StreamRun(session, source.items, source_id=source.source_id, journal=again)
    assert [o.item.key for o in rest.outcomes() if isinstance(o, Predicted)] == [
        f"img{i}.png" for i in range(3, 6)
    ]
    again.close()


def test_unreadable_is_skipped_for_good_transient_is_retried_and_model_failure_ends_the_run(
    tiny_model_path: Path, tmp_path: Path
) -> None:
    folder = _folder(tmp_path / "in", 5)
    source = open_folder(folder, ("normal", "tumor"))
    transient = ImageReadError("img1.png: permission denied")
    transient.transient = True  # what the reader says of a file that may be readable later

    # any exception of reading is a skip, not a crash (img2: a bug in a reading plugin)
    reader = failing_reader({"img0.png"}, {"img1.png": transient, "img2.png": TypeError("a plugin bug")})

    session = Session(tiny_model_path)
    calls = [0]
    real_step = session.step_batch

    def step(images: list[Image.Image], sites: list[str | None] | None = None) -> object:
        calls[0] += 1
        if calls[0] == 2:
            raise RuntimeError("CUDA out of memory")
        return real_step(images, sites)

    session.step_batch = step  # type: ignore[method-assign,assignment]
    journal = Journal(tmp_path / "st")
    run = StreamRun(session, source.items, reader, source_id=source.source_id, journal=journal)
    outcomes = list(run.outcomes())
    skips = [o for o in outcomes if isinstance(o, Skipped)]
    assert [(s.item.key, s.transient) for s in skips] == [
        ("img0.png", False),
        ("img1.png", True),
        ("img2.png", False),
    ]
    assert "TypeError" in skips[2].reason
    summary = run.summary
    assert summary.failure is not None and "img4.png" in summary.failure.message
    assert "out of memory" in summary.failure.message and summary.processed == 1 and summary.saved
    assert isinstance(outcomes[-1], Saved) and outcomes[-1].error is None
    record = journal.source(source.source_id)
    assert record.processed == ["img3.png"] and [k for k, _ in record.skipped] == ["img0.png", "img2.png"]
    journal.close()

    again = Journal(tmp_path / "st")
    fresh = Session(tiny_model_path)
    again.restore(fresh)
    retry = StreamRun(fresh, source.items, source_id=source.source_id, journal=again)
    assert [o.item.key for o in retry.outcomes() if isinstance(o, Predicted)] == ["img1.png", "img4.png"]
    again.close()


def test_second_opener_is_told_who_holds_the_journal(tmp_path: Path) -> None:
    first = Journal(tmp_path / "st", command="f2tta run --input site")
    with pytest.raises(LockedError, match=r"in use by process \d+ on .*f2tta run --input site"):
        Journal(tmp_path / "st")
    first.close()
    Journal(tmp_path / "st").close()  # released: the next one gets it


def test_orphan_temp_files_are_removed_and_unusable_directories_refused_at_start(tmp_path: Path) -> None:
    state = tmp_path / "st"
    (state / "rows").mkdir(parents=True)
    orphans = [
        state / ".state.safetensors.x1y2.tmp",
        state / ".state.safetensors.backup.ab.tmp",
        state / "rows" / ".r.jsonl.q.tmp",
    ]
    for path in orphans:
        path.write_bytes(b"\0" * 100)
    keep = state / "notes.tmp"
    keep.write_text("not ours")
    Journal(state).close()
    assert not any(p.exists() for p in orphans) and keep.exists()
    (tmp_path / "file").write_text("x")
    with pytest.raises(StateError, match="not a directory"):
        Journal(tmp_path / "file")
    with pytest.raises(StateError, match="cannot be created"):
        Journal(tmp_path / "file" / "st")


def test_a_full_disk_is_found_before_the_work(
    tiny_model_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    journal = Journal(tmp_path / "st")
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage._replace(free=1024))
    with pytest.raises(StateError, match="MiB free, the state needs"):
        journal.check_space(Session(tiny_model_path))
    journal.close()


def test_journal_records_are_validated() -> None:
    assert parse_record({}, "x") == {}
    with pytest.raises(StateError, match="earlier version of f2tta run"):
        parse_record({"processed": ["a.png"], "skipped": [], "root": "/data"}, "x")
    with pytest.raises(StateError, match="malformed"):
        parse_record({"format": "f2tta/journal-1", "sources": {"s": {"processed": 5}}}, "x")
    with pytest.raises(StateError, match="unknown journal format"):
        parse_record({"format": "something else"}, "x")
    legacy = parse_record({"format": "f2tta-studio/profile-1", "processed": {"s": ["a", "b"]}}, "x")
    assert legacy["s"].processed == ["a", "b"] and json.dumps(legacy["s"].skipped) == "[]"


def _state_bytes(session: Session) -> int:
    return sum(t.numel() * t.element_size() for t in session.method.state_tensors().values())


def test_the_start_up_check_leaves_room_for_the_state_to_grow(
    tiny_model_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 21: the check asked for two copies of the state before any image (2.0 MB) and the
    state grew to 5.7 MB within 35 images, so the saves failed after the work was done."""
    import shutil

    grown = Session(tiny_model_path)  # the default method
    initial = _state_bytes(grown)
    for image in random_images(40, size=32):
        grown.step(image)
    assert _state_bytes(grown) > 2 * initial, "the state grows"
    journal = Journal(tmp_path / "st")
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage._replace(free=2 * initial + 2**20 + 1))
    with pytest.raises(StateError, match="MiB free, the state needs"):
        journal.check_space(Session(tiny_model_path))  # room for two initial states is not enough
    from engine.run.journal import STATE_GROWTH

    assert _state_bytes(grown) <= STATE_GROWTH * initial, "the allowance covers what the state grew to"
    monkeypatch.setattr(
        shutil, "disk_usage", lambda path: usage._replace(free=2 * STATE_GROWTH * initial + 2**20)
    )
    journal.check_space(Session(tiny_model_path))  # room for two grown states is enough
    journal.close()


def test_a_save_without_room_is_refused_before_a_byte_is_written(
    tiny_model_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno
    import shutil

    session = Session(tiny_model_path)
    journal = Journal(tmp_path / "st")
    session.step(random_images(1, size=32)[0])
    journal.save(session)
    saved = (tmp_path / "st" / "state.safetensors").read_bytes()
    session.step(random_images(2, size=32)[1])
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage._replace(free=len(saved) // 2))
    with pytest.raises(OSError, match="MiB free, saving the state needs") as info:
        journal.save(session)
    assert info.value.errno == errno.ENOSPC
    assert (tmp_path / "st" / "state.safetensors").read_bytes() == saved, "the previous state is kept"
    assert not [p.name for p in (tmp_path / "st").iterdir() if p.name.endswith(".tmp")]
    journal.close()


@pytest.mark.parametrize("which", ["journal.json", "lock", "rows"])
def test_journal_files_that_are_not_regular_are_refused_at_once(
    tiny_model_path: Path, tmp_path: Path, which: str
) -> None:
    """A tampered journal: a FIFO blocked the open for ever, ``/dev/zero`` was read without end."""
    import os
    import threading

    from engine.io.sources import source_hash
    from engine.run.journal import ROWS_DIR

    state = tmp_path / "st"
    state.mkdir()
    if which == "rows":
        (state / ROWS_DIR).mkdir()
        (state / ROWS_DIR / f"{source_hash('src')}.jsonl").symlink_to("/dev/zero")
    else:
        os.mkfifo(state / which)
    outcome: list[object] = []

    def open_and_read() -> None:
        try:
            journal = Journal(state)
            try:
                journal.rows("src")
            finally:
                journal.close()
            outcome.append("opened")
        except Exception as exc:
            outcome.append(exc)

    thread = threading.Thread(target=open_and_read, daemon=True)
    thread.start()
    thread.join(10)
    assert outcome, "still blocked after 10 s"
    assert isinstance(outcome[0], OSError | StateError) and "not a regular file" in str(outcome[0]), outcome
