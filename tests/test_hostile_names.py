"""File names as an attacker or a careless user writes them (issue 21, cases 7, 11 and 14).

``1²2.png`` made ``f2tta run`` refuse the whole folder (exit 2, the file not named): the sort key
called ``int("²")``. A folder whose name is not UTF-8 was refused with only "'utf-8' codec can't
encode '\\udcff'". A newline or a right-to-left override in a file name was printed raw to the
console, where it forges a line.
"""

from __future__ import annotations

import io
import logging
import os
import random
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from engine import open_folder
from engine.cli import main as cli_main
from tests.cli_helpers import read_rows, run_argv

CLASSES = ("normal", "tumor")


def _images(root: Path, names: list[str], bad: tuple[str, ...] = ()) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for name in names:
        Image.fromarray(rng.integers(0, 256, (40, 40, 3), dtype=np.uint8)).save(root / name, format="PNG")
    for name in bad:
        (root / name).write_bytes(b"not an image")
        os.utime(root / name, (1, 1))  # old: a permanent skip, with its reason printed
    return root


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet=st.sampled_from(list("a1²٣0Aa.-_ ")), max_size=8), max_size=12))
def test_the_name_order_is_total(names: list[str]) -> None:
    """Any names sort, and to the same order whatever order they come in."""
    from engine.io.listing import natural_key

    shuffled = names[:]
    random.Random(len(names)).shuffle(shuffled)
    assert sorted(names, key=natural_key) == sorted(shuffled, key=natural_key)


def test_a_name_the_sort_could_not_order_is_listed_and_run(
    tiny_model_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    names = ["1²2.png", "img10.png", "img2.png", "١٢.png", "A.png", "a.png"]
    inp = _images(tmp_path / "in", names)
    keys = [item.key for item in open_folder(inp, CLASSES).items]
    assert sorted(keys) == sorted(names)
    assert keys.index("img2.png") < keys.index("img10.png"), "numbers compared as numbers"
    assert cli_main(run_argv(tiny_model_path, inp, tmp_path / "p.csv", tmp_path / "st")) == 0, (
        capsys.readouterr().err
    )
    assert sorted(r["item"] for r in read_rows(tmp_path / "p.csv")) == sorted(names)


def test_names_that_are_not_utf8_are_kept_as_bytes_and_shown_replaced(
    tiny_model_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / os.fsdecode(b"site\xff")
    latin1 = os.fsdecode(b"caf\xe9.png")
    inp = _images(folder, ["plain.png", latin1], bad=(os.fsdecode(b"bad\xe9.png"),))
    out, state = tmp_path / "p.csv", tmp_path / "st"
    assert cli_main(run_argv(tiny_model_path, inp, out, state)) == 0
    err = capsys.readouterr().err
    assert "skipped bad\ufffd.png" in err and "\udcff" not in err
    cells = out.read_bytes().split(b"\n")
    assert any(line.split(b",")[2] == b"caf\xe9.png" for line in cells[1:] if line), "the name's bytes, kept"
    assert cli_main(run_argv(tiny_model_path, inp, out, state)) == 0, "resumes"
    assert "2 of 3 images processed (0 now, 2 before), 0 skipped" in capsys.readouterr().err


def test_control_characters_in_names_are_escaped_on_the_console(
    tiny_model_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    forged = "x.png: ok\nskipped evil.png"  # a newline: the rest would print as a line of its own
    rtl = "\u202egnp.exe.png"
    inp = _images(tmp_path / "in", ["good.png"], bad=(forged + ".png", rtl, "bell\x07.png"))
    assert (
        cli_main(run_argv(tiny_model_path, inp, tmp_path / "p.csv", tmp_path / "st", "--max-skipped", "1"))
        == 0
    )
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert not any(line.startswith("skipped evil.png") for line in lines), "no forged line"
    assert "skipped x.png: ok\\nskipped evil.png.png:" in err
    assert "\u202e" not in err and "skipped \\u202egnp.exe.png:" in err
    assert "\x07" not in err and "bell\\x07.png" in err


def test_log_lines_with_names_are_one_line_each() -> None:
    from engine.util.text import EscapingFilter, shown

    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(EscapingFilter())
    logger = logging.getLogger("test.hostile.names")
    logger.addHandler(handler)
    try:
        logger.warning("%s: %s", Path("in/a\nWARNING forged"), "symbolic link to \u202e/etc")
    finally:
        logger.removeHandler(handler)
    assert stream.getvalue() == "in/a\\nWARNING forged: symbolic link to \\u202e/etc\n"
    assert shown(os.fsdecode(b"caf\xe9\n")) == "caf\ufffd\\n"
    assert shown("plain name 1.png") == "plain name 1.png" and shown("日本語.png") == "日本語.png"
