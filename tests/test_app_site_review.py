"""The review in the app is the engine's site review (no Qt): Q starts a comparison on the images
so far and says why when there is nothing to review, the queue is the comparison's uniformly random
order, reviews promote a stronger candidate (the rows, the statistics and the reports follow), an
undo takes the promotion back, the marks and the comparisons' starts survive a restart, and the
app's reviews.csv gives ``f2tta run --reviews`` the same certificates."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from pathlib import Path

import numpy as np
from controller_fakes import FakeView, ended, opened, reopened, results_of

from app.control.controller import Controller
from app.core import advice
from app.core.certificates import decided_by
from app.core.projects import DEFAULT_PROJECT
from app.reports.files import config_document, csv_bytes, reviews_bytes
from app.reports.pdf_sections import certificate_blocks
from engine import PredictionRow
from engine.io.sources import source_hash
from engine.run.certify import certify, marks_from_file
from engine.run.review import SiteReview
from engine.vocabulary import DecisionPath
from tests.review_rows import CLASSES, site_rows
from tests.test_site_review_parts import split_rows

N = 120


def _in_folder(rows: list[PredictionRow], labels: np.ndarray) -> list[PredictionRow]:
    """``rows`` under the keys the fake folder's items have, labelled by the dataset."""
    return [
        dataclasses.replace(
            r,
            key=f"k{i}",
            name=f"img{i}.png",
            ground_truth=int(labels[i]),
            truth_label=CLASSES[int(labels[i])],
        )
        for i, r in enumerate(rows)
    ]


def _rows(n: int = N) -> tuple[list[PredictionRow], np.ndarray]:
    """The generated site's rows as the fake folder's items."""
    rows, labels = site_rows(n, seed=3)
    return _in_folder(rows, labels), labels


def _queue(view: FakeView) -> list[int]:
    ranks = view.last("set_queue")[0].ranks
    return sorted(ranks, key=ranks.__getitem__)


def _processed(tmp_path: Path) -> tuple[Controller, FakeView, list[PredictionRow], np.ndarray]:
    c, view, _, _ = opened(tmp_path, N)
    rows, labels = _rows()
    c.start()
    c.on_worker_results_ready(results_of(rows))
    c.tick(force=True)
    return c, view, rows, labels


def _review_until_decided(c: Controller, view: FakeView, labels: np.ndarray) -> list[int]:
    reviewed: list[int] = []
    while c.model.desk.rule == "operating point":
        queue = _queue(view)
        assert queue, "the comparison is decided before its queue runs out"
        c.on_window_review_requested(queue[0], int(labels[queue[0]]))
        reviewed.append(queue[0])
    return reviewed


def test_q_starts_a_comparison_in_random_order_and_an_empty_queue_says_why(tmp_path: Path) -> None:
    c, view, _, _ = opened(tmp_path, N)
    c.on_window_queue_requested()
    assert view.last("show_status")[0].startswith("Nothing to review yet: no image of this folder")
    c2, view2, rows, _ = _processed(tmp_path / "b")
    assert not view2.last("set_queue")[0].ranks, "no comparison starts before the reviewer asks"
    c2.on_window_queue_requested()
    assert view2.of("open_queue")
    queue = _queue(view2)
    fit = next(t for name, t in rows[0].candidates if name == "fit")
    changed = [i for i, r in enumerate(rows) if (r.source_margin > fit) != (r.source_margin > 0)]
    assert sorted(queue) == changed, "the fit candidate's disagreements with the rule in use, all of them"
    assert queue != sorted(queue), "in random order, not arrival order"
    assert c2.model.desk.review is not None and c2.model.desk.review.starts == [N]


