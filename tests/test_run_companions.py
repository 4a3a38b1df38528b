"""Every file ``f2tta run`` writes is owned like ``--out`` (issue 29, case 2 and its "Also" line).

``--reviews R --out D/preds.csv`` silently replaced another person's ``preds.certified.csv``,
``preds.certificates.json`` and ``preds.config.json`` (exit 0): only ``--out`` was checked. A
FIFO at ``OUT.certified.csv`` was found only after the run. A reviews file that could not be used
printed a blank ``error:`` line after the real one, and a run that had finished exited 2 ("nothing
started"). And a folder being copied into was processed as it was listed, with no word of the
images that arrived meanwhile (issue 27, item 7).
"""

from __future__ import annotations

import csv
import json
import os
import threading
from pathlib import Path

import pytest
from PIL import Image
from support import random_images

from engine.cli import main as cli_main
from engine.io.sources import source_hash
from engine.run.runner import EXIT_FAILED, EXIT_USAGE
from tests.cli_helpers import before_step, read_rows, run_argv

COMPANIONS = ("out.skipped.csv", "out.config.json", "out.certified.csv", "out.certificates.json")


def _folder(root: Path, n: int, seed: int = 4, start: int = 0) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for i, img in enumerate(random_images(n, seed=seed)):
        Image.fromarray(img).save(root / f"img{start + i:02d}.png")
    return root


def _reviews(path: Path, item: str = "img00.png") -> Path:
    """A reviews file of the folder ``in`` beside ``path`` (the app's export names its folder)."""
    site = source_hash(str((path.parent / "in").resolve()))
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["item", "review", "reviewed_at", "site"])
        writer.writerow([item, "normal", "2026-11-26T10:00:00", site])
    return path


def _run(model: Path, inp: Path, out: Path, state: Path, *extra: str) -> int:
    return int(cli_main(run_argv(model, inp, out, state, "--batch", "1", *extra)))


def _refused_before_the_run(
    code: object, capsys: pytest.CaptureFixture[str], out: Path, state: Path, *named: str
) -> None:
    """``f2tta run`` exited ``code``: a usage error whose message names each of ``named``, given
    before the state folder or ``out`` was made."""
    assert code == EXIT_USAGE, code
    err = capsys.readouterr().err
    assert all(words in err for words in named), err
    assert not out.exists() and not state.exists(), "refused before the state folder or --out was made"


def test_run_files_names_every_output_once() -> None:
    from engine.run.outputs import run_files

    out = Path("/d/preds.csv")
    names = [p.name for p in run_files(out, reviews=True)]
    assert names == [
        "preds.csv",
        "preds.skipped.csv",
        "preds.config.json",
        "preds.certified.csv",
        "preds.certificates.json",
    ]
    assert [p.name for p in run_files(out)] == names[:3]


@pytest.mark.parametrize("companion", COMPANIONS)
def test_someone_elses_companion_file_is_refused_before_the_run(
    tiny_model_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], companion: str
) -> None:
    inp = _folder(tmp_path / "in", 3)
    theirs = tmp_path / companion
    theirs.write_text("another person's results\n", encoding="utf-8")
    out, state = tmp_path / "out.csv", tmp_path / "st"
    code = _run(tiny_model_path, inp, out, state, "--reviews", str(_reviews(tmp_path / "r.csv")))
    _refused_before_the_run(code, capsys, out, state, str(theirs), "nothing was changed")
    assert theirs.read_text(encoding="utf-8") == "another person's results\n"


