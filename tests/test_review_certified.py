"""Review-certified adaptation in the app, without Qt: the review queue of disagreements, marks
with the reviewer's name, undo and redo, the certificates kept with the project (and rebuilt when
the file is damaged or edited), and the revert path end to end through the plain controller:
reviews from the queue turn a harmed site group back to the source model's decisions in the
table, the statistics and the reports, and the verdict survives a restart."""

from __future__ import annotations

import csv
import getpass
import io
import json
import re
from pathlib import Path

import pytest
from app_fixtures import CLASSES, grouped_rows, report_data, sample_row
from controller_fakes import FakeView, ended, opened, reopened, results_of

from app.control.controller import Controller
from app.core.certificates import REVERTED_PATH, CertificateFile, LineCache
from app.core.projects import DEFAULT_PROJECT
from app.core.reviews import ReviewMark, ReviewStore
from app.core.run_items import review_text
from app.core.run_model import RunModel
from app.core.settings import AppSettings
from app.reports.files import config_document, csv_bytes, reviews_bytes
from app.reports.pdf_sections import certificate_blocks
from engine import REVERTED, UNDECIDED, CertificateBook, FolderSource, PredictionRow, StreamItem

N = 60  # images: two site groups of 30, every third image of each changed by adapting


def _review_dir(home: Path) -> Path:
    return home / "profiles" / DEFAULT_PROJECT / "review"


def _model(home: Path, rows: list[PredictionRow], n: int = N, restored: bool = False) -> RunModel:
    """A run model on a folder of ``n`` images in ``home``, with ``rows`` processed."""
    items = tuple(StreamItem(i, f"k{i}", f"img{i}.png", path=home / f"img{i}.png") for i in range(n))
    source = FolderSource(home, "name", items)
    _review_dir(home).parent.mkdir(parents=True, exist_ok=True)  # the project's folder (the worker makes it)
    model = RunModel()
    store = ReviewStore(_review_dir(home), source.source_id)
    model.open(source, len(rows) if restored else 0, rows if restored else [], 1, CLASSES, None, store)
    if not restored:
        model.add_results(results_of(rows))
    model.flush(force=True)
    return model


def _queue(model: RunModel) -> list[int]:
    ranks = model.desk.queue_state().ranks
    return sorted(ranks, key=ranks.__getitem__)


def _review_head(model: RunModel, reviewer: str = "Dr Ada") -> PredictionRow:
    """Review the queue's first image with the dataset's label, as a reviewer who knows it would."""
    index = _queue(model)[0]
    raw = model.raw_rows[index]
    assert raw.ground_truth is not None
    model.review(raw.position, raw.ground_truth, reviewer)
    return raw


# -- the queue -------------------------------------------------------------------------------------
def test_the_queue_holds_the_disagreements_least_reviewed_group_first(tmp_path: Path) -> None:
    model = _model(tmp_path, grouped_rows(N))
    # Group 0 disagrees at 0, 6, 12, ...; group 1 at 1, 7, 13, ...: the groups alternate.
    assert _queue(model)[:6] == [0, 1, 6, 7, 12, 13]
    assert set(_queue(model)) == {r.position for r in model.raw_rows if r.changed}
    model.review(1, model.raw_rows[1].ground_truth)
    model.review(7, model.raw_rows[7].ground_truth)
    # Group 1 has two reviews, group 0 none: group 0 first until it has as many; arrival order within.
    assert _queue(model)[:6] == [0, 6, 12, 13, 18, 19]
    model.review(0, 0)  # the source model's class: a review against adapting in group 0
    assert 0 not in _queue(model), "a reviewed image leaves the queue"
    model.review(13, model.raw_rows[13].ground_truth)
    model.review(19, model.raw_rows[19].ground_truth)
    assert model.desk.book.verdict(1) == REVERTED
    order = _queue(model)
    group_of = {r.position: r.site_group for r in model.raw_rows}
    assert [group_of[i] for i in order] == [0] * 9 + [1] * 6, "a decided group's items come last"
    assert model.desk.queue_state().verdicts == {0: UNDECIDED, 1: REVERTED}


