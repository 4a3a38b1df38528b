"""The confidence sequence's hedged stakes: fewer reviews for a certificate, still valid (docs/review-certificates.md)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from engine.review import sampling
from engine.review.sampling import HEDGE, SamplingSequence


def _reviews_to_certify(alpha: float, population: int = 2000) -> int:
    """Right answers in a row (z = +1) until the lower bound on the mean of z exceeds 0."""
    seq = SamplingSequence(population, alpha=alpha)
    while seq.lower(alpha) <= 0:
        seq.update(1.0)
    return seq.count


def test_a_run_of_right_answers_certifies_in_seven_reviews_at_the_first_level(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """At 97.5 % the hedged bettor alone (no bold share: tests/test_review_first_answers.py) needs
    7 right answers in a row on a large population (log 40 / log(1 + HEDGE)); with every stake
    capped at 0.8 for every mean, as before, it needed 11."""
    monkeypatch.setattr(sampling, "BOLD", 0.0)
    assert _reviews_to_certify(0.025) == math.ceil(math.log(40) / math.log(1 + HEDGE)) == 7
    assert _reviews_to_certify(0.0125) == 8  # the second comparison of a site


def test_every_factor_stays_positive_and_the_capital_falls_as_the_mean_rises() -> None:
    """After any answers the log-capitals stay finite (each factor >= 1 - HEDGE), the capital
    betting on "above m" does not rise with m (so its value at m0 is an e-value for the whole
    null "mean <= m0") and the one betting on "below m" does not fall."""
    rng = np.random.default_rng(3)
    for population in (30, 400):
        seq = SamplingSequence(population)
        for v in rng.choice([-1.0, 0.0, 1.0], size=min(population - 1, 60), p=[0.45, 0.1, 0.45]):
            seq.update(float(v))
            possible = seq._possible
            plus, minus = seq._log_plus[possible], seq._log_minus[possible]
            assert np.isfinite(plus).all() and np.isfinite(minus).all()
            assert (np.diff(plus) <= 1e-9).all() and (np.diff(minus) >= -1e-9).all()


@pytest.mark.parametrize("share", [0.5, 0.45])
def test_a_candidate_that_is_not_better_is_rarely_certified(share: float) -> None:
    """Disagreements on which the candidate is right on at most half (mean z <= 0), drawn without
    replacement in random orders: the lower bound at 97.5 % rises above 0 in at most 2.5 % of them."""
    rng = np.random.default_rng(11)
    population = 120
    right = round(share * population)
    values = np.r_[np.ones(right), -np.ones(population - right)]
    crossed, runs = 0, 400
    for _ in range(runs):
        seq = SamplingSequence(population, alpha=0.025)
        for v in rng.permutation(values)[:60]:
            seq.update(float(v))
            if seq.lower(0.025) > 0:
                crossed += 1
                break
    assert crossed / runs <= 0.025


def test_the_hedge_is_what_makes_seven_reviews_enough(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same run of right answers with a hedge of 0.4 (a stake of at most 0.8 at the null's
    boundary, the earlier cap) needs 11 reviews: the figure above comes from the hedge."""
    monkeypatch.setattr(sampling, "HEDGE", 0.4)
    monkeypatch.setattr(sampling, "BOLD", 0.0)
    assert _reviews_to_certify(0.025) == 11
