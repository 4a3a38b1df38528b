"""One typed vocabulary, a clinician's names (issues 40 item 3, 38 finding 2).

Rules, verdicts and decision paths are members of ``engine.vocabulary`` whose values are the
identifiers files keep; certificates are typed records the app reads as they are (they were built
as dictionaries and parsed back, a rule's sentence told apart by ``startswith("part ")``). What
people read names the rules by what they do ("the best-fit threshold", not "the fit candidate"),
keeps levels and bounds in the details, and names one rule as deciding a folder: a promotion a
later one replaced said it "decides this site" beside the one that did (``make demo``, sites 3 and 5).
"""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np

from engine.review.ladder import DEFAULT_CANDIDATES, PROMOTED, LadderRule
from engine.run.certificates import site_certificates
from engine.run.review import SiteReview
from engine.vocabulary import DecisionPath, Rule, Verdict
from tests.review_rows import site_rows

STATISTICS = ("%", "candidate", "operating point", "margin", "e-value", "bound")


def _two_promotions() -> tuple[SiteReview, np.ndarray]:
    """A site where the fit candidate is promoted first and then, on the images it covers, a
    shift candidate that is better still (the classes divide at +2.5; fit found +1.5)."""
    rows, labels = site_rows(300, shift=2.5, seed=4)
    rows = [
        dataclasses.replace(r, candidates=(("fit", 1.5), ("shift", 2.5), ("prior", math.nan))) for r in rows
    ]
    labels_only = tuple(r for r in DEFAULT_CANDIDATES if r != Rule.ANSWERS)  # the rules the method proposed
    review = SiteReview(None, "/data/two promotions", 2, rule=LadderRule(candidates=labels_only))
    review.open(rows)
    for _ in range(200):
        index = review.next_item()
        if index is None:
            break
        review.set_mark(rows[index].key, int(labels[index]), "ana")
    return review, labels


def test_a_promotion_a_later_one_replaced_no_longer_says_it_decides() -> None:
    review, _ = _two_promotions()
    promoted = [c for c in review.comparisons() if c.verdict == PROMOTED]
    assert [c.candidate for c in promoted] == [Rule.FIT, Rule.SHIFT], "two promotions, one above the other"
    said = [review.describe(c) for c in promoted]
    assert "decides" not in said[0] and said[0].endswith("the appearance correction replaced it"), said[0]
    assert said[1].startswith("the appearance correction decides this folder: "), said[1]
    assert sum("decides this folder" in review.describe(c) for c in review.comparisons()) == 1
    document = site_certificates(review)
    assert [c.in_use for c in document.certificates if c.verdict == Verdict.PROMOTED] == [False, True]
    assert [c.verdict_words for c in document.certificates if c.verdict == Verdict.PROMOTED] == [
        "better, replaced",
        "better, in use",
    ]
    assert (
        document.rule_in_use == Rule.SHIFT
        and document.decides == "the appearance correction decides this folder"
    )


def test_people_read_what_a_rule_does_and_the_statistics_are_details() -> None:
    review, _ = _two_promotions()
    for c in site_certificates(review).certificates:
        assert not [word for word in STATISTICS if word in c.says], c.says
        assert c.candidate.words in c.says
        assert "%" in c.details or "known exactly" in c.details
    assert {r: r.words for r in Rule} == {
        Rule.SOURCE: "the original model",
        Rule.LABEL_FREE: "the site threshold (unreviewed)",
        Rule.GUARDED: "the site threshold",
        Rule.FIT: "the best-fit threshold",
        Rule.SHIFT: "the appearance correction",
        Rule.PRIOR: "the class-balance correction",
        Rule.PROMPTED: "the adapted network (I-DiPT)",
        Rule.ANSWERS: "the threshold fitted to the answers",
    }