# -- marks: the reviewer, undo and redo ------------------------------------------------------------
def test_marks_carry_the_reviewers_name_and_marks_without_one_still_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = grouped_rows(12)
    model = _model(tmp_path, rows)
    source_id = str(tmp_path.resolve())
    mark = model.review(3, 1, "Dr Ada")
    assert mark is not None and mark.reviewer == "Dr Ada"
    store = ReviewStore(_review_dir(tmp_path), source_id)
    line = store.path.read_text().splitlines()[-1]
    assert json.loads(line)["by"] == "Dr Ada"
    # A mark written before reviewers were recorded: no "by" field.
    with store.path.open("a") as fh:
        fh.write(
            json.dumps({"k": "k4", "label": 0, "prediction": 0, "at": "2024-01-01T00:00:00+00:00"}) + "\n"
        )
    marks = ReviewStore(_review_dir(tmp_path), source_id).load()
    assert marks["k3"].reviewer == "Dr Ada" and marks["k4"] == ReviewMark(
        "k4", 0, 0, "2024-01-01T00:00:00+00:00", ""
    )
    assert list(marks) == ["k3", "k4"], "marks load in the order they were made"

    monkeypatch.setattr(getpass, "getuser", lambda: "clinician7")
    assert AppSettings().reviewer_name() == "clinician7", "the OS user name by default"
    assert AppSettings(reviewer="  Dr Bo ").reviewer_name() == "Dr Bo"
    assert AppSettings.from_json(AppSettings(reviewer="Dr Bo").to_json()).reviewer == "Dr Bo"


def test_undo_removes_a_mark_durably_and_redo_makes_it_again(tmp_path: Path) -> None:
    model = _model(tmp_path, grouped_rows(N))
    store_path = ReviewStore(_review_dir(tmp_path), str(tmp_path.resolve())).path
    assert model.undo() is None and model.undo(redo=True) is None and model.desk.history() == ("", "")
    for _ in range(4):  # 1, 7, 13, 19 of group 1 (wrong adapted decisions) and 0, 6, 12 of group 0
        _review_head(model)
    assert model.desk.book.verdict(1) == UNDECIDED and model.desk.book.certificate(1).reviews == 2
    reviewed = [_review_head(model) for _ in range(4)]
    assert model.desk.book.verdict(1) == REVERTED and model.rows[25].prediction == 0
    assert model.desk.history() == (reviewed[-1].name, "")

    change = model.undo()  # the 4th review of group 1 goes: so does the revert that rested on it
    assert change is not None and change.key == reviewed[-1].key and change.after is not None
    assert reviewed[-1].key not in model.marks and model.desk.book.verdict(1) == UNDECIDED
    assert model.rows[25].prediction == model.raw_rows[25].prediction, "the adapted decision is back"
    assert reviewed[-1].position in _queue(model), "back in the queue"
    assert json.loads(store_path.read_text().splitlines()[-1]) == {"k": reviewed[-1].key, "label": None}
    kept = ReviewStore(_review_dir(tmp_path), str(tmp_path.resolve())).load()
    assert reviewed[-1].key not in kept, "undo removed the mark from the project"
    assert model.desk.history() == (reviewed[-2].name, reviewed[-1].name)

    assert model.undo(redo=True) is not None
    assert model.desk.book.verdict(1) == REVERTED and reviewed[-1].key in model.marks
    assert reviewed[-1].position not in _queue(model) and model.desk.history()[1] == ""

    # Changing a mark and undoing the change brings the earlier mark back (and rebuilds the book).
    before = model.marks["k0"]
    model.review(0, 1 - before.label, "Dr Bo")
    assert model.marks["k0"].reviewer == "Dr Bo" and model.desk.book.certificate(0).outcomes[-1] == -1
    model.undo()
    assert model.marks["k0"] == before and model.desk.book.certificate(0).outcomes.count(-1) == 0
    assert model.review(0, before.label, "Dr Bo") == before, "the same mark again changes nothing"


def test_a_mark_against_the_datasets_label_is_kept_beside_it() -> None:
    mark = ReviewMark("k1", 0, 1, "t")
    assert review_text(mark, CLASSES, shown=1, dataset="tumor") == "✎ normal · dataset: tumor"
    assert review_text(mark, CLASSES, shown=0, dataset="normal") == "✓ confirmed"
    assert review_text(mark, CLASSES) == "✎ normal" and review_text(None, CLASSES) == ""


