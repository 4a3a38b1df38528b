"""Confidence sequences for a finite population reviewed in uniformly random order, by betting.

A certificate is a claim about a fixed, finite set of images: "on the N images of this site
where the two rules disagree, the candidate is right more often than the rule in use". Reviewing
those N images in an order drawn uniformly at random (without replacement) makes every review
a random draw from them, whatever order the images arrived in; reviewing them in arrival order
would test "the first ones were right", which is not the claim (``docs/review-certificates.md``).

Waudby-Smith & Ramdas (2020), "Confidence sequences for sampling without replacement" (NeurIPS):
for values ``x`` in [0, 1] with population mean ``m``, after ``t - 1`` draws whose sum is
``S``, the next draw's conditional mean is

    m_t(m) = (N m - S) / (N - t + 1),

so for every candidate mean ``m``

    K+_t(m) = prod (1 + l_i (x_i - m_i(m))),     K-_t(m) = prod (1 - l_i (x_i - m_i(m)))

are non-negative martingales under ``m`` when the stakes ``l_i`` are chosen before ``x_i`` is
seen and keep every factor non-negative (``0 <= l_i <= 1 / m_i(m)`` for ``K+``,
``1 / (1 - m_i(m))`` for ``K-``). By Ville's inequality ``K+`` reaches ``1/alpha`` with probability at
most ``alpha`` ever: every ``m`` where it did is ruled out, at every time at once. A candidate
mean that the draws already make impossible (``m_t`` outside [0, 1]) is ruled out exactly.

The stakes are the predictable plug-in ones of Waudby-Smith & Ramdas (2023), *hedged* as theirs
are: for the capital betting that the mean lies above ``m`` the stake is at most
``HEDGE / m_t(m)``, for the one betting below at most ``HEDGE / (1 - m_t(m))``. Each factor then
stays at least ``1 - HEDGE`` > 0, and a bettor may stake more than one where the null leaves room
(at ``m_t = 1/2``, the boundary of "the candidate is not better", up to ``2 HEDGE``): a run of
right answers certifies in about 7 reviews at 97.5 % instead of the 11 a stake of at most 0.8
needed (``docs/review-certificates.md``; with the bold share of 0.4 below, 6, and at the first
comparison's 95.5 %, 5). Every factor of ``K+`` still falls as ``m`` rises
(``min(l, c/mu) (x - mu)`` falls in ``mu`` for ``x >= 0``), so the capital at the null's boundary
is the smallest over the whole null, and ``K+_t(m0)`` is an e-value for "the mean is at most
``m0``" at any time the reviewer stops (optional stopping). The capitals of a comparison's blocks
are combined into one e-process over all of them (:mod:`engine.review.union`).

**The bold bettor.** Beside the hedged bettor, a share :data:`BOLD` of the capital is given to
a bettor who stakes everything, ``l_t = 1 / m_t(m)``: its factor is ``x / m_t``, so after an
unbroken run of right answers its capital against ``m`` is exactly one over the chance of that
run when the mean is ``m`` (drawn without replacement: at ``N = 21`` disagreements, ten of them
right, five right in a row have a chance of 1 in 81, against 1 in 32 from an infinite
population), and it is 0 from the first answer below ``m_t`` on. The capital is the mixture
``BOLD K_bold + (1 - BOLD) K_hedged``: both are non-negative martingales under ``m`` starting at
1, so the mixture is one too, and every factor of both falls as ``m`` rises, so the mixture keeps
the properties above. Five right answers in a row then reach ``1 / alpha`` at ``alpha >=
1 / (32 BOLD + (1 + HEDGE)^5 (1 - BOLD))`` (0.044 at ``BOLD`` 0.4) whatever ``N``; after a wrong
answer the mixture holds ``1 - BOLD`` times what the hedged bettor alone would
(``docs/review-certificates.md``, "Fewer answers to the first certificate"). The mixture is read at construction: a sequence keeps it.

**Exactness.** After every draw, every candidate mean whose total is below what was drawn, or
above what was drawn plus every item left at its highest, is ruled out exactly: a population
whose draws decide the sign whatever the rest are (three disagreements, two answered right) is
decided without statistics, at any level.

Review outcomes ``z`` in {-1, 0, +1} (candidate right and rule wrong, both alike, the reverse)
are mapped to ``x = (z + 1) / 2``; the population mean of ``x`` is then a multiple of ``1/(2N)``,
and while ``2N + 1`` stays below :data:`EXACT_GRID` those are exactly the candidate means kept,
so the bounds are exact; beyond, a uniform grid is used and every bound is rounded outwards.
"""

