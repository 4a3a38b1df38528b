"""Qt-free app state: phases, progress, rows and filters, statistics, sources, projects, settings, reports."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import numpy as np
import pytest
from app_fixtures import CLASSES, make_folder, sample_row

from app.core.caches import LruCache, MessageThrottle
from app.core.filters import PredictionRow, RowFilter, make_row
from app.core.overlay import Overlay, composite, probability_rgba, slide_heatmap, widen_levels
from app.core.phase import Phase, actions_for
from app.core.progress import ProgressMeter, format_duration
from app.core.projects import ProjectError, ProjectStore, check_name, studio_home
from app.core.settings import AppSettings, clean_overrides, config_fields, load_settings, save_settings
from app.core.stats import RunStatistics, segment_size_for
from engine import StateError, StreamItem, open_folder
from engine.io.sources import SourceError, parse_label
from engine.run.guard import GuardEvent
from engine.run.step import StepResult


# -- phases and progress ----------------------------------------------------------------------
def test_actions_follow_the_phase() -> None:
    running = actions_for(Phase.RUNNING, has_session=True, pending=5, has_rows=True)
    assert running.pause and running.stop and not running.start and not running.settings and not running.open
    paused = actions_for(Phase.PAUSED, has_session=True, pending=5, has_rows=True)
    assert paused.resume and paused.stop and paused.export and not paused.pause
    ready = actions_for(Phase.READY, has_session=True, pending=5, has_rows=False)
    assert ready.start and ready.open and ready.reset and not ready.export
    done = actions_for(Phase.DONE, has_session=True, pending=0, has_rows=True)
    assert not done.start and done.export
    pausing = actions_for(Phase.PAUSING, has_session=True, pending=5, has_rows=True)
    assert not pausing.resume and not pausing.pause and pausing.stop
    assert not actions_for(Phase.READY, has_session=False, pending=5, has_rows=False).start


def test_progress_rate_and_eta_ignore_pauses() -> None:
    now = [0.0]
    meter = ProgressMeter(window=10, clock=lambda: now[0])
    meter.start(0, 100)
    for _ in range(10):
        now[0] += 0.5
        meter.add()
    p = meter.progress()
    assert p.done == 10 and p.rate == pytest.approx(2.0) and p.remaining_s == pytest.approx(45.0)
    meter.pause()
    now[0] += 1000  # a long pause must not drag the rate down
    meter.start(meter.done, 100)
    now[0] += 0.5
    meter.add()
    assert meter.progress().rate == pytest.approx(2.0)
    assert "11 / 100" in meter.progress().text()
    meter.pause()
    assert meter.progress().rate == pytest.approx(2.0), "the last rate stays on show while paused"
    assert format_duration(3725) == "1:02:05" and format_duration(math.nan) == "--:--"


def test_message_throttle_collapses_repeats() -> None:
    now = [0.0]
    throttle = MessageThrottle(interval=5, clock=lambda: now[0])
    assert throttle.admit("step 1: loss is nan") == "step 1: loss is nan"
    assert throttle.admit("step 2: loss is nan") is None
    assert throttle.admit("something else") == "something else"
    now[0] = 6
    assert throttle.admit("step 9: loss is nan") == "step 9: loss is nan (1 similar messages not shown)"


def test_lru_cache_evicts_oldest() -> None:
    cache = LruCache(2)
    cache.put(1, np.zeros(1))
    cache.put(2, np.zeros(1))
    assert cache.get(1) is not None
    cache.put(3, np.zeros(1))
    assert 2 not in cache and 1 in cache and 3 in cache


# -- rows and filters -------------------------------------------------------------------------
def test_row_filters() -> None:
    rows = [
        sample_row(0, pred=1, src=0, truth=1, conf=0.55),  # changed, fixed, low confidence
        sample_row(1, pred=0, src=0, truth=1),  # wrong
        sample_row(2, pred=1, src=1, truth=1, unc=0.9, name="special.png"),
    ]

    def shown(f: RowFilter) -> list[int]:
        return [r.index for r in rows if f.accepts(r)]

    assert shown(RowFilter()) == [0, 1, 2]
    assert shown(RowFilter("changed")) == [0]
    assert shown(RowFilter("low_confidence", low_confidence=0.6)) == [0]
    assert shown(RowFilter("wrong")) == [1]
    assert shown(RowFilter("fixed")) == [0]
    assert shown(RowFilter("uncertain", high_uncertainty=0.5)) == [2]
    assert shown(RowFilter(text="SPECIAL")) == [2]
    assert rows[0].agreement == "correct (fixed)" and rows[1].agreement == "wrong"


def test_row_json_round_trip_marks_restored() -> None:
    original = sample_row(3, truth=0, tile=(1, 2, 64, 128, 64, 64))
    back = PredictionRow.from_json(json.loads(json.dumps(original.to_json())))
    assert (
        back.restored and back.tile == original.tile and back.confidence == pytest.approx(original.confidence)
    )
    nan_row = sample_row(4, unc=math.nan)
    assert math.isnan(PredictionRow.from_json(nan_row.to_json()).uncertainty)


def _step(index: int, guard: str = "", update_skipped: bool = False) -> StepResult:
    """One image's engine result (adapted tumor, source normal)."""
    return StepResult(
        index=index,
        probs=np.array([0.3, 0.7]),
        prediction=1,
        confidence=0.7,
        source_probs=np.array([0.6, 0.4]),
        source_prediction=0,
        uncertainty=np.full((2, 2), 0.2),
        uncertain_tokens=np.zeros(0, dtype=np.int64),
        reliable_tokens=np.zeros(0, dtype=np.int64),
        grid=(2, 2),
        seconds=0.1,
        guard_event=GuardEvent(index, "recover", guard) if guard else None,
        update_skipped=update_skipped,
    )


