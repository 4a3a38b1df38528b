"""One plain sentence: what decides a folder now and what reviewing could change (issue 38, item 1).

Before any review nothing said what decides or what reviewing could change; after a certificate
nothing said what it changed. The sentence is the engine's (``engine/run/review_outlook.py``),
read by the app's status area and Metrics tab, the PDF's first page and ``f2tta run``'s last line.
Every count below is computed here from the rows and the labels, not read back from the sentence.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from engine.run.review import SiteReview
from engine.run.review_outlook import (
    ANSWERS_WHEN_CLEARLY_BETTER,
    FROM_THE_TERMINAL,
    Change,
    Outlook,
    Step,
    outlook,
)
from engine.run.review_parts import PartRule
from engine.run.rows import PredictionRow
from engine.vocabulary import Rule
from tests.review_rows import CLASSES, site_rows


def _labelled(n: int = 160, seed: int = 0) -> tuple[list[PredictionRow], np.ndarray]:
    rows, labels = site_rows(n, shift=2.0, seed=seed)
    rows = [
        dataclasses.replace(r, ground_truth=int(y), truth_label=CLASSES[int(y)])
        for r, y in zip(rows, labels, strict=True)
    ]
    return rows, labels


def _fit_calls(rows: list[PredictionRow]) -> tuple[np.ndarray, np.ndarray]:
    margin = np.array([r.source_margin for r in rows])
    fit = next(t for name, t in rows[0].candidates if name == "fit")
    return np.array([r.source_prediction for r in rows]), (margin > fit).astype(int)


def test_before_any_review_it_says_who_decides_and_what_the_next_rule_would_change() -> None:
    rows, _ = _labelled()
    review = SiteReview(None, "/data/demo", 2)
    review.open(rows)
    source, fit = _fit_calls(rows)
    # the source model over-calls tumour: the best-fit threshold calls some of them normal
    assert not np.any((source == 0) & (fit == 1))
    changed = int(np.sum(source != fit))
    assert changed > ANSWERS_WHEN_CLEARLY_BETTER
    assert outlook(review).sentence(CLASSES) == (
        f"The original model decides all {len(rows)} images. The best-fit threshold would call {changed} of "
        f"the {len(rows)} images normal instead of tumor; answering about {ANSWERS_WHEN_CLEARLY_BETTER} of "
        "them in the review queue (Q) shows whether it is better."
    )
    assert review.comparisons() == [], "saying it starts nothing"
    terminal = outlook(review).sentence(CLASSES, where=FROM_THE_TERMINAL)
    assert "in the app's review queue (Q) or with f2tta run --reviews shows whether" in terminal


def test_while_answers_come_it_counts_them_and_after_the_certificate_says_what_changed() -> None:
    rows, labels = _labelled()
    review = SiteReview(None, "/data/demo", 2)
    review.open(rows)
    index = review.next_item()
    assert index is not None
    review.set_mark(rows[index].key, int(labels[index]), "ana")
    text = outlook(review).sentence(CLASSES)
    assert (
        "your 1 answer so far has not shown whether it is better: about "
        f"{ANSWERS_WHEN_CLEARLY_BETTER - 1} more in the review queue (Q)" in text
    )
    answers = 1
    while review.ladder.current == "operating point" and (index := review.next_item()) is not None:
        review.set_mark(rows[index].key, int(labels[index]), "ana")
        answers += 1
    assert review.ladder.current == "fit"
    source = np.array([r.source_prediction for r in rows])
    decided = review.decisions()
    changed = int(np.sum(decided != source))
    right = int(np.sum((decided != source) & (labels == 0)))
    text = outlook(review).sentence(CLASSES)
    assert text.startswith(
        f"The best-fit threshold decides this folder: your {answers} answers showed it is better; {changed} "
        f"images changed from tumor to normal, {right} of them normal in the dataset's labels."
    ), text


def test_images_that_arrive_after_the_answers_are_counted_as_provisional() -> None:
    rows, labels = _labelled(240, seed=1)
    review = SiteReview(None, "/data/demo", 2)
    review.open(rows[:80])
    while review.ladder.current == "operating point" and (index := review.next_item()) is not None:
        review.set_mark(rows[index].key, int(labels[index]), "ana")
    review.add_rows(rows[80:])
    provisional = int(review.provisional().sum())
    assert provisional > 0
    text = outlook(review).sentence(CLASSES)
    assert (
        f" {provisional} images that arrived after your answers are shown with its call, provisionally; "
        in text
    )


def test_where_reviewing_cannot_change_anything_it_says_why() -> None:
    rows, labels = _labelled(120)
    review = SiteReview(None, "/data/demo", 2)
    review.open(rows)
    while (index := review.next_item()) is not None:
        review.set_mark(rows[index].key, int(labels[index]), "ana")
    assert (
        outlook(review)
        .sentence(CLASSES)
        .endswith(
            "Every other rule that calls some image otherwise has been tested; more answers cannot change them."
        )
    )
    many = [dataclasses.replace(r, source_margin=None, candidates=()) for r in rows]
    review = SiteReview(None, "/data/three classes", 3)
    review.open(many)
    assert "No other rule can decide these images (the run kept no source margins" in outlook(
        review
    ).sentence(("a", "b", "c"))
    assert outlook(SiteReview(None, "/data/empty", 2)).sentence(CLASSES) == (
        "No image of this folder has been processed yet."
    )


def test_a_threshold_fitted_again_is_not_named_as_the_one_in_use() -> None:
    """Seen on a four-class folder: "The threshold fitted to the answers decides this folder …
    The threshold fitted to the answers would call 54 of the 240 images otherwise" named the rule in
    use and the one under review alike. The one fitted again is "a new threshold fitted to all your
    answers so far"; under another rule in use it keeps its own name."""
    testing = Step(Rule.ANSWERS, "", 240, (Change(1, 0, 51, 51, 40),), answers=5)
    facts = Outlook(
        images=240,
        parts=(PartRule("", 240, Rule.ANSWERS),),
        answers=9,
        changed=(Change(1, 0, 48, 48, 43),),
        reverted=None,
        provisional=0,
        testing=testing,
        next=None,
        nothing="",
    )
    text = facts.sentence(CLASSES)
    assert text.startswith("The threshold fitted to the answers decides this folder")
    assert " A new threshold fitted to all your answers so far would call 51 of the 240 images" in text
    assert text.count("The threshold fitted to the answers") == 1
    under_fit = dataclasses.replace(facts, parts=(PartRule("", 240, Rule.FIT),))
    assert " The threshold fitted to the answers would call 51" in under_fit.sentence(CLASSES)
    waiting = dataclasses.replace(facts, testing=None, next=dataclasses.replace(testing, answers=0))
    assert " A new threshold fitted to all your answers so far would call 51" in waiting.sentence(CLASSES)
    # a folder in two parts: a refit for part 2 is not new while only part 1's rule is fitted
    parts = (PartRule("part 1 of 2", 120, Rule.ANSWERS), PartRule("part 2 of 2", 120, Rule.FIT))
    split = dataclasses.replace(facts, parts=parts, testing=dataclasses.replace(testing, part="part 2 of 2"))
    assert "A new threshold" not in split.sentence(CLASSES)
    same = dataclasses.replace(split, testing=dataclasses.replace(testing, part="part 1 of 2"))
    assert "A new threshold fitted to all your answers so far would call" in same.sentence(CLASSES)
