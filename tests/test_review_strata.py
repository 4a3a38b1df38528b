"""A site decided in several units (a split folder) shares its K reviews over them as the app's
queue does, one ladder each."""

from __future__ import annotations

import math

import numpy as np
import pytest

from lab.reviewer import _sites, review_stream


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


def test_a_split_sites_reviews_are_shared_and_each_certificate_is_about_one_part() -> None:
    s = _split_site_stream()
    folder = np.flatnonzero(s["site"] == "folder")
    # the folder's units, and the other site's one; without told sites (free-form) every unit is a site
    plans = [{u: seen for u, _, seen in units} for units in _sites(s["unit"], s["site"], 1.0)]
    assert plans == [{u: int(np.sum(s["unit"] == u)) for u in (0, 1, 2)}, {3: 150}]
    assert [[u for u, _, _ in units] for units in _sites(s["unit"], None, 1.0)] == [[0], [1], [2], [3]]
    # the reviewer comes half-way through the folder: each unit's images seen by then
    came = folder[math.ceil(0.5 * folder.size) - 1]
    half = {u: seen for units in _sites(s["unit"], s["site"], 0.5) for u, _, seen in units}
    assert {u: half[u] for u in (0, 1, 2)} == {
        u: int(np.sum(np.flatnonzero(s["unit"] == u) <= came)) for u in (0, 1, 2)
    }
    out = _review(s, 20, site=True)
    assert int(out.reviewed[folder].sum()) <= 20 and int(out.reviewed[s["unit"] == 3].sum()) <= 20  # type: ignore[attr-defined]
    assert int(out.reviewed[s["unit"] == 1].sum()) > 0 and int(out.reviewed[s["unit"] == 2].sum()) > 0  # type: ignore[attr-defined]
    # one ladder per unit: every comparison's images are of that unit only
    assert sorted(out.ladders) == [0, 1, 2, 3]  # type: ignore[attr-defined]
    for u, ladder in out.ladders.items():  # type: ignore[attr-defined]
        size = int(np.sum(s["unit"] == u))
        for c in ladder.comparisons:
            assert all(0 <= p < size for p in c.order)


def _two_parts(n: tuple[int, int], helps: tuple[bool, bool], seed: int = 0) -> dict[str, np.ndarray]:
    """One told site in two units; in each a candidate (threshold -2) that fixes the positives the
    source model calls negative where ``helps``, and decides as the source model elsewhere."""
    rng = np.random.default_rng(seed)
    unit = np.r_[np.zeros(n[0]), np.ones(n[1])].astype(np.int64)
    rng.shuffle(unit)
    labels = (rng.random(unit.size) < 0.5).astype(np.int64)
    margin = np.where(labels == 1, rng.normal(-1.0, 0.5, unit.size), rng.normal(-6.0, 0.5, unit.size))
    shift = np.where(np.array(helps)[unit], -2.0, 0.0)
    source = (margin > 0).astype(np.int64)
    site = np.full(unit.size, "folder", dtype=object)
    return {"unit": unit, "site": site, "labels": labels, "margin": margin, "shift": shift, "source": source}


def test_a_parts_answers_are_in_proportion_while_both_have_something_to_test() -> None:
    """Served as the app's queue serves: fewest answers relative to the part's images first (the
    earlier part on a tie): 6 answers over parts of 200 and 100 images fall 4 and 2."""
    s = _two_parts((200, 100), (True, True))
    out = _review(s, 6, site=True)
    assert [int(out.reviewed[s["unit"] == u].sum()) for u in (0, 1)] == [4, 2]  # type: ignore[attr-defined]


def test_answers_a_part_cannot_use_go_to_the_other() -> None:
    """A part with nothing to test leaves the site's answers to the other: eight answers certify the
    helpful candidate of the part that has one (shared in proportion, four would not; five right
    answers in a row certify a first comparison, docs/review-certificates.md)."""
    s = _two_parts((100, 100), (False, True))
    out = _review(s, 8, site=True)
    assert int(out.reviewed[s["unit"] == 0].sum()) == 0  # type: ignore[attr-defined]
    ladder = out.ladders[1]  # type: ignore[attr-defined]
    assert ladder.current == "shift" and int(out.reviewed[s["unit"] == 1].sum()) > 4  # type: ignore[attr-defined]
    assert _review(s, 4, site=True).ladders[1].current != "shift"  # type: ignore[attr-defined]
    fixed = (s["unit"] == 1) & (s["labels"] == 1)
    assert (out.decisions[fixed] == 1).all() and (
        out.decisions[s["unit"] == 0] == s["source"][s["unit"] == 0]
    ).all()  # type: ignore[attr-defined]


def test_review_stream_refuses_a_site_array_of_another_length() -> None:
    s = _split_site_stream()
    s["site"] = s["site"][:-1]
    with pytest.raises(ValueError, match="same length"):
        _review(s, 5, site=True)
