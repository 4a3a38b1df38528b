"""A site decided in several units (a split folder) shares its K reviews over them, one ladder each."""

from __future__ import annotations

import math

import numpy as np
import pytest

from engine.review.reviewer import _plans, review_stream, stratified_budgets


@pytest.mark.parametrize(
    ("sizes", "budget", "expected"),
    [
        ([100, 100], 20, [10, 10]),
        ([131, 69], 20, [13, 7]),
        ([30, 131, 69], 20, [3, 11, 6]),  # quotas 2.61, 11.39, 6.00: the one left goes to 2.61
        ([190, 5, 5], 20, [18, 1, 1]),  # each part at least one answer (from the part given most)
        ([190, 5, 5], 2, [1, 1, 0]),  # ... while the budget allows (the larger parts first)
        ([10, 0], 5, [5, 0]),  # a unit with no image yet gets none
    ],
)
def test_stratified_budgets_are_proportional_and_sum_to_k(
    sizes: list[int], budget: int, expected: list[int]
) -> None:
    out = stratified_budgets(sizes, budget)
    assert out == expected and sum(out) == budget


def test_stratified_budgets_sum_to_k_whatever_the_sizes() -> None:
    rng = np.random.default_rng(0)
    for _ in range(500):
        sizes = [int(s) for s in rng.integers(0, 300, int(rng.integers(1, 5)))]
        budget = int(rng.integers(0, 40))
        out = stratified_budgets(sizes, budget)
        assert sum(out) == (budget if sum(sizes) else 0)
        assert all(a == 0 for a, s in zip(out, sizes, strict=True) if s == 0)
        if budget >= sum(s > 0 for s in sizes):
            assert all(a >= 1 for a, s in zip(out, sizes, strict=True) if s > 0)


def _split_site_stream(seed: int = 0) -> dict[str, np.ndarray]:
    """One told site decided in three units (before the split, part A, part B) and a second site.

    Part A's candidate helps (its threshold -2 fixes the positives the source calls negative),
    part B's candidate harms (its threshold +2 breaks positives the source calls right).
    """
    rng = np.random.default_rng(seed)
    unit = np.r_[np.zeros(60), np.where(rng.random(300) < 0.6, 1, 2), np.full(150, 3)].astype(np.int64)
    rng.shuffle(unit[60:])
    site = np.where(unit == 3, "other", "folder").astype(object)
    n = unit.size
    labels = (rng.random(n) < 0.5).astype(np.int64)
    margin = np.where(labels == 1, rng.normal(1.0, 1.5, n), rng.normal(-4.0, 1.0, n))
    margin[unit == 1] -= 2.0  # part A: the source model under-calls it
    shift = np.where(unit == 1, -2.0, np.where(unit == 2, 2.0, np.nan))
    source = (margin > 0).astype(np.int64)
    return {"unit": unit, "site": site, "labels": labels, "margin": margin, "shift": shift, "source": source}


def _review(s: dict[str, np.ndarray], budget: int, site: bool) -> object:
    return review_stream(
        s["source"],
        s["source"],
        s["margin"],
        np.zeros(s["unit"].size),
        {"shift": s["shift"]},
        s["unit"],
        s["labels"],
        budget,
        seed=3,
        site=s["site"] if site else None,
    )


def test_a_split_sites_reviews_are_stratified_and_each_certificate_is_about_one_part() -> None:
    s = _split_site_stream()
    sizes = [int(np.sum(s["unit"] == u)) for u in (0, 1, 2)]
    # the folder's 20 answers are shared over its three units in proportion to their images; the
    # other site, one unit, has its 20; without told sites (free-form) every unit has 20
    plans = {u: (seen, answers) for u, _, seen, answers in _plans(s["unit"], s["site"], 20, 1.0)}
    assert plans == {**{u: (sizes[u], a) for u, a in enumerate(stratified_budgets(sizes, 20))}, 3: (150, 20)}
    assert sum(plans[u][1] for u in (0, 1, 2)) == 20
    assert {u: a for u, _, _, a in _plans(s["unit"], None, 20, 1.0)} == {0: 20, 1: 20, 2: 20, 3: 20}
    # the reviewer comes half-way through the folder: each unit's images seen by then
    half = _plans(s["unit"], s["site"], 20, 0.5)
    folder = np.flatnonzero(s["site"] == "folder")
    came = folder[math.ceil(0.5 * folder.size) - 1]
    assert {u: seen for u, _, seen, _ in half if u < 3} == {
        u: int(np.sum(np.flatnonzero(s["unit"] == u) <= came)) for u in (0, 1, 2)
    }
    out = _review(s, 20, site=True)
    for u, (_, answers) in plans.items():
        assert int(out.reviewed[s["unit"] == u].sum()) <= answers  # type: ignore[attr-defined]
    assert int(out.reviewed[s["unit"] == 1].sum()) > 0 and int(out.reviewed[s["unit"] == 2].sum()) > 0  # type: ignore[attr-defined]
    # one ladder per unit: every comparison's images are of that unit only
    assert sorted(out.ladders) == [0, 1, 2, 3]  # type: ignore[attr-defined]
    for u, ladder in out.ladders.items():  # type: ignore[attr-defined]
        size = int(np.sum(s["unit"] == u))
        for c in ladder.comparisons:
            assert all(0 <= p < size for p in c.order)


def test_review_stream_refuses_a_site_array_of_another_length() -> None:
    s = _split_site_stream()
    s["site"] = s["site"][:-1]
    with pytest.raises(ValueError, match="same length"):
        _review(s, 5, site=True)