def test_make_row_from_engine_outputs() -> None:
    item = StreamItem(5, "a.png", "a.png", ground_truth=0)
    r = make_row(item, _step(12), CLASSES, 1)
    assert (r.index, r.position, r.prediction_label, r.source_label) == (12, 5, "tumor", "normal")
    assert r.changed and r.correct is False and r.source_correct is True
    assert r.confidence == pytest.approx(0.7) and r.positive_prob == pytest.approx(0.7)


def test_rows_keep_guard_events_and_skipped_updates() -> None:
    item = StreamItem(1, "b.png", "b.png")
    plain = make_row(item, _step(7), CLASSES, 1)
    assert plain.guard_message == "" and not plain.update_skipped
    assert "guard_message" not in plain.to_json() and "update_skipped" not in plain.to_json()
    event = make_row(item, _step(7, "collapse guard after image 7: bank cleared", True), CLASSES, 1)
    assert event.guard_message == "collapse guard after image 7: bank cleared" and event.update_skipped
    back = PredictionRow.from_json(json.loads(json.dumps(event.to_json())))
    assert back.guard_message == event.guard_message and back.update_skipped and back.restored
    assert PredictionRow.from_json(plain.to_json()).guard_message == ""
    assert [r.index for r in (plain, event) if RowFilter("events").accepts(r)] == [7]
    stats = RunStatistics()
    stats.extend([plain, event, sample_row(8, update_skipped=True)])
    s = stats.summary()
    assert (s.guard_events, s.skipped_updates) == (1, 2)
    stats.clear()
    assert (stats.summary().guard_events, stats.summary().skipped_updates) == (0, 0)


def test_message_throttle_with_an_explicit_key() -> None:
    now = [0.0]
    throttle = MessageThrottle(interval=5, clock=lambda: now[0])
    assert throttle.admit("a.png: update skipped", key="skip") == "a.png: update skipped"
    assert throttle.admit("b.png: update skipped", key="skip") is None
    now[0] = 6
    assert throttle.admit("c.png: update skipped", key="skip") == (
        "c.png: update skipped (1 similar messages not shown)"
    )


