"""``f2tta run``'s certificates: a reviews file or the project's own marks applied to a run's rows."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from support import random_images

from engine.cli import main as cli_main
from engine.io.sources import source_hash
from engine.review.marks import MarkStore, ReviewMark
from engine.run.certify import (
    ReviewFileError,
    certificates_json,
    certify,
    marks_from_file,
    project_review_folder,
    write_certified,
)
from engine.run.review import SiteReview
from tests.cli_helpers import run_argv
from tests.review_rows import CLASSES, review_all, site_rows


def _export(path: Path, review: SiteReview, site: str | None = None) -> Path:
    """The marks as the app's reviews.csv gives them (item, its place, review, reviewed_at, site)."""
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(
            [
                "index",
                "position",
                "item",
                "prediction",
                "review",
                "verdict",
                "reviewed_at",
                "reviewer",
                "site",
            ]
        )
        for i, mark in enumerate(review.marks.values()):
            row = review.rows[review.index[mark.key]]
            writer.writerow(
                [
                    i,
                    review.index[mark.key],
                    row.name,
                    CLASSES[mark.prediction],
                    CLASSES[mark.label],
                    "",
                    mark.at,
                    mark.reviewer,
                    site if site is not None else source_hash(review.source_id),
                ]
            )
    return path


def test_a_reviews_file_gives_the_certificates_the_app_reached(tmp_path: Path) -> None:
    """The app's review of a finished folder, exported and applied by f2tta run, decides the same."""
    rows, labels = site_rows()
    app = SiteReview(tmp_path / "project" / "review", "/data/folder", 2)
    app.open(rows)
    review_all(app, labels)
    exported = _export(tmp_path / "reviews.csv", app)
    cli = SiteReview(None, "/data/folder", 2)
    cli.open(rows)
    used, unknown_items, unknown_classes = marks_from_file(exported, cli, CLASSES)
    certify(cli)
    assert used == len(app.marks) and unknown_items == unknown_classes == 0
    assert [(c.candidate, c.verdict) for c in cli.comparisons()] == [
        (c.candidate, c.verdict) for c in app.comparisons()
    ]
    assert np.array_equal(cli.decisions(), app.decisions())
    certified, certificates = write_certified(tmp_path / "out.csv", cli, CLASSES)
    with certified.open(newline="", encoding="utf-8") as fh:
        table = list(csv.DictReader(fh))
    assert [line["certified"] for line in table] == [CLASSES[int(d)] for d in cli.decisions()]
    data = json.loads(certificates.read_text(encoding="utf-8"))
    assert data == certificates_json(cli) and data["comparisons"][0]["says"]
    assert any(c["verdict"] == "promoted" for c in data["comparisons"])


def test_a_reviews_file_of_another_folder_is_refused(tmp_path: Path) -> None:
    """Issue 29, 7: the same file names in another folder's reviews.csv are not this folder's marks."""
    rows, labels = site_rows()
    other = SiteReview(None, "/data/other folder", 2)
    other.open(rows)
    review_all(other, 1 - labels)
    exported = _export(tmp_path / "reviews.csv", other)
    mine = SiteReview(None, "/data/folder", 2)
    mine.open(rows)
    with pytest.raises(ReviewFileError, match="another folder"):
        marks_from_file(exported, mine, CLASSES)
    assert mine.marks == {}


def test_a_reviews_file_without_the_needed_columns_or_times_is_refused(tmp_path: Path) -> None:
    rows, _ = site_rows(10)
    review = SiteReview(None, "folder", 2)
    review.open(rows)
    bad = tmp_path / "bad.csv"
    bad.write_text("item,label\nimg000.png,tumor\n", encoding="utf-8")
    with pytest.raises(ReviewFileError, match="review, reviewed_at"):
        marks_from_file(bad, review, CLASSES)
    site = source_hash("folder")
    bad.write_text(f"item,review,reviewed_at,site\nimg000.png,tumor,soon,{site}\n", encoding="utf-8")
    with pytest.raises(ReviewFileError, match="not a time"):
        marks_from_file(bad, review, CLASSES)
    bad.write_text("item,review,reviewed_at\nimg000.png,tumor,2026-11-26T10:00:00+01:00\n", encoding="utf-8")
    with pytest.raises(ReviewFileError, match="no site column"):
        marks_from_file(bad, review, CLASSES)


