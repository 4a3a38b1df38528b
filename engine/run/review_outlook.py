"""What decides a site now and what reviewing could change, in counts and class names (issue 38).

One sentence is always in view -- the app's status area and Metrics tab, the PDF's first page,
``f2tta run``'s last line -- and it is made here, from facts read off the site's review
(:class:`engine.run.review.SiteReview`) by :func:`outlook`: the rule that decides each part, what
the certificates changed from the original model's calls (by direction, and how many of those
images the dataset labels as the new class), the images shown provisionally, the comparison under
review with the answers so far, and what the next candidate would change. Nothing here changes
the review (no comparison is started), so it can be read as often as the window wants.

Before any review (the histology demo)::

    The original model decides all 160 images. The best-fit threshold would call 42 of the 160
    images tumor instead of normal; answering about 5 of them in the review queue (Q) shows
    whether it is better.

After a certificate::

    The best-fit threshold decides this folder: your 6 answers showed it is better; 42 images
    changed from normal to tumor, 40 of them tumor in the dataset's labels.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from engine.review.ladder import PROMOTED, REVERTED
from engine.run.review import SiteReview
from engine.run.review_parts import PartRule, ReviewPart, part_label, served, serving_order
from engine.vocabulary import QueueEmpty, Rule

#: About how many answers in the review queue show a site rule better when it clearly is (every
#: answer on its side): what the sentence, the welcome page and the Quick guide promise. Measured,
#: not chosen: tests/test_guide_words.py reviews generated 600-image sites with the engine's own
#: ladder and checks this figure against the answers it took.
ANSWERS_WHEN_CLEARLY_BETTER = 5
#: Where the reviewer answers, as each place says it: the window names its key; ``f2tta run`` says
#: where else the answers come from; a report (the PDF, ``run_config.json``) is read away from the
#: app, at a tumour board, where a key means nothing: it names the queue and the command alone.
IN_THE_APP = "in the review queue (Q)"
FROM_THE_TERMINAL = "in the app's review queue (Q) or with f2tta run --reviews"
IN_A_REPORT = "in the app's review queue or with f2tta run --reviews"
#: Every way the sentence says where to answer (what differs between places, and only that).
WHERE_TO_ANSWER = (IN_THE_APP, FROM_THE_TERMINAL, IN_A_REPORT)


@dataclass(frozen=True)
class Change:
    """Images one rule calls ``after`` where the other called ``before``."""

    before: int
    after: int
    images: int
    labelled: int  # of them, the images the dataset labels
    agree: int  # of those, the images it labels ``after``


@dataclass(frozen=True)
class Step:
    """A rule under review, or the next one the queue would test."""

    rule: Rule
    part: str  # "part 2 of 3" (empty: the site has one part)
    images: int  # the images it is tested on (the first ``images`` of its part)
    changes: tuple[Change, ...]
    answers: int  # answers given on it so far


@dataclass(frozen=True)
class Outlook:
    """The facts of the sentence (:meth:`sentence`)."""

    images: int
    parts: tuple[PartRule, ...]
    answers: int  # answers the rules in use were certified with (else every answer the review used)
    changed: tuple[Change, ...]  # the certified decisions against the original model's
    reverted: Rule | None  # a rule the answers turned back (the original model decides again)
    provisional: int  # images shown with a promoted rule's call that no certificate covers yet
    testing: Step | None  # the comparison under review
    next: Step | None  # what the queue would test next
    nothing: str  # why reviewing cannot change anything (empty: it can)

    def sentence(
        self, classes: Sequence[str], answers: int = ANSWERS_WHEN_CLEARLY_BETTER, where: str = IN_THE_APP
    ) -> str:
        """The plain sentence (``answers``: about how many answers show a rule better when it
        clearly is; ``where``: where the reviewer answers)."""
        if not self.images:
            return "No image of this folder has been processed yet."
        text = self._decider(classes)
        if self.provisional:
            n = self.provisional
            them = "them" if n != 1 else "it"
            ask = (
                f"about {answers} more answers {where} cover {them}"
                if n > answers
                else f"answering {them} {where} covers {them}"
            )
            text += (
                f" {n} image{'s' if n != 1 else ''} that arrived after your answers "
                f"{'are' if n != 1 else 'is'} shown with its call, provisionally; {ask}."
            )
        elif self.testing is not None and self.testing.answers:
            t = self.testing
            left = answers - t.answers
            more = f"about {left} more" if left > 0 else "a few more"
            text += (
                f" {_capital(self._named(t))} would call {_calls(t, classes)}; your {t.answers} "
                f"answer{'s' if t.answers != 1 else ''} so far {'have' if t.answers != 1 else 'has'} not "
                f"shown whether it is better: {more} {where}."
            )
        elif (step := self.testing or self.next) is not None:  # a comparison not answered yet, or the next
            total = sum(c.images for c in step.changes)
            ask = f"about {answers} of them" if total > answers else ("it" if total == 1 else "them")
            text += (
                f" {_capital(self._named(step))} would call {_calls(step, classes)}; answering {ask} {where} "
                "shows whether it is better."
            )
        elif self.nothing:
            text += f" {self.nothing}"
        return text

    def _named(self, step: Step) -> str:
        """The rule under review in a sentence; a threshold fitted to the answers again, while one
        fitted to fewer answers decides its part, is "a new threshold fitted to all your answers so
        far" (not the name of the rule in use: the sentence then named two rules alike)."""
        if step.rule == Rule.ANSWERS and any(
            p.rule == Rule.ANSWERS and p.part == step.part for p in self.parts
        ):
            return "a new threshold fitted to all your answers so far"
        return step.rule.words

    def _decider(self, classes: Sequence[str]) -> str:
        answers = f"your {self.answers} answer{'s' if self.answers != 1 else ''}"
        if len(self.parts) > 1:
            each = ", ".join(f"{p.part} ({p.images} images) by {p.rule.words}" for p in self.parts)
            text = f"This folder is decided in {len(self.parts)} parts: {each}."
            if self.changed:
                text += f" After {answers}, {_changed(self.changed, classes)}."
            return text
        rule = self.parts[0].rule
        if rule.by_review:
            return (
                f"{_capital(rule.words)} decides this folder: {answers} showed it is better; "
                f"{_changed(self.changed, classes)}."
            )
        text = f"{_capital(rule.words)} decides all {self.images} images"
        if self.reverted is not None:
            text += f": {answers} showed {self.reverted.words} does harm here"
        return text + "."


