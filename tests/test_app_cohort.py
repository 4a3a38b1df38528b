"""The app opens a cohort (issue 43, item 4): its sites listed with their progress and status from
the cohort's record, a run started (and refused, and resumed) in the background, a damaged record
named without losing anything, and a site opened in the main window for review."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from cohort_helpers import cohort_slides, csv_rows, run_cohort, summary_rows
from PIL import Image
from support import random_images

from app.core.cohort_sites import RecordedRun, read_cohort, recorded_run, write_manifest
from app.views.cohort_view import CohortWindow
from engine.io.cohort import cohort_inputs
from engine.run.cohort_state import CohortState
from engine.run.lock import DirectoryLock

RUN_TIMEOUT_MS = 90_000


def _folder(folder: Path, n: int = 8, seed: int = 3) -> Path:
    folder.mkdir(parents=True)
    for i, img in enumerate(random_images(n, seed=seed)):
        Image.fromarray(img).save(folder / f"im{i:02d}.png")
    return folder


def _window(qtbot: object, state: Path, fallback: RecordedRun | None = None) -> CohortWindow:
    window = CohortWindow(state, fallback=fallback)
    qtbot.addWidget(window)  # type: ignore[attr-defined]
    return window


@pytest.fixture
def ran(tiny_model_path: Path, tmp_path: Path) -> tuple[Path, Path, list[Path]]:
    """A cohort of two slides and a folder that f2tta run ran to the end (its state, out, inputs)."""
    inputs = [*cohort_slides(tmp_path / "slides", 2), _folder(tmp_path / "site-images")]
    state, out = tmp_path / "cohort", tmp_path / "out"
    assert run_cohort(tiny_model_path, inputs, state, out) == 0
    return state, out, inputs


def test_the_sites_are_listed_with_their_progress_and_status(
    qtbot: object, ran: tuple[Path, Path, list[Path]], tiny_model_path: Path
) -> None:
    state, out, _ = ran
    summary = summary_rows(out)
    window = _window(qtbot, state)
    assert window.site_names() == ["slide00", "slide01", "site-images"] == list(summary)
    for name, row in summary.items():
        shown = window.row_texts(name)
        assert shown["Status"] == "Done" and row["status"] == "done"
        assert shown["Images"] == row["images"] and shown["Processed"] == row["processed"] != "0"
        assert shown["Skipped"] == row["skipped"]
        assert shown["Kind"] == ("Folder of images" if name == "site-images" else "Slide")
        assert shown["Decided by"].lower() == row["decided_by"].lower()
        assert shown["Review"] == "Not reviewed yet"
    assert "3 sites: 3 done" in window.state_line.text()
    assert window.run_button.text() == "Resume" and window.run_button.isEnabled()
    assert not window.stop_button.isEnabled()
    # The model and method the cohort ran with come from its sites' run records.
    run = recorded_run(read_cohort(state))
    assert run.model == tiny_model_path.resolve() and run.method == "source"
    assert "--accept-warnings" in run.options


def test_a_damaged_or_foreign_record_is_named_and_nothing_is_lost(
    qtbot: object, ran: tuple[Path, Path, list[Path]], tmp_path: Path
) -> None:
    state, _, _ = ran
    record = state / "cohort.json"
    good = record.read_bytes()
    window = _window(qtbot, state)
    assert len(window.site_names()) == 3
    for damaged in (b'{"sites": [', json.dumps({"format": 1, "kind": "someone else", "sites": []}).encode()):
        record.write_bytes(damaged)
        os.utime(record, ns=(1, 1))  # another time stamp than the one read last
        window.refresh()
        assert window.problem.isVisible() or not window.problem.isHidden()
        assert "cannot be read, and nothing was changed" in window.problem.text()
        assert window.site_names() == ["slide00", "slide01", "site-images"]  # the list shown stays
        assert record.read_bytes() == damaged  # read, never rewritten
    record.write_bytes(good)
    window.refresh(force=True)
    assert window.problem.isHidden() and window.row_texts("slide01")["Status"] == "Done"
    # A folder that is no cohort, a damaged record opened first: a message, no list, no run.
    for folder, words in ((tmp_path / "plain", "is not a cohort"), (state, "cannot be read")):
        folder.mkdir(exist_ok=True)
        if folder == state:
            record.write_text("[1, 2")
        other = _window(qtbot, folder)
        assert words in other.problem.text() and other.site_names() == []
        assert not other.run_button.isEnabled()


def test_the_window_runs_the_cohort_in_the_background_and_a_second_run_is_refused(
    qtbot: object, tiny_model_path: Path, tmp_path: Path
) -> None:
    inputs = [*cohort_slides(tmp_path / "slides", 1), _folder(tmp_path / "site-images", 6)]
    state, out = tmp_path / "cohort", tmp_path / "out"
    with CohortState(state, "test") as cohort:  # recorded, never run (as a run stopped at once leaves it)
        found = cohort_inputs(inputs)
        assert found is not None
        cohort.take(found)
        cohort.save(out)
    fallback = RecordedRun(tiny_model_path, "source", ("--accept-warnings",))
    window = _window(qtbot, state, fallback)
    assert [window.row_texts(n)["Status"] for n in window.site_names()] == ["Not run yet"] * 2
    assert window.run_button.text() == "Run"
    assert window.row_texts("slide00")["Images"] == "–" and window.row_texts("slide00")["Review"] == "–"
    assert window.state_line.text().startswith("2 sites: 2 not run yet. Runs with the model tiny.safetensors")
    with DirectoryLock(state, "another f2tta run"):  # the cohort is in use: the engine's message
        with qtbot.waitSignal(window.process.finished, timeout=RUN_TIMEOUT_MS):  # type: ignore[attr-defined]
            window.start()
            assert window.running and not window.run_button.isEnabled() and window.stop_button.isEnabled()
    assert any("is in use by process" in line and "another f2tta run" in line for line in window.messages())
    assert [window.row_texts(n)["Status"] for n in window.site_names()] == ["Not run yet"] * 2
    with qtbot.waitSignal(window.process.finished, timeout=RUN_TIMEOUT_MS):  # type: ignore[attr-defined]
        window.start()
    assert "every site is done" in window.messages()[-1]
    summary = summary_rows(out)
    for name in ("slide00", "site-images"):
        shown = window.row_texts(name)
        assert shown["Status"] == "Done" and shown["Processed"] == summary[name]["processed"] != "0"
        assert len(csv_rows(out / name / "predictions.csv")) == int(summary[name]["images"])
    assert window.run_button.text() == "Resume" and not window.running


def test_a_manifest_names_every_site_as_recorded(ran: tuple[Path, Path, list[Path]], tmp_path: Path) -> None:
    state, _, inputs = ran
    cohort = read_cohort(state)
    inputs[1].rename(tmp_path / "gone.tif")  # a slide moved away: left out, its rows kept
    assert write_manifest(cohort, tmp_path / "m.csv") == (["slide00", "site-images"], ["slide01"])
    found = cohort_inputs([tmp_path / "m.csv"])
    assert found is not None and [(i.site, i.path) for i in found] == [
        ("slide00", inputs[0]),
        ("site-images", inputs[2]),
    ]
    # While some sites are unfinished only they are named (a finished site open in the main window
    # would otherwise be reported in use by the run).
    cohort.records[2].result = None
    assert write_manifest(cohort, tmp_path / "m.csv") == (["site-images"], [])


def test_a_site_opens_in_the_main_window_with_its_rows(studio: object, tmp_path: Path) -> None:
    model = studio.model  # type: ignore[attr-defined]
    inputs = [*cohort_slides(tmp_path / "slides", 1), _folder(tmp_path / "site-images", 8)]
    state, out = tmp_path / "cohort", tmp_path / "out"
    assert run_cohort(model, inputs, state, out, method="source") == 0
    app = studio.open()  # type: ignore[attr-defined]
    window = CohortWindow(state, app.window)
    studio.qtbot.addWidget(window)  # type: ignore[attr-defined]
    window.table.selectRow(window.site_names().index("site-images"))
    with studio.qtbot.waitSignal(app.sourceOpened, timeout=RUN_TIMEOUT_MS):  # type: ignore[attr-defined]
        window.open_selected()
    controller = app.controller
    assert controller.state.state_dir == state / "sites" / "site-images"
    rows = controller.model.rows
    expected = csv_rows(out / "site-images" / "predictions.csv")
    assert [r.name for r in rows] == [r["item"] for r in expected] and all(r.restored for r in rows)
    assert controller.model.pending == 0 and controller.state.info is not None
    assert not controller.state.info.project_error
    # A review mark given in the main window is kept in the site's state, and the list says so.
    controller.on_window_review_requested(rows[0].position, rows[0].source_prediction)
    window.refresh(force=True)
    assert window.row_texts("site-images")["Review"] == "Reviewed in the app: 1 answer"
    assert window.row_texts("slide00")["Review"] == "Not reviewed yet"


@pytest.mark.slow
def test_a_stopped_run_resumes_from_the_window_without_processing_anything_twice(
    qtbot: object, tiny_model_path: Path, tmp_path: Path
) -> None:
    inputs = [_folder(tmp_path / f"site{i}", 120, seed=i) for i in range(3)]
    state, out = tmp_path / "cohort", tmp_path / "out"
    with CohortState(state, "test") as cohort:
        found = cohort_inputs(inputs)
        assert found is not None
        cohort.take(found)
        cohort.save(out)
    fallback = RecordedRun(tiny_model_path, "tent", ("--accept-warnings", "--save-every", "5"))
    window = _window(qtbot, state, fallback)
    with qtbot.waitSignal(window.process.finished, timeout=RUN_TIMEOUT_MS):  # type: ignore[attr-defined]
        window.start()
        # Stop once the first site has begun saving (its rows file is written as it goes).
        qtbot.waitUntil(  # type: ignore[attr-defined]
            lambda: any((state / "sites" / "site0" / "rows").glob("*.jsonl")), timeout=RUN_TIMEOUT_MS
        )
        window.stop()
    assert window.messages()[-1].startswith("Stopped.")
    statuses = [window.row_texts(f"site{i}")["Status"] for i in range(3)]
    assert statuses[2] == "Not run yet" and "Done" not in statuses[1:], statuses
    assert window.run_button.text() == "Resume"
    with qtbot.waitSignal(window.process.finished, timeout=RUN_TIMEOUT_MS):  # type: ignore[attr-defined]
        window.start()
    assert "every site is done" in window.messages()[-1]
    for i in range(3):
        assert window.row_texts(f"site{i}")["Status"] == "Done"
        rows = csv_rows(out / f"site{i}" / "predictions.csv")
        assert sorted(r["item"] for r in rows) == sorted({r["item"] for r in rows}) and len(rows) == 120


def test_the_command_line_names_a_cohort_folder_that_is_not_there(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from app.main import main

    assert main(["--cohort", str(tmp_path / "nowhere"), "--home", str(tmp_path / "home")]) == 2
    err = capsys.readouterr().err
    assert "--cohort" in err and "no such folder" in err
