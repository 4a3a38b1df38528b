"""The app's runs that end early or unusually, its events, its command line, and the journal it
shares with ``f2tta run`` (offscreen, pytest-qt). Every test ends with the worker thread finished."""

from __future__ import annotations

import csv
import dataclasses
import json
import os
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest
from app_fixtures import make_folder
from app_studio import RUN_TIMEOUT_MS, Studio, drain_worker, read_pdf_text
from cli_helpers import before_step, out_of_memory_at

from app.core.phase import Phase
from app.core.projects import ProjectStore
from app.shell.studio_app import StudioApp


def test_command_line_run_export_and_quit(
    home: Path, model: Path, tmp_path: Path, qapp: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    import app.shell.studio_app
    from app.main import main

    made: list[StudioApp] = []

    class Recording(StudioApp):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, **kwargs)  # type: ignore[arg-type]
            made.append(self)

    monkeypatch.setattr(app.shell.studio_app, "StudioApp", Recording)
    folder = make_folder(tmp_path, 10, labelled="csv")  # mixed arrival: the gate does not fire
    out = tmp_path / "cli_out"
    code = main(
        [
            str(folder),
            "--model",
            str(model),
            "--project",
            "smoke",
            "--run",
            "--export",
            str(out),
            "--quit-when-done",
        ]
    )
    assert code == 0
    assert {p.name for p in out.iterdir()} == {"predictions.csv", "run_config.json", "report.pdf"}
    with open(out / "predictions.csv", newline="") as fh:
        assert len(list(csv.DictReader(fh))) == 10
    assert ProjectStore(home).open("smoke").info().images_seen == 10
    assert made and not any(c.engine_thread.isRunning() for c in made), "main() ends the worker thread"
    # Failures give a non-zero exit code.
    assert (
        main([str(folder), "--model", str(tmp_path / "missing.safetensors"), "--run", "--quit-when-done"])
        == 1
    )
    assert main([str(tmp_path / "nowhere"), "--run"]) == 2
    assert len(made) == 2 and not any(c.engine_thread.isRunning() for c in made)


def test_a_scripted_run_of_flagged_images_stops_with_4_or_runs_apart(
    home: Path, model: Path, tmp_path: Path, qapp: object
) -> None:
    """The gate means the same in the app as in f2tta run (issue 27, item 4): ``--run`` on a folder
    the applicability check flags (class sub-folders in name order arrive class by class) runs
    nothing and exits 4; ``--accept-warnings`` runs it in a project of its own, not the named one."""
    from app.main import main

    folder = make_folder(tmp_path, 10, labelled="folders")
    argv = [str(folder), "--model", str(model), "--project", "smoke", "--method", "source", "--run"]
    assert main([*argv, "--quit-when-done"]) == 4
    assert ProjectStore(home).open("smoke").info().images_seen == 0, "nothing was run"
    out = tmp_path / "out"
    assert main([*argv, "--accept-warnings", "--export", str(out), "--quit-when-done"]) == 0
    assert ProjectStore(home).open("smoke").info().images_seen == 0, "the named project is not touched"
    apart = ProjectStore(home).info("smoke - site")
    assert apart is not None and apart.images_seen == 10
    with open(out / "predictions.csv", newline="") as fh:
        assert len(list(csv.DictReader(fh))) == 10


