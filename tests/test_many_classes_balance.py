"""The class-balance correction of a model with more than two classes (issue 39, item 3;
engine/review/balance.py): the EM prior correction kept whole as a per-class offset vector, a
candidate that decides each image itself, reviewed through the same queue and certificates."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest

from engine.methods.decision import DecisionRecord
from engine.review.balance import Balanced, balanced_decisions, decide, offsets, site_priors
from engine.review.ladder import LadderRule
from engine.run.review import SiteReview
from engine.run.review_parts import rules_calling_otherwise, site_images
from engine.run.rows import PredictionRow, log_probs_problem, many_class_margin
from engine.vocabulary import Rule
from lab.bench.adversarial import site_rows
from lab.reviewer import answer_queue, review_counts

CLASSES = ("grade 1", "normal", "grade 2")
REF = 1
MEANS = np.array([[2.0, 0.0], [0.0, 0.0], [0.0, 2.0]])  # the classes' feature means (unit variance)


def label_shift_site(n: int, seed: int, priors: tuple[float, ...]) -> tuple[np.ndarray, np.ndarray]:
    """``(log_probs, labels)`` of a site whose class priors differ from the source's (equal): the
    source posteriors are the Bayes posteriors under equal priors, so the prior correction with
    the site's priors is the Bayes rule there."""
    rng = np.random.default_rng(seed)
    labels = rng.choice(len(priors), n, p=list(priors))
    x = MEANS[labels] + rng.normal(0, 1, (n, 2))
    loglik = -0.5 * ((x[:, None, :] - MEANS[None]) ** 2).sum(axis=2)
    logs = (
        loglik
        - np.log(np.exp(loglik - loglik.max(1, keepdims=True)).sum(1, keepdims=True))
        - loglik.max(1, keepdims=True)
    )
    return logs, labels


def rows_of(logs: np.ndarray) -> list[PredictionRow]:
    """The rows of the default method for a site with these source log-probabilities."""
    record = DecisionRecord("not-accepted")
    fields = [many_class_margin(np.exp(v).tolist(), CLASSES, record) for v in logs]
    margin = np.array([f["source_margin"] for f in fields])
    other = np.array([f["source_classes"][1] for f in fields])
    rows = site_rows(
        margin, {}, CLASSES, "img{:03d}.png", others=other, reference=REF, decision_path="not-accepted"
    )
    return [
        dataclasses.replace(r, source_log_probs=f["source_log_probs"])
        for r, f in zip(rows, fields, strict=True)
    ]


def test_em_finds_the_site_priors_and_offsets_move_the_calls() -> None:
    logs, labels = label_shift_site(4000, 0, (0.1, 0.8, 0.1))
    prior = site_priors(logs)
    assert abs(prior[REF] - 0.8) < 0.05 and abs(prior[0] - 0.1) < 0.04
    source = logs.argmax(1)
    assert np.array_equal(decide(logs, source, np.zeros(3)), source)  # no offset: the source model
    corrected = decide(logs, source, offsets(logs))
    assert np.mean(corrected == labels) > np.mean(source == labels) + 0.05


def test_each_decision_depends_only_on_the_images_before_it() -> None:
    logs, _ = label_shift_site(300, 1, (0.1, 0.8, 0.1))
    source = logs.argmax(1)
    full = balanced_decisions(logs, source)
    for k in (1, 19, 20, 57, 180, 299):
        assert np.array_equal(balanced_decisions(logs[:k], source[:k]), full[:k])
    assert np.array_equal(full[:19], source[:19])  # before the first fit: the source model
    kept = Balanced()
    for k in (25, 90, 300):  # kept between calls: the same decisions
        assert np.array_equal(kept.of(logs[:k], source[:k]), full[:k])


def test_a_site_whose_class_balance_moved_promotes_the_correction() -> None:
    """A generated label-shift site: the prior correction is right more often, and reviewed alone
    it is certified and decides the images its certificate covers."""
    logs, labels = label_shift_site(300, 0, (0.05, 0.9, 0.05))
    rows = rows_of(logs)
    images = site_images(rows, 3)
    assert Rule.PRIOR in images.decided and Rule.PRIOR not in images.candidates
    assert Rule.PRIOR in rules_calling_otherwise(images)
    review = SiteReview(None, "/data/site", 3, rule=LadderRule(candidates=(Rule.PRIOR,)))
    review.open(rows)
    used = answer_queue(review, labels, 20)
    source = np.array([r.source_prediction for r in rows])
    counts = review_counts(review.decisions(), source, labels)
    assert review.in_use()[0].rule == Rule.PRIOR, used
    assert counts.fixed > counts.broken and counts.accuracy > counts.source_accuracy
    # the certified decisions are the correction's where its certificate covers them
    covered = review.decisions() != source
    assert np.array_equal(review.decisions()[covered], images.decided[Rule.PRIOR][covered])