def test_someone_elses_companion_is_refused_also_when_the_state_exists(
    tiny_model_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The state ran before with another --out; D/out.certificates.json is not its file."""
    inp = _folder(tmp_path / "in", 3)
    state = tmp_path / "st"
    assert _run(tiny_model_path, inp, tmp_path / "first.csv", state) == 0
    theirs = tmp_path / "out.certificates.json"
    theirs.write_text('{"groups": ["theirs"]}\n', encoding="utf-8")
    code = _run(
        tiny_model_path, inp, tmp_path / "out.csv", state, "--reviews", str(_reviews(tmp_path / "r.csv"))
    )
    assert code == EXIT_USAGE
    assert str(theirs) in capsys.readouterr().err
    assert theirs.read_text(encoding="utf-8") == '{"groups": ["theirs"]}\n'
    assert not (tmp_path / "out.csv").exists()


def test_a_companion_of_another_input_is_refused(
    tiny_model_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One state, two folders, one --out stem: the second folder would replace the first's files."""
    first, second = _folder(tmp_path / "a", 3), _folder(tmp_path / "b", 3, seed=5)
    state = tmp_path / "st"
    assert _run(tiny_model_path, first, tmp_path / "out.csv", state) == 0
    before = (tmp_path / "out.config.json").read_bytes()
    (tmp_path / "out.csv").unlink()  # the predictions moved away; their companions stayed
    assert _run(tiny_model_path, second, tmp_path / "out.csv", state) == EXIT_USAGE
    assert "another input" in capsys.readouterr().err
    assert (tmp_path / "out.config.json").read_bytes() == before


def test_a_run_resumes_over_its_own_companions_and_a_journal_from_before_the_check(
    tiny_model_path: Path, tmp_path: Path
) -> None:
    inp = _folder(tmp_path / "in", 3)
    out, state = tmp_path / "out.csv", tmp_path / "st"
    reviews = ("--reviews", str(_reviews(tmp_path / "r.csv")))
    assert _run(tiny_model_path, inp, out, state, *reviews) == 0
    owned = json.loads((state / "journal.json").read_text(encoding="utf-8"))["outputs"]
    assert {Path(p).name for p in owned} == {"out.csv", *COMPANIONS}
    assert _run(tiny_model_path, inp, out, state, *reviews) == 0, "its own files are its own"
    # A journal written before companions were recorded owns only --out: its companions are its own.
    meta = json.loads((state / "journal.json").read_text(encoding="utf-8"))
    meta["outputs"] = {p: s for p, s in meta["outputs"].items() if Path(p).name == "out.csv"}
    (state / "journal.json").write_text(json.dumps(meta), encoding="utf-8")
    _folder(inp, 1, seed=9, start=3)
    assert _run(tiny_model_path, inp, out, state, *reviews) == 0
    assert len(read_rows(out)) == 4 and len(read_rows(tmp_path / "out.certified.csv")) == 4


@pytest.mark.parametrize("companion", ["out.certified.csv", "out.certificates.json"])
def test_a_fifo_at_a_certificate_output_is_refused_before_the_run(
    tiny_model_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], companion: str
) -> None:
    inp = _folder(tmp_path / "in", 3)
    fifo = tmp_path / companion
    os.mkfifo(fifo)
    out, state = tmp_path / "out.csv", tmp_path / "st"
    argv = run_argv(tiny_model_path, inp, out, state, "--reviews", str(_reviews(tmp_path / "r.csv")))
    box: list[object] = []

    def call() -> None:
        try:
            box.append(cli_main(argv))
        except BaseException as exc:  # (the run itself cannot start off the main thread: signals)
            box.append(exc)

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    thread.join(60)
    assert len(box) == 1, "refused at once, not blocked on the FIFO"
    _refused_before_the_run(box[0], capsys, out, state, "not a regular file", str(fifo))


def test_a_reviews_file_that_cannot_be_used_is_refused_before_the_run_with_one_error_line(
    tiny_model_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inp = _folder(tmp_path / "in", 3)
    bad = tmp_path / "r.csv"
    bad.write_text("item,label\nimg00.png,tumor\n", encoding="utf-8")
    out, state = tmp_path / "out.csv", tmp_path / "st"
    assert _run(tiny_model_path, inp, out, state, "--reviews", str(bad)) == EXIT_USAGE
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "review, reviewed_at" in errors[0], err
    assert read_rows(out) == [], "nothing was processed"


def test_a_finished_run_is_never_reported_as_nothing_started(
    tiny_model_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The reviews file is replaced during the run by one that cannot be used."""
    inp = _folder(tmp_path / "in", 3)
    reviews = _reviews(tmp_path / "r.csv")

    def spoil(n: int) -> None:
        if n == 2:
            reviews.write_text("no columns here\n", encoding="utf-8")

    before_step(monkeypatch, spoil)
    out, state = tmp_path / "out.csv", tmp_path / "st"
    code = _run(tiny_model_path, inp, out, state, "--reviews", str(reviews))
    assert code == EXIT_FAILED
    err = capsys.readouterr().err
    assert len(read_rows(out)) == 3
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert errors and all(line.strip() != "error:" for line in errors), err
    assert "the run finished" in err


def test_images_that_arrive_during_the_run_are_counted_and_taken_by_the_next_run(
    tiny_model_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    inp = _folder(tmp_path / "in", 4)

    def copy_more(n: int) -> None:
        if n == 2:
            _folder(inp, 3, seed=8, start=4)

    restore = before_step(monkeypatch, copy_more)
    out, state = tmp_path / "out.csv", tmp_path / "st"
    assert _run(tiny_model_path, inp, out, state) == 0
    err = capsys.readouterr().err
    assert "3 new images arrived in the folder during the run" in err and "the next run" in err
    assert len(read_rows(out)) == 4
    restore()
    assert _run(tiny_model_path, inp, out, state) == 0
    assert len(read_rows(out)) == 7
    assert "arrived" not in capsys.readouterr().err, "nothing said when nothing arrived"