# -- the certificates file -------------------------------------------------------------------------
def _reviewed_project(home: Path) -> tuple[list[PredictionRow], dict[int | None, str]]:
    """Eight reviews from the queue: group 1 reverted, group 0 undecided."""
    rows = grouped_rows(N)
    model = _model(home, rows)
    for _ in range(8):
        _review_head(model)
    verdicts = {g: c.verdict for g, c in model.desk.book.certificates.items()}
    assert verdicts == {0: UNDECIDED, 1: REVERTED}
    model.close()
    return rows, verdicts


@pytest.mark.parametrize(
    "damage",
    ["garbage", "verdict edited", "bounds edited", "a mark removed", "a folder", "NaN", "extra key"],
)
def test_damaged_or_edited_certificates_are_rebuilt_from_the_marks(tmp_path: Path, damage: str) -> None:
    rows, verdicts = _reviewed_project(tmp_path)
    path = CertificateFile(_review_dir(tmp_path), str(tmp_path.resolve())).path
    data = json.loads(path.read_text())
    group1 = next(g for g in data["groups"] if g["group"] == 1)
    if damage == "garbage":
        path.write_bytes(b"\x00\xffnot json")
    elif damage == "verdict edited":  # keep the adapted decisions: claim the group undecided
        group1.update(verdict="undecided", decided_at=None, decided_images=None, decided_disagreements=None)
        path.write_text(json.dumps(data))
    elif damage == "bounds edited":
        group1["upper"] = 0.5
        path.write_text(json.dumps(data))
    elif damage == "a mark removed":  # the certificates and the marks no longer agree
        store = ReviewStore(_review_dir(tmp_path), str(tmp_path.resolve()))
        store.clear("k19")
        store.close()
    elif damage == "a folder":
        path.unlink()
        path.mkdir()
    elif damage == "NaN":
        path.write_text(re.sub(r'"upper": [-0-9.e]+', '"upper": NaN', path.read_text(), count=1))
    else:
        data["pickle"] = "cos\nsystem\n(S'echo owned'\ntR."
        path.write_text(json.dumps(data))
    model = _model(tmp_path, rows, restored=True)
    notes = model.desk.take_notes()
    assert notes[0][0] == "warning" and "rebuilt" in notes[0][1], notes
    assert len(notes) == (2 if damage == "a folder" else 1), "a folder cannot be written over either"
    assert str(path.name) in notes[0][1]
    expected = UNDECIDED if damage == "a mark removed" else REVERTED  # 3 reviews of group 1 left
    assert model.desk.book.verdict(1) == expected and model.desk.book.verdict(0) == verdicts[0]
    if damage != "a folder":
        assert CertificateBook.from_json(path.read_text()).verdict(1) == expected, "the rebuilt book is saved"


def test_the_verdict_survives_a_restart_even_where_the_rows_alone_would_not_give_it(tmp_path: Path) -> None:
    """Group 1 is reverted early, while a third of its images were disagreements; 300 more images
    without one follow. A book built from the final rows would judge the same four reviews with
    d = 10/330 and leave the group undecided: the saved certificate keeps the revert."""
    first = grouped_rows(N)
    model = _model(tmp_path, first, n=N + 600)
    for position in (1, 7, 13, 19):
        model.review(position, model.raw_rows[position].ground_truth)
    assert model.desk.book.verdict(1) == REVERTED
    later = [sample_row(i, 0, 0, 0, site_group=1) for i in range(N, N + 600, 2)]
    model.add_results(results_of(later))
    model.close()
    rows = first + later
    rebuilt = CertificateBook.from_marks(
        [(r.site_group, r.changed) for r in rows],
        [
            (1, 1 - r.ground_truth, r.ground_truth, r.ground_truth)
            for r in first
            if r.position in (1, 7, 13, 19) and r.ground_truth is not None
        ],
    )
    assert rebuilt.verdict(1) == UNDECIDED

    again = _model(tmp_path, rows, n=N + 600, restored=True)
    assert again.desk.take_notes() == [], "the saved certificates were used as they are"
    cert = again.desk.book.certificate(1)
    assert cert.verdict == REVERTED and cert.decided_at == 4 and cert.images == 330
    assert again.rows[25].prediction == again.raw_rows[25].source_prediction


