"""The controller as a plain object: a fake window and a fake engine worker, no Qt at all.

As ndv tests its controller: the window is anything that satisfies :class:`app.control.view.View`,
the worker anything that satisfies :class:`app.control.requests.WorkerRequests`. The fakes record
what the controller asks; each test then plays the worker's answer by calling the handler the app
wires to that worker signal (``app/shell/wiring.py``). Neither this module nor its fakes
(``tests/controller_fakes.py``) import PySide6, and one test checks, in a fresh interpreter, that
running every other test here loads no Qt module at all.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from app_fixtures import CLASSES, sample_row
from controller_fakes import (
    FakeView,
    FakeWorker,
    ended,
    events_seen,
    folder,
    labelled_folder,
    make,
    opened,
    results,
    results_of,
    session_info,
)

from app.control.controller import Controller
from app.core.messages import ItemFailure
from app.core.phase import Phase
from app.core.projects import DEFAULT_PROJECT
from engine.review.marks import MarkStore

HERE = Path(__file__).resolve().parent


# -- phases --------------------------------------------------------------------------------------
def test_phases_from_open_through_run_pause_and_stop_to_done(tmp_path: Path) -> None:
    c, view, worker, ticker = make(tmp_path)
    seen = events_seen(c)
    assert c.phase is Phase.EMPTY and view.last("set_actions")[0] is Phase.EMPTY and not ticker.running
    c.start()
    assert "start" not in worker.names(), "nothing to run without a session"

    c.load_session()
    assert c.phase is Phase.LOADING and worker.last("open_session")[0].project == DEFAULT_PROJECT
    c.sessions.on_worker_session_ready(session_info(tmp_path))
    assert c.phase is Phase.DONE and c.state.usable and len(seen["session_changed"]) == 1
    assert view.actions().open and not view.actions().start

    c.open_folder(str(tmp_path / "site"))
    request = worker.last("open_source")[0]
    assert request.kind == "folder" and request.path == tmp_path / "site" and c.phase is Phase.LOADING
    c.sessions.on_worker_source_ready(folder(tmp_path, 6))
    assert c.phase is Phase.READY and view.actions().start and c.model.pending == 6
    assert view.last("clear_results") == (6, 1, False) and len(seen["source_opened"]) == 1

    c.start()
    assert c.phase is Phase.RUNNING and worker.names()[-1] == "start" and ticker.running
    assert view.actions().pause and not view.actions().open
    c.on_worker_results_ready(results(0, 1))
    assert not view.of("append_rows"), "results reach the views on a tick, not as they arrive"
    c.tick()
    assert [r.key for r in view.last("append_rows")[0]] == ["k0", "k1"] and c.model.pending == 4
    c.on_worker_item_failed(ItemFailure(2, "img2.png", "img2.png: cannot be read", retried=True))
    assert "img2.png: cannot be read" in view.logged("error")

    c.pause()
    assert c.phase is Phase.PAUSING and worker.names()[-1] == "pause"
    c.resume()
    assert worker.names()[-1] == "pause", "resume waits until the run has paused"
    c.on_worker_paused()
    assert c.phase is Phase.PAUSED and not ticker.running and view.actions().resume
    assert any("Paused after 2 of 6 images" in m for m in view.logged("info"))
    c.resume()
    assert c.phase is Phase.RUNNING and worker.names()[-1] == "resume" and ticker.running

    c.stop()
    assert c.phase is Phase.STOPPING and worker.names()[-1] == "stop" and ticker.running
    c.on_worker_run_ended(ended("stopped", 2, tmp_path))
    assert c.phase is Phase.READY and not ticker.running and view.actions().start
    assert view.last("set_actions")[2] == "stopped · 4 left · state saved"
    assert [e.reason for e in seen["run_finished"]] == ["stopped"] and c.state.last_run is not None

    c.start()
    c.on_worker_results_ready(results(2, 3, 4, 5))
    c.on_worker_run_ended(ended("finished", 4, tmp_path))
    assert c.phase is Phase.DONE and c.model.pending == 0 and not view.actions().start
    assert view.actions().export and [r.key for r in c.model.rows] == [f"k{i}" for i in range(6)]
    shown = [row.key for (rows,) in view.of("append_rows") for row in rows]
    assert shown == [f"k{i}" for i in range(6)], "every row reached the table once, in order"
    assert not seen["shutdown_needed"]


def test_failures_to_load_leave_a_phase_that_can_recover(tmp_path: Path) -> None:
    c, view, worker, _ = make(tmp_path)
    seen = events_seen(c)
    c.load_session()
    c.sessions.on_worker_session_failed("Cannot load the model tiny.safetensors: gone")
    assert c.phase is Phase.EMPTY and view.last("show_banner")[0].key == "model"
    assert seen["load_failed"] == ["Cannot load the model tiny.safetensors: gone"]
    c.open_folder(str(tmp_path))
    assert "open_source" not in worker.names(), "no source is opened without a session"

    c.sessions.on_worker_session_ready(session_info(tmp_path, error="made with another model"))
    assert c.phase is Phase.EMPTY and not c.state.usable and view.actions().reset
    c.sessions.request_reset()
    assert worker.names()[-1] == "reset_state" and c.phase is Phase.LOADING
    c.sessions.on_worker_reset_done(session_info(tmp_path))
    assert c.phase is Phase.DONE and c.state.usable and view.actions().open


def test_closing_the_window_mid_run_stops_first_and_shuts_down_when_the_run_ends(tmp_path: Path) -> None:
    c, view, worker, _ = opened(tmp_path)
    seen = events_seen(c)
    c.on_window_close_requested()
    assert seen["shutdown_needed"] == [None], "not running: the app shuts down at once"
    c.start()
    c.on_window_close_requested()
    assert c.phase is Phase.STOPPING and worker.names()[-1] == "stop" and not view.close_allowed
    assert len(seen["shutdown_needed"]) == 1 and not view.of("close_now")
    c.on_worker_run_ended(ended("stopped", 0, tmp_path))
    assert len(seen["shutdown_needed"]) == 2 and view.names()[-1] == "close_now"


# -- export --------------------------------------------------------------------------------------
def test_export_with_nothing_to_export_says_so(tmp_path: Path) -> None:
    c, view, worker, _ = make(tmp_path)
    seen = events_seen(c)
    c.load_session()
    c.sessions.on_worker_session_ready(session_info(tmp_path))
    c.export(tmp_path / "out")
    assert "export_reports" not in worker.names()
    assert seen["export_error"] == ["Nothing to export: open images and process them first."]
    banner = view.last("show_banner")[0]
    assert banner.key == "export" and banner.level == "error" and "Nothing to export" in banner.text


def test_export_sends_the_run_models_data_and_reports_success(tmp_path: Path) -> None:
    c, view, worker, _ = opened(tmp_path, 4)
    seen = events_seen(c)
    c.start()
    c.on_worker_results_ready(results(0, 1, 2, 3))
    c.on_worker_run_ended(ended("finished", 4, tmp_path))
    out = tmp_path / "out"
    c.export(str(out))
    directory, data = worker.last("export_reports")
    assert directory == out and [r.key for r in data.rows] == ["k0", "k1", "k2", "k3"]
    assert view.of("plot_png"), "the plots come from the window, the rows from the run model"
    paths = [out / "predictions.csv", out / "run_config.json", out / "report.pdf"]
    c.exports.on_reports_written(paths)
    assert seen["export_finished"] == [paths] and not seen["export_error"]
    banner = view.last("show_banner")[0]
    assert banner.key == "export" and banner.level == "info" and "report.pdf" in banner.text
    assert any("Reports written" in m for m in view.logged("info"))


def test_export_errors_reach_the_log_the_banner_and_the_reports(tmp_path: Path) -> None:
    c, view, worker, _ = opened(tmp_path, 2)
    seen = events_seen(c)
    c.start()
    c.on_worker_results_ready(results(0, 1))
    c.on_worker_run_ended(ended("finished", 2, tmp_path))
    c.export(tmp_path / "out")
    c.exports.on_export_failed("out/predictions.csv: No space left on device")
    assert seen["export_error"] == ["out/predictions.csv: No space left on device"]
    assert view.last("show_banner")[0].level == "error" and c.state.errors[-1].endswith("device")

    view.answers["plot_png"] = RuntimeError("the plots cannot be drawn")
    requests = len(worker.of("export_reports"))
    c.export(tmp_path / "out")
    assert len(worker.of("export_reports")) == requests, "nothing is sent when the data cannot be gathered"
    assert seen["export_error"][-1] == "Reports cannot be prepared: RuntimeError: the plots cannot be drawn"


# -- review marks --------------------------------------------------------------------------------
def test_review_marks_reach_the_run_model_the_table_and_the_marks_file(tmp_path: Path) -> None:
    c, view, _, _ = opened(tmp_path, 4)
    c.start()
    c.on_worker_results_ready(results(0, 1, 2, 3))
    c.on_worker_run_ended(ended("finished", 4, tmp_path))
    c.on_window_review_requested(0, 1)  # the prediction (class 1): confirmed
    c.on_window_review_requested(1, 0)  # corrected to class 0
    assert {k: m.label for k, m in c.model.marks.items()} == {"k0": 1, "k1": 0}
    assert [r.ground_truth for r in c.model.rows] == [1, 0, None, None], "a mark is the row's truth"
    changes = [change for (batch,) in view.of("update_rows") for change in batch]
    assert [(ch.index, ch.review.text) for ch in changes] == [
        (0, f"✓ confirmed {CLASSES[1]}"),
        (1, f"✎ {CLASSES[1]} → {CLASSES[0]}"),
    ]
    review_dir = tmp_path / "profiles" / DEFAULT_PROJECT / "review"
    source_id = str((tmp_path / "site").resolve())
    kept = MarkStore(review_dir, source_id, 2).load().marks
    assert {k: (m.label, m.confirmed) for k, m in kept.items()} == {"k0": (1, True), "k1": (0, False)}

    c.on_window_review_requested(0, -1)  # the mark is cleared
    assert set(c.model.marks) == {"k1"} and c.model.rows[0].ground_truth is None
    assert set(MarkStore(review_dir, source_id, 2).load().marks) == {"k1"}
    c.on_window_review_requested(2, 7)  # not a class of this model
    c.on_window_review_requested(9, 0)  # not processed
    assert set(c.model.marks) == {"k1"} and len(view.logged("warning")) >= 2


def test_a_review_mark_that_cannot_be_kept_changes_nothing(tmp_path: Path) -> None:
    c, view, _, _ = opened(tmp_path, 2)
    c.start()
    c.on_worker_results_ready(results(0, 1))
    c.on_worker_run_ended(ended("finished", 2, tmp_path))
    review_dir = tmp_path / "profiles" / DEFAULT_PROJECT / "review"  # made with the first mark
    review_dir.parent.mkdir(parents=True, exist_ok=True)
    review_dir.write_text("a file where the folder should be")
    c.on_window_review_requested(0, 0)
    assert not c.model.marks and c.model.rows[0].ground_truth is None
    assert any("cannot be kept" in m for m in view.logged("error"))


def _labelled(home: Path) -> tuple[Controller, FakeView]:
    """A folder whose 4 images the dataset labels (sub-folders), processed: image 0 is a confident
    error (dataset: tumor, model: normal at 0.95), the others right."""
    c, view, _, _ = make(home)
    c.load_session()
    c.sessions.on_worker_session_ready(session_info(home))
    truths = [1, 0, 1, 0]
    c.sessions.on_worker_source_ready(labelled_folder(home, truths, "class sub-folders"))
    c.start()
    rows = [
        sample_row(i, pred=0 if i == 0 else truths[i], src=0, truth=truths[i], conf=0.95) for i in range(4)
    ]
    c.on_worker_results_ready(results_of(rows))
    c.on_worker_run_ended(ended("finished", 4, home))
    return c, view


def test_a_mark_against_the_dataset_label_asks_first_and_no_records_nothing(tmp_path: Path) -> None:
    c, view = _labelled(tmp_path)
    view.answers["confirm"] = False
    c.on_window_review_requested(0, 0)  # C on the confident error: the model's 'normal', the folder's 'tumor'
    title, text = view.last("confirm")
    assert "The folder says 'tumor'; you mark 'normal'" in text and "Keep both" in text, title
    assert not c.model.marks, "No records nothing"
    view.answers["confirm"] = True
    c.on_window_review_requested(0, 0)
    assert c.model.marks["k0"].label == 0, "Yes records the mark"
    asked = len(view.of("confirm"))
    c.on_window_review_requested(1, 0)  # agrees with the dataset's label: nothing asked
    c.on_window_review_requested(0, 0)  # the same mark again: nothing asked
    assert len(view.of("confirm")) == asked == 2
    figures = c.model.figures()
    assert (figures.dataset.labelled, figures.dataset.confident_errors, figures.reviewed.labelled) == (
        4,
        1,
        2,
    )


def test_a_mark_against_the_label_changes_only_the_reviewed_figures(tmp_path: Path) -> None:
    c, view = _labelled(tmp_path)
    c.on_window_review_requested(0, 0)  # confirmed against the label (the fake window answers yes)
    row = c.model.rows[0]
    assert row.ground_truth == 1 and row.correct is False, "the dataset's label stays the row's truth"
    assert c.model.review_of(0).text == "✓ confirmed normal · dataset: tumor"
    after = c.model.figures()
    assert (after.dataset.labelled, after.dataset.accuracy, after.dataset.confident_errors) == (4, 0.75, 1)
    assert (after.reviewed.labelled, after.reviewed.accuracy) == (1, 1.0), "the reviewed images only"
    shown = view.last("set_metrics")[0]
    assert (shown.dataset.accuracy, shown.reviewed.labelled) == (0.75, 1), "the window shows both sets"
    data = c.model.stats.plot_data()
    assert data.truth == "dataset labels" and data.adapted[-1] == 0.75, "the plots keep the dataset's truth"
    c.on_window_undo_requested()
    assert not c.model.marks and c.model.figures().reviewed.labelled == 0
    c.on_window_undo_requested(redo=True)
    assert c.model.marks["k0"].label == 0 and c.model.figures().dataset.accuracy == 0.75


# -- no Qt ---------------------------------------------------------------------------------------
def test_the_controller_and_these_fakes_load_no_qt(tmp_path: Path) -> None:
    """Every other test of this module and of ``test_controller_projects.py``, run in a fresh
    interpreter: no PySide6 module is loaded."""
    script = textwrap.dedent(
        f"""
        import inspect
        import sys
        from pathlib import Path

        sys.path.insert(0, {str(HERE)!r})
        import test_controller_plain
        import test_controller_projects

        ran = 0
        for module in (test_controller_plain, test_controller_projects):
            for name, test in sorted(vars(module).items()):
                if name.startswith("test_") and name != "test_the_controller_and_these_fakes_load_no_qt":
                    folder = Path({str(tmp_path)!r}) / name
                    folder.mkdir()
                    test(*[folder][: len(inspect.signature(test).parameters)])
                    ran += 1
        qt = sorted(m for m in sys.modules if m.split(".")[0] in ("PySide6", "shiboken6", "pyqtgraph"))
        assert not qt, qt
        assert "app.control.controller" in sys.modules
        print("ran", ran)
        """
    )
    root = str(HERE.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=root, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-4000:]
    import test_controller_projects

    tests = [n for n in [*globals(), *vars(test_controller_projects)] if n.startswith("test_")]
    assert done.stdout.split() == ["ran", str(len(tests) - 1)]


def test_the_fakes_refuse_what_the_protocols_do_not_offer() -> None:
    with pytest.raises(AttributeError, match="no 'table'"):
        FakeView().table  # noqa: B018 - the controller may not reach past the View protocol
    with pytest.raises(AttributeError, match="no 'request_pause'"):
        FakeWorker().request_pause  # noqa: B018
