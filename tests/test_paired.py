"""Paired comparisons (fixed/broken, exact McNemar interval) and the replay streams' construction."""

from __future__ import annotations

import numpy as np
import pytest

from lab.bench.paired import clopper_pearson, mcnemar_interval, paired
from lab.bench.streams import DRIFT, StreamError, interleave, resample_site


def test_clopper_pearson_matches_known_values() -> None:
    # 0 of 10: upper end 1 - 0.025^(1/10); 5 of 10: the textbook interval (0.187, 0.813)
    low, high = clopper_pearson(0, 10)
    assert low == 0.0 and high == pytest.approx(1 - 0.025 ** (1 / 10), abs=1e-6)
    low, high = clopper_pearson(5, 10)
    assert low == pytest.approx(0.1871, abs=1e-4) and high == pytest.approx(0.8129, abs=1e-4)
    low, high = clopper_pearson(10, 10)
    assert low == pytest.approx(0.025 ** (1 / 10), abs=1e-6) and high == 1.0


def test_mcnemar_interval_is_in_points_of_the_site() -> None:
    assert mcnemar_interval(0, 0, 100) == (0.0, 0.0)  # nothing changed: exactly no difference
    low, high = mcnemar_interval(0, 10, 1000)  # ten broken, none fixed, on 1 000 images
    assert low == pytest.approx(-1.0) and -1.0 < high < 0.0
    low, high = mcnemar_interval(40, 10, 1000)
    assert 0.0 < low < 3.0 < high


def test_paired_counts_fixed_and_broken_images() -> None:
    labels = np.array([0, 1, 1, 0, 1, 0])
    source = np.array([0, 0, 1, 1, 1, 0])
    adapted = np.array([0, 1, 0, 0, 1, 1])
    p = paired(labels, source, adapted)
    assert (p.fixed, p.broken, p.images) == (2, 2, 6)
    assert p.source_acc == pytest.approx(400 / 6) and p.delta == pytest.approx(0.0)
    assert p.low < 0 < p.high


def test_resample_site_holds_the_share_and_the_drift_rises() -> None:
    labels = np.r_[np.ones(500, dtype=np.int64), np.zeros(500, dtype=np.int64)]
    idx = np.arange(1000)
    rng = np.random.default_rng(0)
    positive = labels == 1
    picked = resample_site(idx, positive, 0.1, 400, rng)
    assert len(set(picked.tolist())) == 400 and labels[picked].mean() == pytest.approx(0.1)
    drift = resample_site(idx, positive, DRIFT, 400, rng)
    assert labels[drift].mean() == pytest.approx(0.5)
    assert labels[drift[:100]].mean() < 0.35 < 0.65 < labels[drift[-100:]].mean()
    with pytest.raises(StreamError, match="need"):
        resample_site(idx, positive, 0.9, 600, rng)


def test_interleave_keeps_every_image_once_and_a_drifting_site_in_order() -> None:
    sites = [np.arange(0, 100), np.arange(100, 200), np.arange(200, 300)]
    order, site_of = interleave(sites, 1.0, 10, seed=1, keep_order=[False, True, False])
    assert sorted(order.tolist()) == list(range(300))
    assert np.array_equal(site_of, order // 100)
    assert np.array_equal(order[site_of == 1], np.arange(100, 200))  # the drifting site's sequence
    assert not np.array_equal(order[site_of == 0], np.arange(100))  # the others are shuffled
