"""Fewer answers to the first certificate (issue 39, item 2; docs/review-certificates.md): exact
decisions where the disagreements are few, the bold bettor's share of the capital, and the levels
the ladder gives its comparisons. Each claim is checked where it could fail: nulls that are not
better, replayed over many seeded random orders, are certified at most at their level."""

from __future__ import annotations

import math

import numpy as np
import pytest

from engine.review import sampling, union
from engine.review.ladder import LadderRule
from engine.review.sampling import SamplingSequence

#: the settings issue 39's item 2 measured (docs/review-certificates.md): the first comparison at
#: 90 % of alpha, patience 3, and a bold share of 0.4 (set for every test here)
RULE = LadderRule(first_share=0.9, patience=3)
BOLD = 0.4


@pytest.fixture(autouse=True)
def _bold(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sampling, "BOLD", BOLD)


def _run(population: int, values: list[float], alpha: float) -> SamplingSequence:
    seq = SamplingSequence(population, alpha=alpha)
    for v in values:
        seq.update(v)
    return seq


def test_a_block_whose_answers_decide_it_whatever_the_rest_is_decided_exactly() -> None:
    """Three disagreements, two answered right: even if the third went against the candidate its
    total would be +1, so it is better at any level, with no statistics; one of two answered wrong
    leaves at most 0, so it is not better at any level. Every disagreement answered: the mean is known."""
    for alpha in (0.05, 1e-6):
        two_of_three = _run(3, [1.0, 1.0], alpha)
        assert two_of_three.lower(alpha) > 0
        assert union.certified([two_of_three], 0, alpha)
        assert _run(2, [-1.0], alpha).upper(alpha) <= 0
        everything = _run(4, [1.0, -1.0, 1.0, 0.0], alpha)
        assert everything.exhausted
        assert everything.lower(alpha) == everything.upper(alpha) == pytest.approx(0.25)
    assert _run(3, [1.0], 1e-6).lower(1e-6) < 0  # one answered of three decides nothing yet


def test_a_block_decided_only_once_its_answers_decide_it() -> None:
    """Eleven disagreements, right answers in a row, at a level no betting reaches in so few
    answers: the lower bound is above 0 exactly from the sixth (six right: at least 6 - 5 = +1)."""
    seq = SamplingSequence(11, alpha=1e-9)
    for k in range(1, 7):
        seq.update(1.0)
        assert (seq.lower(1e-9) > 0) == (k >= 6)


def test_five_right_answers_in_a_row_certify_the_first_comparison() -> None:
    """At the first comparison's level (90 % of 5 %) with a bold share of 0.4, five right answers
    in a row certify on any population; four do not on a large one."""
    alpha = RULE.level(1)
    for population in (2000, 300, 40):
        seq = SamplingSequence(population, alpha=alpha)
        for k in range(1, 6):
            seq.update(1.0)
            if k == 5 or population > 40:
                assert (seq.lower(alpha) > 0) == (k == 5), (population, k)


def test_without_the_bold_bettor_five_answers_are_not_enough(monkeypatch: pytest.MonkeyPatch) -> None:
    """The hedged bettor alone (1.75 per right answer at the null's boundary) reaches 1.75^5 = 16.4
    in five: below 1 / alpha at the first level; the bold share is what makes five enough."""
    monkeypatch.setattr(sampling, "BOLD", 0.0)
    alpha = RULE.level(1)
    seq = _run(2000, [1.0] * 5, alpha)
    assert seq.lower(alpha) <= 0
    assert seq.e_value(0.0) == pytest.approx(1.75**5, rel=0.02)


def test_the_levels_add_up_to_at_most_alpha() -> None:
    for rule in (LadderRule(), RULE, LadderRule(first_share=1.0)):
        levels = [rule.level(j) for j in range(1, 200)]
        assert all(level >= 0 for level in levels)
        assert math.fsum(levels) <= rule.alpha + 1e-12


def test_the_mixture_keeps_finite_capitals_that_fall_as_the_mean_rises() -> None:
    """After any answers the mixture's log capital stays finite (its hedged part never reaches 0)
    and does not rise with the mean, so its value at the null's boundary is an e-value for the
    whole null; the bold part alone drops to 0 at the first wrong answer."""
    rng = np.random.default_rng(5)
    for population in (12, 30, 400):
        seq = SamplingSequence(population)
        assert seq.bold == BOLD
        for v in rng.choice([-1.0, 0.0, 1.0], size=min(population - 1, 60), p=[0.45, 0.1, 0.45]):
            seq.update(float(v))
            plus = seq._log_plus[seq._possible]
            assert np.isfinite(plus).all()
            assert (np.diff(plus) <= 1e-9).all()
    mixed = _run(400, [1.0, 1.0, -1.0], 0.05)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sampling, "BOLD", 0.0)
        hedged = _run(400, [1.0, 1.0, -1.0], 0.05)
    assert mixed.e_value(0.0) == pytest.approx((1 - BOLD) * hedged.e_value(0.0), rel=1e-6)


@pytest.mark.parametrize(("population", "share"), [(9, 0.5), (24, 0.5), (120, 0.5), (120, 0.45), (1000, 0.5)])
def test_a_candidate_that_is_not_better_is_certified_at_most_at_the_level(
    population: int, share: float
) -> None:
    """Disagreements on which the candidate is right on at most half (total of z at most 0), drawn
    without replacement in 2 000 seeded random orders and read after every answer, up to 20
    answers: the first comparison's lower bound rises above 0 in at most its level of them (a
    one-sided binomial test at 0.1 %: at the null's boundary the bold bettor makes the true rate
    close to the level, about 1 / 32 from five right answers in a row alone)."""
    alpha = RULE.level(1)
    rng = np.random.default_rng([17, population, round(share * 100)])
    right = math.floor(share * population)
    values = np.r_[np.ones(right), -np.ones(population - right)]
    crossed, runs = 0, 2000
    for _ in range(runs):
        seq = SamplingSequence(population, alpha=alpha)
        for v in rng.permutation(values)[:20]:
            seq.update(float(v))
            if seq.lower(alpha) > 0:
                crossed += 1
                break
    assert _binomial_tail(crossed, runs, alpha) > 1e-3, (crossed, runs, alpha)


def _binomial_tail(k: int, n: int, p: float) -> float:
    """The chance of at least ``k`` successes in ``n`` tries of chance ``p``."""

    def log_term(i: int) -> float:
        log_choose = math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1)
        return log_choose + i * math.log(p) + (n - i) * math.log1p(-p)

    return math.fsum(math.exp(log_term(i)) for i in range(k, n + 1))