def test_reviews_promote_a_stronger_candidate_everywhere_and_for_good(tmp_path: Path) -> None:
    c, view, rows, labels = _processed(tmp_path)
    c.state.settings = dataclasses.replace(c.state.settings, reviewer="Dr Ada")
    before = c.model.stats.summary().adapted_correct
    c.on_window_queue_requested()
    reviewed = _review_until_decided(c, view, labels)
    assert c.model.desk.rule == "fit" and len(reviewed) < 40
    banner = next(b for (b,) in view.of("show_banner") if b.key == "source-review")
    assert banner.level == "info" and banner.text.startswith("The best-fit threshold decides this folder: ")
    lines = view.last("set_certificates")[0]
    tested = [(line.candidate, line.verdict) for line in lines if line.disagreements]
    assert tested[0] == ("fit", "promoted") and all(v == "open" for _, v in tested[1:]), "the next one starts"

    # The rows show the candidate's decisions, with the decision as the image arrived in the reason.
    fit = next(t for name, t in rows[0].candidates if name == "fit")
    for i, shown in enumerate(c.model.rows):
        assert shown.prediction == int(rows[i].source_margin > fit)
        if shown.prediction != rows[i].prediction:
            assert shown.decision_path == DecisionPath.REVIEWED and "decided" in shown.decision_reason
    after = c.model.stats.summary().adapted_correct
    assert after > before, "the statistics follow the promoted decisions"
    assert c.model.raw_rows == rows, "the engine's rows are kept as they were"

    # The reports: the comparisons, the rule in use, the site column f2tta run checks.
    data = c.report_data()
    assert data is not None
    document = json.loads(json.dumps(config_document(data), default=str))
    assert document["summary"]["rule_in_use"] == "fit"
    assert document["summary"]["decided_by_review_images"] == sum(
        r.decision_path == DecisionPath.REVIEWED for r in c.model.rows
    )
    assert next(c["verdict"] for c in document["certificates"] if c["disagreements"]) == "promoted"
    predictions = list(csv.DictReader(io.StringIO(csv_bytes(data.raw_rows).decode())))
    changed = next(i for i, r in enumerate(c.model.rows) if r.decision_path == DecisionPath.REVIEWED)
    assert predictions[changed]["decision_path"] == DecisionPath.REVIEWED
    assert predictions[changed]["ground_truth"] == rows[changed].truth_label, "the dataset's truth"
    html = "".join(block.html for block in certificate_blocks(data))
    assert "uniformly random sample" in html and "better, in use" in html

    # reviews.csv, given to f2tta run's review, certifies the same rule on the same rows.
    marks_csv = tmp_path / "reviews.csv"
    marks_csv.write_bytes(reviews_bytes(data))
    written = list(csv.DictReader(io.StringIO(marks_csv.read_text())))
    assert [int(m["position"]) for m in written] == reviewed and {m["reviewer"] for m in written} == {
        "Dr Ada"
    }
    source_id = c.model.source.source_id  # type: ignore[union-attr]
    assert {m["site"] for m in written} == {source_hash(source_id)}
    cli = SiteReview(None, source_id, len(CLASSES))
    cli.open(rows)
    assert marks_from_file(marks_csv, cli, CLASSES)[0] == len(reviewed)
    certify(cli)
    assert cli.ladder.current == "fit" and (cli.decisions() == c.model.desk.decisions()).all()
    c.on_worker_run_ended(ended("finished", N, tmp_path))

    # A restart: the marks and the comparison's start are read back; the rule holds.
    again, view2, _, _ = reopened(tmp_path, rows, N)
    assert again.model.desk.rule == "fit" and not view2.logged("warning")
    assert any(
        b.key == "source-review" and "decides this folder" in b.text for (b,) in view2.of("show_banner")
    )
    assert [r.prediction for r in again.model.rows] == [r.prediction for r in c.model.rows]


def test_an_undo_takes_the_promotion_back_and_the_redo_makes_it_again(tmp_path: Path) -> None:
    c, view, rows, labels = _processed(tmp_path)
    c.on_window_queue_requested()
    reviewed = _review_until_decided(c, view, labels)
    promoted = [r.prediction for r in c.model.rows]
    c.on_window_undo_requested()
    assert c.model.desk.rule == "operating point"
    assert [r.prediction for r in c.model.rows] == [r.prediction for r in rows], "as the images arrived"
    assert any(key == "source-review" for (key,) in view.of("dismiss_banner"))
    assert any("open again" in m for m in view.logged("info"))
    assert view.last("select_row") == (reviewed[-1],)
    assert _queue(view)[0] == reviewed[-1], "the undone image is the queue's next again"
    c.on_window_undo_requested(redo=True)
    assert c.model.desk.rule == "fit" and [r.prediction for r in c.model.rows] == promoted


def test_marks_made_for_another_folder_are_not_used(tmp_path: Path) -> None:
    c, view, rows, labels = _processed(tmp_path)
    c.on_window_queue_requested()
    _review_until_decided(c, view, labels)
    c.on_worker_run_ended(ended("finished", N, tmp_path))
    (marks,) = (tmp_path / "profiles" / DEFAULT_PROJECT / "review").glob("*.marks.jsonl")
    site = source_hash(c.model.source.source_id)  # type: ignore[union-attr]
    # Another folder's file copied in under this folder's name: its records name the other folder.
    marks.write_text(marks.read_text().replace(site, source_hash("/elsewhere")))
    again, view2, _, _ = reopened(tmp_path, rows, N)
    assert again.model.desk.rule == "operating point" and not again.model.marks
    assert any("belong to another folder" in m for m in view2.logged("warning"))


