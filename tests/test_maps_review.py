"""The review ladder while the maps follow the decisions (issue 28 item 4): a comparison starts
only on images whose map, and so I-DiPT's prompted decision, is there (``engine/run/review.py``)."""

from __future__ import annotations

import dataclasses

from review_rows import review_all, site_rows

from engine.review.ladder import PROMPTED
from engine.run.review import SiteReview, site_images
from engine.run.rows import MAP_PENDING


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
