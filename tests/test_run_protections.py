"""``f2tta run`` against careless use (issue 13): exit codes that mean something, saved settings
never overridden, one process per state, outputs never written over, spreadsheets and Ctrl-C."""

from __future__ import annotations

import csv
import os
import signal
import time
from pathlib import Path

import pytest
from PIL import Image
from support import random_images

from engine import Journal
from engine.cli import main as cli_main
from engine.run.state import read_state
from tests.cli_helpers import before_step, out_of_memory_at, read_rows, run_argv


def _folder(root: Path, n: int, names: list[str] | None = None) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for i, img in enumerate(random_images(n, seed=21)):
        Image.fromarray(img).save(root / (names[i] if names else f"img{i:02d}.png"))
    return root


def _bad(path: Path) -> Path:
    path.write_bytes(b"this is not an image")
    os.utime(path, (time.time() - 3600, time.time() - 3600))  # not being written: a permanent skip
    return path


def _run(model: Path, inp: Path, out: Path, state: Path, *extra: str) -> int:
    return cli_main(run_argv(model, inp, out, state, "--batch", "1", *extra))


def test_model_failure_is_not_a_skip_it_fails_the_run_and_is_retried(
    tiny_model_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    inp = _folder(tmp_path / "in", 6)
    out, state = tmp_path / "p.csv", tmp_path / "st"
    restore = before_step(monkeypatch, out_of_memory_at(3))
    assert _run(tiny_model_path, inp, out, state) == 1
    err = capsys.readouterr().err
    assert "img02.png: ran out of memory" in err and "tried again by the next run" in err
    assert [r["item"] for r in read_rows(out)] == ["img00.png", "img01.png"]
    assert read_rows(tmp_path / "p.skipped.csv") == [], "a model failure is not recorded as a skip"
    restore()
    assert _run(tiny_model_path, inp, out, state) == 0
    assert [r["item"] for r in read_rows(out)] == [f"img{i:02d}.png" for i in range(6)]


def test_exit_code_says_when_too_little_could_be_processed(
    tiny_model_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    only_bad = tmp_path / "bad"
    only_bad.mkdir()
    for i in range(4):
        _bad(only_bad / f"b{i}.png")
    assert _run(tiny_model_path, only_bad, tmp_path / "a.csv", tmp_path / "sa") == 3
    assert "none of the 4 images could be processed" in capsys.readouterr().err
    assert _run(tiny_model_path, only_bad, tmp_path / "a.csv", tmp_path / "sa") == 3, "and again on resume"

    mixed = _folder(tmp_path / "mixed", 3)
    for i in range(4):
        _bad(mixed / f"b{i}.png")
    assert _run(tiny_model_path, mixed, tmp_path / "m.csv", tmp_path / "sm") == 3  # 4 of 7 > 50 %
    assert "4 of 7 images could not be processed" in capsys.readouterr().err
    assert _run(tiny_model_path, mixed, tmp_path / "m.csv", tmp_path / "sm", "--max-skipped", "0.6") == 0


def test_set_that_differs_from_the_saved_state_is_refused(
    tiny_model_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inp = _folder(tmp_path / "in", 3)
    out, state = tmp_path / "p.csv", tmp_path / "st"
    assert _run(tiny_model_path, inp, out, state, "--set", "mc_passes=3") == 0
    before = (state / "state.safetensors").read_bytes()
    Image.fromarray(random_images(1, seed=5)[0]).save(inp / "z_new.png")
    assert _run(tiny_model_path, inp, out, state, "--set", "mc_passes=4") == 2
    err = capsys.readouterr().err
    assert "mc_passes: 3 saved, 4 now" in err and "run again without --set" in err and "new --state" in err
    assert (state / "state.safetensors").read_bytes() == before and len(read_rows(out)) == 3
    assert _run(tiny_model_path, inp, out, state) == 0, "without --set the saved settings continue"
    assert read_state(state)[1]["method_config"]["mc_passes"] == 3 and len(read_rows(out)) == 4


def test_second_run_on_a_state_in_use_is_refused_and_names_the_holder(
    tiny_model_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inp = _folder(tmp_path / "in", 2)
    holder = Journal(tmp_path / "st", command="f2tta run --input elsewhere")
    try:
        assert _run(tiny_model_path, inp, tmp_path / "p.csv", tmp_path / "st") == 2
    finally:
        holder.close()
    err = capsys.readouterr().err
    assert f"in use by process {os.getpid()}" in err and "f2tta run --input elsewhere" in err
    assert not (tmp_path / "p.csv").exists()
    assert _run(tiny_model_path, inp, tmp_path / "p.csv", tmp_path / "st") == 0


def test_existing_out_of_another_state_is_never_truncated(
    tiny_model_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inp = _folder(tmp_path / "in", 3)
    out = tmp_path / "p.csv"
    assert _run(tiny_model_path, inp, out, tmp_path / "st") == 0
    written = out.read_bytes()
    assert _run(tiny_model_path, inp, out, tmp_path / "sT") == 2  # a mistyped --state
    assert "not written with the state" in capsys.readouterr().err
    assert out.read_bytes() == written and not (tmp_path / "sT").exists()
    other = tmp_path / "other.csv"
    other.write_text("patient,result\n1,positive\n")
    assert _run(tiny_model_path, inp, other, tmp_path / "st") == 2
    assert other.read_text() == "patient,result\n1,positive\n"


def test_formula_cells_are_escaped(tiny_model_path: Path, tmp_path: Path) -> None:
    names = ["=HYPERLINK(1).png", "+cmd.png", "-2+3.png", "@SUM(1).png", "plain.png"]
    inp = _folder(tmp_path / "in", len(names), names)
    out = tmp_path / "p.csv"
    assert _run(tiny_model_path, inp, out, tmp_path / "st") == 0
    items = sorted(r["item"] for r in read_rows(out))
    assert items == sorted(["'=HYPERLINK(1).png", "'+cmd.png", "'-2+3.png", "'@SUM(1).png", "plain.png"])
    assert _run(tiny_model_path, inp, out, tmp_path / "st") == 0, "escaped cells read back on resume"


def test_csv_saved_again_by_a_spreadsheet_reads_back_or_is_refused(
    tiny_model_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inp = _folder(tmp_path / "in", 4)
    out, state = tmp_path / "p.csv", tmp_path / "st"
    assert _run(tiny_model_path, inp, out, state) == 0
    rows = read_rows(out)
    with out.open("w", newline="", encoding="utf-8-sig") as fh:  # BOM, CRLF, every cell quoted
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]), quoting=csv.QUOTE_ALL, lineterminator="\r\n")
        writer.writeheader()
        writer.writerows({**r, "index": f"{r['index']}.0"} for r in rows)
    Image.fromarray(random_images(1, seed=8)[0]).save(inp / "z_new.png")
    assert _run(tiny_model_path, inp, out, state) == 0
    again = read_rows(out)
    assert [r["index"] for r in again] == ["0", "1", "2", "3", "4"], "no index blanked by the BOM"
    assert [r["item"] for r in again][:4] == [r["item"] for r in rows]

    text = out.read_text().replace("prediction,", "Prediction (edited),", 1)
    out.write_text(text)
    assert _run(tiny_model_path, inp, out, state) == 2
    assert "columns are not the ones this program writes" in capsys.readouterr().err
    assert out.read_text() == text, "refused, not rewritten"


def test_state_location_is_checked_before_any_work(
    tiny_model_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inp = _folder(tmp_path / "in", 2)
    (tmp_path / "afile").write_text("x")
    assert _run(tiny_model_path, inp, tmp_path / "p.csv", tmp_path / "afile") == 2
    assert "not a directory" in capsys.readouterr().err and not (tmp_path / "p.csv").exists()
    assert _run(tiny_model_path, inp, tmp_path / "p.csv", tmp_path / "afile" / "st") == 2
    assert "cannot be created" in capsys.readouterr().err


def test_orphan_temp_files_are_removed_at_start(tiny_model_path: Path, tmp_path: Path) -> None:
    inp = _folder(tmp_path / "in", 2)
    state = tmp_path / "st"
    assert _run(tiny_model_path, inp, tmp_path / "p.csv", state) == 0
    orphan = state / ".state.safetensors.k1ll3d.tmp"
    orphan.write_bytes(b"\0" * 4096)  # what a SIGKILL during a save leaves
    assert _run(tiny_model_path, inp, tmp_path / "p.csv", state) == 0
    assert not orphan.exists()


def test_double_ctrl_c_ends_at_once_without_a_traceback(
    tiny_model_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def ctrl_c_twice(call: int) -> None:
        if call == 4:  # the user presses Ctrl-C twice while image 4 is adapted
            for _ in range(2):
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.05)  # each press is handled before the next arrives

    inp = _folder(tmp_path / "in", 8)
    out, state = tmp_path / "p.csv", tmp_path / "st"
    restore = before_step(monkeypatch, ctrl_c_twice)
    assert _run(tiny_model_path, inp, out, state, "--save-every", "1") == 130
    err = capsys.readouterr().err
    assert "Ctrl-C again to abort" in err and "aborted: the state saved last is intact" in err
    assert "Traceback" not in err
    restore()
    assert _run(tiny_model_path, inp, out, state) == 0
    items = [r["item"] for r in read_rows(out)]
    assert items == [f"img{i:02d}.png" for i in range(8)], "every image once after the abort"