def test_model_failure_ends_the_run_and_a_failed_save_is_reported(
    studio: Studio, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from engine import Journal

    folder = make_folder(tmp_path, 6, labelled="none")
    c = studio.open()
    studio.open_folder(c, folder)
    before_step(monkeypatch, out_of_memory_at(3))
    ended = studio.run_to_end(c)
    # A model failure is not the image's fault: the run ends, the image is retried next time.
    assert ended.reason == "failed" and ended.processed == 2 and ended.saved  # type: ignore[attr-defined]
    errors = [m for level, m in c.window.log.entries if level == "error"]
    assert any("out of memory" in m and "img002" in m and "tried again" in m for m in errors)
    # four images to decide, and the two decided ones whose maps the failure left pending
    assert c.controller.model.pending == 4 + 2 and c.controller.phase is Phase.READY

    def broken_save(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Journal, "save", broken_save)
    ended = studio.run_to_end(c)
    assert ended.reason == "failed" and ended.processed == 4 and not ended.saved  # type: ignore[attr-defined]
    errors = [m for level, m in c.window.log.entries if level == "error"]
    assert any("cannot be written" in m and "No space left" in m for m in errors)
    assert any("state NOT saved" in m for m in errors)


def test_closing_the_window_mid_run_stops_and_saves(studio: Studio, tmp_path: Path, qtbot: object) -> None:
    folder = make_folder(tmp_path, 40, labelled="none")
    c = studio.open()
    studio.start_and_wait(c, folder, 2)
    with qtbot.waitSignal(c.engine_thread.finished, timeout=RUN_TIMEOUT_MS):  # type: ignore[attr-defined]
        c.window.close()  # refused while running: the run stops, saves, then the window closes
    assert not c.engine_thread.isRunning() and not c.window.isVisible()
    assert (
        c.controller.state.last_run is not None
        and c.controller.state.last_run.reason == "stopped"
        and c.controller.state.last_run.saved
    )
    assert ProjectStore(studio.home).open("default").info().images_seen == c.window.table.model.rowCount()


def test_guard_events_and_skipped_updates_reach_the_log_and_every_report(
    studio: Studio, tmp_path: Path, qtbot: object, monkeypatch: pytest.MonkeyPatch
) -> None:

    import app.worker.opening
    from engine import Session
    from engine.run.guard import GuardConfig

    # A two-image window in which any majority counts as collapse: the real guard acts after
    # images 1, 3 and 5 (first recovering, then resetting because the collapse "came back").
    # The guard watches methods whose predictions can drift (I-DiPT), not idipt+'s guarded decisions.
    guard = GuardConfig(window=2, adapted_share=0.5, source_share=1.0)

    def session(model: object, method: str, method_config: object, device: object) -> Session:
        return Session(model, method="idipt", device=device, guard=guard)  # type: ignore[arg-type]

    monkeypatch.setattr(app.worker.opening, "Session", session)
    real_step = Session.step_batch

    def step(self: Session, images: list[object], sites: list[str | None] | None = None) -> list[object]:
        results = real_step(self, images, sites)  # type: ignore[arg-type]
        # what I-DiPT reports when the loss is not finite
        return [dataclasses.replace(r, update_skipped=True) if r.index == 2 else r for r in results]

    monkeypatch.setattr(Session, "step_batch", step)
    folder = make_folder(tmp_path, 6, labelled="none")
    c = studio.open()
    studio.open_folder(c, folder)
    studio.run_to_end(c)

    warnings = [m for level, m in c.window.log.entries if level == "warning"]
    guard_lines = [m for m in warnings if "collapse guard after" in m]
    assert [m.split(": 50%")[0] for m in guard_lines] == [
        f"img00{i}.png: collapse guard after {i + 1} images" for i in (1, 3, 5)
    ], "one line per guard action, with the file name, and no duplicate from the engine's logger"
    assert guard_lines[-1].endswith("adaptation reset to the source model")
    assert [m for m in warnings if "update skipped" in m] == [
        "img002.png (#3): non-finite loss or gradient, update skipped "
        "(the adaptation keeps its last good state)"
    ]
    assert guard_lines[-1] in c.window.log.text.toPlainText()
    messages = [m for _, m in c.window.log.entries]
    summary = next(m for m in messages if m.startswith("Run finished"))
    assert "collapse guard acted 3 times" in summary and "update skipped once" in summary
    rows = c.window.table.model.rows
    assert [r.index for r in rows if r.guard_message] == [1, 3, 5]
    assert [r.index for r in rows if r.update_skipped] == [2]
    c.window.table.mode_combo.setCurrentIndex(c.window.table.mode_combo.findData("events"))
    assert c.window.table.proxy.rowCount() == 4

    out = tmp_path / "reports"
    with qtbot.waitSignal(c.exportFinished, timeout=RUN_TIMEOUT_MS):  # type: ignore[attr-defined]
        c.controller.export(str(out))
    config = json.loads((out / "run_config.json").read_text())
    assert config["summary"]["guard_events"] == 3 and config["summary"]["skipped_updates"] == 1
    assert [(e["index"], e["item"]) for e in config["guard_events"]] == [
        (1, "img001.png"),
        (3, "img003.png"),
        (5, "img005.png"),
    ]
    assert config["guard_events"][0]["message"].startswith("collapse guard after 2 images:")
    assert config["run"]["guard"]["window"] == 2
    with open(out / "predictions.csv", newline="", encoding="utf-8") as fh:
        records = list(csv.DictReader(fh))
    assert [r["index"] for r in records if r["guard_event"]] == ["1", "3", "5"]
    assert [r["index"] for r in records if r["update_skipped"] == "1"] == ["2"]
    _, text = read_pdf_text(out / "report.pdf")
    for needle in (
        "Collapse-guard events 3",
        "Skipped updates (non-finite loss) 1",
        "Guard events",
        "img005.png",
        "collapse guard after 4 images:",
    ):
        assert needle in text, needle


# -- one journal for f2tta run and the app -----------------------------------------------------
def _cli(model: Path, folder: Path, out: Path, state: Path, *extra: str) -> int:
    from engine.cli import main as cli_main

    argv = ["run", "--model", str(model), "--input", str(folder), "--state", str(state), "--out", str(out)]
    # the folders are labelled by class sub-folders, so arrive class by class: the gate's warning is accepted
    return cli_main([*argv, "--no-progress", "--accept-warnings", "--set", "mc_passes=2", *extra])


def test_state_written_by_f2tta_run_opens_in_the_app_with_its_rows(studio: Studio, tmp_path: Path) -> None:
    folder = make_folder(tmp_path, 10, labelled="folders")
    state, out = tmp_path / "cli_state", tmp_path / "preds.csv"
    assert _cli(studio.model, folder, out, state) == 0
    cli_rows = [r for r in csv.DictReader(out.open(newline=""))]
    c = studio.open(state_dir=state)
    assert (
        c.controller.state.info is not None
        and c.controller.state.info.images_seen == 10
        and not c.controller.state.info.project_error
    )
    studio.open_folder(c, folder)
    rows = c.controller.model.rows
    assert [r.name for r in rows] == [r["item"] for r in cli_rows] and all(r.restored for r in rows)
    assert [f"{r.confidence:.6f}" for r in rows] == [r["confidence"] for r in cli_rows]
    assert c.controller.model.pending == 0 and c.controller.phase is Phase.DONE
    # New images arrive: the app continues the same journal, and f2tta run continues after it.
    extra = make_folder(tmp_path / "more", 3, labelled="folders", seed=9)
    for src in sorted(extra.rglob("*.png")):
        target = folder / src.relative_to(extra)
        target.parent.mkdir(parents=True, exist_ok=True)
        src.rename(target.with_name("new_" + target.name))
    studio.open_folder(c, folder)
    assert c.controller.model.pending == 3
    c.window.confirm = lambda title, text: True  # the gate's question: run in this --state directory
    studio.run_to_end(c)
    studio.close(c)
    assert _cli(studio.model, folder, out, state) == 0
    final = [r for r in csv.DictReader(out.open(newline=""))]
    assert [int(r["index"]) for r in final] == list(range(13)) and len({r["item"] for r in final}) == 13


def test_project_written_by_the_app_resumes_under_f2tta_run(
    studio: Studio, tmp_path: Path, qtbot: object
) -> None:
    folder = make_folder(tmp_path, 30, labelled="none")
    c = studio.open(project="Site B")
    studio.start_and_wait(c, folder, 4)
    with qtbot.waitSignal(c.runFinished, timeout=RUN_TIMEOUT_MS):  # type: ignore[attr-defined]
        c.controller.stop()
    app_rows = list(c.controller.model.rows)
    studio.close(c)
    project = studio.home / "profiles" / "Site B"
    out = tmp_path / "preds.csv"
    assert _cli(studio.model, folder, out, project) == 0, "the project folder is accepted as --state"
    rows = [r for r in csv.DictReader(out.open(newline=""))]
    assert [r["item"] for r in rows][: len(app_rows)] == [r.name for r in app_rows]
    assert [f"{r.confidence:.6f}" for r in app_rows] == [r["confidence"] for r in rows][: len(app_rows)]
    assert [int(r["index"]) for r in rows] == list(range(30)) and len({r["item"] for r in rows}) == 30


def test_a_folder_begun_interleaved_continues_in_that_order_when_reopened(
    studio: Studio, tmp_path: Path
) -> None:
    """Reopened under the settings' name order (a restart with other settings, another computer),
    a folder begun interleaved continues interleaved, as `f2tta run` does without --order: its
    rows keep their "#" and no class-sorted warning appears for a stream that was not sorted.
    Changing the order for the open folder still changes it."""
    folder = make_folder(tmp_path, 12, labelled="folders")
    first = studio.open(order="interleaved")
    studio.open_folder(first, folder)
    studio.run_to_end(first)
    positions = {r.key: r.position for r in first.controller.model.rows}
    assert [r.key for r in sorted(first.controller.model.rows, key=lambda r: r.position)] != sorted(positions)
    studio.close(first)
    again = studio.open(order="name")
    studio.open_folder(again, folder)
    model = again.controller.model
    assert model.source is not None and model.source.order == "interleaved"
    assert {r.key: r.position for r in model.rows} == positions, "the rows keep their #"
    assert "class-sorted" not in model.gate_checks
    again.window.confirm = lambda title, text: True  # "Reorder …? its rows are numbered again"
    with studio.qtbot.waitSignal(again.sourceOpened, timeout=RUN_TIMEOUT_MS):  # type: ignore[attr-defined]
        again.controller.sessions.on_window_order_changed("mtime")  # File ▸ Arrival order
    assert again.controller.model.source.order == "mtime", "an order chosen for the open folder wins"


def test_a_folder_that_grows_offers_its_new_images(studio: Studio, tmp_path: Path, qtbot: object) -> None:
    """A folder being copied into was processed as it was when opened (5 of 41 files) with no sign
    that more arrived (issue 27, item 7): at the end of a run and when the window comes to the
    front, the worker counts what arrived, and a banner offers to process it."""
    import shutil

    folder = make_folder(tmp_path, 5, labelled="none")
    c = studio.processed(folder)
    more = make_folder(tmp_path / "more", 3, labelled="none", seed=4)
    for i, src in enumerate(sorted(more.glob("*.png"))):
        shutil.copy(src, folder / f"later{i}.png")
    c.controller.on_window_activated()
    qtbot.waitUntil(lambda: "source-new-images" in c.window.banners.items, timeout=RUN_TIMEOUT_MS)  # type: ignore[attr-defined]
    banner = c.window.banners.items["source-new-images"].banner
    assert "3 new images arrived" in banner.text
    with qtbot.waitSignal(c.runFinished, timeout=RUN_TIMEOUT_MS):  # type: ignore[attr-defined]
        c.window.bannerActionTriggered.emit("source-new-images", "take-new")
    assert len(c.controller.model.rows) == 8 and c.controller.model.pending == 0
    drain_worker(c)
    assert "source-new-images" not in c.window.banners.items, "nothing new after the run"