def outlook(review: SiteReview) -> Outlook:
    """The facts of the sentence for ``review`` as it stands (nothing is started or changed)."""
    rows = review.rows
    truth = np.array([-1 if r.ground_truth is None else r.ground_truth for r in rows], dtype=np.int64)
    source = np.array([r.source_prediction for r in rows], dtype=np.int64)
    comparisons = [c for p in review.parts for c in p.ladder.comparisons]
    reverted = next((c.candidate for c in comparisons if c.verdict == REVERTED), None)
    chain = [c for p in review.parts for c in p.ladder.chain()]
    answers = sum(len(c.reviewed) for c in chain) if chain else sum(p.reviews() for p in review.parts)
    return Outlook(
        images=len(rows),
        parts=review.in_use(),
        answers=answers,
        changed=_changes(source, review.decisions(), truth) if rows else (),
        reverted=reverted,
        provisional=int(review.provisional().sum()) if rows else 0,
        testing=_testing(review, truth),
        next=_next(review, truth),
        nothing=_nothing(review),
    )


def _testing(review: SiteReview, truth: np.ndarray) -> Step | None:
    """The comparison whose first block waits for answers (a promoted rule's later block is the
    provisional images' business)."""
    part = served(review.parts)
    c = part.ladder.active if part is not None else None
    if part is None or c is None or c.verdict == PROMOTED:
        return None
    n = c.population
    at = np.array(part.positions[:n], dtype=np.int64)
    return Step(
        c.candidate,
        _part(review, part),
        n,
        _changes(c.before[:n], c.after[:n], truth[at]),
        len(c.blocks[0].reviewed),
    )


def _next(review: SiteReview, truth: np.ndarray) -> Step | None:
    """What the queue would start next, in the part it would serve first."""
    if any(p.ladder.active is not None for p in review.parts):
        return None
    for part in serving_order(review.parts):
        k = review.parts.index(part)
        upcoming = review.upcoming(k)
        if upcoming is not None:
            rule, before, after = upcoming
            at = np.array(part.positions[: len(before)], dtype=np.int64)
            return Step(rule, _part(review, part), len(before), _changes(before, after, truth[at]), 0)
    return None


