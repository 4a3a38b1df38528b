"""The ladder of one site: which rule decides its images, and the certificates that moved it.

Per site (a folder or slide the clinician loaded; a site group when nobody said) the rules form
a ladder (``docs/review-certificates.md``):

* **A0**, the source model's own decisions;
* **A1**, the label-free operating point reported without review — only where the method runs
  with ``report_operating_point`` on (off by default: *review first*); then a site's images are
  decided by its *latest* threshold; by default every reported threshold is 0 and A1 decides as A0;
* **candidates** (``engine.methods.idipt_plus``: ``fit``, ``shift``, ``prior``, ``guarded`` — the
  operating point once its guards accept it — each a threshold on the source margin, and
  ``prompted``, I-DiPT's own decision), computed beside the rule in use and **never reported
  until a certificate shows them better on this site**.

A :class:`~engine.review.comparison.Comparison` is one certificate, tested at
:meth:`LadderRule.level` for the j-th comparison ever started at the site: ``0.9 alpha`` for the
first (five right answers in a row certify it; issue 39, item 2), then the rest halved along the
ladder, so the whole ladder errs at most ``alpha`` (an index is never reused, whatever is
undone). Each review gives ``z = 1[candidate right] - 1[rule right]``:

* **A1 against A0** (only where A1 changed a decision): *verified* when the lower bound on the
  mean of ``z`` is above 0; *reverted* (the site goes back to the source model's decisions) when,
  with at least ``min_reviews`` reviews, the upper bound shows harm at ``1 - alpha_j``, or the
  upper bound at the revert level shows a harm above ``tolerance`` of the site's images.
* **a candidate against the rule in use**: *promoted* when the lower bound is above 0; *not
  better* when the upper bound is at or below 0, or after ``patience`` reviews without being
  right more often (the next candidate is tried).

**Coverage** (:mod:`engine.review.union`). A promoted candidate decides an image only where its
certificate covers it. Images that arrive after its first block are covered by extension blocks
and, as far as the evidence reaches, counted at their worst; until then they are *provisional*:
:meth:`SiteLadder.shown` gives the candidate's call (what a reader sees while the folder arrives,
marked provisional), :meth:`SiteLadder.certified` the decision of the rule below it (what reports
say). An extension block is covered when the blocks up to it are certified together, and stopped
when it shows no gain (its upper bound at or below 0, or ``extension_patience`` reviews without
the candidate right more often, or every one reviewed without a certificate): the candidate then
shows no image beyond its coverage. The queue (:meth:`SiteLadder.open_next`) extends the coverage
of the rules in use, lowest first, before it starts the next candidate, and starts a candidate
only on images the rules below it cover.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from engine.review import extrapolation, fitted, probe, union
from engine.review.comparison import (
    COVERED,
    GUARDED,
    LABEL_FREE,
    NOT_BETTER,
    OPEN,
    PROMOTED,
    PROMPTED,
    REVERTED,
    SOURCE_RULE,
    STOPPED,
    VERIFIED,
    Block,
    Comparison,
)
from engine.review.images import PROMPTED_PENDING, SiteImages, rule_decisions, site_seed
from engine.review.sampling import SamplingSequence
from engine.vocabulary import Rule

# a threshold fitted to the answers first (whenever answers show one), then the label-free
# candidates (issue 39; chosen on the sixth suite's streams, docs/review-certificates.md)
DEFAULT_CANDIDATES = (Rule.ANSWERS, Rule.FIT, Rule.SHIFT, Rule.PRIOR, GUARDED, PROMPTED)

__all__ = [
    "COVERED",
    "DEFAULT_CANDIDATES",
    "GUARDED",
    "LABEL_FREE",
    "NOT_BETTER",
    "OPEN",
    "PROMOTED",
    "PROMPTED",
    "REVERTED",
    "SOURCE_RULE",
    "STOPPED",
    "VERIFIED",
    "Block",
    "Comparison",
    "LadderRule",
    "SiteImages",
    "SiteLadder",
    "site_seed",
]


@dataclass(frozen=True)
class LadderRule:
    """How the ladder's comparisons are tested (frozen before any evaluation; see the module)."""

    alpha: float = 0.05  # the whole ladder of one site errs at most this
    revert_alpha: float = 0.25  # the revert level's error (75 %), as engine.review.rule
    tolerance: float = 0.01  # harm tolerated, share of the site's images
    min_reviews: int = 3  # reviews before A1 can be reverted
    patience: int = 3  # reviews after which a candidate that has not been right more often is given up
    extension_patience: int = 8  # the same for a promoted candidate's later block
    candidates: tuple[str, ...] = DEFAULT_CANDIDATES  # tried in this order (Rule identifiers)
    refits: int = 3  # comparisons a threshold fitted to the answers may have (each on more answers)
    # with no fit inside what was sampled: the last promoted threshold's move, times this (0: off)
    step: float = 1.0
    # the share of alpha the first comparison is given (0.5: alpha / 2**j for all); 0.9: five right
    # answers in a row certify it (issue 39 item 2, docs/review-certificates.md)
    first_share: float = 0.9
    # a promoted comparison's level goes on to the next one when the site is complete (the
    # fallback procedure; SiteLadder.start, docs/review-certificates.md "A level passed on"); off:
    # the comparison that gave it is never extended, so a folder that grows after its review
    # would keep its later images from every certificate
    pass_level: bool = False
    # answers drawn uniformly (strata: one from each of ``probe`` runs along the margin) before any
    # comparison, that only fit the threshold tried first (issue 39; 0: off). Lab only
    probe: int = 0
    probe_strata: bool = False

    def level(self, j: int) -> float:
        """The error of the j-th comparison (1-based): ``alpha * first_share`` for the first, then
        the rest halved along the ladder (``alpha / 2**j`` for every j with the default share);
        the levels add up to at most ``alpha``."""
        if j <= 1:
            return self.alpha * self.first_share
        return self.alpha * (1.0 - self.first_share) / 2.0 ** (j - 1)