def test_marks_of_one_item_at_different_offsets_keep_the_latest_in_time(tmp_path: Path) -> None:
    """Issue 29, 6: the CLI orders marks by time, not by their text, as the app does."""
    rows, _ = site_rows(10)
    review = SiteReview(None, "folder", 2)
    review.open(rows)
    path = tmp_path / "reviews.csv"
    site = source_hash("folder")
    path.write_text(
        "item,review,reviewed_at,site\n"
        f"img000.png,normal,2026-03-29T09:30:00+02:00,{site}\n"  # 07:30 UTC: the earlier mark
        f"img000.png,tumor,2026-03-29T08:00:00+00:00,{site}\n",  # 08:00 UTC: the later one, though it sorts first as text
        encoding="utf-8",
    )
    marks_from_file(path, review, CLASSES)
    assert review.marks["img000.png"].label == 1


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    inp = tmp_path / "in"
    inp.mkdir()
    for i, img in enumerate(random_images(6, seed=2)):
        Image.fromarray(img).save(inp / f"img{i}.png")
    return inp


def test_cli_run_with_reviews_writes_the_certified_decisions(
    tiny_model_path: Path, folder: Path, tmp_path: Path
) -> None:
    reviews = tmp_path / "reviews.csv"
    site = source_hash(str(folder.resolve()))
    reviews.write_text(
        f"item,review,reviewed_at,site\nimg0.png,normal,2026-11-26T10:00:00+01:00,{site}\n", encoding="utf-8"
    )
    out = tmp_path / "out.csv"
    argv = run_argv(tiny_model_path, folder, out, tmp_path / "state", "--reviews", str(reviews))
    assert cli_main(argv) == 0
    with (tmp_path / "out.certified.csv").open(newline="", encoding="utf-8") as fh:
        assert len(list(csv.DictReader(fh))) == 6
    assert "comparisons" in json.loads((tmp_path / "out.certificates.json").read_text(encoding="utf-8"))
    missing = run_argv(
        tiny_model_path, folder, out, tmp_path / "state", "--reviews", str(tmp_path / "none.csv")
    )
    assert cli_main(missing) == 2


