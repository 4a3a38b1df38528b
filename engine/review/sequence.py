"""Anytime-valid confidence sequences for the mean of bounded observations, by betting.

Waudby-Smith & Ramdas (2023), "Estimating means of bounded random variables by betting", JRSSB 86(1).
For observations ``x_1, x_2, ...`` in [0, 1] whose conditional mean is ``m*``, and any candidate
mean ``m``, two gamblers bet on the sign of ``x - m`` with capitals

    K+_t(m) = prod_{i<=t} (1 + l+_i(m) (x_i - m)),    K-_t(m) = prod_{i<=t} (1 - l-_i(m) (x_i - m)).

At ``m = m*`` both are non-negative martingales that start at 1, so by Ville's inequality the
*hedged* capital ``max(theta K+, (1 - theta) K-)`` reaches ``1/alpha`` with probability at most
``alpha`` ever. The confidence set at time ``t`` is every ``m`` whose hedged capital is still
below ``1/alpha``; it holds the true mean at all times at once with probability ``1 - alpha``, so
it may be read after every observation and acted on (stop, revert) without any correction for
looking often. Running intersection (the bounds only ever tighten) keeps that guarantee.

The bets are the paper's *predictable plug-in* ones (its section on hedged capital): a size from
the observations before ``x_t`` only,

    l_t = sqrt(2 log(2/alpha) / (s2_{t-1} t log(1 + t))),
    s2_t = (1/4 + sum_{i<=t} (x_i - xbar_i)^2) / (t + 1),   xbar_t = (1/2 + sum_{i<=t} x_i) / (t + 1),

truncated at ``c/m`` (``K+``) or ``c/(1 - m)`` (``K-``) so that a factor never drops below
``1 - c`` (:data:`TRUNCATION` is ``c``, one of the paper's two suggested values). The paper's
``log(2/alpha)`` is the log of each side's threshold ``1/(alpha theta)`` at ``theta = 1/2``; other
weights use their own side's threshold. ``theta = 1`` (or 0) puts all weight on ``K+`` (``K-``):
a one-sided bound at ``1 - alpha``, the other bound staying at the end of the range. Each side of a
two-sided sequence at ``2 alpha`` is a one-sided ``1 - alpha`` bound.

With these bets every factor of ``K+`` falls as ``m`` rises and every factor of ``K-`` rises,
so the set is an interval: ``K+`` rules out a prefix of candidate means and ``K-`` a suffix.
The capitals are kept on a grid of candidate means, and each bound is rounded outwards to the
grid point that was ruled out (a true mean between two grid points is never lost): with the
default 1 000 points the bounds are exact to 0.001 of the observations' range.

:class:`BettingSequences` runs many independent streams at once (simulations, projections);
:class:`ConfidenceSequence` is one stream, on any bounded range, read as plain floats.
"""

from __future__ import annotations

import math

import numpy as np

ALPHA = 0.05  # default error level: the bounds hold at all times at once with 95 % probability
GRID_SIZE = 1000  # candidate means on [0, 1]
TRUNCATION = 0.5  # c: a bet never stakes more than this share of what it can lose
THETA = 0.5  # weight of K+ in the hedged capital (1/2: both sides alike)