# -- statistics -------------------------------------------------------------------------------
def test_running_accuracy_with_ground_truth() -> None:
    stats = RunStatistics(segment_size=2)
    stats.extend(
        [
            sample_row(0, 1, 0, truth=1),
            sample_row(1, 0, 0, truth=1),
            sample_row(2, 1, 1, truth=1),
            sample_row(3, 1, 1, truth=None),
        ]
    )
    data = stats.plot_data()
    assert data.labelled
    np.testing.assert_allclose(data.x, [1, 2, 3])
    np.testing.assert_allclose(data.adapted, [1, 0.5, 2 / 3])
    np.testing.assert_allclose(data.source, [0, 0, 1 / 3])
    np.testing.assert_allclose(data.segment_adapted, [0.5, 1.0])
    s = stats.summary()
    assert (s.images, s.labelled, s.changed, s.adapted_correct, s.source_correct) == (4, 3, 1, 2, 1)


def test_positive_rate_without_ground_truth() -> None:
    stats = RunStatistics(positive_class=1, segment_size=segment_size_for(4, segments=2))
    stats.extend(
        [
            sample_row(0, 1, 0, conf=0.8),
            sample_row(1, 0, 0, conf=0.6),
            sample_row(2, 1, 1, conf=0.7),
            sample_row(3, 1, 1, conf=0.9),
        ]
    )
    data = stats.plot_data()
    assert not data.labelled
    np.testing.assert_allclose(data.adapted, [1, 0.5, 2 / 3, 0.75])
    np.testing.assert_allclose(data.confidence, [0.8, 0.7, 0.7, 0.75])
    np.testing.assert_allclose(data.segment_adapted, [0.5, 1.0])
    np.testing.assert_allclose(data.segment_source, [0.0, 1.0])


# -- sources ----------------------------------------------------------------------------------
def test_folder_with_class_subfolders(tmp_path: Path) -> None:
    root = make_folder(tmp_path, 6, labelled="folders")
    src = open_folder(root, CLASSES)
    assert len(src.items) == 6 and src.label_origin == "class sub-folders"
    assert all(it.ground_truth == CLASSES.index(it.key.split("/")[0]) for it in src.items)
    assert [it.position for it in src.items] == list(range(6))


def test_folder_with_labels_csv_and_manifest_order(tmp_path: Path) -> None:
    root = make_folder(tmp_path, 5, labelled="csv")
    (root / "manifest.txt").write_text("img004.png\nimg001.png\nmissing.png\nimg003.png\n")
    src = open_folder(root, CLASSES, order="manifest")
    assert [it.key for it in src.items] == ["img004.png", "img001.png", "img003.png"]
    assert src.label_origin == "labels.csv" and [it.ground_truth for it in src.items] == [0, 1, 1]
    assert any("not found" in n for n in src.notes) and any("left out" in n for n in src.notes)
    with pytest.raises(SourceError, match="manifest"):
        open_folder(make_folder(tmp_path / "x", 2, labelled="none"), CLASSES, order="manifest")


def test_folder_mtime_order_and_errors(tmp_path: Path) -> None:
    root = make_folder(tmp_path, 3, labelled="none")
    for i, name in enumerate(["img002.png", "img000.png", "img001.png"]):
        os.utime(root / name, (1000 + i, 1000 + i))
    assert [it.key for it in open_folder(root, CLASSES, order="mtime").items] == [
        "img002.png",
        "img000.png",
        "img001.png",
    ]
    assert open_folder(root, CLASSES).label_origin is None
    (tmp_path / "empty").mkdir()
    with pytest.raises(SourceError, match="no images"):
        open_folder(tmp_path / "empty", CLASSES)
    with pytest.raises(SourceError, match="not a folder"):
        open_folder(tmp_path / "nope", CLASSES)


def test_parse_label() -> None:
    assert parse_label("Tumor", CLASSES) == 1 and parse_label("0", CLASSES) == 0
    assert parse_label("7", CLASSES) is None and parse_label("cat", CLASSES) is None


