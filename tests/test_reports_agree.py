"""The table, the Certificates tab, the PDF, the CSVs and ``f2tta run`` agree on a reviewed folder
(issue 38's target: zero contradictions between them).

The histology demo set with the demo model, as the issue tried it: the app runs the first half,
the reviewer presses Q and answers with the set's labels until a rule is promoted, the other half
arrives in the folder and is run (its rows the promoted rule calls otherwise are provisional), and
the app exports its reports. Then ``f2tta run
--state PROJECT`` continues the same project on the same folder (nothing left to process) and
certifies with the project's own marks. Every decision, provisional flag and rule named as
deciding is compared, row by row and sentence by sentence.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import shutil
import unicodedata
from pathlib import Path

import pytest
from support import two_class_step

from app.core.certificates import decided_by
from app.core.projects import DEFAULT_PROJECT
from app.reports.files import config_document, csv_bytes
from app.reports.pdf import write_pdf
from engine.cli import main as cli_main
from engine.io.sources import StreamItem
from engine.methods.decision import DecisionRecord
from engine.run.review import SiteReview
from engine.run.review_outlook import FROM_THE_TERMINAL, IN_A_REPORT, IN_THE_APP, WHERE_TO_ANSWER
from engine.run.rows import PredictionRow, make_row
from engine.vocabulary import DecisionPath, Rule
from tests.review_rows import site_rows

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "resources" / "demo-sets" / "histology"
MODEL = ROOT / "resources" / "demo" / "model.safetensors"


WHERE = "<where to answer>"


def _facts(sentence: str) -> str:
    """The sentence with where to answer left out: what every place must say alike."""
    for where in sorted(WHERE_TO_ANSWER, key=len, reverse=True):
        sentence = sentence.replace(where, WHERE)
    return sentence


def _pdf_text(path: Path) -> str:
    from pypdf import PdfReader

    raw = "\n".join(page.extract_text() or "" for page in PdfReader(str(path)).pages)
    return " ".join(unicodedata.normalize("NFKC", raw).split())


@pytest.mark.slow
def test_the_table_the_reports_and_f2tta_run_agree_on_a_reviewed_folder(
    studio: object, home: Path, tmp_path: Path, qtbot: object, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = shutil.copytree(DEMO, tmp_path / "site2-histology")
    truth = {r["file"]: r["label"] for r in csv.DictReader((folder / "labels.csv").open())}
    later = sorted(truth)[1::2]  # every other image arrives after the answers (a mix like the first)
    (tmp_path / "later").mkdir()
    for name in later:
        (folder / name).rename(tmp_path / "later" / name)
    app = studio.open(model=str(MODEL), batch=16)  # type: ignore[attr-defined]
    c, window = app.controller, app.window
    studio.open_folder(app, folder)  # type: ignore[attr-defined]
    studio.run_to_end(app)  # type: ignore[attr-defined]
    model, desk = c.model, c.model.desk
    c.on_window_queue_requested()
    for _ in range(60):  # a reviewer who knows the truth answers the queue until a rule is promoted
        ranks = desk.queue_state().ranks
        if desk.rule != Rule.LABEL_FREE or not ranks:
            break
        row = model.rows[min(ranks, key=ranks.__getitem__)]
        c.on_window_review_requested(row.position, model.classes.index(truth[row.name]))
    assert desk.rule == Rule.FIT, "the answers promoted the best-fit threshold"
    for name in later:
        (tmp_path / "later" / name).rename(folder / name)
    studio.open_folder(app, folder)  # type: ignore[attr-defined]
    studio.run_to_end(app)  # type: ignore[attr-defined]
    model, desk = c.model, c.model.desk
    c.model.flush(force=True)
    rows = list(model.rows)
    assert len(rows) == 160
    provisional = [r.name for r in rows if r.decision_path == DecisionPath.PROVISIONAL]
    assert provisional, "images that arrived after the answers are shown provisionally"

    # The app's exports: predictions.csv, run_config.json, the PDF (as the export writes them).
    data = c.report_data()
    assert data is not None
    predictions = {r["item"]: r for r in csv.DictReader(io.StringIO(csv_bytes(data.rows).decode()))}
    config = json.loads(json.dumps(config_document(data), default=str))
    pdf = _pdf_text(write_pdf(tmp_path / "report.pdf", data))

    tab = [line.says for line in window.certificates.lines]  # the Certificates tab
    in_view = window.views.outlook.text()  # the sentence above the status bar
    studio.close(app)  # type: ignore[attr-defined]  # the project is let go of, as when the app quits

    # f2tta run on the same project and folder: nothing left to process, the project's marks certify.
    project = home / "profiles" / DEFAULT_PROJECT
    capsys.readouterr()
    out = tmp_path / "cli.csv"
    code = cli_main(
        ["run", "--no-progress", "--input", str(folder), "--state", str(project), "--out", str(out)]
    )
    assert code == 0
    last = capsys.readouterr().err.strip().splitlines()[-1]
    with (tmp_path / "cli.certified.csv").open(newline="", encoding="utf-8") as fh:
        certified = {r["item"]: r for r in csv.DictReader(fh)}
    certificates = json.loads((tmp_path / "cli.certificates.json").read_text(encoding="utf-8"))

    # Row by row: the same certified decision, the same provisional flag and call, the same rule.
    assert set(certified) == set(predictions) == {r.name for r in rows}
    shown = {r.name: r for r in rows}
    for name, line in certified.items():
        reported, on_screen = predictions[name], shown[name]
        assert line["certified"] == reported["prediction"], name
        is_provisional = line["coverage"] == "provisional"
        assert is_provisional == (reported["decision_path"] == "provisional") == (name in provisional), name
        if is_provisional:  # the window shows the promoted rule's call; the CSV names the same call
            assert line["provisional"] == on_screen.prediction_label, name
            assert decided_by(on_screen) == f"provisional: {Rule(certificates['rule_in_use']).short}"
        else:
            assert line["certified"] == on_screen.prediction_label, name
            rule = Rule(line["rule"])
            assert decided_by(on_screen) == rule.short

    # The rule named as deciding, and every certificate's sentence, the same everywhere.
    summary = config["summary"]
    assert summary["rule_in_use"] == certificates["rule_in_use"] == "fit"
    assert summary["decides"] == certificates["decides"] == "the best-fit threshold decides this folder"
    assert summary["provisional_images"] == certificates["provisional_images"] == len(provisional)
    says = [c["says"] for c in certificates["comparisons"]]
    assert [c["says"] for c in config["certificates"]] == says
    assert tab == says
    assert sum("decides this folder" in s for s in says) == 1, "one rule decides the folder"
    for sentence in says:
        assert " ".join((sentence[:1].upper() + sentence[1:]).split()) in pdf
    assert f"Now {certificates['decides']}" in pdf
    # The sentence in view: the window's, the PDF's first lines, run_config.json's and f2tta run's last
    # line say the same facts; only where to answer is each place's own (the window's key Q means
    # nothing on paper, the terminal names --reviews too).
    assert summary["outlook"] == data.sentence
    assert " ".join(data.sentence.split()) in pdf
    assert _facts(in_view) == _facts(data.sentence) == _facts(last)
    assert WHERE in _facts(in_view), "the provisional images are to be answered somewhere"
    assert IN_THE_APP in in_view and FROM_THE_TERMINAL in last and IN_A_REPORT in data.sentence
    assert "(Q)" not in data.sentence


def test_a_certificate_made_in_the_session_survives_the_journals_rounding(tmp_path: Path) -> None:
    """Found by the test above: the app froze a comparison on its rows in memory, whose candidate
    thresholds were not rounded as the journal keeps them (6 decimals); reopened from the journal
    (the app after a restart, f2tta run --state PROJECT) the block's threshold did not match, the
    block was set aside and the folder went back to the original model ('the candidate's threshold
    changed'). Rows in memory now hold what the journal holds, and a block recorded before that is
    matched up to the rounding."""
    decision = DecisionRecord(
        "awaiting-review", group=0, threshold=0.0, reason="", candidates=(("fit", -5.5062302350997925),)
    )
    step = two_class_step(decision)
    row = make_row(StreamItem(0, "k", "a.png"), step, ["normal", "tumor"], 1)
    assert row.candidates == PredictionRow.from_json(row.to_json()).candidates == (("fit", -5.50623),)

    rows, labels = site_rows(200, shift=2.0)
    precise = [dataclasses.replace(r, candidates=(("fit", 2.0000004321),)) for r in rows]
    review = SiteReview(tmp_path, "/data/site", 2)  # as a session before the rows were rounded
    review.open(precise)
    while review.ladder.current == Rule.LABEL_FREE and (index := review.next_item()) is not None:
        review.set_mark(precise[index].key, int(labels[index]), "ana")
    assert review.ladder.current == Rule.FIT
    review.close()
    reopened = SiteReview(tmp_path, "/data/site", 2)  # from the journal: the thresholds rounded
    reopened.open([PredictionRow.from_json(r.to_json()) for r in precise])
    assert reopened.ladder.current == Rule.FIT and not reopened.take_notes()
    assert (reopened.decisions() == review.decisions()).all()