class BettingSequences:
    """Betting confidence sequences for ``streams`` independent streams of [0, 1] observations.

    Args:
        streams: how many streams are updated together.
        alpha: error level; each stream's bounds hold at all times with probability ``1 - alpha``.
        grid_size: candidate means, at the midpoints of ``grid_size`` equal cells of [0, 1].
        theta: weight of ``K+`` in the hedged capital (1/2: two-sided; 1: lower bound only;
            0: upper bound only).
    """

    def __init__(
        self, streams: int = 1, alpha: float = ALPHA, grid_size: int = GRID_SIZE, theta: float = THETA
    ) -> None:
        if streams < 1:
            raise ValueError(f"streams must be at least 1, not {streams}")
        if not 0.0 < alpha < 1.0:
            raise ValueError(f"alpha must lie in (0, 1), not {alpha}")
        if grid_size < 2:
            raise ValueError(f"grid_size must be at least 2, not {grid_size}")
        if not 0.0 <= theta <= 1.0:
            raise ValueError(f"theta must lie in [0, 1], not {theta}")
        self.alpha = float(alpha)
        self.theta = float(theta)
        self.grid = (np.arange(grid_size, dtype=np.float64) + 0.5) / grid_size
        # Largest stake per candidate mean: c/m for K+, c/(1-m) for K- (m never 0 or 1 on the grid).
        self._cap_plus = TRUNCATION / self.grid
        self._cap_minus = TRUNCATION / (1.0 - self.grid)
        # Thresholds on log K+ and log K-: theta K+ >= 1/alpha is K+ >= 1/(alpha theta). A side
        # of weight 0 never rules anything out (a one-sided sequence).
        self._limit_plus = math.log(1.0 / (alpha * theta)) if theta > 0 else math.inf
        self._limit_minus = math.log(1.0 / (alpha * (1.0 - theta))) if theta < 1 else math.inf
        self.count = np.zeros(streams, dtype=np.int64)
        self._sum = np.zeros(streams)  # sum of observations
        self._squares = np.zeros(streams)  # sum of (x_i - xbar_i)^2
        self._log_plus = np.zeros((streams, grid_size))
        self._log_minus = np.zeros((streams, grid_size))
        self.lower = np.zeros(streams)
        self.upper = np.ones(streams)

    @property
    def streams(self) -> int:
        return int(self.count.shape[0])

    def mean(self) -> np.ndarray:
        """``(S,)`` observed means (nan for a stream with no observation yet)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.count > 0, self._sum / np.maximum(self.count, 1), np.nan)

    def stakes(self) -> tuple[np.ndarray, np.ndarray]:
        """``(S,)`` twice: the untruncated plug-in stakes of K+ and K- for the next observation.

        The paper's ``log(2/alpha)`` is the log of the threshold ``1/(alpha theta)`` at
        ``theta = 1/2``; each side uses its own threshold (the same at 1/2), so a one-sided
        sequence bets as hard as its single threshold calls for. A side of weight 0 stakes 0.
        """
        t = self.count + 1
        # s2_{t-1} * t is 1/4 plus the sum of squares so far.
        scale = 2.0 / ((0.25 + self._squares) * np.log1p(t))
        plus = np.sqrt(scale * self._limit_plus) if self.theta > 0 else np.zeros_like(scale)
        minus = np.sqrt(scale * self._limit_minus) if self.theta < 1 else np.zeros_like(scale)
        return plus, minus

    def update(self, values: np.ndarray, active: np.ndarray | None = None) -> None:
        """Add one observation to each stream (or to the ``active`` ones only).

        Args:
            values: ``(S,)`` observations in [0, 1] (entries of inactive streams are ignored).
            active: ``(S,)`` booleans, the streams that observed something (None: all).

        Raises:
            ValueError: an observation of an active stream lies outside [0, 1] or is not finite.
        """
        x = np.asarray(values, dtype=np.float64).reshape(-1)
        if x.shape[0] != self.streams:
            raise ValueError(f"expected {self.streams} observations, got {x.shape[0]}")
        on = np.ones(self.streams, dtype=bool) if active is None else np.asarray(active, dtype=bool)
        if not on.any():
            return
        if not np.all(np.isfinite(x[on])) or np.any(x[on] < 0.0) or np.any(x[on] > 1.0):
            raise ValueError("observations must be finite and lie in [0, 1]")
        x = np.where(on, x, 0.0)
        stake_plus, stake_minus = self.stakes()
        step = x[:, None] - self.grid[None, :]
        work = np.empty_like(step)  # one scratch array, written in place (S x G floats per side)
        if self.theta > 0:
            self._log_plus += _log_factor(stake_plus, self._cap_plus, step, on, work)
        if self.theta < 1:
            np.negative(step, out=step)
            self._log_minus += _log_factor(stake_minus, self._cap_minus, step, on, work)
        # Predictable statistics for the next stake: xbar_t includes x_t (the paper's definition).
        count = self.count + on
        self._sum += x
        xbar = (0.5 + self._sum) / (count + 1)
        self._squares += np.where(on, (x - xbar) ** 2, 0.0)
        self.count = count
        if self.theta > 0:  # K+ rules out a prefix of candidate means: the true mean lies above
            lower = _last(self._log_plus >= self._limit_plus, self.grid, 0.0)
            self.lower = np.where(on, np.maximum(self.lower, lower), self.lower)
        if self.theta < 1:  # K- rules out a suffix: the true mean lies below
            upper = _first(self._log_minus >= self._limit_minus, self.grid, 1.0)
            self.upper = np.where(on, np.minimum(self.upper, upper), self.upper)


def _log_factor(
    stake: np.ndarray, cap: np.ndarray, step: np.ndarray, on: np.ndarray, out: np.ndarray
) -> np.ndarray:
    """``log(1 + min(stake, cap) * step)`` into ``out``, 0 in the rows of inactive streams."""
    np.minimum(stake[:, None], cap[None, :], out=out)
    np.multiply(out, step, out=out)
    np.log1p(out, out=out)
    if not on.all():
        out[~on] = 0.0
    return out


def _last(ruled: np.ndarray, grid: np.ndarray, none: float) -> np.ndarray:
    """``(S,)`` the largest grid point ruled out in each row (``none`` where none is)."""
    index = grid.shape[0] - 1 - np.argmax(ruled[:, ::-1], axis=1)
    return np.where(ruled.any(axis=1), grid[index], none)


def _first(ruled: np.ndarray, grid: np.ndarray, none: float) -> np.ndarray:
    """``(S,)`` the smallest grid point ruled out in each row (``none`` where none is)."""
    return np.where(ruled.any(axis=1), grid[np.argmax(ruled, axis=1)], none)


class ConfidenceSequence:
    """One stream's betting confidence sequence for the mean of observations in ``[low, high]``.

    Observations are mapped to [0, 1] for the bets and the bounds mapped back, so
    ``ConfidenceSequence(low=-1, high=1)`` bounds the mean of ``z`` in {-1, 0, +1} directly.

    Args:
        alpha: error level (the bounds hold at every time at once with probability ``1 - alpha``).
        grid_size: candidate means (see :class:`BettingSequences`).
        low, high: the range every observation lies in.
    """

    def __init__(
        self, alpha: float = ALPHA, grid_size: int = GRID_SIZE, low: float = 0.0, high: float = 1.0
    ) -> None:
        if not (math.isfinite(low) and math.isfinite(high) and low < high):
            raise ValueError(f"need finite low < high, got {low}, {high}")
        self.low = float(low)
        self.high = float(high)
        self._core = BettingSequences(1, alpha=alpha, grid_size=grid_size)
        self.observations: list[float] = []  # in their own units, in order (for saving, replay)

    @property
    def alpha(self) -> float:
        return self._core.alpha

    @property
    def grid_size(self) -> int:
        return int(self._core.grid.shape[0])

    @property
    def count(self) -> int:
        return int(self._core.count[0])

    @property
    def lower(self) -> float:
        """Lower bound on the mean (``low`` before any observation); it never decreases."""
        return self.low + (self.high - self.low) * float(self._core.lower[0])

    @property
    def upper(self) -> float:
        """Upper bound on the mean (``high`` before any observation); it never increases."""
        return self.low + (self.high - self.low) * float(self._core.upper[0])

    @property
    def mean(self) -> float:
        """Observed mean (nan before any observation)."""
        return math.fsum(self.observations) / len(self.observations) if self.observations else math.nan

    @property
    def empty(self) -> bool:
        """True when the bounds crossed: no constant mean fits the observations (rare, <= alpha)."""
        return self.lower > self.upper

    def update(self, value: float) -> None:
        """Add one observation.

        Raises:
            ValueError: ``value`` is not finite or lies outside ``[low, high]``.
        """
        value = float(value)
        if not (math.isfinite(value) and self.low <= value <= self.high):
            raise ValueError(f"observation {value!r} lies outside [{self.low}, {self.high}]")
        scaled = (value - self.low) / (self.high - self.low)
        self._core.update(np.array([min(max(scaled, 0.0), 1.0)]))
        self.observations.append(value)
