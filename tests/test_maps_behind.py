"""Decisions first, maps behind (issue 28 item 4; ``engine/run/stream.py``, ``docs/method.md``).

For a method that decides from the source pass (I-DiPT+, SourceOnly) the stream loop records every
decision first and makes the uncertainty maps afterwards, in order and in the same batches. What
that promises, each checked against the inline step (a decision and its map in one step):

* the rows' decisions are the inline rows' decisions, field by field, at B = 1 and B > 1;
* the maps (the uncertainty grid, its tokens, I-DiPT's prompted decision, the skipped-update
  flag) are the inline step's, and the method's state after the last map is the inline state;
* a run stopped anywhere resumes: the decisions, then the maps, losing and repeating nothing;
* an image unreadable the second time keeps its decision and gets no map, with a line saying so.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from support import random_images, referenced_copy

from engine import Session
from engine.errors import ImageReadError
from engine.io.sources import StreamItem
from engine.methods.idipt_plus import IDiPTPlusConfig
from engine.run.journal import Journal
from engine.run.outcomes import Mapped, MapSkipped, Predicted, Prompted, Saved
from engine.run.rows import MAP_PENDING, MAP_UNREADABLE, PredictionRow, map_cell
from engine.run.stream import StreamRun

#: Small I-DiPT settings, and an operating point that accepts within a stream of two kinds of image
#: (so decisions move: "accepted" rows).
SETTINGS = {
    "bank_size": 2,
    "graph_dim": 16,
    "mc_passes": 3,
    "min_images": 10,
    "min_edge": 0.0,
    "bootstrap": 0,
    "min_separation": 0.0,
    "max_disagreement": 0.5,
    "min_share": 0.0,
}
DECISION_FIELDS = (
    "index",
    "position",
    "key",
    "prediction",
    "confidence",
    "positive_prob",
    "source_prediction",
    "source_confidence",
    "decision_path",
    "site_group",
    "decision_threshold",
    "decision_reason",
    "source_margin",
    "candidates",
)
MAP_FIELDS = ("uncertainty", "update_skipped", "prompted_prediction")


@pytest.fixture(scope="module")
def referenced_model(tiny_model_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model with a source reference (so I-DiPT+'s operating point runs)."""
    return referenced_copy(tiny_model_path, tmp_path_factory.mktemp("referenced") / "tiny.safetensors")


def _session(model: Path, **overrides: object) -> Session:
    config = IDiPTPlusConfig(**{**SETTINGS, **overrides})  # type: ignore[arg-type]
    return Session(model, method="idipt+", method_config=config, seed=3)


def _two_kinds(n: int, seed: int) -> list[np.ndarray]:
    """Dark and bright noise images in turn: two clusters of source margins."""
    rng = np.random.default_rng(seed)
    return [
        np.clip(rng.normal(60 if i % 2 else 190, 30, (32, 32, 3)), 0, 255).astype(np.uint8) for i in range(n)
    ]


def _items(n: int) -> list[StreamItem]:
    return [StreamItem(i, f"im{i:03d}.png", f"im{i:03d}.png") for i in range(n)]


def _reader(images: list[np.ndarray]) -> Callable[[StreamItem], np.ndarray]:
    return lambda item: images[item.position]


def _same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def _fields(row: PredictionRow, names: tuple[str, ...]) -> dict[str, object]:
    return {name: getattr(row, name) for name in names}


def _assert_rows_equal(got: PredictionRow, expected: PredictionRow, names: tuple[str, ...]) -> None:
    for name in names:
        assert _same(getattr(got, name), getattr(expected, name)), (got.key, name)