# -- the revert path, end to end through the controller --------------------------------------------
def _queue_head(c: Controller, view: FakeView) -> PredictionRow:
    ranks = view.last("set_queue")[0].ranks
    return c.model.raw_rows[min(ranks, key=ranks.__getitem__)]


def test_reviews_from_the_queue_revert_a_harmed_group_everywhere_and_for_good(tmp_path: Path) -> None:
    c, view, _, _ = opened(tmp_path, N)
    c.state.settings = AppSettings(reviewer="Dr Ada")
    rows = grouped_rows(N)
    c.start()
    c.on_worker_results_ready(results_of(rows))
    c.tick(force=True)
    summary = c.model.stats.summary()
    assert (summary.adapted_correct, summary.source_correct, summary.labelled) == (50, 50, 60)

    reviewed = []
    while not any(b.key == "source-reverted-1" for (b,) in view.of("show_banner")):
        head = _queue_head(c, view)
        assert head.changed, "the queue holds disagreements only"
        c.on_window_review_requested(head.position, head.ground_truth)  # the reviewer's class
        reviewed.append(head.position)
        assert len(reviewed) < 20
    assert reviewed == [0, 1, 6, 7, 12, 13, 18, 19], "the groups alternate, each in arrival order"
    banner = next(b for (b,) in view.of("show_banner") if b.key == "source-reverted-1")
    assert banner.text.startswith("Group 1 reverted after 4 reviews: its 30 images now show the source")
    assert any("Group 1 reverted after 4 reviews" in m for m in view.logged("warning"))
    lines = {line.group: line for line in view.last("set_certificates")[0]}
    assert lines[1].verdict == REVERTED and lines[1].reviews == 4 and lines[0].verdict == UNDECIDED
    assert lines[0].decision.startswith("≈") or lines[0].decision == "may stay undecided"

    # The table shows the source model's decisions in group 1, with both in the row's reason.
    changes = {ch.index: ch.row for (batch,) in view.of("update_rows") for ch in batch}
    shown = changes[25]
    assert shown.prediction == shown.source_prediction == rows[25].source_prediction
    assert shown.decision_path == REVERTED_PATH and not shown.changed
    assert shown.decision_reason == (
        f"adapted: {rows[25].prediction_label}, reverted to the source model's: {rows[25].source_label}; "
        "site group 1 reverted after 4 reviews"
    )
    assert c.model.raw_rows[25] == rows[25], "the engine's rows are kept as they were"
    summary = c.model.stats.summary()
    assert (summary.adapted_correct, summary.changed) == (60, 10), "the statistics follow"
    assert c.model.figures().dataset.accuracy == 1.0

    # The reports: JSON certificates, the reported decisions in the CSV, the reviewer in reviews.csv.
    data = c.report_data()
    assert data is not None
    document = json.loads(json.dumps(config_document(data), default=str))
    verdicts = {g["group"]: (g["verdict"], g["reviews"], g["decided_at"]) for g in document["certificates"]}
    assert verdicts == {0: (UNDECIDED, 4, None), 1: (REVERTED, 4, 4)}
    assert document["summary"]["reverted_images"] == 30 and document["summary"]["adapted_accuracy"] == 1.0
    predictions = list(csv.DictReader(io.StringIO(csv_bytes(data.raw_rows).decode())))
    assert (
        predictions[25]["prediction"] == rows[25].source_label
        and predictions[25]["decision_path"] == "reverted"
    )
    assert predictions[25]["ground_truth"] == rows[25].truth_label, "the dataset's truth, not the marks"
    marks = list(csv.DictReader(io.StringIO(reviews_bytes(data).decode())))
    assert [int(m["position"]) for m in marks] == reviewed, "in the order the reviews were made"
    assert {m["reviewer"] for m in marks} == {"Dr Ada"} and marks[1]["site_group"] == "1"
    assert any("site group 1: reverted" in t for t in data.certificate_texts)
    c.on_worker_run_ended(ended("finished", N, tmp_path))

    # A restart: the verdict, and the source model's decisions, are still there.
    again, view2, _, _ = reopened(tmp_path, rows, N)
    assert again.model.desk.book.verdict(1) == REVERTED and not view2.logged("warning")
    (banner,) = [b for (b,) in view2.of("show_banner") if b.key == "source-reverted-1"]
    assert banner.level == "info" and banner.text.startswith("Group 1 is reverted (after 4 reviews): its 30")
    assert again.model.rows[25].prediction == rows[25].source_prediction
    lines = {line.group: line for line in view2.last("set_certificates")[0]}
    assert lines[1].verdict == REVERTED and lines[1].decided_at == 4
    assert view2.last("set_queue")[0].verdicts[1] == REVERTED

    # Undo works on this session's marks only; the earlier marks stay.
    assert view2.last("set_undo_texts") == ("", "")
    again.on_window_undo_requested()
    assert len(again.model.marks) == 8


