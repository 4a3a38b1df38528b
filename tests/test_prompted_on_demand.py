"""I-DiPT's prompted decision on demand (issue 41 item 1; ``engine/run/stream.py``, ``docs/method.md``).

With the maps behind the decisions, I-DiPT+'s prompted candidate has a step of its own, the prompt
step, taken behind the maps only when asked for. What that promises, checked against the inline
step (decision, map and prompted decision in one step):

* a run on demand makes the decisions and the maps and leaves the prompted decisions pending, in
  the rows and in the journal's record, across a save and a reload;
* asked for later (another run, or the same run while it goes on), the prompted decisions and the
  method's state are the inline step's, bit for bit;
* a run stopped inside the prompt step resumes it, repeating and losing nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_maps_behind import (
    DECISION_FIELDS,
    MAP_FIELDS,
    _assert_rows_equal,
    _items,
    _journal_run,
    _reader,
    _session,
    _two_kinds,
    referenced_model,  # noqa: F401  (a fixture)
)

from engine.run.journal import Journal
from engine.run.outcomes import Mapped, Prompted
from engine.run.record import JOURNAL_FORMAT, SourceRecord, parse_record, record_extra
from engine.run.rows import MAP_PENDING, PredictionRow
from engine.run.stream import StreamRun


def _run(model: Path, state: Path, images: list, prompted: str, stop_at: int | None = None):  # type: ignore[no-untyped-def]
    """One run on the journal at ``state`` (:func:`_journal_run`), then its rows and the state as a
    later session restores them."""
    got, run = _journal_run(model, state, images, stop_at, batch=3, prompted=prompted)
    session, journal = _session(model), Journal(state)
    try:
        journal.restore(session)
        return got, run, journal.rows("site"), session.state_fingerprint()
    finally:
        journal.close()


def _inline(model: Path, state: Path, images: list) -> tuple[list[PredictionRow], str]:  # type: ignore[type-arg]
    """The rows (read back from a journal, as the others are) and the state of the inline step."""
    session = _session(model)
    journal = Journal(state)
    try:
        run = StreamRun(
            session, _items(len(images)), _reader(images), source_id="site", journal=journal, batch=3
        )
        assert not [o for o in run.outcomes() if isinstance(o, Prompted)], "inline: with the decisions"
        return journal.rows("site"), session.state_fingerprint()
    finally:
        journal.close()


def test_on_demand_leaves_the_prompted_decisions_pending_until_asked_for(
    referenced_model: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    images = _two_kinds(18, seed=2)
    expected, fingerprint = _inline(referenced_model, tmp_path / "inline", images)
    got, run, rows, _ = _run(referenced_model, tmp_path / "s", images, "on-demand")
    assert not [o for o in got if isinstance(o, Prompted)], "nothing asked for the prompted decisions"
    assert len([o for o in got if isinstance(o, Mapped)]) == 18
    assert run.summary.prompts_pending == 18 and run.summary.prompted == 0
    assert all(r.map_status == "" and r.prompted_status == MAP_PENDING for r in rows)
    assert all(r.prompted_prediction is None for r in rows)
    for row, want in zip(rows, expected, strict=True):
        _assert_rows_equal(row, want, (*DECISION_FIELDS, "uncertainty"))
    # another run on demand keeps them pending; one that asks for them makes them
    again, run2, rows, _ = _run(referenced_model, tmp_path / "s", images, "on-demand")
    assert run2.summary.prompts_pending == 18 and not [o for o in again if isinstance(o, Prompted)]
    made, run3, rows, state = _run(referenced_model, tmp_path / "s", images, "behind")
    assert [o.item.key for o in made if isinstance(o, Prompted)] == [it.key for it in _items(18)]
    assert run3.summary.prompts_pending == 0 and run3.summary.processed == 0
    for row, want in zip(rows, expected, strict=True):
        _assert_rows_equal(row, want, DECISION_FIELDS + MAP_FIELDS)
        assert row.prompted_status == ""
    assert state == fingerprint, "the state after the prompted decisions is the inline state"
    # a rows file changed by hand to say one is pending again: none would come, none is waited for
    journal = Journal(tmp_path / "s")
    try:
        journal.restore(_session(referenced_model))
        tampered = {**rows[4].to_json(), "prompted_status": MAP_PENDING}
        with journal.rows_file("site").open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(tampered) + "\n")
        assert journal.rows("site")[4].prompted_status == ""
    finally:
        journal.close()


def test_asked_for_while_the_run_goes_on(referenced_model: Path, tmp_path: Path) -> None:  # noqa: F811
    images = _two_kinds(15, seed=4)
    expected, fingerprint = _inline(referenced_model, tmp_path / "inline", images)
    session = _session(referenced_model)
    run = StreamRun(
        session, _items(15), _reader(images), source_id="site", batch=3, maps="behind", prompted="on-demand"
    )
    outcomes = run.outcomes()
    got = [next(outcomes) for _ in range(4)]  # four decisions in, the review reaches I-DiPT's candidate
    run.request_prompted()
    got += list(outcomes)
    made = [o.row for o in got if isinstance(o, Prompted)]
    assert len(made) == 15 and run.summary.prompts_pending == 0
    for row, want in zip(made, expected, strict=True):
        assert (
            row.prompted_prediction == want.prompted_prediction and row.update_skipped == want.update_skipped
        )
    assert session.state_fingerprint() == fingerprint


@pytest.mark.parametrize("stop_at", [20, 27])  # at the start of the prompt step, inside it
def test_a_run_stopped_in_the_prompt_step_resumes_it(
    referenced_model: Path,  # noqa: F811
    tmp_path: Path,
    stop_at: int,
) -> None:
    images = _two_kinds(12, seed=5)
    expected, fingerprint = _inline(referenced_model, tmp_path / "inline", images)
    part, first, _, _ = _run(referenced_model, tmp_path / "s", images, "behind", stop_at=stop_at)
    assert first.summary.stopped and first.summary.prompts_pending > 0
    rest, _second, rows, state = _run(referenced_model, tmp_path / "s", images, "behind")
    made = [o.item.key for o in part + rest if isinstance(o, Prompted)]
    assert made == [it.key for it in _items(12)], "each prompted decision once, in order"
    for row, want in zip(rows, expected, strict=True):
        _assert_rows_equal(row, want, DECISION_FIELDS + MAP_FIELDS)
    assert state == fingerprint


def test_a_record_written_before_the_prompt_step_had_a_count() -> None:
    """Maps pending in a journal written when the map step made the prompted decisions too: a method
    with a prompt step makes both for those items; a record written now is never taken for one."""
    old = {
        "format": JOURNAL_FORMAT,
        "sources": {"s": {"processed": ["a", "b", "c"], "skipped": [], "mapped": 1}},
    }
    record = parse_record(old, "state")["s"]
    assert record.legacy_maps and record.pending_prompts() == []
    record.from_legacy_maps()
    assert record.pending_prompts() == record.pending_maps() == ["b", "c"]
    again = parse_record(record_extra({"s": record}), "state")["s"]
    assert not again.legacy_maps and again.pending_prompts() == ["b", "c"]
    done = SourceRecord(["a", "b"], mapped=1)  # a method without a prompt step, maps pending
    assert parse_record(record_extra({"s": done}), "state")["s"].pending_prompts() == []
    assert not parse_record(record_extra({"s": done}), "state")["s"].legacy_maps
