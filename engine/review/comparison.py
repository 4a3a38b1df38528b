"""One certificate of a site's ladder: a comparison, its blocks and the images its verdict covers.

A :class:`Comparison` tests one rule (a candidate) against the rule in use. When it starts, the
candidate's parameters are frozen (a threshold is one number from then on) and so is its first
**block**: the site's images processed so far. The images of a block where the two rules
disagree are put in a random order drawn once, and reviewed in that order (a uniform draw
without replacement, whatever order the images arrived in: :mod:`engine.review.sampling`).

Images keep arriving after a comparison started. Once it is promoted, the candidate decides them
only where a certificate covers them (:mod:`engine.review.union`): later images are covered by
**extension blocks** (each frozen once, on the images that arrived since the block before it,
with its own random order) and, as far as the evidence reaches, by counting the disagreements
nobody sampled yet at their worst. Until then they are *provisional*: shown with the candidate's
call while the folder arrives, reported with the rule below it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from engine.review import union
from engine.review.sampling import SamplingSequence
from engine.vocabulary import BlockEnd, Rule, Verdict

# The names the ladder has always used, as members of the shared vocabulary (engine.vocabulary).
OPEN, VERIFIED, REVERTED, PROMOTED, NOT_BETTER = (
    Verdict.OPEN,
    Verdict.VERIFIED,
    Verdict.REVERTED,
    Verdict.PROMOTED,
    Verdict.NOT_BETTER,
)
COVERED, STOPPED = BlockEnd.COVERED, BlockEnd.STOPPED  # how an extension block ended
SOURCE_RULE, LABEL_FREE = Rule.SOURCE, Rule.LABEL_FREE
PROMPTED = Rule.PROMPTED
GUARDED = Rule.GUARDED  # the label-free operating point as a candidate (the method's default: review first)


@dataclass
class Block:
    """One block of a comparison: a run of images frozen at once, reviewed in its own random order.

    Attributes:
        start, end: the images it was frozen on (positions in the site's arrival order).
        order: its disagreements, as positions, in review order (drawn once).
        sequence: the confidence sequence of the mean of ``z`` over its disagreements.
        reviewed: positions whose review was used, in order.
        state: :data:`OPEN`; the first block ends as its comparison's verdict, a later one
            :data:`COVERED` (certified with the blocks before it) or :data:`STOPPED`.
        known: disagreements answered before the block was frozen, counted exactly and not
            sampled (the first block of a threshold fitted to those answers, ``engine.review.fitted``).
        known_total: the sum of ``z`` over ``known``.
    """

    start: int
    end: int
    order: list[int]
    sequence: SamplingSequence
    reviewed: list[int] = field(default_factory=list)
    state: Verdict | BlockEnd = OPEN
    known: list[int] = field(default_factory=list)
    known_total: int = 0

    @property
    def next_position(self) -> int | None:
        """The next image to review (None: decided, or every disagreement reviewed)."""
        if self.state != OPEN or len(self.reviewed) >= len(self.order):
            return None
        return self.order[len(self.reviewed)]


@dataclass
class Comparison:
    """One certificate of a site's ladder (module docstring).

    Attributes:
        index: j, its place among the comparisons ever started at this site (1-based, never
            reused); tested at ``alpha = rule.level(j)`` (plus a level passed on to it:
            ``passed_from``), every block of it at that one level.
        candidate: what is tested: :data:`LABEL_FREE` (A1 against A0) or a candidate's name.
        threshold: the candidate's frozen threshold (nan: not a threshold candidate).
        population: the images its first block was frozen on (the first ``population``).
        before: the decisions of the rule it is tested against, images ``[0, frozen)``.
        after: the candidate's decisions there.
        blocks: the first block, then the extension blocks.
        below: ``(rule, threshold)`` it is tested against (the rule in use when it started).
        verdict: :data:`OPEN`, :data:`VERIFIED`, :data:`REVERTED`, :data:`PROMOTED` or :data:`NOT_BETTER`.
        coverage: the images its certificate covers (promoted; the ladder keeps it current).
        extending: False once an extension block stopped: the candidate then decides no image
            beyond its coverage, not even provisionally.
        answers_at: the answers its ladder had used when it started.
        probe: a first uniform sample of the site's images, not a comparison
            (``LadderRule.probe``): its block's order is the sample, its answers only fit.
        passed_from: the comparison just before it, promoted, whose level it was given on top of
            its own (``alpha`` is the sum; 0: none): that one covers only the images it was tested
            on and is never extended (``SiteLadder.start``, the fallback procedure).
    """

    index: int
    candidate: Rule
    threshold: float
    population: int
    before: np.ndarray
    after: np.ndarray
    alpha: float
    blocks: list[Block] = field(default_factory=list)
    below: tuple[Rule, float] = (SOURCE_RULE, float("nan"))
    verdict: Verdict = OPEN
    coverage: int = 0
    extending: bool = True
    answers_at: int = 0  # answers the ladder had used when it started (a fitted threshold's)
    passed_from: int = 0  # the index of the comparison whose level it took on top of its own (0: none)
    probe: bool = False  # a first uniform sample (index 0, the rule in use on both sides)
    # more than two classes: the class a threshold fitted to the answers calls the images it
    # moves from their reference class, and the rule below's (-1: each image its own other class)
    other: int = -1
    below_other: int = -1

    # -- the first block (what the comparison's verdict is about) ------------------------------
    @property
    def order(self) -> list[int]:
        return self.blocks[0].order if self.blocks else []

    @property
    def sequence(self) -> SamplingSequence:
        return self.blocks[0].sequence if self.blocks else SamplingSequence(1)

    @property
    def reviewed(self) -> list[int]:
        """Every review used, block by block."""
        return [p for b in self.blocks for p in b.reviewed]

    @property
    def disagreements(self) -> int:
        """The disagreements of its first block (0: nothing to test), answered ones included."""
        if self.probe:
            return 0
        return len(self.order) + (len(self.blocks[0].known) if self.blocks else 0)

    @property
    def known_total(self) -> int:
        """The sum of ``z`` over the disagreements answered before it started (counted exactly)."""
        return self.blocks[0].known_total if self.blocks else 0

    def certified_first(self) -> bool:
        """Whether its first block, answered part included, is certified better at its level."""
        if not self.blocks or not self.blocks[0].known:
            return self.sequence.lower(self.alpha) > 0
        return union.certified([self.sequence], -self.known_total, self.alpha)

    def shown_worse_or_equal(self) -> bool:
        """Whether its first block's upper bound, answered part included, is at or below 0."""
        upper = self.sequence.upper(self.alpha)
        if not self.blocks or not self.blocks[0].known:
            return upper <= 0
        return upper * len(self.order) + self.known_total <= 0

    @property
    def frozen(self) -> int:
        """The images its blocks were frozen on (the first ``frozen``)."""
        return int(self.before.shape[0])

    @property
    def covered(self) -> int:
        """The images its verdict speaks for: a promoted candidate's coverage, else its first block."""
        return self.coverage if self.verdict == PROMOTED else self.population

    @property
    def open_block(self) -> Block | None:
        """The block waiting for reviews (None: none)."""
        for block in self.blocks:
            if block.next_position is not None:
                return block
        return None

    @property
    def next_position(self) -> int | None:
        block = self.open_block
        return None if block is None else block.next_position

    def e_value(self) -> float:
        """Evidence that the candidate is better on its first block (an e-value)."""
        return self.sequence.e_value(0.0)

    def describe(
        self, total: int, part: str = "", replaced_by: Rule | None = None, label_free: bool = False
    ) -> str:
        """One sentence for people: what the reviews showed about the rule and what it decides
        (levels and bounds: :meth:`details`). ``total``: the site's images now, or its part's, when
        ``part`` names the part of a split folder it is about ("part 2 of 3"); ``replaced_by``: the
        rule a later promotion put in use above this promoted one (it then decides no longer);
        ``label_free``: the method reported label-free decisions here (else A1 is the source model's)."""
        what = self.candidate.words
        answers = len(self.blocks[0].reviewed) if self.blocks else 0
        earlier = len(self.blocks[0].known) if self.blocks else 0
        counted = f"{answers + earlier} answer{'s' if answers + earlier != 1 else ''}"
        if earlier:  # a threshold fitted to answers: those it was fitted on count as given
            counted += f", {earlier} of them given before it was fitted,"
        n, d = self.population, self.disagreements
        scope = f"the {d} image{'s' if d != 1 else ''} it calls otherwise among the first {n}"
        scope += f" of {part}" if part else ""
        where = f"{part} of this folder" if part else "this folder"
        if self.verdict == VERIFIED:
            return f"{what} is better: {counted} showed it on {scope}"
        if self.verdict == PROMOTED and replaced_by is not None:
            return f"{what} was shown better by {counted} on {scope}; {replaced_by.words} replaced it"
        if self.verdict == PROMOTED:
            below = self.below[0] if label_free or self.below[0] != LABEL_FREE else SOURCE_RULE
            return f"{what} decides {where}: {counted} showed it better on {scope}{self._reach(total, below)}"
        if self.verdict == REVERTED:
            return f"{what} was turned back: {counted} showed it does harm on {scope}; {SOURCE_RULE.words} decides"
        if self.verdict == NOT_BETTER:
            return f"{what} was not shown better on {scope} ({counted.rstrip(',')}); it is not used"
        return f"{what} is under review on {scope} ({counted} so far)"

    def details(self) -> str:
        """The statistics behind :meth:`describe`: level, bounds, evidence, the frozen threshold."""
        level = f"{100 * (1 - self.alpha):.1f} %".replace(".0 %", " %")
        reviews = len(self.reviewed)
        if self.sequence.exhausted:
            text = "known exactly (every changed decision reviewed)"
        elif reviews:
            lower, upper = self.sequence.lower(self.alpha), self.sequence.upper(self.alpha)
            text = f"tested at {level}: gain per changed decision between {lower:+.2f} and {upper:+.2f}"
        else:
            text = f"tested at {level}: nothing measured yet"
        if self.passed_from:
            text += f" (its own level and certificate {self.passed_from}'s, passed on when that one was shown better)"
        evidence = self.e_value()
        if math.isfinite(evidence):
            text += f"; evidence (e-value) {evidence:.3g}"
        if self.blocks and self.blocks[0].known:
            k = len(self.blocks[0].known)
            text += (
                f"; {k} changed decision{'s' if k != 1 else ''} answered before it was fitted, counted "
                f"exactly (net {self.known_total:+d}), the bounds are on the {len(self.order)} others"
            )
        if self.candidate.is_threshold and math.isfinite(self.threshold):
            text += f"; threshold {self.threshold:+.3g} on the original model's score margin"
        return text

    def _reach(self, total: int, below: Rule) -> str:
        """What a promoted candidate covers beyond its first block, and what it does not."""
        more = len(self.blocks) - 1
        text = ""
        if self.coverage > self.population:
            blocks = f" (with {more} later block{'s' if more != 1 else ''} answered)" if more else ""
            text = f"; its certificate now covers the first {self.coverage} images{blocks}"
        left = total - max(self.coverage, 0)
        if left > 0:
            images = f"{left} later image{'s' if left != 1 else ''}"
            if self.extending:
                text += (
                    f"; {images} not covered yet: shown with its call provisionally, reported as "
                    f"{below.words} decides them until answers cover them"
                )
            else:
                text += f"; {images} not covered: it was not shown better on them, {below.words} decides them"
        return text
