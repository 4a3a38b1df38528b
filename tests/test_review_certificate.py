"""The revert rule's building blocks: the betting sequence's coverage and the rule's error rates on
simulated review streams (the deployed ladder on uniform samples: tests/test_review_ladder.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from engine.review import BettingSequences, ConfidenceSequence, verdict_paths


def draw(rng: np.random.Generator, mu: float, ties: float, steps: int, streams: int) -> np.ndarray:
    """``(steps, streams)`` review outcomes z in {-1, 0, +1} with mean ``mu``, a share ``ties`` of 0."""
    p = [(1 - ties - mu) / 2, ties, (1 - ties + mu) / 2]
    return rng.choice(np.array([-1, 0, 1]), size=(steps, streams), p=p)


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


def test_helpful_groups_are_rarely_reverted() -> None:
    rng = np.random.default_rng(6)
    for d in (0.1, 0.3):
        _, reverted_at = verdict_paths(draw(rng, 0.2, 0.0, 50, 300), d)
        rate = np.mean(reverted_at > 0)
        assert rate <= 0.05, f"mu +0.2, d {d}: reverted in {rate:.3f} of 300 streams of 50 reviews"
