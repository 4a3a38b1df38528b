"""Helpers shared by the tests that drive ``f2tta run``: its arguments and its CSV rows."""

from __future__ import annotations

import csv
from pathlib import Path


def run_argv(model: Path, inp: Path, out: Path, state: Path, *extra: str) -> list[str]:
    """Arguments of ``f2tta run`` (after the program name) without a progress bar."""
    return [
        "run",
        "--model",
        str(model),
        "--input",
        str(inp),
        "--state",
        str(state),
        "--out",
        str(out),
        "--no-progress",
        *extra,
    ]


def read_rows(path: Path) -> list[dict[str, str]]:
    """The CSV's rows as dicts; none when the file does not exist (yet)."""
    if not path.exists():
        return []
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))
