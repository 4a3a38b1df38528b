"""Review certificates: the betting sequence's coverage, the rule's error rates on simulated review
streams, the revert path end to end, strict JSON, the review queue and the simulated reviewer."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from engine.review import (
    DEFAULT_RULE,
    REVERTED,
    UNDECIDED,
    VERIFIED,
    BettingSequences,
    Certificate,
    CertificateBook,
    CertificateError,
    ConfidenceSequence,
    QueueItem,
    ReviewQueue,
    review_order,
    simulate_reviews,
    verdict_paths,
)


def draw(rng: np.random.Generator, mu: float, ties: float, steps: int, streams: int) -> np.ndarray:
    """``(steps, streams)`` review outcomes z in {-1, 0, +1} with mean ``mu``, a share ``ties`` of 0."""
    p = [(1 - ties - mu) / 2, ties, (1 - ties + mu) / 2]
    return rng.choice(np.array([-1, 0, 1]), size=(steps, streams), p=p)


def certificate_with(outcomes: list[int], share: float = 0.1, group: int | None = 0) -> Certificate:
    """A certificate whose reviews each come after ``1/share`` images, the last a disagreement.

    ``d`` is then exactly ``share`` at every review and below it in between (never above, where
    a revert could come earlier than at a fixed ``d``).
    """
    cert = Certificate(group)
    per_review = round(1 / share)
    for z in outcomes:
        for k in range(per_review):
            cert.note_image(k == per_review - 1)
        cert.add_outcome(z)
    return cert


# -- the confidence sequence --------------------------------------------------------------------


@pytest.mark.parametrize(("mu", "ties"), [(0.0, 0.0), (-0.5, 0.0), (0.6, 0.3)])
def test_sequence_holds_the_true_mean_at_all_times(mu: float, ties: float) -> None:
    rng = np.random.default_rng(1)
    z = draw(rng, mu, ties, 150, 300)
    seq = BettingSequences(300)  # two-sided, 95 %
    missed = np.zeros(300, dtype=bool)
    width_before = np.full(300, 2.0)  # [-1, 1] before any observation
    for t in range(z.shape[0]):
        seq.update((z[t] + 1) / 2.0)
        lower, upper = 2 * seq.lower - 1, 2 * seq.upper - 1
        missed |= (lower > mu) | (upper < mu)
        assert np.all(upper - lower <= width_before + 1e-12), "a running intersection never widens"
        width_before = upper - lower
    rate = missed.mean()
    assert rate <= 0.05, f"true mean {mu} outside the 95 % bounds at some time in {rate:.3f} of streams"
    assert np.mean(width_before) < 0.6, "after 150 observations the bounds should be informative"


def test_one_stream_matches_the_batch_and_maps_its_range() -> None:
    rng = np.random.default_rng(2)
    z = draw(rng, 0.3, 0.2, 40, 3)
    batch = BettingSequences(3)
    singles = [ConfidenceSequence(low=-1, high=1) for _ in range(3)]
    for t in range(40):
        batch.update((z[t] + 1) / 2.0)
        for k, single in enumerate(singles):
            single.update(float(z[t, k]))
    for k, single in enumerate(singles):
        assert single.lower == pytest.approx(2 * batch.lower[k] - 1)
        assert single.upper == pytest.approx(2 * batch.upper[k] - 1)
        assert single.lower <= single.mean <= single.upper and single.count == 40
    fresh = ConfidenceSequence(low=-1, high=1)
    assert (fresh.lower, fresh.upper) == (-1.0, 1.0) and math.isnan(fresh.mean)
    for bad in (1.5, float("nan"), -2):
        with pytest.raises(ValueError):
            fresh.update(bad)


# -- the rule's error rates on simulated review streams -----------------------------------------


@pytest.mark.parametrize(("mu", "ties"), [(0.0, 0.0), (0.0, 0.3), (-0.2, 0.0), (-0.5, 0.3)])
def test_no_harm_is_verified_more_than_five_percent_of_the_time(mu: float, ties: float) -> None:
    rng = np.random.default_rng(3)
    z = draw(rng, mu, ties, 100, 300)
    verified_at, _ = verdict_paths(z, 0.1)
    rate = np.mean(verified_at > 0)
    assert rate <= 0.05, f"mu {mu:+.1f} (ties {ties}): verified in {rate:.3f} of 300 streams of 100 reviews"


def test_the_batch_paths_are_what_certificates_do() -> None:
    rng = np.random.default_rng(4)
    z = draw(rng, -0.4, 0.0, 30, 12)
    z[:, :6] = draw(rng, 0.7, 0.1, 30, 6)
    verified_at, reverted_at = verdict_paths(z, 0.1)
    for k in range(12):
        cert = certificate_with([int(v) for v in z[:, k]], share=0.1)
        if reverted_at[k]:
            assert cert.verdict == REVERTED and cert.decided_at == reverted_at[k]
        elif verified_at[k]:
            assert cert.verdict == VERIFIED and cert.decided_at == verified_at[k]
        else:
            assert cert.verdict == UNDECIDED
    assert (verified_at > 0).any() and (reverted_at > 0).any()


def test_clearly_harmful_groups_are_reverted_and_helpful_ones_verified() -> None:
    rng = np.random.default_rng(5)
    harmful = draw(rng, -0.5, 0.0, 20, 100)
    helpful = draw(rng, 0.6, 0.0, 20, 100)
    reverted = [certificate_with([int(v) for v in harmful[:, k]]).verdict == REVERTED for k in range(100)]
    helped = [certificate_with([int(v) for v in helpful[:, k]]).verdict for k in range(100)]
    assert np.mean(reverted) > 0.5, (
        f"mu -0.5, d 0.1: reverted in {np.mean(reverted):.2f} of 100 streams of 20"
    )
    verified = np.mean([v == VERIFIED for v in helped])
    assert verified > 0.5, f"mu +0.6: verified in {verified:.2f} of 100 streams of 20 reviews"
    assert REVERTED not in helped, "a clearly helpful group was reverted"


def test_helpful_groups_are_rarely_reverted() -> None:
    rng = np.random.default_rng(6)
    for d in (0.1, 0.3):
        _, reverted_at = verdict_paths(draw(rng, 0.2, 0.0, 50, 300), d)
        rate = np.mean(reverted_at > 0)
        assert rate <= 0.05, f"mu +0.2, d {d}: reverted in {rate:.3f} of 300 streams of 50 reviews"


# -- verdicts and the revert path ---------------------------------------------------------------


def test_without_reviews_everything_is_undecided() -> None:
    book = CertificateBook()
    for i in range(500):
        book.note_image(i % 3 if i % 7 else None, disagreement=i % 2 == 0)
    assert all(book.verdict(g) == UNDECIDED for g in (0, 1, 2, None))
    assert book.decide(1, 0, 2) == 1 and book.decided_groups() == set()


def test_reverted_is_permanent_and_decide_returns_the_source_decision() -> None:
    book = CertificateBook()
    for i in range(200):
        book.note_image(0, disagreement=i % 10 == 0)
        book.note_image(1, disagreement=i % 10 == 0)
    verdicts = [book.add_review(0, adapted_correct=False, source_correct=True) for _ in range(12)]
    first = DEFAULT_RULE.min_reviews - 1
    assert verdicts[-1] == REVERTED and verdicts[:first] == [UNDECIDED] * first
    at = book.certificate(0).decided_at
    for _ in range(60):  # every later review says adapting was right, and more images arrive
        book.add_review(0, adapted_correct=True, source_correct=False)
        book.note_image(0, disagreement=False)
    assert book.verdict(0) == REVERTED and book.certificate(0).decided_at == at
    assert book.decide(prediction=1, source_prediction=0, group=0) == 0
    assert book.decide(prediction=1, source_prediction=0, group=1) == 1  # undecided: kept
    assert book.decide(prediction=1, source_prediction=0, group=7) == 1  # never seen: kept
    assert book.decided_groups() == {0} and book.reviews_per_group() == {0: 72, 1: 0}


def test_a_book_from_marks_replays_a_run_and_undo_drops_the_mark() -> None:
    images = [(0, i % 10 == 0) for i in range(200)] + [(None, False)] * 50
    harmful = [(0, 1, 0, 0)] * 12  # adapted said 1, source 0, the reviewer 0: broken by adapting
    marks = [(None, 1, 1, 0), *harmful]  # a mark on an agreement does not count
    book = CertificateBook.from_marks(images, marks)
    assert book.verdict(0) == REVERTED and book.certificate(0).reviews == 12
    assert book.certificate(0).share == pytest.approx(0.1) and book.certificate(None).reviews == 0
    undone = CertificateBook.from_marks(images, marks[:4])
    assert undone.verdict(0) == UNDECIDED and undone.decide(1, 0, 0) == 1


def test_a_verified_group_keeps_its_decisions_and_reviews_only_count_disagreements() -> None:
    book = CertificateBook()
    for _ in range(100):
        book.note_image(None, disagreement=True)
    assert book.add_reviewed_image(None, prediction=2, source_prediction=2, label=1) is None
    for _ in range(15):
        book.add_reviewed_image(None, prediction=1, source_prediction=0, label=1)
    cert = book.certificate(None)
    assert cert.reviews == 15 and cert.verdict == VERIFIED and cert.lower > 0
    assert book.decide(1, 0, None) == 1
    assert "verified" in cert.describe() and "15" in cert.describe()


def test_an_undecided_group_says_how_many_reviews_would_likely_decide_it() -> None:
    cert = certificate_with([1, 1, -1, 1, 1, 1], share=0.1)
    assert cert.verdict == UNDECIDED
    more = cert.reviews_to_decide()
    assert more is not None and 1 <= more <= 60 and more == cert.reviews_to_decide()
    assert certificate_with([1, -1] * 3).reviews_to_decide(max_reviews=20) is None  # neutral: not soon
    summary = cert.summary()
    assert summary["reviews_to_decide"] == more and json.dumps(summary)
    assert "unverified" in cert.describe()


# -- saving -------------------------------------------------------------------------------------


def saved_book() -> dict[str, Any]:
    book = CertificateBook()
    for i in range(300):
        book.note_image(i % 3 if i % 5 else None, disagreement=i % 4 == 0)
    for _ in range(12):
        book.add_review(0, adapted_correct=False, source_correct=True)
    for _ in range(15):
        book.add_review(1, adapted_correct=True, source_correct=False)
    book.add_review(2, adapted_correct=False, source_correct=False)
    return book.to_dict()


def test_json_round_trip_keeps_every_verdict() -> None:
    data = saved_book()
    book = CertificateBook.from_json(json.dumps(data))
    assert book.to_dict() == data
    assert [book.verdict(g) for g in (0, 1, 2, None)] == [REVERTED, VERIFIED, UNDECIDED, UNDECIDED]
    book.add_review(2, adapted_correct=True, source_correct=False)  # goes on where it was
    assert book.certificate(2).reviews == 2


def _group(data: dict[str, Any], group: int) -> dict[str, Any]:
    return next(g for g in data["groups"] if g["group"] == group)


TAMPERED: dict[str, Callable[[dict[str, Any]], object]] = {
    "count as text": lambda d: _group(d, 2).__setitem__("images", "100"),
    "count as a boolean": lambda d: _group(d, 2).__setitem__("disagreements", True),
    "count as a float": lambda d: _group(d, 2).__setitem__("images", 100.0),
    "negative count": lambda d: _group(d, 2).__setitem__("disagreements", -1),
    "more disagreements than images": lambda d: _group(d, 2).__setitem__("disagreements", 10_000),
    "NaN bound": lambda d: _group(d, 2).__setitem__("lower", float("nan")),
    "unknown verdict": lambda d: _group(d, 2).__setitem__("verdict", "approved"),
    "extra key": lambda d: _group(d, 2).__setitem__("note", "x"),
    "missing key": lambda d: _group(d, 2).pop("outcomes"),
    "outcome out of range": lambda d: _group(d, 2)["outcomes"].append(2),
    "reverted turned undecided": lambda d: _group(d, 0).update(
        verdict="undecided", decided_at=None, decided_images=None, decided_disagreements=None
    ),
    "undecided turned verified": lambda d: _group(d, 2).update(
        verdict="verified", decided_at=1, decided_images=50, decided_disagreements=5
    ),
    "edited bound": lambda d: _group(d, 1).__setitem__("lower", 0.9),
    "decided beyond its reviews": lambda d: _group(d, 0).__setitem__("decided_at", 99),
    "group twice": lambda d: d["groups"].append(dict(_group(d, 1))),
    "negative group": lambda d: _group(d, 2).__setitem__("group", -3),
    "rule out of range": lambda d: d["rule"].__setitem__("revert_alpha", 1.5),
    "wrong format": lambda d: d.__setitem__("format", "something else"),
    "wrong version": lambda d: d.__setitem__("version", 99),
    "groups not a list": lambda d: d.__setitem__("groups", {"0": {}}),
    "top-level extra key": lambda d: d.__setitem__("pickle", "gASV"),
}


@pytest.mark.parametrize("change", list(TAMPERED))
def test_a_tampered_file_is_refused_with_a_clear_error(change: str) -> None:
    data = saved_book()
    TAMPERED[change](data)
    with pytest.raises(CertificateError) as caught:
        CertificateBook.from_json(json.dumps(data))  # NaN is written as the bare word NaN
    assert isinstance(caught.value, ValueError) and "certificates" in str(caught.value)


@pytest.mark.parametrize("text", ["", "{", "[]", "null", '{"format": NaN}', "[" * 100_000, b"\xff\xfe"])
def test_text_that_is_no_book_is_refused(text: str | bytes) -> None:
    with pytest.raises(CertificateError):
        CertificateBook.from_json(text)


# -- the review queue ---------------------------------------------------------------------------


def test_queue_alternates_least_reviewed_undecided_groups_in_arrival_order() -> None:
    items = [QueueItem(10 + i, g, i) for i, g in enumerate([0, 0, 1, 0, 2, 1, None, 2])]
    # Group 0 has 3 reviews, 1 has 1, 2 has 1, None has 0; group 2 is decided.
    order = review_order(items, reviews={0: 3, 1: 1, 2: 1}, decided={2})
    assert order == [16, 12, 15, 10, 11, 13, 14, 17]
    queue = ReviewQueue()
    for entry in items:
        queue.add(entry.item, entry.group)
    queue.add(10, 5)  # a second add keeps the first arrival
    assert len(queue) == 8 and queue.order({0: 3, 1: 1, 2: 1}, {2}) == order
    assert queue.next({0: 3, 1: 1, 2: 1}, {2}) == 16
    for item in (16, 12, 15, 10, 11, 13):
        queue.remove(item)
    assert queue.next({}, {2}) == 14 and queue.next({}, {2}, include_decided=False) is None
    assert ReviewQueue().next({}) is None


# -- the simulated reviewer ---------------------------------------------------------------------


def synthetic_site(seed: int, n: int = 400) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Binary site: group 0 harmed by adapting (d 0.2, mu -0.6), group 1 helped (d 0.1, mu +0.6)."""
    rng = np.random.default_rng(seed)
    group = rng.integers(0, 2, size=n)
    label = rng.integers(0, 2, size=n)
    d = np.where(group == 0, 0.2, 0.1)
    mu = np.where(group == 0, -0.6, 0.6)
    disagree = rng.random(n) < d
    source_right = np.where(disagree, rng.random(n) >= (1 + mu) / 2, rng.random(n) < 0.8)
    adapted_right = np.where(disagree, ~source_right, source_right)
    return (
        np.where(adapted_right, label, 1 - label),
        np.where(source_right, label, 1 - label),
        group,
        label,
    )