# -- overlays ---------------------------------------------------------------------------------
def test_overlay_composite_draws_heat_and_tokens() -> None:
    overlay = Overlay.from_step((2, 2), np.array([[0.0, 1.0], [0.5, 0.25]]), np.array([1]), np.array([0]))
    assert not overlay.uncertainty.flags.writeable  # type: ignore[union-attr]
    np.testing.assert_array_equal(overlay.token_cells("uncertain"), [[0, 1]])
    image = np.full((20, 20, 3), 128, np.uint8)
    out = composite(image, overlay, opacity=1.0, heat=True, uncertain=True, reliable=False)
    assert tuple(out[0, 15]) == (255, 64, 64)  # the T_U outline in the top-right cell
    assert tuple(out[5, 5]) == (0, 0, 4)  # lowest uncertainty -> darkest colour
    assert np.array_equal(composite(image, None), image)
    rgba = probability_rgba(np.array([[np.nan, 1.0]]))
    assert rgba[0, 0, 3] == 0 and tuple(rgba[0, 1]) == (214, 39, 40, 255)
    assert slide_heatmap(image, np.array([[1.0]]), 10, opacity=1.0)[0, 0].tolist() == [214, 39, 40]
    levels = widen_levels(None, overlay)
    assert levels is not None and levels[0] == 0.0 and levels[1] > 1.0
    assert widen_levels(levels, overlay) == levels, "the stream-wide range only changes when exceeded"


# -- projects ---------------------------------------------------------------------------------
def test_project_keeps_its_journal_and_lists_what_was_saved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_model_path: Path
) -> None:
    from engine import Session

    monkeypatch.setenv("F2TTA_STUDIO_HOME", str(tmp_path / "home"))
    assert studio_home() == tmp_path / "home"
    store = ProjectStore()
    project = store.open("Site A")
    session = Session(tiny_model_path)
    journal = project.open_journal()
    assert journal.directory == project.state_dir == tmp_path / "home" / "profiles" / "Site A" / "state"
    for i in range(3):
        journal.add_row("src", sample_row(i))
        session.images_seen += 1
    journal.save(session)
    info = project.note_saved(session)
    assert info.images_seen == 3 and info.state_fingerprint == session.state_fingerprint()
    assert "3 images seen" in info.summary() and store.names() == ["Site A"]
    with pytest.raises(StateError, match="in use by process"):
        store.open("Site A").open_journal()  # one process (or window) at a time
    journal.close()
    cleared = store.open("Site A")
    journal = cleared.open_journal()
    journal.restore(Session(tiny_model_path))
    assert [r.key for r in journal.rows("src")] == ["k0", "k1", "k2"]
    journal.clear()
    assert cleared.note_cleared().images_seen == 0 and not journal.has_state
    journal.close()
    with pytest.raises(ProjectError):
        check_name("../evil")


def test_project_rows_of_the_older_layout_move_into_the_journal(
    tmp_path: Path, tiny_model_path: Path
) -> None:
    from engine import Session
    from engine.io.sources import source_hash

    project = ProjectStore(tmp_path).open("old")
    session = Session(tiny_model_path)
    session.images_seen = 2
    legacy_rows = [sample_row(0), sample_row(1)]
    rows_dir = project.path / "rows"
    rows_dir.mkdir()
    source_id = "/data/site"
    name = f"{source_hash(source_id)}.jsonl"  # the old layout used the same file names
    (rows_dir / name).write_text("".join(json.dumps(r.to_json()) + "\n" for r in legacy_rows))
    session.save(
        project.state_dir, extra={"format": "f2tta-studio/profile-1", "processed": {source_id: ["k0", "k1"]}}
    )
    journal = project.open_journal()
    journal.restore(Session(tiny_model_path))
    assert [r.key for r in journal.rows(source_id)] == ["k0", "k1"] and not rows_dir.exists()
    journal.close()


# -- settings ---------------------------------------------------------------------------------
def test_settings_round_trip_and_method_fields(tmp_path: Path) -> None:
    from engine.methods import method_config_class

    s = AppSettings(model="m.safetensors", method_config={"mc_passes": 3}, low_confidence=0.7)
    save_settings(s, tmp_path / "s.json")
    assert load_settings(tmp_path / "s.json") == s
    (tmp_path / "bad.json").write_text("{not json")
    assert load_settings(tmp_path / "bad.json") == AppSettings()
    fields = {f.name: f for f in config_fields(method_config_class("idipt"))}
    assert fields["mc_passes"].kind is int and fields["lr"].kind is float and fields["use_uom"].kind is bool
    assert fields["prompt_mode"].choices == ("gated", "prefix") and "Monte-Carlo" in fields["mc_passes"].help
    assert clean_overrides(list(fields.values()), {"mc_passes": 10, "lr": "0.01", "bogus": 1}) == {"lr": 0.01}