def test_the_files_keep_the_identifiers_and_the_app_reads_typed_records() -> None:
    """The JSON is made from the typed records (not the other way round), with the identifiers
    files always kept; a member equals its identifier, so files written before read back."""
    review, _ = _two_promotions()
    document = site_certificates(review)
    data = json.loads(json.dumps(document.to_json()))
    assert data["rule_in_use"] == "shift" and data["parts"] == [] and data["decides"] == document.decides
    assert [c["candidate"] for c in data["comparisons"]][:2] == ["fit", "shift"]
    assert {c["verdict"] for c in data["comparisons"]} <= {v.value for v in Verdict}
    assert (
        data["comparisons"][1]["tested_against"] == "fit"
        and data["comparisons"][0]["tested_against"] == "source"
    )
    assert Rule("operating point") is Rule.LABEL_FREE and DecisionPath("awaiting-review") is DecisionPath.HELD
    assert "operating point" == Rule.LABEL_FREE and f"{Rule.FIT}" == "fit"


def test_before_any_review_the_rule_in_use_is_the_original_model_not_the_operating_point() -> None:
    """run_config.json said rule_in_use "operating point" where no operating point was accepted."""
    rows, _ = site_rows(120)
    review = SiteReview(None, "/data/unreviewed", 2)
    review.open(rows)
    document = site_certificates(review)
    assert document.rule_in_use == Rule.SOURCE and document.to_json()["rule_in_use"] == "source"
    assert document.decides == "the original model decides this folder"


def test_a_model_without_a_source_reference_is_said_to_have_none() -> None:
    """Issue 38: with a model without a source reference the app's sentence said 'No other rule would
    call any of them otherwise' and f2tta cohort's line 'the site threshold was not accepted (no
    source reference)'; no site threshold could be proposed at all, and the rows say why, typed."""
    from engine.run.review_outlook import outlook
    from engine.run.review_parts import what_adapting_changed
    from engine.vocabulary import NoSiteRule
    from tests.review_rows import CLASSES

    rows, _ = site_rows(120)
    rows = [
        dataclasses.replace(
            r, candidates=(), decision_reason=NoSiteRule.NO_REFERENCE, prompted_prediction=r.source_prediction
        )
        for r in rows
    ]
    review = SiteReview(None, "/data/no reference", 2)
    review.open(rows)
    assert review.next_item() is None, "nothing to review: I-DiPT calls every image as the original model"
    why = "the model has no source reference; f2tta reference makes one"
    assert outlook(review).sentence(CLASSES) == (
        f"The original model decides all 120 images. Adapting proposed no site threshold for this folder "
        f"({why}), and the adapted network (I-DiPT) calls every image as it is decided now, so reviewing "
        "cannot change them."
    )
    assert f"adapting proposed no site threshold for this folder ({why})" in review.why_empty()
    assert what_adapting_changed(rows, review.decisions()) == (
        f"adapting changed no decision: it proposed no site threshold ({why}), and the adapted network "
        "(I-DiPT) calls every image as the original model does"
    )


def test_rules_that_agree_with_the_original_model_are_not_called_too_few_images() -> None:
    """f2tta cohort and make demo said 'adapting changed no decision: a site needs 40 before its
    operating point is fitted; this folder has 160' where the last image's message said 'too few
    images' (a group new with that image) although the folder's rules were fitted and call every
    image as the original model does; the reason is read from the rules, not the message."""
    from engine.run.review_outlook import outlook
    from engine.run.review_parts import what_adapting_changed
    from tests.review_rows import CLASSES

    rows, _ = site_rows(160)
    rows = [dataclasses.replace(r, candidates=(("fit", 0.0), ("shift", 0.0), ("prior", 0.0))) for r in rows]
    rows[-1] = dataclasses.replace(
        rows[-1], decision_reason="too few images (a site needs 40 before its operating point is fitted)"
    )
    review = SiteReview(None, "/data/agree", 2)
    review.open(rows)
    assert review.next_item() is None
    said = [
        what_adapting_changed(rows, review.decisions()),
        outlook(review).sentence(CLASSES),
        review.why_empty(),
    ]
    assert said[0] == (
        "adapting changed no decision: every rule it proposed calls each image as the original model does"
    )
    assert said[1].endswith(
        "No other rule would call any of them otherwise, so reviewing cannot change them."
    )
    assert not [s for s in said if "too few" in s or "needs 40" in s], said