@pytest.mark.parametrize("batch", [1, 4])
@pytest.mark.parametrize("prompted", [True, False], ids=["prompted", "mc-dropout"])
def test_decisions_first_give_the_inline_decisions_and_maps(
    referenced_model: Path, batch: int, prompted: bool
) -> None:
    images = _two_kinds(30, seed=1)
    inline = _session(referenced_model, prompted_candidate=prompted)
    expected = list(
        StreamRun(inline, _items(30), _reader(images), source_id="site", batch=batch, read_ahead=0).outcomes()
    )
    assert all(isinstance(o, Predicted) for o in expected)
    behind = _session(referenced_model, prompted_candidate=prompted)
    run = StreamRun(
        behind, _items(30), _reader(images), source_id="site", batch=batch, maps="behind", readers=2
    )
    got = list(run.outcomes())

    decided = [o for o in got if isinstance(o, Predicted)]
    mapped = [o for o in got if isinstance(o, Mapped)]
    made = [o for o in got if isinstance(o, Prompted)]
    assert got == decided + mapped + made, "every decision first, then every map, then I-DiPT's decisions"
    assert [o.item.key for o in mapped] == [o.item.key for o in decided], "the maps in arrival order"
    assert [o.item.key for o in made] == ([o.item.key for o in decided] if prompted else [])
    paths = set()
    for i, (d, m, e) in enumerate(zip(decided, mapped, expected, strict=True)):
        assert isinstance(e, Predicted)
        _assert_rows_equal(d.row, e.row, DECISION_FIELDS)
        assert d.row.map_status == MAP_PENDING and math.isnan(d.row.uncertainty)
        assert d.step.uncertainty is None and d.row.prompted_prediction is None
        assert d.row.prompted_status == (MAP_PENDING if prompted else "")
        _assert_rows_equal(m.row, e.row, (*DECISION_FIELDS, "uncertainty"))
        assert m.row.map_status == "" and map_cell(m.row) == "done"
        assert e.step.uncertainty is not None and m.map.uncertainty is not None
        assert np.array_equal(m.map.uncertainty, e.step.uncertainty)
        assert np.array_equal(m.map.uncertain_tokens, e.step.uncertain_tokens)
        assert np.array_equal(m.map.reliable_tokens, e.step.reliable_tokens)
        assert m.map.prompted is None, "the map step makes the map alone"
        last = made[i].row if prompted else m.row  # the row as it ends
        _assert_rows_equal(last, e.row, DECISION_FIELDS + MAP_FIELDS)
        assert last.prompted_status == "" and last.map_status == ""
        paths.add(d.row.decision_path)
    # the operating point accepted a threshold within the stream ("awaiting-review" where it is held
    # for a review): its state advanced in the decision step
    assert paths & {"accepted", "awaiting-review"}, paths
    assert behind.state_fingerprint() == inline.state_fingerprint(), "the state after the last map"
    assert run.summary.mapped == 30 and run.summary.maps_pending == 0
    assert run.summary.prompted == (30 if prompted else 0) and run.summary.prompts_pending == 0


def test_source_only_decides_behind_with_no_map_to_wait_for(tiny_model_path: Path) -> None:
    images = random_images(6, size=32, seed=2)
    inline = list(
        StreamRun(Session(tiny_model_path, method="source"), _items(6), _reader(images), batch=3).outcomes()
    )
    session = Session(tiny_model_path, method="source")
    got = list(StreamRun(session, _items(6), _reader(images), batch=3, maps="behind").outcomes())
    assert all(isinstance(o, Predicted) for o in got)
    for g, e in zip(got, inline, strict=True):
        assert isinstance(g, Predicted) and isinstance(e, Predicted)
        assert g.row.map_status == "" and _fields(g.row, DECISION_FIELDS) == _fields(e.row, DECISION_FIELDS)


def test_idipt_keeps_its_inline_step_when_asked_for_maps_behind(tiny_model_path: Path) -> None:
    """I-DiPT's decision is its prompted model's: it has no decision step to run ahead."""
    session = Session(tiny_model_path, method="idipt")
    run = StreamRun(session, _items(3), _reader(random_images(3, size=32)), maps="behind")
    assert not run.behind
    got = list(run.outcomes())
    assert all(isinstance(o, Predicted) and o.step.uncertainty is not None for o in got)


def _journal_run(
    model: Path, state: Path, images: list[np.ndarray], stop_at: int | None, batch: int, **kw: object
) -> tuple[list[object], StreamRun]:
    """One run on the journal at ``state``; ``stop_at``: ask for a stop at that outcome."""
    session = _session(model)
    journal = Journal(state)
    try:
        journal.restore(session)
        run = StreamRun(
            session,
            _items(len(images)),
            _reader(images),
            source_id="site",
            journal=journal,
            save_every=3,
            batch=batch,
            maps="behind",
            **kw,  # type: ignore[arg-type]
        )
        got: list[object] = []
        for i, outcome in enumerate(run.outcomes()):
            got.append(outcome)
            if stop_at is not None and i == stop_at:
                run.request_stop()
        return got, run
    finally:
        journal.close()