def _nothing(review: SiteReview) -> str:
    """Why reviewing cannot change this folder's decisions now (empty: it can, or nothing is processed)."""
    empty = review.empty_queue()
    if empty is None or empty.stage is QueueEmpty.NOT_PROCESSED:
        return ""
    if empty.stage is QueueEmpty.NO_OTHER_RULE:
        return (
            "No other rule can decide these images (the run kept no source margins: a method that keeps "
            "none, or a journal written before they were kept), so reviewing cannot change them."
        )
    if empty.stage is QueueEmpty.PROMPTED_PENDING:
        return (
            f"The next rule to test is {Rule.PROMPTED.words}; its decisions for these images are made "
            "when a review reaches it, and its questions follow."
        )
    if empty.tested:
        return "Every other rule that calls some image otherwise has been tested; more answers cannot change them."
    if empty.unproposed is not None:  # the method proposed no site threshold here: its typed reason says why
        because = f" ({empty.unproposed})" if empty.unproposed else ""
        if not empty.prompted:
            return (
                f"Adapting proposed no other rule for this folder{because}, so reviewing cannot change them."
            )
        return (  # a model without a source reference: I-DiPT's class alone, as decided now on every image
            f"Adapting proposed no site threshold for this folder{because}, and {Rule.PROMPTED.words} calls "
            "every image as it is decided now, so reviewing cannot change them."
        )
    # the rules it proposed call every image as it is decided now (or none has a threshold yet)
    return "No other rule would call any of them otherwise, so reviewing cannot change them."


def _changes(before: np.ndarray, after: np.ndarray, truth: np.ndarray) -> tuple[Change, ...]:
    """The images ``after`` calls otherwise than ``before``, by direction, most first."""
    at = before != after
    out = []
    for b, a in {(int(x), int(y)) for x, y in zip(before[at], after[at], strict=True)}:
        mask = at & (before == b) & (after == a)
        labels = truth[mask]
        out.append(Change(b, a, int(mask.sum()), int((labels >= 0).sum()), int((labels == a).sum())))
    return tuple(sorted(out, key=lambda c: (-c.images, c.before, c.after)))


def _part(review: SiteReview, part: ReviewPart) -> str:
    return part_label(review.parts, part) if len(review.parts) > 1 else ""


def _name(classes: Sequence[str], k: int) -> str:
    return classes[k] if 0 <= k < len(classes) else str(k)


def _directions(changes: Sequence[Change], classes: Sequence[str], verb: str) -> str:
    """``42 tumor instead of normal and 3 normal instead of tumor`` (``verb`` "instead of"), or
    ``42 from normal to tumor`` (``verb`` "from"); three directions at most, then how many more."""
    words = [
        f"{c.images} {_name(classes, c.after)} instead of {_name(classes, c.before)}"
        if verb == "instead of"
        else f"{c.images} from {_name(classes, c.before)} to {_name(classes, c.after)}"
        for c in changes[:3]
    ]
    rest = sum(c.images for c in changes[3:])
    if rest:
        words.append(f"{rest} more in other directions")
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def _calls(step: Step, classes: Sequence[str]) -> str:
    """``42 of the 160 images tumor instead of normal`` (in a split folder: ``... of the first 131
    images of part 2 of 3``); the dataset's labels are not given before a certificate."""
    total = sum(c.images for c in step.changes)
    where = f"the first {step.images} images of {step.part}" if step.part else f"the {step.images} images"
    if len(step.changes) == 1:
        c = step.changes[0]
        return f"{c.images} of {where} {_name(classes, c.after)} instead of {_name(classes, c.before)}"
    return f"{total} of {where} otherwise ({_directions(step.changes, classes, 'instead of')})"


def _changed(changes: Sequence[Change], classes: Sequence[str]) -> str:
    """``42 images changed from normal to tumor, 40 of them tumor in the dataset's labels``."""
    total = sum(c.images for c in changes)
    if not total:
        return "no image changed from the original model's call"
    plural = "s" if total != 1 else ""
    if len(changes) == 1:
        c = changes[0]
        text = f"{total} image{plural} changed from {_name(classes, c.before)} to {_name(classes, c.after)}"
    else:
        text = f"{total} image{plural} changed from the original model's call ({_directions(changes, classes, 'from')})"
    return text + _labels(changes, classes)


def _labels(changes: Sequence[Change], classes: Sequence[str]) -> str:
    """What the dataset's labels say of changed images (empty where it labels none of them)."""
    labelled = sum(c.labelled for c in changes)
    if not labelled:
        return ""
    agree = sum(c.agree for c in changes)
    total = sum(c.images for c in changes)
    if len(changes) == 1:
        name = _name(classes, changes[0].after)
        if labelled == total:
            return f", {agree} of them {name} in the dataset's labels"
        return f", {agree} of the {labelled} the dataset labels {name}"
    return f"; the dataset's labels agree with the new call on {agree} of the {labelled} it labels"


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]
