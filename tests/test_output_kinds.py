"""Outputs are only ever regular files (issue 21, case 1): ``--out /dev/full`` turned the device
into a CSV file (exit 0). A FIFO, a device node or a folder where an output goes is refused by its
kind before anything is opened or created, and stays what it was."""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from PIL import Image
from support import random_images

from engine import Journal, PredictionRow
from engine.cli import main as cli_main
from engine.util.atomic import atomic_write_bytes
from tests.cli_helpers import run_argv


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def _char_device(path: Path) -> Path:
    """A node for the kernel's null device (major 1, minor 3) in a temporary folder; root only."""
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("creating a device node needs root")
    return path


def _folder(path: Path) -> Path:
    path.mkdir()
    return path


MAKERS: dict[str, Callable[[Path], Path]] = {"fifo": _fifo, "device": _char_device, "folder": _folder}


def _kind(path: Path) -> int:
    return stat.S_IFMT(os.lstat(path).st_mode)


def _within(seconds: float, fn: Callable[[], object]) -> object:
    """``fn()``'s result, failing the test if it has not returned in ``seconds`` (a blocked open)."""
    box: list[object] = []
    thread = threading.Thread(target=lambda: box.append(_capture(fn)), daemon=True)
    thread.start()
    thread.join(seconds)
    assert box, f"still blocked after {seconds} s"
    return box[0]


def _capture(fn: Callable[[], object]) -> object:
    try:
        return fn()
    except BaseException as exc:
        return exc


@pytest.mark.parametrize("kind", ["fifo", "device"])
@pytest.mark.parametrize("which", ["out", "skipped", "config"])
def test_run_refuses_an_out_that_is_not_a_regular_file(
    tiny_model_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str, which: str
) -> None:
    inp = tmp_path / "in"
    inp.mkdir()
    for i, img in enumerate(random_images(2, seed=3)):
        Image.fromarray(img).save(inp / f"img{i}.png")
    out = tmp_path / "p.csv"
    target = {"out": out, "skipped": tmp_path / "p.skipped.csv", "config": tmp_path / "p.config.json"}[which]
    MAKERS[kind](target)
    before = _kind(target)
    code = _within(60, lambda: cli_main(run_argv(tiny_model_path, inp, out, tmp_path / "st")))
    assert code == 2
    err = capsys.readouterr().err
    assert "not a regular file" in err and str(target) in err
    assert _kind(target) == before, "the device or FIFO is still what it was"
    assert not (tmp_path / "st").exists(), "refused before the state folder was created"


@pytest.mark.parametrize("kind", ["fifo", "device", "folder"])
def test_atomic_write_refuses_what_is_not_a_regular_file(tmp_path: Path, kind: str) -> None:
    target = MAKERS[kind](tmp_path / "out.csv")
    before = _kind(target)
    with pytest.raises(OSError, match="not a regular file"):
        atomic_write_bytes(target, b"a,b\n")
    assert _kind(target) == before
    assert [p.name for p in tmp_path.iterdir()] == ["out.csv"], "no temp file left behind"
    regular = tmp_path / "real.csv"
    regular.write_text("old")
    link = tmp_path / "link.csv"
    link.symlink_to(regular)
    atomic_write_bytes(link, b"new")  # a link to a regular file is an ordinary destination
    assert link.read_bytes() == b"new"


def test_appending_to_a_fifo_returns_at_once(tmp_path: Path) -> None:
    """A journal's rows file that is a FIFO: appending blocked until a reader appeared."""
    journal = Journal(tmp_path / "st")
    try:
        fifo = journal.rows_file("src")
        fifo.parent.mkdir(parents=True)
        _fifo(fifo)
        result = _within(10, lambda: journal.add_row("src", _row()))
        assert isinstance(result, OSError) and "not a regular file" in str(result)
        assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    finally:
        journal.close()


def _row() -> PredictionRow:
    return PredictionRow(0, 0, "a.png", "a.png", 0, "a", 0.5, 0.5, 0, "a", 0.5, 0.0, None, None, 0.0)
