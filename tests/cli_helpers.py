"""Helpers shared by the tests that drive ``f2tta run`` or the app: arguments, CSV rows, a faulty step."""

from __future__ import annotations

import csv
from collections.abc import Callable
from pathlib import Path

import pytest


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


def before_step(monkeypatch: pytest.MonkeyPatch, act: Callable[[int], None]) -> Callable[[], None]:
    """Make every ``Session.step_batch`` call ``act(n)`` first (n counts calls from 1, one a batch;
    ``act`` may raise).

    Returns:
        A function that puts the real step back.
    """
    from engine import Session

    real_step = Session.step_batch
    calls = [0]

    def step(
        self: Session, images: list[object], sites: list[str | None] | None = None, **kw: bool
    ) -> object:
        calls[0] += 1
        act(calls[0])
        return real_step(self, images, sites, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(Session, "step_batch", step)
    return lambda: monkeypatch.setattr(Session, "step_batch", real_step)


def out_of_memory_at(call: int) -> Callable[[int], None]:
    """An ``act`` for :func:`before_step`: the model step runs out of memory on call ``call``."""

    def act(n: int) -> None:
        if n == call:
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")

    return act