class SiteLadder:
    """One site's ladder: the rule in use and every comparison so far (module docstring).

    Args:
        site: the site's key (its random orders are seeded by it).
        rule: the testing rule (:class:`LadderRule`'s defaults when None).
        seed: the run's seed.
    """

    def __init__(self, site: str, rule: LadderRule | None = None, seed: int = 0) -> None:
        self.site = site
        self.rule = rule if rule is not None else LadderRule()
        self.seed = seed
        self.comparisons: list[Comparison] = []
        self.current: Rule = LABEL_FREE  # the rule in use: LABEL_FREE, SOURCE_RULE or a candidate
        self.current_threshold = math.nan
        self.current_other = -1  # the class the rule in use calls the images it moves (-1: their own)
        self.next_index = 1  # the index the next comparison gets (never reused)
        self.frozen: list[tuple[Comparison, int]] = []  # blocks frozen, (comparison, block number)
        self._undo_start = 0  # comparisons before the last start (what discard restores)
        self.answers: dict[int, int] = {}  # position -> class, every answer a block used
        self.complete = False  # every image of the site is decided (the caller says so): see start
        # the last start / look ahead (plan) waits for I-DiPT's decisions, still to be made
        self.waits_for_prompted = self.would_wait = self._waits = False

    # -- the rules in use ----------------------------------------------------------------------
    @property
    def uses_prompted(self) -> bool:
        """I-DiPT's prompted candidate was tested (its decisions are needed for every image then)."""
        return any(c.candidate == PROMPTED for c in self.comparisons)

    @property
    def base(self) -> tuple[Rule, float]:
        """The rule before any promotion: A1 (the label-free decisions), or A0 after a revert."""
        reverted = any(c.candidate == LABEL_FREE and c.verdict == REVERTED for c in self.comparisons)
        return (SOURCE_RULE if reverted else LABEL_FREE), math.nan

    def chain(self) -> list[Comparison]:
        """The promoted comparisons, in order: each tested against the one before it."""
        return [c for c in self.comparisons if c.verdict == PROMOTED]

    def coverage(self, c: Comparison, images: SiteImages) -> int:
        """The images ``c``'s certificate covers among ``images`` (0 unless promoted)."""
        if c.verdict != PROMOTED or not c.blocks:
            return 0
        n = len(images)
        later = [p for p in np.flatnonzero(c.after != c.before).tolist() if p >= c.blocks[0].end]
        if n > c.frozen:
            rest = images
            below = rule_decisions(rest, *c.below, n, c.below_other)[c.frozen :]
            mine = rule_decisions(rest, c.candidate, c.threshold, n, c.other)[c.frozen :]
            later += (np.flatnonzero(below != mine) + c.frozen).tolist()
        return union.coverage(
            [b.sequence for b in c.blocks], [b.end for b in c.blocks], later, n, c.alpha, c.known_total
        )

    def covered_changes(self, c: Comparison, images: SiteImages) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(positions, before, after)``: the disagreements among the images ``c``'s verdict speaks
        for (a promoted candidate's coverage, else its first block), with both rules' decisions:
        its claim is that the candidate is better on them taken together."""
        n = self.coverage(c, images) if c.verdict == PROMOTED else c.population
        frozen = min(n, c.frozen)
        before = np.concatenate(
            [c.before[:frozen], rule_decisions(images, *c.below, n, c.below_other)[frozen:]]
        )
        after = np.concatenate(
            [c.after[:frozen], rule_decisions(images, c.candidate, c.threshold, n, c.other)[frozen:]]
        )
        at = np.flatnonzero(before != after)
        return at, before[at], after[at]

    def _walk(
        self, images: SiteImages, certified_only: bool
    ) -> tuple[np.ndarray, list[tuple[Rule, float, int]]]:
        """Every image's decision along the chain, and the layers: the base rule over every image,
        then each chain member with its reach (the first images it decides): its coverage, or
        (shown, while it extends) every image the one below reaches."""
        n = len(images)
        base = self.base
        out = rule_decisions(images, *base, n)
        reach, layers = n, [(base[0], base[1], n)]
        for c in self.chain():
            c.coverage = self.coverage(c, images)
            if certified_only or not c.extending:
                reach = min(reach, c.coverage)
            else:  # shown beyond its coverage while later images look like the covered ones
                reach = min(reach, self.alike(c, images))
            if reach > 0:
                out[:reach] = rule_decisions(images, c.candidate, c.threshold, reach, c.other)
            layers.append((c.candidate, c.threshold, reach))
        return out, layers

    def alike(self, c: Comparison, images: SiteImages, delta: float = 0.05) -> int:
        """How far ``c``'s call is shown beyond its coverage, provisionally
        (:func:`engine.review.extrapolation.alike`)."""
        return extrapolation.alike(c, images, delta)

    def layers(self, images: SiteImages, shown: bool = False) -> list[tuple[Rule, float, int]]:
        """``(rule, threshold, reach)`` from the base up: image ``i`` is decided by the last layer
        whose reach exceeds ``i`` (certified; ``shown``: as a reader is shown it)."""
        return self._walk(images, certified_only=not shown)[1]

    def decide(self, images: SiteImages, upto: int | None = None) -> np.ndarray:
        """The certified decisions of the site's first ``upto`` images (all: None): each by the
        highest rule in use whose certificate covers it (:meth:`certified`)."""
        out = self.certified(images)
        return out if upto is None else out[:upto]

    def certified(self, images: SiteImages) -> np.ndarray:
        """What reports say: each image by the highest promoted rule whose certificate covers it."""
        return self._walk(images, certified_only=True)[0]

    def shown(self, images: SiteImages) -> np.ndarray:
        """What a reader is shown: the rules in use, provisional beyond their coverage."""
        return self._walk(images, certified_only=False)[0]

    def reach(self, images: SiteImages) -> int:
        """The images every rule in use covers (a new candidate is started on these only)."""
        return self._walk(images, certified_only=True)[1][-1][2]

    def upcoming(self, images: SiteImages) -> tuple[Rule, np.ndarray, np.ndarray] | None:
        """What :meth:`start` would freeze on ``images`` now, without starting it: the candidate, the
        decisions it is tested against and its own (None: a comparison is open, or none is next)."""
        if self.active is not None:
            return None
        plan, self.would_wait = self._plan(images.head(self.reach(images))), self._waits
        return None if plan is None else (plan[1][0], plan[1][2], plan[1][3])

    # -- starting comparisons and blocks -------------------------------------------------------
    @property
    def active(self) -> Comparison | None:
        """The comparison with a block waiting for reviews (None: none)."""
        for c in reversed(self.comparisons):
            if c.open_block is not None:
                return c
        return None

    def _plan(
        self, images: SiteImages
    ) -> tuple[list[Comparison], tuple[Rule, float, np.ndarray, np.ndarray, int]] | None:
        """The candidates with nothing to test before the next one that has, and that one's
        ``(name, threshold, before, after, other)`` (None: none has anything to test, or I-DiPT's
        is reached before its decisions are made: ``_waits``; ``other``: the class a threshold
        fitted to the answers calls, :func:`fitted.fitted_rule`)."""
        n, self._waits = len(images), False
        if n == 0:
            return None
        tried = {c.candidate for c in self.comparisons}
        waiting = images.prompted is not None and PROMPTED_PENDING in images.prompted[:n]
        if self._refit_allowed():
            tried.discard(Rule.ANSWERS)
        steps: list[tuple[Rule, float]] = []
        if LABEL_FREE not in tried and self.current == LABEL_FREE:
            steps.append((LABEL_FREE, math.nan))
        for name in map(Rule, self.rule.candidates):
            if name in tried or (name == self.current and name != Rule.ANSWERS):
                continue
            if name == PROMPTED:
                if waiting or (images.prompted is not None and bool((images.prompted[:n] >= 0).any())):
                    steps.append((name, math.nan))
                if waiting:
                    break  # reached: the plan waits for its decisions, then goes on
            elif name == Rule.ANSWERS:
                steps.append((name, math.nan))  # fitted below, against the rule in use
            elif (value := images.candidate_at(name, n)) is not None:  # a threshold, or nan: decided
                steps.append((name, value))
        rule_in_use = self.decide(images, n)
        empties: list[Comparison] = []
        for name, threshold in steps:
            if name == PROMPTED and waiting:
                self._waits = True  # tested once its decisions are made
                return None
            other = -1
            if name == Rule.ANSWERS:
                threshold, other = self._fit(images, rule_in_use)
                if not math.isfinite(threshold):
                    continue  # nothing fitted yet: not tried, so it may be once answers show something
            if name not in (PROMPTED, LABEL_FREE, *images.decided) and not math.isfinite(threshold):
                continue
            if name == LABEL_FREE:  # A1 is the candidate, A0 the rule it is tested against
                before, after = images.source[:n].copy(), rule_in_use
            else:
                before, after = rule_in_use, rule_decisions(images, name, threshold, n, other)
            if not np.any(after != before):
                empties.append(Comparison(0, name, threshold, n, before, after, 0.0, verdict=NOT_BETTER))
                continue
            return empties, (name, threshold, before, after, other)
        return None

    def _refit_allowed(self) -> bool:
        """Whether a threshold fitted to the answers may be tried again: fewer tries than
        ``rule.refits``, none open, and answers given since the last one was fitted (its own
        included: a refit against it, once it is in use, is fitted on more)."""
        tries = [c for c in self.comparisons if c.candidate == Rule.ANSWERS]
        if not tries or len(tries) >= self.rule.refits:
            return False
        last = tries[-1]
        return last.verdict != OPEN and len(self.answers) > last.answers_at

    def _fit(self, images: SiteImages, in_use: np.ndarray) -> tuple[float, int]:
        """The threshold fitted to the answers so far against ``in_use`` and the class it calls
        (nan: none; fitted.py); kept only where some disagreement with the rule in use is still
        unanswered."""
        n = len(images)
        drawn = fitted.inclusion(  # a probe drew from every image it was frozen on
            n,
            (
                (list(range(c.population)) if c.probe else b.order, len(b.reviewed))
                for c in self.comparisons
                for b in c.blocks
            ),
        )
        classes = None if images.classes is None else images.classes[:n]
        threshold, other = fitted.fitted_rule(images.margin[:n], in_use, self.answers, drawn, classes)
        if not math.isfinite(threshold) and self.rule.step > 0:
            threshold, other = self._step(), self.current_other
        tried = [(c.threshold, c.other) for c in self.comparisons if c.candidate == Rule.ANSWERS]
        if not math.isfinite(threshold) or any(abs(threshold - t) <= 1e-9 and other == o for t, o in tried):
            return math.nan, -1  # (a threshold tried once is not tried again)
        changed = np.flatnonzero(images.calls(threshold, n, other) != in_use)
        return (threshold, other) if any(int(p) not in self.answers for p in changed) else (math.nan, -1)

    def _step(self) -> float:
        """The threshold in use moved once more by as much as its promotion moved it (nan: the
        rule in use is not a threshold promoted over one): where the answers showed a gain up to
        the edge of what was sampled, the next stretch is the one to ask about."""
        chain = self.chain()
        if not chain or not chain[-1].candidate.is_threshold or not math.isfinite(chain[-1].threshold):
            return math.nan
        top = chain[-1]
        below = top.below[1] if math.isfinite(top.below[1]) else 0.0
        move = self.rule.step * (top.threshold - below)
        return top.threshold + move if move != 0 else math.nan

    def start(
        self,
        images: SiteImages,
        index: int | None = None,
        candidate: str | None = None,
        level: float | None = None,
    ) -> Comparison | None:
        """Freeze the next comparison on ``images`` (the images processed so far that the rules in
        use cover); None: nothing left to test, a comparison is open, or (``candidate`` given, as
        when a recorded start is replayed) the next candidate is another or ``level`` (the recorded
        error; None: ``rule.level(j)``) is not one it may have. ``index``: the recorded index.

        A new comparison on a :attr:`complete` site right after a promoted one with one block
        covering every image is tested at its own level plus that one's, which is then never
        extended (the fallback procedure: docs/review-certificates.md, "A level passed on")."""
        if self.active is not None:
            return None
        everything = len(images)
        images = images.head(self.reach(images))  # tested only where the rules in use are certified
        n = len(images)
        if self.rule.probe > 0 and not self.comparisons:
            return self._probe(images, self.rule.probe) if candidate is None else None
        before_it = self._passing(n)
        plan = self._plan(images)
        self.waits_for_prompted = self._waits  # a start waits (a look ahead does not)
        if plan is None or (candidate is not None and plan[1][0] != candidate):
            return None
        j = self.next_index if index is None else int(index)
        own = self.rule.level(j)
        if candidate is None:  # a new start
            passed = before_it if self.complete and n == everything else None
        elif level is None or abs(level - own) <= 1e-12 * own:
            passed = None  # a recorded start at its own level (every record before levels were kept)
        elif before_it is not None and abs(level - (own + before_it.alpha)) <= 1e-12 * level:
            passed = before_it
        else:
            return None  # a recorded level this comparison may not have
        empties, (name, threshold, before, after, other) = plan
        self._undo_start = len(self.comparisons)
        self.comparisons += empties
        self.next_index = max(self.next_index, j + 1)
        alpha = own + (passed.alpha if passed is not None else 0.0)
        below = (SOURCE_RULE, math.nan) if name == LABEL_FREE else (self.current, self.current_threshold)
        if below[0] == LABEL_FREE:
            below = self.base
        c = Comparison(j, name, threshold, n, before, after, alpha, below=below, answers_at=len(self.answers))
        c.other, c.below_other = other, (self.current_other if below[0] == self.current else -1)
        if passed is not None:
            c.passed_from, passed.extending = passed.index, False
        changed = np.flatnonzero(after != before)
        known = [int(i) for i in changed if int(i) in self.answers] if name == Rule.ANSWERS else []
        if known:  # answers the threshold was fitted on: counted exactly, never sampled (fitted.py)
            changed = np.asarray([i for i in changed if int(i) not in self.answers], dtype=np.int64)
        rng = np.random.default_rng([site_seed(self.seed, self.site), j, n])
        c.blocks.append(
            Block(
                0,
                n,
                [int(i) for i in rng.permutation(changed)],
                SamplingSequence(changed.size, alpha=alpha),
                known=known,
                known_total=sum(
                    int(after[p] == self.answers[p]) - int(before[p] == self.answers[p]) for p in known
                ),
            )
        )
        self.comparisons.append(c)
        self.frozen.append((c, 0))
        return c

    def _probe(self, images: SiteImages, size: int) -> Comparison | None:
        """Start the uniform sample of ``size`` images (``engine.review.probe``)."""
        n, strata = len(images), self.rule.probe_strata
        rng = np.random.default_rng([site_seed(self.seed, self.site), 0, n])
        c = probe.sample(self.decide(images, n), size, rng, images.margin[:n] if strata else None)
        if c is not None:
            self._undo_start = len(self.comparisons)
            self.comparisons.append(c)
            self.frozen.append((c, 0))
        return c

    def extend(self, c: Comparison, images: SiteImages, end: int) -> Block | None:
        """Freeze ``c``'s images ``[c.frozen, end)`` as its next block (None: no disagreement there,
        the images are frozen without a block to review; or nothing to freeze)."""
        start = c.frozen
        if end <= start or end > len(images):
            return None
        before = rule_decisions(images, *c.below, end, c.below_other)[start:]
        after = rule_decisions(images, c.candidate, c.threshold, end, c.other)[start:]
        c.before, c.after = np.concatenate([c.before, before]), np.concatenate([c.after, after])
        changed = np.flatnonzero(after != before) + start
        if changed.size == 0:
            return None
        b = len(c.blocks)
        rng = np.random.default_rng([site_seed(self.seed, self.site), c.index, start, end, b])
        block = Block(
            start,
            end,
            [int(i) for i in rng.permutation(changed)],
            SamplingSequence(changed.size, alpha=c.alpha),
        )
        c.blocks.append(block)
        self.frozen.append((c, b))
        return block

    def _passing(self, population: int) -> Comparison | None:
        """The last comparison started, if promoted with one block on exactly ``population`` images."""
        last = next((c for c in reversed(self.comparisons) if c.index > 0), None)
        if last is None or not self.rule.pass_level or last.candidate == LABEL_FREE:
            return None
        ok = last.verdict == PROMOTED and len(last.blocks) == 1 and last.population == population
        return last if ok else None

    def discard(self, c: Comparison) -> None:
        """Take back the comparison the last :meth:`start` made (a recorded start that did not match)."""
        if self.comparisons and self.comparisons[-1] is c:
            for earlier in self.comparisons if c.passed_from else ():
                if earlier.index == c.passed_from:
                    earlier.extending = True  # it had one block and was extending until c took its level
            self.comparisons = self.comparisons[: self._undo_start]
            self.frozen = [f for f in self.frozen if f[0] is not c]

    def discard_block(self, c: Comparison) -> None:
        """Take back ``c``'s last extension block (a recorded block that did not match)."""
        if len(c.blocks) > 1:
            block = c.blocks.pop()
            c.before, c.after = c.before[: block.start], c.after[: block.start]
            self.frozen = [f for f in self.frozen if not (f[0] is c and f[1] == len(c.blocks))]

    def below_reach(self, c: Comparison, images: SiteImages) -> int:
        """The images the rules in use below ``c`` cover (where the rule ``c`` is tested against is certified)."""
        reach = len(images)
        for m in self.chain():
            if m is c:
                break
            reach = min(reach, self.coverage(m, images))
        return reach

    def lagging(self, images: SiteImages) -> tuple[Comparison, int] | None:
        """The lowest rule in use whose coverage lags the images it could cover, and how far
        those reach (None: every rule in use covers what the one below it covers)."""
        reach = len(images)
        for c in self.chain():
            if not c.extending:
                return None
            if c.open_block is not None:
                return None
            if self.coverage(c, images) < reach and c.frozen < reach:
                return c, reach
            reach = min(reach, self.coverage(c, images))
        return None

    def open_next(self, images: SiteImages) -> Comparison | None:
        """Open what the queue asks about next (module docstring): a block of the lowest rule in
        use whose coverage lags, else the next candidate on the images every rule in use covers."""
        for _ in range(len(self.comparisons) + 1):  # each pass freezes a lagging rule up to its reach
            lag = self.lagging(images)
            if lag is None:
                break
            c, reach = lag
            if self.extend(c, images, reach) is not None:
                return c
        return self.start(images)

    # -- reviews -------------------------------------------------------------------------------
    def review(self, labels: Mapping[int, int], images: SiteImages | None = None) -> list[Comparison]:
        """Use the labels known so far (position in arrival order -> class) in the open block's
        order, as far as they reach; returns the comparisons whose verdict or coverage changed."""
        decided: list[Comparison] = []
        c = self.active
        while c is not None:
            block = c.open_block
            position = None if block is None else block.next_position
            if block is None or position is None or position not in labels:
                break
            y = int(labels[position])
            self.answers[position] = y
            z = int(c.after[position] == y) - int(c.before[position] == y)
            block.sequence.update(z)
            block.reviewed.append(position)
            if self._judge(c, block):
                decided.append(c)
                c = self.active
        return decided

    def _judge(self, c: Comparison, block: Block) -> bool:
        """Settle ``block`` of ``c`` if its reviews allow; True when something was settled."""
        if c.probe:  # nothing to judge: it ends when its sample is answered
            if block.next_position is None:
                c.verdict = block.state = NOT_BETTER
            return c.verdict != OPEN
        if block is not c.blocks[0]:
            return self._judge_extension(c, block)
        r = self.rule
        lower, upper = c.sequence.lower(c.alpha), c.sequence.upper(c.alpha)
        exhausted = c.sequence.exhausted
        if c.candidate == LABEL_FREE:
            harm = c.disagreements / max(c.population, 1) * -c.sequence.upper(r.revert_alpha)
            if lower > 0:
                c.verdict = VERIFIED
            elif len(block.reviewed) >= r.min_reviews and (upper < 0 or harm > r.tolerance):
                c.verdict = REVERTED
            elif exhausted:  # every disagreement reviewed: the effect is known exactly
                mean = c.sequence.mean
                c.verdict = REVERTED if mean < 0 else VERIFIED if mean > 0 else NOT_BETTER
            if c.verdict == REVERTED:
                self.current, self.current_threshold, self.current_other = SOURCE_RULE, math.nan, -1
        elif c.certified_first():  # a fitted threshold's answered disagreements counted exactly
            c.verdict = PROMOTED
            c.coverage = c.population
            self.current, self.current_threshold, self.current_other = c.candidate, c.threshold, c.other
        elif (
            c.shown_worse_or_equal()
            or exhausted
            or (len(block.reviewed) >= r.patience and c.sequence.mean <= 0)
        ):
            c.verdict = NOT_BETTER
        if c.verdict != OPEN:
            block.state = c.verdict
        return c.verdict != OPEN

    def _judge_extension(self, c: Comparison, block: Block) -> bool:
        upto = c.blocks[: c.blocks.index(block) + 1]
        if union.certified([b.sequence for b in upto], -c.known_total, c.alpha):
            block.state = COVERED
            return True
        seq = block.sequence
        patient = len(block.reviewed) >= self.rule.extension_patience and seq.mean <= 0
        if seq.upper(c.alpha) <= 0 or seq.exhausted or patient:
            block.state, c.extending = STOPPED, False
            return True
        return False

    def reviews(self) -> int:
        return sum(len(c.reviewed) for c in self.comparisons)