def test_the_default_ladder_offers_it_after_the_best_fit_threshold() -> None:
    logs, labels = label_shift_site(300, 3, (0.1, 0.8, 0.1))
    review = SiteReview(None, "/data/site", 3)
    review.open(rows_of(logs))
    answer_queue(review, labels, 20)
    tried = [c.candidate for c in review.ladder.comparisons if c.disagreements]
    assert Rule.PRIOR in tried
    source = np.array([r.source_prediction for r in review.rows])
    counts = review_counts(review.decisions(), source, labels)
    assert counts.broken <= counts.fixed


def test_log_probabilities_go_through_the_journal_and_old_rows_load() -> None:
    logs, _ = label_shift_site(5, 4, (0.1, 0.8, 0.1))
    row = rows_of(logs)[0]
    assert row.source_log_probs is not None and len(row.source_log_probs) == 3
    back = PredictionRow.from_json(row.to_json())
    assert back.source_log_probs == row.source_log_probs
    old = row.to_json()
    old.pop("source_log_probs")
    assert PredictionRow.from_json(old).source_log_probs is None  # a journal written before
    images = site_images([PredictionRow.from_json(old)] * 30, 3)
    assert not images.decided  # without them there is no correction, and nothing else changes


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda v: [v[0], float("nan"), v[2]], "finite"),
        (lambda v: [v[0], v[1]], "finite"),
        (lambda v: [x - 1.0 for x in v], "adding up to 1"),
        (lambda v: [v[2], v[1], v[0]], "most likely class"),
        (lambda v: "0,0,0", "list of numbers"),
    ],
)
def test_a_changed_log_probability_is_refused_with_a_clear_message(change, words) -> None:  # type: ignore[no-untyped-def]
    logs = np.log(np.array([[0.05, 0.15, 0.8]]))
    row = rows_of(logs)[0]
    data = row.to_json() | {"source_log_probs": change(list(row.source_log_probs or ()))}
    with pytest.raises(ValueError, match=words) as caught:
        PredictionRow.from_json(data)
    assert "img000.png" in str(caught.value) or words == "list of numbers"


def test_a_row_of_another_length_than_the_model_decides_nothing_with_it() -> None:
    logs, _ = label_shift_site(40, 5, (0.1, 0.8, 0.1))
    rows = rows_of(logs)
    four = np.log(np.array([0.05, 0.15, 0.7, 0.1]))
    rows[7] = dataclasses.replace(rows[7], source_log_probs=tuple(four.tolist()))
    assert not site_images(rows, 3).decided


def test_a_log_probability_that_would_not_read_back_is_not_written() -> None:
    record = DecisionRecord("not-accepted")
    fields = many_class_margin([0.2, 0.3, 0.4], CLASSES, record)  # not a distribution
    assert "source_log_probs" not in fields and "source_margin" in fields
    fields = many_class_margin([0.1, 0.3, 0.6], CLASSES, record, prediction=0)  # another prediction
    assert "source_log_probs" not in fields
    assert log_probs_problem(fields.get("source_log_probs", (0.0,)), 0, None, None)


def test_two_classes_are_unchanged() -> None:
    """A two-class row keeps no log-probabilities, and a two-class site has no decided candidate:
    its ladder is the one it was, decision for decision."""
    record = DecisionRecord("not-accepted")
    assert many_class_margin([0.3, 0.7], ("a", "b"), record) == {}
    rng = np.random.default_rng(6)
    margin = np.concatenate([rng.normal(-3, 0.7, 120), rng.normal(-0.5, 0.7, 80)])
    rows = site_rows(margin, {"fit": -1.7, "prior": -0.4})
    assert all(r.source_log_probs is None and "source_log_probs" not in r.to_json() for r in rows)
    images = site_images(rows, 2)
    assert not images.decided and images.classes is None
    assert math.isfinite(images.candidate_at(Rule.PRIOR, 200) or math.nan)


def test_a_journal_whose_log_probabilities_were_changed_by_hand_says_which_and_how(
    tiny_model_path: Path, tmp_path: Path
) -> None:
    from engine import Journal, Session, StateError

    logs, _ = label_shift_site(4, 7, (0.1, 0.8, 0.1))
    journal = Journal(tmp_path / "st")
    session = Session(tiny_model_path)
    for row in rows_of(logs):
        journal.add_row("src", row)
        session.images_seen += 1
    journal.save(session)
    journal.close()
    rows_file = journal.rows_file("src")
    lines = [json.loads(line) for line in rows_file.read_text().splitlines()]
    again = Journal(tmp_path / "st")
    again.restore(Session(tiny_model_path))
    assert [r.source_log_probs for r in again.rows("src")] == [tuple(x["source_log_probs"]) for x in lines]
    again.close()
    lines[2]["source_log_probs"] = [-0.1, -0.1, -0.1]  # three classes each more likely than a half
    rows_file.write_text("".join(json.dumps(x) + "\n" for x in lines))
    tampered = Journal(tmp_path / "st")
    tampered.restore(Session(tiny_model_path))
    with pytest.raises(StateError, match=r"img002\.png.*source log-probabilities"):
        tampered.rows("src")
    tampered.close()