def test_simulator_without_budget_returns_the_unreviewed_decisions() -> None:
    prediction, source, group, label = synthetic_site(7)
    result = simulate_reviews(prediction, source, group, label, budget=0)
    assert result.reviews_used == 0 and not result.reviewed.any() and not result.reverted_at
    assert np.array_equal(result.decisions, prediction) and np.array_equal(
        result.online_decisions, prediction
    )
    assert result.counts == result.adapted_counts


@pytest.mark.parametrize("budget", [3, 20, 50])
def test_simulator_respects_the_budget_and_reverts_the_harmed_group(budget: int) -> None:
    prediction, source, group, label = synthetic_site(8)
    result = simulate_reviews(prediction, source, group, label, budget=budget)
    assert result.reviews_used <= budget and int(result.reviewed.sum()) == result.reviews_used
    assert np.all(prediction[result.reviewed] != source[result.reviewed]), "only disagreements are reviewed"
    book = result.book
    assert sum(book.reviews_per_group().values()) == result.reviews_used
    for g, at in result.reverted_at.items():
        members = group == g
        assert np.array_equal(result.decisions[members], source[members])  # all of the group's images
        early = members & (np.arange(len(group)) < at)
        assert np.array_equal(result.online_decisions[early], prediction[early])
    if budget >= 20:
        assert book.verdict(0) == REVERTED and book.verdict(1) != REVERTED
        assert result.counts.accuracy > result.adapted_counts.accuracy
        fixed_minus_broken = result.counts.fixed - result.counts.broken
        assert fixed_minus_broken == round(
            (result.counts.accuracy - result.counts.source_accuracy) * len(label)
        )
    with pytest.raises(ValueError):
        simulate_reviews(prediction, source, group[:-1], label, budget=5)
    with pytest.raises(ValueError):
        simulate_reviews(prediction, source, group, label, budget=-1)


def test_the_budget_is_per_site_and_a_site_reviews_its_own_images() -> None:
    rng = np.random.default_rng(3)
    n = 400
    site = np.arange(n) % 2
    label = rng.integers(0, 2, n)
    source = np.where(rng.random(n) < 0.5, label, 1 - label)
    pred = 1 - source  # every image a disagreement, right half of the time: groups stay open
    groups = list(rng.integers(0, 8, n))
    out = simulate_reviews(pred, source, groups, label, budget=3, site=site)
    per_site = [int(out.reviewed[site == s].sum()) for s in (0, 1)]
    assert per_site == [3, 3], f"each site spends its own budget: {per_site}"
    assert out.reviews_used == 6 == int(out.reviewed.sum())
    one_site = simulate_reviews(pred, source, groups, label, budget=3)
    assert one_site.reviews_used == 3, "without sites, one budget for the stream"