@pytest.mark.parametrize("stop_at", [5, 24, 33])  # while deciding, at the first maps, deep in them
def test_a_stopped_run_resumes_the_decisions_then_the_maps(
    referenced_model: Path, tmp_path: Path, stop_at: int
) -> None:
    images = _two_kinds(24, seed=6)
    _journal_run(referenced_model, tmp_path / "whole", images, None, batch=3)
    part, first = _journal_run(referenced_model, tmp_path / "part", images, stop_at, batch=3)
    assert first.summary.stopped and isinstance(part[-1], Saved) and part[-1].final
    assert first.summary.maps_pending > 0
    rest, second = _journal_run(referenced_model, tmp_path / "part", images, None, batch=3)
    assert second.summary.maps_pending == 0
    made = [o.item.key for o in part + rest if isinstance(o, Predicted)]
    maps = [o.item.key for o in part + rest if isinstance(o, Mapped)]
    assert made == maps == [it.key for it in _items(24)], "each decision once and each map once, in order"
    for state in ("whole", "part"):
        journal = Journal(tmp_path / state)
        session = _session(referenced_model)
        journal.restore(session)
        rows = journal.rows("site")
        journal.close()
        if state == "whole":
            expected, fingerprint = rows, session.state_fingerprint()
    assert session.state_fingerprint() == fingerprint
    for got, want in zip(rows, expected, strict=True):
        _assert_rows_equal(got, want, DECISION_FIELDS + MAP_FIELDS + ("map_status",))


def test_rows_of_maps_made_after_the_last_save_read_back_pending(
    referenced_model: Path, tmp_path: Path
) -> None:
    """A kill after a map's row reached the file but before the state was saved: the journal reads
    that row back with its map pending, and the next run makes the map again."""
    images = random_images(6, size=32, seed=7)
    session = _session(referenced_model)
    journal = Journal(tmp_path / "s")
    run = StreamRun(
        session,
        _items(6),
        _reader(images),
        source_id="site",
        journal=journal,
        save_every=0,
        maps="behind",
        batch=2,
    )
    outcomes = run.outcomes()
    seen = 0
    for outcome in outcomes:
        if isinstance(outcome, Predicted):
            seen += 1
            if seen == 6:
                journal.save(session)  # every decision saved, no map
        if isinstance(outcome, Mapped):
            break  # killed here: the first two maps' rows are in the file, the state does not count them
    outcomes.close()
    journal.close()
    again = Journal(tmp_path / "s")
    again.restore(_session(referenced_model))
    rows = again.rows("site")
    assert [r.map_status for r in rows] == [MAP_PENDING] * 6
    assert all(math.isnan(r.uncertainty) and r.prompted_prediction is None for r in rows)
    assert again.source("site").pending_maps() == [it.key for it in _items(6)]
    again.close()


class _SecondReadFails:
    """Reads every image, except ``key`` the second time it is asked for."""

    def __init__(self, images: list[np.ndarray], key: str) -> None:
        self.images, self.key, self.reads = images, key, 0

    def __call__(self, item: StreamItem) -> np.ndarray:
        if item.key == self.key:
            self.reads += 1
            if self.reads > 1:
                raise ImageReadError(f"{item.name}: truncated", reason="truncated file")
        return self.images[item.position]


def test_an_image_unreadable_the_second_time_keeps_its_decision(
    referenced_model: Path, tmp_path: Path
) -> None:
    images = random_images(8, size=32, seed=8)
    session = _session(referenced_model)
    journal = Journal(tmp_path / "s")
    reader = _SecondReadFails(images, "im003.png")
    run = StreamRun(session, _items(8), reader, source_id="site", journal=journal, batch=2, maps="behind")
    got = list(run.outcomes())
    skipped = [o for o in got if isinstance(o, MapSkipped)]
    assert len(skipped) == 1 and skipped[0].item.key == "im003.png" and "truncated" in skipped[0].reason
    decided = next(o for o in got if isinstance(o, Predicted) and o.item.key == "im003.png")
    assert dataclasses.replace(skipped[0].row, map_status=MAP_PENDING) == decided.row, "its decision kept"
    assert run.summary.mapped == 7 and run.summary.maps_skipped == 1 and run.summary.maps_pending == 0
    assert journal.source("site").map_skipped == [("im003.png", "truncated file")]
    journal.close()
    again = Journal(tmp_path / "s")
    again.restore(_session(referenced_model))
    rows = {r.key: r for r in again.rows("site")}
    assert rows["im003.png"].map_status == MAP_UNREADABLE and map_cell(rows["im003.png"]) == "unreadable"
    assert all(map_cell(r) == "done" for k, r in rows.items() if k != "im003.png")
    again.close()