def test_undo_through_the_controller_selects_the_image_and_takes_the_banner_away(tmp_path: Path) -> None:
    c, view, _, _ = opened(tmp_path, N)
    c.on_worker_results_ready(results_of(grouped_rows(N)))
    c.tick(force=True)
    for position in (1, 7, 13, 19):
        c.on_window_review_requested(position, c.model.raw_rows[position].ground_truth or 0)
    assert view.last("set_undo_texts") == ("img19.png", "")
    c.on_window_undo_requested()
    assert view.last("dismiss_banner") == ("source-reverted-1",)
    assert any("Group 1 is no longer reverted" in m for m in view.logged("info"))
    assert view.last("select_row") == (19,) and view.last("set_undo_texts") == ("img13.png", "img19.png")
    assert view.last("show_status")[0] == "Undone: img19.png has no review mark (removed from the project)"
    c.on_window_undo_requested(redo=True)
    assert c.model.desk.book.verdict(1) == REVERTED and view.last("show_banner")[0].key == "source-reverted-1"
    assert view.last("show_status")[0] == "Redone: the review mark on img19.png"


def test_the_report_puts_groups_without_disagreements_on_one_line() -> None:
    book = CertificateBook()
    for i in range(30):
        book.note_image(0, i % 3 == 0)
    for _ in range(27):
        book.note_image(2, False)
    for _ in range(4):
        book.add_review(0, False, True)
    data = report_data(
        tuple(grouped_rows(4)),
        certificates=tuple(book.summaries()),
        certificate_texts=tuple(c.describe() for c in book.certificates.values()),
    )
    (block,) = certificate_blocks(data)
    assert "Site group 2 (27 images): adapting changed none of their decisions" in block.html
    assert "site group 0: reverted to the source model&#x27;s decisions after 4" in block.html
    assert "site group 2:" not in block.html, "no 'unverified' sentence where nothing changed"
    assert "Nothing was certified" not in block.html and "≤ " in block.html


def test_the_look_ahead_is_worked_out_once_per_state_of_a_group() -> None:
    """Two books' group 0 with as many reviews but other outcomes (another source, or an undo)
    each get their own "≈N more reviews"."""
    cache = LineCache()
    books = []
    for outcomes in ((1, 1, 1), (-1, 1, -1)):
        book = CertificateBook()
        for i in range(30):
            book.note_image(0, i % 3 == 0)
        for z in outcomes:
            book.add_review(0, z == 1, z == -1)
        books.append(book)
    first, second = (cache.lines(book)[0] for book in books)
    assert (first.to_decide, second.to_decide) == (7, 61)
    assert first.decision == "≈7 more reviews would likely decide it"


def test_closing_after_the_project_was_renamed_does_not_make_its_old_folder_again(tmp_path: Path) -> None:
    model = _model(tmp_path, grouped_rows(12))
    model.desk.save()  # as when the state was saved at the end of the run
    old = tmp_path / "profiles" / DEFAULT_PROJECT
    old.rename(tmp_path / "profiles" / "Site B")  # the worker renamed the project
    model.close()  # the source is opened again under the new name
    assert not old.exists(), "nothing changed since the last save: nothing is written"
    model = _model(tmp_path, grouped_rows(12))  # a new source in a project that then goes away
    (tmp_path / "profiles" / DEFAULT_PROJECT).rename(tmp_path / "profiles" / "Site C")
    model.add_results(results_of(grouped_rows(2, start=12)))
    model.close()
    assert not old.exists(), "the old project folder is not made again"
    assert "cannot be saved" in model.desk.take_notes()[-1][1]
