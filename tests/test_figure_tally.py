"""The figures and the one-class collapse, kept up to date row by row (issue 30), agree with a
full count over the rows (:func:`app.core.figures.figures`, :func:`one_class_collapse`) after any
sequence of rows shown, changed, marked and unmarked."""

from __future__ import annotations

import dataclasses
import random

import pytest
from app_fixtures import CLASSES, sample_row

from app.core.applicability import CollapseWatch, one_class_collapse
from app.core.figure_tally import FigureTally
from app.core.figures import figures
from engine import PredictionRow


@pytest.mark.parametrize("seed", range(6))
def test_figures_counted_row_by_row_agree_with_a_full_count(seed: int) -> None:
    rng = random.Random(seed)
    tally = FigureTally(CLASSES)
    shown: dict[int, PredictionRow] = {}
    truth: dict[int, int | None] = {}
    marks: dict[int, int] = {}
    for _ in range(400):
        index = rng.randrange(60)
        row = sample_row(
            index,
            pred=rng.randrange(2),
            src=rng.randrange(2),
            conf=rng.choice([0.5, 0.89, 0.9, 0.99]),
        )
        truth[index] = rng.choice([None, 0, 1, 1, 5])  # 5: a label outside the classes
        mark = rng.choice([None, None, 0, 1, 7, -1])
        if mark is None:
            marks.pop(index, None)
        else:
            marks[index] = mark
        shown[index] = row
        tally.set_row(index, row, truth[index], marks.get(index))
    order = sorted(shown)
    expected = figures(
        [shown[i] for i in order], [truth[i] for i in order], {f"k{i}": marks[i] for i in marks}, CLASSES
    )
    got = tally.figures()
    for mine, full in ((got.dataset, expected.dataset), (got.reviewed, expected.reviewed)):
        assert (mine.confusion == full.confusion).all()
        assert (mine.source_confusion == full.source_confusion).all()
        assert (mine.confident_errors, mine.labelled) == (full.confident_errors, full.labelled)
        for a, b in zip(mine.per_class, full.per_class, strict=True):  # nan where a class has none
            assert dataclasses.astuple(a) == pytest.approx(dataclasses.astuple(b), nan_ok=True)


@pytest.mark.parametrize("seed", range(6))
def test_collapse_counted_row_by_row_agrees_with_a_full_count(seed: int) -> None:
    rng = random.Random(seed)
    watch = CollapseWatch()
    shown: dict[int, PredictionRow] = {}
    share = rng.choice([0.5, 0.97, 1.0])
    for _ in range(300):
        index = rng.randrange(80)
        pred = 1 if rng.random() < share else 0
        row = sample_row(index, pred=pred, src=pred, truth=rng.choice([None, 0, 1]), conf=rng.random())
        shown[index] = row
        watch.set_row(index, row)
        expected = one_class_collapse([shown[i] for i in sorted(shown)])
        got = watch.collapse()
        assert (got is None) == (expected is None)
        if got is not None and expected is not None:
            assert (got.label, got.count, got.total) == (expected.label, expected.count, expected.total)
            assert got.mean_confidence == pytest.approx(expected.mean_confidence)