def test_cli_run_on_a_project_certifies_with_the_projects_own_marks(
    tiny_model_path: Path, folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``f2tta run --state PROJECT`` reads the marks the app kept for the folder (no reviews.csv)."""
    project = tmp_path / "project"
    (project / "state").mkdir(parents=True)
    (project / "profile.json").write_text("{}", encoding="utf-8")
    assert project_review_folder(project) == project / "review" == project_review_folder(project / "state")
    out = tmp_path / "out.csv"
    assert cli_main(run_argv(tiny_model_path, folder, out, project)) == 0
    assert not (tmp_path / "out.certified.csv").exists()  # no marks yet: nothing to certify
    from engine.io.sources import open_folder
    from engine.run.journal import Journal
    from engine.run.session import Session

    source_id = open_folder(folder, CLASSES).source_id
    journal = Journal(project / "state", "test")
    try:
        journal.restore(Session(tiny_model_path, method="idipt+"))
        rows = journal.rows(source_id)
    finally:
        journal.close()
    assert len(rows) == 6
    review = SiteReview(project / "review", source_id, 2)
    review.open(rows)
    review.set_mark(rows[0].key, 1 - rows[0].prediction, "ana")
    review.close()
    store = MarkStore(project / "review", source_id, 2)  # issue 42, 13: marks naming no image here
    for name in ("gone0.png", "gone1.png", "gone2.png", "gone3.png"):
        store.put(ReviewMark(name, 0, 1, "2026-11-27T10:00:00+00:00"))
    store.close()
    capsys.readouterr()
    assert cli_main(run_argv(tiny_model_path, folder, out, project)) == 0
    err = capsys.readouterr().err
    assert "the project's 1 mark(s) of this folder; 4 naming no image of this run, not used" in err
    assert (tmp_path / "out.certified.csv").is_file()
    shutil.rmtree(project / "review")


def test_another_folders_reviews_with_the_same_names_are_refused(tmp_path: Path) -> None:
    """Issue 42, 9: a reviews.csv of another folder with the same file names was used without a word
    when its site cells were emptied, its site column deleted, or this folder's key pasted in; its
    images' places and pictures are now compared with the run's."""
    rows, labels = site_rows()
    other = SiteReview(None, "/data/other folder", 2)
    other.open(rows[::-1])  # the same names in another order: another folder
    review_all(other, labels[::-1])
    exported = _export(tmp_path / "reviews.csv", other)
    review = SiteReview(None, "/data/this folder", 2)
    review.open(rows)
    with pytest.raises(ReviewFileError, match="another folder"):
        marks_from_file(exported, review, CLASSES)
    text = exported.read_text(encoding="utf-8")
    emptied = tmp_path / "emptied.csv"
    emptied.write_text(text.replace(source_hash("/data/other folder"), ""), encoding="utf-8")
    with pytest.raises(ReviewFileError, match="another folder"):
        marks_from_file(emptied, review, CLASSES)
    pasted = tmp_path / "pasted.csv"
    pasted.write_text(
        text.replace(source_hash("/data/other folder"), source_hash("/data/this folder")), encoding="utf-8"
    )
    with pytest.raises(ReviewFileError, match="another folder"):
        marks_from_file(pasted, review, CLASSES)
    assert review.marks == {}, "nothing of the refused files was used"


def _journal_rows(model: Path, state: Path, folder: Path) -> tuple[str, list]:  # type: ignore[type-arg]
    from engine.io.sources import open_folder
    from engine.run.journal import Journal
    from engine.run.session import Session

    source_id = open_folder(folder, CLASSES).source_id
    journal = Journal(state, "test")
    try:
        journal.restore(Session(model, method="idipt+"))
        return source_id, journal.rows(source_id)
    finally:
        journal.close()


def test_a_reviewed_run_ends_with_the_folders_sentence_from_its_reviews(
    tiny_model_path: Path, folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 38, finding 9: a reviewed folder's run ended with "adapting changed no decision yet ...
    until reviews certify" (read from its rows without their marks) above the certificates and
    beside a certified.csv that changed decisions. Its last line is now the folder's sentence, made
    from the review its marks left, as the app's is."""
    from engine.run.review_outlook import FROM_THE_TERMINAL, outlook

    site = source_hash(str(folder.resolve()))
    reviews = tmp_path / "reviews.csv"
    reviews.write_text(
        f"item,review,reviewed_at,site\nimg0.png,normal,2026-11-26T10:00:00+01:00,{site}\n", encoding="utf-8"
    )
    state = tmp_path / "state"
    assert (
        cli_main(run_argv(tiny_model_path, folder, tmp_path / "out.csv", state, "--reviews", str(reviews)))
        == 0
    )
    lines = capsys.readouterr().err.strip().splitlines()
    source_id, rows = _journal_rows(tiny_model_path, state, folder)
    review = SiteReview(None, source_id, 2)
    review.open(rows)
    marks_from_file(reviews, review, CLASSES)
    certify(review)
    assert lines[-1] == outlook(review).sentence(CLASSES, where=FROM_THE_TERMINAL)
    assert lines[-1].startswith("The original model decides all 6 images.")
    assert not [line for line in lines if line.startswith("adapting changed")], "one sentence, at the end"


def test_a_marks_recorded_decision_is_the_one_on_screen_when_the_file_says_it(tmp_path: Path) -> None:
    """The app's reviews.csv says what was on screen when each mark was made (``shown``) and who
    made it; marks_from_file recorded the decision the fresh review shows now and no reviewer, so
    a correction made after a promotion read as made on the original model's call."""
    rows, _ = site_rows(10)
    review = SiteReview(None, "folder", 2)
    review.open(rows)
    first = next(r for r in rows if r.prediction == 1)  # tumour as it arrived
    second = next(r for r in rows if r.prediction == 0)  # normal
    path = tmp_path / "reviews.csv"
    site = source_hash("folder")
    path.write_text(
        "item,shown,review,reviewed_at,reviewer,site\n"
        f"{first.name},normal,normal,2026-11-26T10:00:00+01:00,Dr Ada,{site}\n"  # on screen: a promoted rule's normal
        f"{second.name},,tumor,2026-11-26T10:01:00+01:00,,{site}\n",  # an older export: no shown, no reviewer
        encoding="utf-8",
    )
    marks_from_file(path, review, CLASSES)
    ada, older = review.marks[first.key], review.marks[second.key]
    assert (ada.prediction, ada.label, ada.reviewer, ada.confirmed) == (0, 0, "Dr Ada", True)
    assert (older.prediction, older.label, older.reviewer) == (0, 1, ""), "the decision shown now, as before"