def test_a_folder_split_in_parts_shows_each_rows_own_parts_rule(tmp_path: Path) -> None:
    """A folder the method split: when one part's reviews promote a candidate while the queue
    serves another part, that part's rows show the promoted decisions (with its threshold's
    confidence and its part named), and the other parts' rows stay as they were decided."""
    split, labels, _ = split_rows()
    n = len(split)
    c, view, _, _ = opened(tmp_path, n)
    rows = _in_folder(split, labels)
    c.start()
    c.on_worker_results_ready(results_of(rows))
    c.tick(force=True)
    c.on_window_queue_requested()
    desk = c.model.desk
    assert desk.review is not None and len(desk.rules_key) == 3
    promoted = None
    for _ in range(120):
        moved = [
            k for k, (rule, *_) in enumerate(desk.rules_key) if rule not in ("operating point", "source")
        ]
        if moved:
            promoted = moved[0]
            break
        queue = _queue(view)
        if not queue:
            break
        c.on_window_review_requested(queue[0], int(labels[queue[0]]))
    assert promoted is not None, "some part's reviews promoted a candidate"
    part = desk.review.parts[promoted]
    rule, threshold, *_ = desk.rules_key[promoted]
    decisions = desk.decisions()
    for i, shown in enumerate(c.model.rows):
        assert shown.prediction == int(decisions[i])
        if i in part.positions and shown.prediction != rows[i].prediction:
            assert shown.decision_path == DecisionPath.REVIEWED
            assert (
                f"reviews of part {promoted + 1} of 3 of this folder put {rule.words}"
                in shown.decision_reason
            )
            margin = rows[i].source_margin
            assert margin is not None
            assert shown.confidence > 0.5 and (margin > threshold) == bool(shown.prediction)
        elif desk.rule_of(i)[0] == "operating point":  # a part no review moved: as it was decided
            assert shown == rows[i] or shown.prediction == rows[i].prediction
    # the folder's rule names every part's (the restart banner and the report say it so)
    document = desk.document()
    assert document is not None and document.rule_in_use is None  # the parts' rules differ
    assert document.decides.startswith("part 1 of 3 (") and f"{rule.words} decides" in document.decides
    banner = advice.review_rule(document.decides)
    assert banner.text.startswith("Part 1 of 3 (")
    reviewed_rows = [i for i in part.positions if c.model.rows[i].decision_path == DecisionPath.REVIEWED]
    assert reviewed_rows, "the promoted part changed some decisions"
    assert decided_by(c.model.rows[reviewed_rows[0]]) == f"{rule.short} (part {promoted + 1} of 3)"


def test_q_mid_run_shows_later_rows_provisionally_and_reports_what_is_covered(tmp_path: Path) -> None:
    """Issue 37: the reviewer presses Q while the folder still arrives. The candidate promoted on the
    first images calls the later ones provisionally (Decided by 'provisional: best-fit threshold', the reason says
    what reports give); the reports give the source model's decision there until the queue's
    block of later images covers them; then the rows are the candidate's, covered."""
    c, view, _, _ = opened(tmp_path, N)
    rows, labels = _rows()
    c.start()
    c.on_worker_results_ready(results_of(rows[:60]))
    c.tick(force=True)
    c.on_window_queue_requested()
    _review_until_decided(c, view, labels)
    assert c.model.desk.rule == "fit"
    c.on_worker_results_ready(results_of(rows[60:]))  # the rest of the folder arrives
    c.tick(force=True)
    fit = next(t for name, t in rows[0].candidates if name == "fit")
    provisional = [i for i, r in enumerate(c.model.rows) if r.decision_path == "provisional"]
    assert provisional and min(provisional) >= 60, "only images that arrived after the answers"
    for i in provisional:
        shown = c.model.rows[i]
        assert shown.prediction == int(rows[i].source_margin > fit), "the window: the candidate's call"
        assert "provisional" in shown.decision_reason and "reports give" in shown.decision_reason
        assert decided_by(shown) == "provisional: best-fit threshold", (
            "the word first: a narrow column keeps it"
        )
        reported = c.model.reported(i)
        assert reported.prediction == rows[i].source_prediction, "reports: the rule below it"
        assert reported.decision_reason.startswith("reported as")
    c.on_window_queue_requested()  # the open comparison first, then a block of the later images
    answered = 0
    while (queue := _queue(view)) and any(r.decision_path == "provisional" for r in c.model.rows):
        c.on_window_review_requested(queue[0], int(labels[queue[0]]))
        answered += 1
        assert answered < 80
    covered = [i for i in provisional if c.model.rows[i].decision_path == DecisionPath.REVIEWED]
    assert covered == provisional, "a block of the later images covered them: the rows are the candidate's"
    assert all(c.model.reported(i).prediction == c.model.rows[i].prediction for i in provisional)
