"""The review's vocabulary, typed and shared by the engine, ``f2tta``, the app and the reports.

Rules of a site's review ladder, the verdicts of its comparisons, how a later block ended, the
decision path a method records per image and whether a certificate covers a row: each is a
:class:`enum.StrEnum` whose value is the identifier files keep (the journal, the marks file,
``OUT.certified.csv``, ``OUT.certificates.json``, ``run_config.json``), so files written before
read back unchanged and a member equals its identifier. Code compares members, never message
text; what people read comes from the members' own words.

The rules' names are a clinician's (issue 38): the source model is *the original model*; the
label-free operating point, guarded, is *the site threshold*; ``fit`` (the mixture's own threshold,
unguarded) the *best-fit threshold*; ``shift`` (the site's features moved back toward the source
site's) the *appearance correction*; ``prior`` the *class-balance correction*; ``prompted``
*the adapted network (I-DiPT)*; ``answers`` (a threshold fitted to the reviewer's answers so far,
issue 39) *the threshold fitted to the answers*. Levels, bounds and margins go to details views and
appendices.

Plain standard library: every layer of the engine may import it.
"""

from __future__ import annotations

from enum import StrEnum


class _Worded(StrEnum):
    """A vocabulary whose members have words for people: its own table in :data:`_WORDS`."""

    @property
    def words(self) -> str:
        return _WORDS[type(self)][self]


class Rule(StrEnum):
    """A rule that can decide a site's images (the ladder's rungs and candidates)."""

    SOURCE = "source"  # A0: the source model's own decisions
    LABEL_FREE = "operating point"  # A1: the label-free operating point, reported without review
    FIT = "fit"
    SHIFT = "shift"
    PRIOR = "prior"
    GUARDED = "guarded"  # the operating point once its guards accept it, as a candidate
    PROMPTED = "prompted"  # I-DiPT's prompted decision
    ANSWERS = "answers"  # a threshold fitted to the site's answers so far (engine.review.fitted)

    @property
    def words(self) -> str:
        """The rule in a sentence: "the original model", "the best-fit threshold"."""
        return f"the {_NAMES[self][0]}"

    @property
    def short(self) -> str:
        """The rule in a table cell: "original model", "best-fit threshold"."""
        return _NAMES[self][0]

    @property
    def means(self) -> str:
        """What the rule does, in one clause for a tooltip or a details view."""
        return _NAMES[self][1]

    @property
    def by_review(self) -> bool:
        """Whether only a review can put this rule in use (every candidate; not A0 or A1)."""
        return self not in (Rule.SOURCE, Rule.LABEL_FREE)

    @property
    def is_threshold(self) -> bool:
        """Whether the rule is a threshold on the source margin (its threshold means something)."""
        return self in THRESHOLD_RULES


THRESHOLD_RULES = (Rule.FIT, Rule.SHIFT, Rule.PRIOR, Rule.GUARDED, Rule.ANSWERS)

_NAMES: dict[Rule, tuple[str, str]] = {
    Rule.SOURCE: ("original model", "the model as it was trained, before it saw this site"),
    Rule.LABEL_FREE: (
        "site threshold (unreviewed)",
        "the site threshold as adapting set it, reported without any review (the method's "
        "report_operating_point setting)",
    ),
    Rule.GUARDED: (
        "site threshold",
        "the original model's score cut at a threshold moved to this site's images once five safety "
        "checks passed, with a safety margin",
    ),
    Rule.FIT: (
        "best-fit threshold",
        "the original model's score cut where this site's images fall into two groups, without the "
        "site threshold's safety margin",
    ),
    Rule.SHIFT: (
        "appearance correction",
        "the site's image features moved back toward the training site's (colour, stain, texture), "
        "then decided by the original model",
    ),
    Rule.PRIOR: (
        "class-balance correction",
        "the original model's decision moved by how common each class is at this site, estimated "
        "without labels",
    ),
    Rule.ANSWERS: (
        "threshold fitted to the answers",
        "the original model's score cut where the answers given so far at this site put it (with "
        "more than two classes, the images it moves called the class the answers showed, where the "
        "model's own second choice did not help); the answered images count as answered, the "
        "others are tested on a fresh random sample",
    ),
    Rule.PROMPTED: (
        "adapted network (I-DiPT)",
        "I-DiPT's own decision: the network with prompts adapted to this site's images",
    ),
}


