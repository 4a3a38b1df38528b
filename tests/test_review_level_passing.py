"""A promoted comparison's level passed on to the next one (the fallback procedure;
docs/review-certificates.md, "A level passed on"): only on a complete site, only from a promoted
comparison with one block covering every image, kept in its block record, never taken by a
record that may not have it, and the comparison that gave it never extended."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from engine.review.ladder import PROMOTED, LadderRule
from engine.review.marks import marks_path
from engine.run.review import SiteReview
from lab.bench.adversarial import site_rows
from lab.reviewer import answer_queue, review_stream

SOURCE_ID = "/data/level-site"
N = 240


def site(n: int = N, seed: int = 0) -> tuple[np.ndarray, np.ndarray, dict[str, float]]:
    """Margins spread over [-2, 2], class 1 above -1: ``shift`` (-0.5) is right on every image it
    changes, and ``fit`` (-1.0), tested against it, is right on every image it changes too."""
    margin = np.random.default_rng(seed).uniform(-2.0, 2.0, n)
    labels = (margin > -1.0).astype(np.int64)
    return margin, labels, {"shift": -0.5, "fit": -1.0}


RULE = LadderRule(candidates=("shift", "fit"), pass_level=True)


def review_of(folder: Path | None, rows: list, complete: bool, rule: LadderRule = RULE) -> SiteReview:
    review = SiteReview(folder, SOURCE_ID, 2, seed=3, rule=rule)
    review.open(rows)
    review.complete = complete
    return review


def comparisons(review: SiteReview) -> dict[str, object]:
    return {str(c.candidate): c for c in review.comparisons()}


def test_a_complete_site_passes_the_promoted_comparisons_level_on_and_stops_extending_it() -> None:
    margin, labels, thresholds = site()
    review = review_of(None, site_rows(margin, thresholds), complete=True)
    answer_queue(review, labels, 12)
    by = comparisons(review)
    shift, fit = by["shift"], by["fit"]
    assert shift.verdict == PROMOTED and not shift.extending  # type: ignore[attr-defined]
    assert fit.passed_from == shift.index  # type: ignore[attr-defined]
    assert math.isclose(fit.alpha, RULE.level(2) + RULE.level(1))  # type: ignore[attr-defined]
    # a folder that grows afterwards: the comparison that passed its level covers its own images only
    review.complete = False
    review.add_rows(site_rows(np.r_[margin, [-0.2] * 10], thresholds)[N:])
    answer_queue(review, np.r_[labels, np.ones(10, dtype=np.int64)], 10)
    # no block of shift is frozen on them; beyond what its certificate covers at their worst
    # (its evidence to spare), they are the source model's calls
    shift = comparisons(review)["shift"]  # (the ladder is rebuilt at each mark)
    assert len(shift.blocks) == 1 and not shift.extending  # type: ignore[attr-defined]
    covered = review.ladder.coverage(shift, review.images())  # type: ignore[arg-type]
    assert N <= covered < N + 10
    assert review.decisions()[covered:].tolist() == [0] * (N + 10 - covered)


def test_a_site_still_arriving_keeps_each_comparisons_own_level() -> None:
    margin, labels, thresholds = site()
    review = review_of(None, site_rows(margin, thresholds), complete=False)
    answer_queue(review, labels, 12)
    by = comparisons(review)
    assert by["shift"].verdict == PROMOTED and by["shift"].extending  # type: ignore[attr-defined]
    assert by["fit"].passed_from == 0  # type: ignore[attr-defined]
    assert math.isclose(by["fit"].alpha, RULE.level(2))  # type: ignore[attr-defined]


def test_by_default_no_level_is_passed_on_and_a_folder_that_grows_after_its_review_stays_covered() -> None:
    margin, labels, thresholds = site()
    grown = np.r_[margin, np.full(20, -0.2)]  # shift calls them 1, the source model 0
    review = review_of(None, site_rows(margin, thresholds), True, LadderRule(candidates=("shift", "fit")))
    answer_queue(review, labels, 12)
    shift, fit = comparisons(review)["shift"], comparisons(review)["fit"]
    assert shift.verdict == PROMOTED and shift.extending and fit.passed_from == 0  # type: ignore[attr-defined]
    assert math.isclose(fit.alpha, RULE.level(2))  # type: ignore[attr-defined]
    review.complete = False
    review.add_rows(site_rows(grown, thresholds)[N:])
    answer_queue(review, np.r_[labels, np.ones(20, dtype=np.int64)], 30)
    shift = comparisons(review)["shift"]  # (the ladder is rebuilt at each mark)
    assert len(shift.blocks) > 1  # type: ignore[attr-defined]  # asked about the later images
    assert review.decisions()[N:].tolist() == [1] * 20  # and its certificate covers them


def test_the_level_is_kept_in_the_block_record_and_replayed_as_it_was(tmp_path: Path) -> None:
    margin, labels, thresholds = site()
    rows = site_rows(margin, thresholds)
    review = review_of(tmp_path, rows, complete=True)
    answer_queue(review, labels, 12)
    alpha = comparisons(review)["fit"].alpha  # type: ignore[attr-defined]
    review.close()
    # reopened while the site is not known to be complete: the record says what it was tested at
    again = review_of(tmp_path, rows, complete=False)
    fit = comparisons(again)["fit"]
    assert fit.alpha == alpha and fit.passed_from == comparisons(again)["shift"].index  # type: ignore[attr-defined]
    assert not comparisons(again)["shift"].extending  # type: ignore[attr-defined]
    again.close()
    # undoing the answers that promoted shift takes the level back with the promotion; redoing
    # them gives it again from the record
    answered = len(review.marks)
    review = review_of(tmp_path, rows, complete=True)
    assert len(review.marks) == answered
    for key in list(review.marks):
        review.set_mark(key, None)
    assert comparisons(review)["shift"].verdict != PROMOTED  # type: ignore[attr-defined]
    assert comparisons(review)["shift"].extending  # type: ignore[attr-defined]
    assert "fit" not in comparisons(review)
    while review.history()[0]:
        review.undo()  # the clearings taken back: the marks are there again
    assert comparisons(review)["fit"].alpha == alpha  # type: ignore[attr-defined]
    review.close()


def test_a_record_claiming_a_level_it_may_not_have_is_set_aside(tmp_path: Path) -> None:
    margin, labels, thresholds = site()
    rows = site_rows(margin, thresholds)
    review = review_of(tmp_path, rows, complete=False)  # fit starts at its own level
    answer_queue(review, labels, 12)
    assert comparisons(review)["fit"].passed_from == 0  # type: ignore[attr-defined]
    review.close()
    path = marks_path(tmp_path, SOURCE_ID)
    lines = path.read_text().splitlines()
    edited = []
    for line in lines:
        record = json.loads(line)
        block = record.get("block")
        if block is not None and block["candidate"] == "fit" and block["number"] == 0:
            block["level"] = 0.5  # a tampered file: fit tested at 50 %
        edited.append(json.dumps(record))
    path.write_text("\n".join(edited) + "\n")
    again = review_of(tmp_path, rows, complete=False)
    notes = again.take_notes()
    assert any("set aside" in note and "fit" in note for note in notes), notes
    fit = comparisons(again).get("fit")
    assert fit is None or fit.alpha < 0.5  # type: ignore[attr-defined]
    again.close()


def test_the_next_comparison_at_its_passed_level_errs_at_most_that_level() -> None:
    """``shift`` is better (promoted with its first answers); ``fit`` is right on exactly half the
    images it changes (the null's boundary). Over 400 seeded sites reviewed after the folder with 40
    answers, ``fit`` is promoted in at most its level (its own plus shift's), by a one-sided
    binomial test at 0.1 %, and the whole ladder never passes more than alpha."""
    runs, promoted = 400, 0
    level = RULE.level(2) + RULE.level(1)
    assert level <= RULE.alpha
    for seed in range(runs):
        rng = np.random.default_rng([seed, 11])
        margin = rng.uniform(-2.0, 2.0, N)
        labels = (margin > -0.5).astype(np.int64)  # shift right on every image it changes
        changed = np.flatnonzero((margin > -1.0) & (margin <= -0.5))
        right = rng.permutation(changed)[: changed.size // 2]
        labels[right] = 1  # fit right on half of the images it changes: no better than shift
        n = margin.size
        out = review_stream(
            reported=(margin > 0).astype(np.int64),
            source=(margin > 0).astype(np.int64),
            margin=margin,
            threshold=None,
            candidates={"shift": np.full(n, -0.5), "fit": np.full(n, -1.0)},
            unit=np.zeros(n, dtype=np.int64),
            labels=labels,
            budget=40,
            review_at=1.0,
            rule=RULE,
            seed=seed,
        )
        ladder = out.ladders[0]
        fit = [c for c in ladder.comparisons if c.candidate == "fit"]
        shift = [c for c in ladder.comparisons if c.candidate == "shift"]
        assert shift and shift[0].verdict == PROMOTED
        assert fit and math.isclose(fit[0].alpha, level)
        promoted += fit[0].verdict == PROMOTED
    tail = math.fsum(
        math.comb(runs, k) * level**k * (1 - level) ** (runs - k) for k in range(promoted, runs + 1)
    )
    assert tail > 1e-3, (promoted, runs)
