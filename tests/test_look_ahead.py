"""The next batch's decision pass run ahead on a worker thread (``engine/run/ahead.py``, issue 41).

On CUDA the stream loop runs a batch's decision pass (the frozen model's pass, which reads no state
of the method) while the batch before it is decided and recorded. Here it is switched on by hand on
the CPU (``run.look_ahead = True``; off by default there), and it must give what taking turns
gives: the same decisions, maps, I-DiPT's prompted decisions and state; a pass that overlaps the
decisions before it; a pass that failed taken again where the loop sees the failure; a batch that
ran out of memory split as before.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
from support import random_images
from test_maps_behind import (
    DECISION_FIELDS,
    MAP_FIELDS,
    _assert_rows_equal,
    _items,
    _reader,
    _session,
    _two_kinds,
    referenced_model,  # noqa: F401  (a fixture)
)

from engine import Session
from engine.run.ahead import looks_ahead
from engine.run.outcomes import Mapped, Predicted, Prompted
from engine.run.step import PassedBatch
from engine.run.stream import StreamRun

WORKER = "f2tta-decision-pass"


def _run(
    session: Session, images: list[np.ndarray], batch: int, look_ahead: bool
) -> tuple[list[object], StreamRun]:
    run = StreamRun(
        session, _items(len(images)), _reader(images), source_id="site", batch=batch, maps="behind", readers=2,
        prompted="behind",
    )  # fmt: skip
    run.look_ahead = look_ahead
    return list(run.outcomes()), run


def _spy_passes(session: Session, before: Callable[[list[np.ndarray]], None] | None = None) -> list[str]:
    """Record the thread of each decision pass of ``session`` (``before`` runs first, on that thread)."""
    threads: list[str] = []
    real = session.decision_pass

    def spy(pixels: list[np.ndarray]) -> PassedBatch:
        threads.append(threading.current_thread().name)
        if before is not None:
            before(pixels)
        return real(pixels)

    session.decision_pass = spy  # type: ignore[method-assign]
    return threads


def _assert_same_outcomes(got: list[object], expected: list[object]) -> None:
    assert [type(o) for o in got] == [type(o) for o in expected]
    for g, e in zip(got, expected, strict=True):
        if isinstance(g, Predicted | Mapped | Prompted):
            assert isinstance(e, Predicted | Mapped | Prompted)
            assert g.item.key == e.item.key
            _assert_rows_equal(g.row, e.row, DECISION_FIELDS + MAP_FIELDS)


@pytest.mark.parametrize("batch", [1, 3, 4])
def test_looking_ahead_decides_as_taking_turns(referenced_model: Path, batch: int) -> None:  # noqa: F811
    images = _two_kinds(30, seed=4)
    reference = _session(referenced_model)
    turns, _ = _run(reference, images, batch, look_ahead=False)
    session = _session(referenced_model)
    threads = _spy_passes(session)
    ahead, _ = _run(session, images, batch, look_ahead=True)
    _assert_same_outcomes(ahead, turns)
    assert sum(isinstance(o, Prompted) for o in ahead) == 30, "decisions, maps and I-DiPT's decisions"
    assert {o.row.decision_path for o in ahead if isinstance(o, Predicted)} & {"accepted", "awaiting-review"}
    assert len(threads) == math.ceil(30 / batch) and set(threads) == {f"{WORKER}_0"}, threads
    assert session.state_fingerprint() == reference.state_fingerprint()
    assert not [t for t in threading.enumerate() if t.name.startswith(WORKER)], "the worker is gone"


def test_the_source_model_looks_ahead_too(tiny_model_path: Path) -> None:
    images = random_images(10, size=32, seed=6)
    turns, _ = _run(Session(tiny_model_path, method="source"), images, 3, look_ahead=False)
    session = Session(tiny_model_path, method="source")
    threads = _spy_passes(session)
    ahead, _ = _run(session, images, 3, look_ahead=True)
    _assert_same_outcomes(ahead, turns)
    assert [o.step.probs.tolist() for o in ahead if isinstance(o, Predicted)] == [
        o.step.probs.tolist() for o in turns if isinstance(o, Predicted)
    ]
    assert len(threads) == 4 and set(threads) == {f"{WORKER}_0"}


def test_the_next_pass_runs_while_a_batch_is_decided(referenced_model: Path) -> None:  # noqa: F811
    """The loop is held inside the first batch's outcomes until the second batch's pass has
    started: only a pass run ahead, on the worker, can start then."""
    session = _session(referenced_model)
    second = threading.Event()
    threads = _spy_passes(session, lambda _: second.set() if len(threads) == 2 else None)
    run = StreamRun(
        session, _items(12), _reader(_two_kinds(12, seed=5)), source_id="site", batch=4, maps="behind"
    )
    run.look_ahead = True
    held = False
    for outcome in run.outcomes():
        if isinstance(outcome, Predicted) and not held:
            held = True
            assert second.wait(timeout=60), (
                "the second batch's pass did not start during the first's decisions"
            )
    assert held and threads == [f"{WORKER}_0"] * 3


def test_the_loop_takes_turns_on_the_cpu_by_default(referenced_model: Path) -> None:  # noqa: F811
    session = _session(referenced_model)
    run = StreamRun(session, _items(4), _reader(_two_kinds(4, seed=1)), source_id="site", maps="behind")
    assert not looks_ahead(session) and not run.look_ahead
    inline = StreamRun(
        _session(referenced_model), _items(4), _reader(_two_kinds(4, seed=1)), source_id="site"
    )
    assert not inline.look_ahead, "with the maps inline there is no decision pass of its own"


def test_a_pass_that_failed_ahead_is_taken_again_on_the_loops_thread(referenced_model: Path) -> None:  # noqa: F811
    images = _two_kinds(16, seed=7)
    turns, _ = _run(_session(referenced_model), images, 4, look_ahead=False)
    session = _session(referenced_model)

    def fail_once_on_the_worker(_: list[np.ndarray]) -> None:
        if len(threads) == 2:
            raise RuntimeError("a driver hiccup")

    threads = _spy_passes(session, fail_once_on_the_worker)
    ahead, run = _run(session, images, 4, look_ahead=True)
    assert run.summary.failure is None
    _assert_same_outcomes(ahead, turns)
    # the failed pass (the second) was taken again on the loop's thread, the others ahead
    assert threads[:2] == [f"{WORKER}_0"] * 2 and threading.main_thread().name in threads[2:], threads


def test_a_pass_that_fails_everywhere_ends_the_run_as_taking_turns(referenced_model: Path) -> None:  # noqa: F811
    images = _two_kinds(16, seed=7)
    results = {}
    for look_ahead in (False, True):
        session = _session(referenced_model)
        firsts: list[np.ndarray] = []

        def broken_on_the_second_batch(pixels: list[np.ndarray], firsts: list[np.ndarray] = firsts) -> None:
            if not any(pixels[0] is f for f in firsts):
                firsts.append(pixels[0])
            if pixels[0] is firsts[1] if len(firsts) > 1 else False:
                raise RuntimeError("the model broke")

        _spy_passes(session, broken_on_the_second_batch)
        results[look_ahead] = _run(session, images, 4, look_ahead)
    (turns, turns_run), (ahead, ahead_run) = results[False], results[True]
    assert turns_run.summary.failure is not None and ahead_run.summary.failure is not None
    assert ahead_run.summary.failure.item.key == turns_run.summary.failure.item.key == "im004.png"
    assert "the model broke" in ahead_run.summary.failure.message
    assert ahead_run.summary.failure.message == turns_run.summary.failure.message
    _assert_same_outcomes(
        [o for o in ahead if isinstance(o, Predicted)], [o for o in turns if isinstance(o, Predicted)]
    )
    assert sum(isinstance(o, Predicted) for o in ahead) == 4


def test_out_of_memory_splits_a_batch_whose_pass_ran_ahead(
    referenced_model: Path,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:
    images = _two_kinds(20, seed=8)
    results = {}
    for look_ahead in (False, True):
        session = _session(referenced_model)
        real = session.decide_passed

        def decide(batch: PassedBatch, sites: object, real: Callable[..., object] = real) -> object:
            if batch.images > 2:
                raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 8.00 GiB")
            return real(batch, sites)

        session.decide_passed = decide  # type: ignore[method-assign,assignment]
        threads = _spy_passes(session)
        with caplog.at_level(logging.WARNING, logger="engine.run.stream"):
            got, run = _run(session, images, 4, look_ahead)
        results[look_ahead] = (got, run, threads)
    (turns, turns_run, _), (ahead, ahead_run, threads) = results[False], results[True]
    assert turns_run.batch == ahead_run.batch == 2 and ahead_run.summary.failure is None
    _assert_same_outcomes(ahead, turns)
    assert sum(isinstance(o, Prompted) for o in ahead) == 20
    assert f"{WORKER}_0" in threads[2:], "after the split, passes run ahead again at the smaller batch"