class Verdict(_Worded):
    """Where a comparison of the ladder stands (its first block's state too); its words are for
    people ("better, in use"; "not shown better")."""

    OPEN = "open"
    VERIFIED = "verified"  # A1 against A0: adapting helps
    REVERTED = "reverted"  # A1 against A0: adapting harms, the source model decides
    PROMOTED = "promoted"  # a candidate is better than the rule in use, and decides what it covers
    NOT_BETTER = "not better"

    @property
    def decided(self) -> bool:
        return self is not Verdict.OPEN


_VERDICT_WORDS: dict[_Worded, str] = {
    Verdict.OPEN: "under review",
    Verdict.VERIFIED: "better",
    Verdict.REVERTED: "worse, turned back",
    Verdict.PROMOTED: "better, in use",
    Verdict.NOT_BETTER: "not shown better",
}


class BlockEnd(StrEnum):
    """How a later block of a promoted comparison ended."""

    COVERED = "covered"  # certified together with the blocks before it
    STOPPED = "stopped"  # it showed no gain: the candidate decides nothing beyond its coverage


class DecisionPath(_Worded):
    """Where a row's decision came from (I-DiPT+'s paths, and the two a site's review adds); its
    words say who decided, in a table cell ("original model", "site threshold (unreviewed)")."""

    SOURCE_LIKE = "source-like"  # the image looks like the source site: the source model decides
    ACCEPTED = "accepted"  # the site threshold, reported without review
    NOT_ACCEPTED = "not-accepted"  # no site threshold accepted: the source model decides
    HELD = "awaiting-review"  # the site threshold passed its guards; the source model decides until reviews
    REVIEWED = "reviewed"  # the rule the site's reviews put in use decides it (the app and the reports)
    PROVISIONAL = "provisional"  # a promoted rule's call that no certificate covers yet


_PATH_WORDS: dict[_Worded, str] = {
    DecisionPath.SOURCE_LIKE: "original model",
    DecisionPath.NOT_ACCEPTED: "original model",
    DecisionPath.HELD: "original model",  # its site threshold awaits review: the row's reason says so
    DecisionPath.ACCEPTED: "site threshold (unreviewed)",
    DecisionPath.REVIEWED: "your answers' rule",
    DecisionPath.PROVISIONAL: "your answers' rule · provisional",
}


class NoSiteRule(_Worded):
    """Why a method proposed no site threshold for an image (I-DiPT+'s operating point did not run):
    the reason its rows record (``decision_reason``), read back as a member, never by its words,
    which are for people ("the model has no source reference")."""

    NO_REFERENCE = "no source reference"
    SWITCHED_OFF = "operating point off"
    MANY_CLASSES = "more than two classes"


_NO_SITE_RULE_WORDS: dict[_Worded, str] = {
    NoSiteRule.NO_REFERENCE: "the model has no source reference; f2tta reference makes one",
    NoSiteRule.SWITCHED_OFF: "the site threshold is switched off in the method's settings",
    NoSiteRule.MANY_CLASSES: "the model has more than two classes",
}

# Keyed by class: members of different vocabularies may share a value, hence a hash.
_WORDS: dict[type[_Worded], dict[_Worded, str]] = {
    Verdict: _VERDICT_WORDS,
    DecisionPath: _PATH_WORDS,
    NoSiteRule: _NO_SITE_RULE_WORDS,
}


class QueueEmpty(StrEnum):
    """Why a site's review queue has nothing to ask (:class:`engine.run.review.EmptyQueue`'s stage);
    each place that says it words it its own way."""

    NOT_PROCESSED = "not processed"  # no image of the folder has been processed yet
    NO_OTHER_RULE = "no other rule"  # the model has more than two classes, or no source margins were kept
    NO_MAPS_YET = "no maps yet"  # the review starts on images whose uncertainty maps are made
    SETTLED = "settled"  # every other rule was tested, or calls every image as it is decided now
    # the next rule to test is the adapted network's (I-DiPT), whose decisions are made only now
    # that the review reached it (its prompt step, on demand)
    PROMPTED_PENDING = "prompted pending"


class Coverage(StrEnum):
    """Whether a certificate covers a row's decision (``OUT.certified.csv``'s ``coverage``)."""

    NONE = ""  # no rule of the reviews decides it
    COVERED = "covered"  # a promoted rule decides it under its certificate
    PROVISIONAL = "provisional"  # a promoted rule calls it otherwise; reports give the rule below it


__all__ = [
    "THRESHOLD_RULES",
    "BlockEnd",
    "Coverage",
    "DecisionPath",
    "NoSiteRule",
    "Rule",
    "Verdict",
]