from __future__ import annotations

import math

import numpy as np

HEDGE = 0.75  # a stake is at most HEDGE / m_t (or / (1 - m_t)): each factor stays >= 0.25
# the share of the capital given to the bold bettor (stake 1 / m_t; module docstring); 0: off,
# as before. Issue 39's item 2 measured 0.4 with LadderRule(first_share=0.9, patience=3)
# (docs/review-certificates.md, "Fewer answers to the first certificate")
BOLD = 0.4
EXACT_GRID = 8001  # candidate means kept exactly up to this many (populations of 4 000 disagreements)
_EPS = 1e-9


class SamplingSequence:
    """The betting confidence sequence of one finite population's mean (module docstring).

    Args:
        population: N, the items that can be drawn.
        low, high: the range of one item's value (reviews: -1 and +1).
        alpha: the error level the stakes are tuned for (any level can be read off afterwards).

    Raises:
        ValueError: a population below 1, or ``low >= high``.
    """

    def __init__(self, population: int, low: float = -1.0, high: float = 1.0, alpha: float = 0.05) -> None:
        if isinstance(population, bool) or int(population) != population or population < 1:
            raise ValueError(f"a population is a whole number >= 1, not {population!r}")
        if not (math.isfinite(low) and math.isfinite(high) and low < high):
            raise ValueError(f"need finite low < high, got {low}, {high}")
        if not 0.0 < alpha < 1.0:
            raise ValueError(f"alpha must lie in (0, 1), not {alpha}")
        self.population = int(population)
        self.low, self.high, self.alpha = float(low), float(high), float(alpha)
        points = 2 * self.population + 1
        self.exact = points <= EXACT_GRID
        self.grid = np.linspace(0.0, 1.0, points if self.exact else EXACT_GRID)
        self.count = 0
        self._sum = 0.0  # of x so far
        self._squares = 0.0  # of (x_i - xbar_i)^2, for the plug-in variance
        self._log_plus = np.zeros_like(self.grid)  # of the mixture: the hedged and the bold bettor's
        self._log_hedged = np.zeros_like(self.grid)
        self._log_bold = np.zeros_like(self.grid)  # -inf once an answer went against "above m"
        self.bold = float(BOLD)  # read once: a sequence keeps the mixture it started with
        self._log_minus = np.zeros_like(self.grid)
        self._possible = np.ones(self.grid.shape, dtype=bool)
        self.values: list[float] = []  # in their own units, in order (for replay and saving)

    @property
    def exhausted(self) -> bool:
        """Every item was drawn: the mean is known exactly."""
        return self.count >= self.population

    def _stake(self) -> float:
        """The plug-in stake before hedging (the same for every candidate mean)."""
        t = self.count + 1
        variance_t = 0.25 + self._squares  # s2_{t-1} * t
        return math.sqrt(2.0 * math.log(1.0 / self.alpha) / (variance_t * math.log1p(t)))

    def update(self, value: float) -> None:
        """Add the value of the next item drawn.

        Raises:
            ValueError: the value is not finite or lies outside ``[low, high]``, or every item
                was drawn already.
        """
        value = float(value)
        if not (math.isfinite(value) and self.low <= value <= self.high):
            raise ValueError(f"value {value!r} lies outside [{self.low}, {self.high}]")
        if self.exhausted:
            raise ValueError(f"all {self.population} items were drawn already")
        x = min(max((value - self.low) / (self.high - self.low), 0.0), 1.0)
        remaining = self.population - self.count
        conditional = (self.population * self.grid - self._sum) / remaining
        self._possible &= (conditional >= -_EPS) & (conditional <= 1.0 + _EPS)
        conditional = np.clip(conditional, 0.0, 1.0)
        stake = self._stake()
        plus = np.minimum(stake, HEDGE / np.maximum(conditional, _EPS))
        minus = np.minimum(stake, HEDGE / np.maximum(1.0 - conditional, _EPS))
        self._log_hedged += np.log1p(plus * (x - conditional))
        if self.bold > 0.0:  # stake 1 / m_t: the factor is x / m_t, 0 on an answer below m_t
            with np.errstate(divide="ignore"):
                self._log_bold += np.log(np.maximum(x, 0.0) / np.maximum(conditional, _EPS))
            self._log_plus = np.logaddexp(
                math.log1p(-self.bold) + self._log_hedged, math.log(self.bold) + self._log_bold
            )
        else:
            self._log_plus = self._log_hedged.copy()
        self._log_minus += np.log1p(-minus * (x - conditional))
        self.count += 1
        self._sum += x
        xbar = (0.5 + self._sum) / (self.count + 1)
        self._squares += (x - xbar) ** 2
        self.values.append(value)
        if self.exhausted:  # the mean is known: only it stays possible
            mean = self._sum / self.population
            self._possible &= np.abs(self.grid - mean) <= (0.25 / self.population if self.exact else 1.0)
        else:  # the total lies between what was drawn and that plus every item left at its highest
            ahead = (self.population * self.grid - self._sum) / (self.population - self.count)
            self._possible &= (ahead >= -_EPS) & (ahead <= 1.0 + _EPS)

    # -- reading -----------------------------------------------------------------------------
    def _to_units(self, m: float) -> float:
        return self.low + (self.high - self.low) * m

    def _from_units(self, value: float) -> float:
        return (value - self.low) / (self.high - self.low)

    def lower(self, alpha: float) -> float:
        """One-sided ``1 - alpha`` lower bound on the population mean, valid at every time at once."""
        kept = self._possible & (self._log_plus < math.log(1.0 / alpha))
        if not kept.any():
            return self.high
        first = int(np.argmax(kept))
        if not self.exact and first > 0:
            first -= 1  # a mean between two grid points is never lost
        return self._to_units(float(self.grid[first]))

    def upper(self, alpha: float) -> float:
        """One-sided ``1 - alpha`` upper bound on the population mean, valid at every time at once."""
        kept = self._possible & (self._log_minus < math.log(1.0 / alpha))
        if not kept.any():
            return self.low
        last = int(len(kept) - 1 - np.argmax(kept[::-1]))
        if not self.exact and last < len(kept) - 1:
            last += 1
        return self._to_units(float(self.grid[last]))

    def e_value(self, null: float = 0.0) -> float:
        """The evidence against "the mean is at most ``null``": the capital ``K+`` at ``null``.

        Its expectation is at most 1 under that null at any stopping time (module docstring),
        so it can be combined with other certificates' e-values (e-BH). Infinite once the draws
        make every mean up to ``null`` impossible.
        """
        m0 = self._from_units(null)
        at = int(np.searchsorted(self.grid, m0 - _EPS))
        at = min(at, len(self.grid) - 1)
        if not self.exact and at > 0 and self.grid[at] > m0 + _EPS:
            at -= 1  # the grid point at or below the null: its capital is the larger
        if not self._possible[: at + 1].any():
            return math.inf
        return float(math.exp(min(self._log_plus[at], 700.0)))

    def log_evidence_by_total(self) -> np.ndarray:
        """``log K+`` against each possible population *total* of the values (``-1``/``+1`` units:
        index ``T + N`` holds the evidence against "the values sum to ``T``"); ``inf`` where the
        draws make that total impossible. Used to combine blocks sampled apart
        (:mod:`engine.review.union`). On a coarse grid (populations above ``EXACT_GRID``) each
        total takes the capital of the grid mean at or above it (the capital falls as the mean
        rises, so this never overstates the evidence) and is impossible only when both grid
        means around it are.

        Only for the default range ``[-1, +1]`` (reviews).
        """
        if (self.low, self.high) != (-1.0, 1.0):
            raise ValueError("totals are defined for values in [-1, +1]")
        n = self.population
        if self.exact:
            return np.where(self._possible, self._log_plus, np.inf)
        means = (np.arange(-n, n + 1) / n + 1.0) / 2.0  # each total's mean of x
        above = np.minimum(np.searchsorted(self.grid, means - _EPS), len(self.grid) - 1)
        below = np.maximum(above - 1, 0)
        possible = self._possible[above] | self._possible[below]
        return np.where(possible, self._log_plus[above], np.inf)

    @property
    def mean(self) -> float:
        """The mean of the values drawn so far (nan before the first)."""
        return math.fsum(self.values) / len(self.values) if self.values else math.nan
