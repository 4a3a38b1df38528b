"""The review ladder while the maps follow the decisions (issue 28 item 4): a comparison starts
only on images whose map, and so I-DiPT's prompted decision, is there (``engine/run/review.py``)."""

from __future__ import annotations

import dataclasses

from review_rows import review_all, site_rows

from engine.review.ladder import PROMPTED
from engine.run.review import SiteReview, site_images
from engine.run.rows import MAP_PENDING
from engine.vocabulary import QueueEmpty


def test_comparisons_cover_only_the_images_whose_map_is_there() -> None:
    rows, labels = site_rows(80)
    mapped = [dataclasses.replace(r, prompted_prediction=1 - r.source_prediction) for r in rows]
    pending = [dataclasses.replace(r, map_status=MAP_PENDING) for r in rows]
    review = SiteReview(None, "site", 2)
    review.open(mapped[:30] + pending[30:])  # the maps of the first 30 images are made
    images = site_images(review.rows)
    assert images.prompted is not None and (images.prompted[30:] == -1).all(), "a partial column"
    assert review_all(review, labels) > 0
    assert review.starts and all(n <= 30 for n in review.starts), review.starts
    assert any(c.candidate == PROMPTED for c in review.comparisons()), "the prompted candidate was tested"
    # the maps arrive: a comparison started now covers every image
    review.add_rows(mapped[30:])
    later = SiteReview(None, "site", 2)
    later.open(mapped)
    review_all(later, labels)
    assert max(later.starts) == 80


def test_the_ladder_waits_for_prompted_decisions_made_on_demand() -> None:
    """I-DiPT's prompted decisions pending (its prompt step runs when asked for): the ladder tests
    what comes before that candidate, then waits there, says so and asks for them; once they are
    made it goes on as a review that had them from the start does, answer for answer."""
    rows, labels = site_rows(80)
    made = [dataclasses.replace(r, prompted_prediction=1 - r.source_prediction) for r in rows]
    pending = [dataclasses.replace(r, prompted_status=MAP_PENDING) for r in rows]
    review, whole = SiteReview(None, "site", 2), SiteReview(None, "site", 2)
    review.open(pending)
    whole.open(made)
    assert not review.wants_prompted
    answered = review_all(review, labels)
    assert review.wants_prompted and any(p.ladder.waits_for_prompted for p in review.parts)
    before = review.comparisons()
    assert answered > 0 and before and all(c.candidate != PROMPTED for c in before), "the rules before it"
    empty = review.empty_queue()
    assert empty is not None and empty.stage is QueueEmpty.PROMPTED_PENDING
    assert "being made" in review.why_empty()
    review.add_rows(made)  # the prompt step's rows replace the pending ones
    answered += review_all(review, labels)
    assert review_all(whole, labels) == answered
    assert [c.candidate for c in review.comparisons()] == [c.candidate for c in whole.comparisons()]
    assert any(c.candidate == PROMPTED for c in review.comparisons()), "then the prompted candidate is tested"
    assert [c.verdict for c in review.comparisons()] == [c.verdict for c in whole.comparisons()]
    assert (review.decisions() == whole.decisions()).all()
    assert review.empty_queue() is not None and review.empty_queue().stage is QueueEmpty.SETTLED  # type: ignore[union-attr]
