"""I-DiPT+'s operating point without a model: the estimator and its guard, groups by appearance in
the free-form protocol, a named site as one unit, and state that continues identically."""

from __future__ import annotations

import json

import numpy as np
import pytest

from engine.methods.idipt_plus import IDiPTPlusConfig, Observation, OperatingPoint, fit_operating_point
from engine.methods.idipt_plus._mixture import margin_threshold
from engine.methods.idipt_plus._state import load_operating_point, operating_point_state

SETTINGS = IDiPTPlusConfig().operating_point_settings()


def _site(n: int, positive_share: float, threshold_shift: float, seed: int = 0) -> tuple[np.ndarray, ...]:
    """One generated "site": two feature clusters whose source margin puts the threshold off.

    Class 0 sits at -3, class 1 at +3 along the first of four feature axes (noise sd 0.8); the
    source margin is ``2 (x - threshold_shift)``, so with a shift of 3.5 the source model calls
    most positives negative, yet still ranks them above the negatives.
    """
    rng = np.random.default_rng(seed)
    labels = (rng.random(n) < positive_share).astype(np.int64)
    feats = rng.normal(0.0, 0.8, (n, 4))
    feats[:, 0] += np.where(labels == 1, 3.0, -3.0)
    margins = 2.0 * (feats[:, 0] - threshold_shift)
    return feats, margins, labels


# ------------------------------------------------------------------------------------ the estimator
def test_a_moved_threshold_is_found_and_moved_pessimistically() -> None:
    feats, margins, labels = _site(300, 0.5, 3.5)
    fit = fit_operating_point(margins, feats, SETTINGS, np.random.default_rng(0))
    assert fit.accepted and fit.reason == "accepted"
    # the truth sits near margin -7 (x = 0); the estimate moves there, the move stops at the
    # interval's edge nearest the source threshold
    assert fit.estimate < -4.0 and fit.low <= fit.estimate <= fit.high < 0.0
    assert fit.pessimistic == fit.high
    before = np.mean((margins > 0) == labels)
    after = np.mean((margins > fit.pessimistic) == labels)
    assert before < 0.8 and after > 0.95


@pytest.mark.parametrize("share", [0.5, 0.2, 0.8])
def test_a_right_threshold_is_kept(share: float) -> None:
    feats, margins, _ = _site(300, share, 0.0, seed=2)
    fit = fit_operating_point(margins, feats, SETTINGS, np.random.default_rng(0))
    assert not fit.accepted or abs(fit.pessimistic) < 1.0


def test_one_correlated_gaussian_never_poses_as_two_classes() -> None:
    """The audit's counter-example: one 4-D Gaussian, equal correlation 0.8, 101 points.

    The old tied-diagonal separation test passed it in about 189 of 200 draws; every guard
    together must accept none.
    """
    cov = np.full((4, 4), 0.8) + 0.2 * np.eye(4)
    passed_separation = accepted = 0
    for trial in range(60):
        rng = np.random.default_rng(trial)
        x = rng.multivariate_normal(np.zeros(4), cov, 101)
        fit = fit_operating_point(3.0 * x[:, 0] - 1.0, x, SETTINGS, np.random.default_rng([trial, 1]))
        passed_separation += int(fit.separation >= SETTINGS.min_separation)
        accepted += int(fit.accepted)
    assert passed_separation >= 45  # the separation alone would be fooled ...
    assert accepted == 0  # ... the edge and stability guards are not


def test_a_site_of_one_spread_class_is_not_split() -> None:
    """A group that holds one class whose margins spread evenly (a nuisance): no cluster edge."""
    rng = np.random.default_rng(4)
    margins = rng.uniform(-6.0, 4.0, 200)
    feats = np.c_[margins / 3.0, rng.normal(0, 1, (200, 3))]
    feats[:, 1] += np.where(margins > -2, 2.5, -2.5)  # a nuisance direction that splits it
    fit = fit_operating_point(margins, feats, SETTINGS, np.random.default_rng(0))
    assert not fit.accepted


def test_margin_threshold_reports_its_disagreement() -> None:
    margins = np.array([-3.0, -2.0, -1.0, 1.0, 2.0, 3.0])
    t, dis = margin_threshold(margins, np.array([0, 0, 0, 1, 1, 1]))
    assert -1.0 < t < 1.0 and dis == 0.0
    t, dis = margin_threshold(margins, np.array([0, 1, 0, 1, 0, 1]))
    assert dis > 0.3  # no threshold reproduces an alternating split


def test_groups_follow_appearance_and_decide_by_their_own_threshold() -> None:
    """Two sites, far apart in appearance, one with a moved threshold: only that one moves."""
    a_feats, a_margins, a_labels = _site(240, 0.5, 3.5, seed=1)
    b_feats, b_margins, b_labels = _site(240, 0.5, 0.0, seed=3)
    op = OperatingPoint(SETTINGS, radius=0.5, seed=0)
    rng = np.random.default_rng(0)
    order = rng.permutation(480)
    feats, margins = np.r_[a_feats, b_feats], np.r_[a_margins, b_margins]
    appearance = np.r_[np.full((240, 3), 10.0), np.full((240, 3), -10.0)] + rng.normal(0, 0.2, (480, 3))
    labels = np.r_[a_labels, b_labels]
    decided = np.zeros(480, dtype=bool)
    paths = []
    for i in order:
        d = op.step(Observation(float(margins[i]), feats[i], appearance[i]))
        decided[i] = d.positive(float(margins[i]))
        paths.append((i < 240, d.path, d.group))
    assert len(op.groups.groups) == 2
    site_a = np.arange(480) < 240
    assert np.mean(decided[site_a] == labels[site_a]) > np.mean((margins[site_a] > 0) == labels[site_a]) + 0.1
    assert np.array_equal(decided[~site_a], margins[~site_a] > 0)  # the right threshold is kept
    # images waiting for a group (-1) keep the source decision; no group holds both sites
    assert {g for a, p, g in paths if a and g >= 0}.isdisjoint({g for a, p, g in paths if not a and g >= 0})
    assert any(p == "accepted" for a, p, _ in paths if a)


def test_operating_point_state_round_trips_and_continues_identically() -> None:
    feats, margins, _ = _site(200, 0.5, 3.5, seed=5)
    appearance = np.random.default_rng(1).normal(5.0, 0.1, (200, 3))
    one = OperatingPoint(SETTINGS, 0.5, seed=2)
    appearance[::7] += 5.0  # a few images far from the rest wait in the pool
    for i in range(120):
        one.step(Observation(float(margins[i]), feats[i], appearance[i]), site="a" if i % 3 else None)
    tensors, meta = operating_point_state(one)
    assert meta["pool"] and meta["sites"] and meta["groups"]
    two = OperatingPoint(SETTINGS, 0.5, seed=2)
    load_operating_point(two, tensors, json.loads(json.dumps(meta)))
    for i in range(120, 200):
        obs = Observation(float(margins[i]), feats[i], appearance[i])
        site = "a" if i % 3 else None
        assert one.step(obs, site=site) == two.step(obs, site=site)
    meta["groups"][0]["threshold"] = float("nan")
    with pytest.raises(ValueError, match="non-finite"):
        load_operating_point(OperatingPoint(SETTINGS, 0.5, seed=2), tensors, meta)
    with pytest.raises(ValueError, match="earlier version"):
        load_operating_point(OperatingPoint(SETTINGS, 0.5, seed=2), tensors, {**meta, "format": 1})


def test_a_named_site_is_one_unit_whatever_it_looks_like() -> None:
    """Images the caller says come from one folder form one unit, even when their appearance
    spreads far wider than any group by appearance would allow; another folder is another."""
    feats, margins, _ = _site(300, 0.5, 3.5, seed=4)
    rng = np.random.default_rng(2)
    op = OperatingPoint(SETTINGS, radius=0.5, seed=0)
    decided = []
    for i in range(300):
        obs = Observation(float(margins[i]), feats[i], rng.normal(0.0, 50.0, 3))
        decided.append(op.step(obs, site="folder A"))
    assert list(op.sites) == ["folder A"] and not op.groups.groups
    assert {d.group for d in decided} == {0} and {d.site for d in decided} == {"folder A"}
    assert any(d.path == "accepted" for d in decided)  # the site's threshold moved
    other = op.step(Observation(float(margins[0]), feats[0], np.zeros(3)), site="folder B")
    assert other.group == 1 and other.reason.startswith("too few images (a site needs 40")


def test_one_image_never_founds_a_group_and_seeds_of_one_site_merge() -> None:
    """Free-form: an image near no group waits (source decision) until enough images lie near one
    another; two groups founded on one site are merged once their centres come close."""
    rng = np.random.default_rng(3)
    op = OperatingPoint(SETTINGS, radius=1.0, seed=0)
    first = op.step(Observation(0.5, np.zeros(4), np.full(3, 40.0)))
    assert (first.path, first.group, first.reason) == ("not-accepted", -1, "no site group yet")
    assert not op.groups.groups and len(op.groups.pool) == 1
    for _ in range(SETTINGS.seed_images - 1):  # 19 near one another: not yet a group
        op.step(Observation(0.5, np.zeros(4), rng.normal(0.0, 0.1, 3)))
    assert not op.groups.groups
    founder = op.step(Observation(0.5, np.zeros(4), rng.normal(0.0, 0.1, 3)))  # the 20th founds it
    assert founder.group == -1 and len(op.groups.groups) == 1
    assert op.groups.groups[0].count == SETTINGS.seed_images and len(op.groups.pool) == 1  # the outlier waits
    grown = op.step(Observation(0.5, np.zeros(4), rng.normal(0.0, 0.1, 3)))
    assert grown.group == 0 and op.groups.groups[0].count == SETTINGS.seed_images + 1
    # a second seed of the same site, founded while the pool held images a little apart, merges
    groups = op.groups
    for _ in range(SETTINGS.seed_images):
        groups.pool.append(groups.pool[0].__class__(rng.normal(0.0, 0.1, 3) + 0.2, 0.5, np.zeros(4), 0))
    groups._found(0)
    assert len(groups.groups) == 1 and groups.merged == 1 and groups.created == 2
    assert groups.groups[0].count == 2 * SETTINGS.seed_images + 1


def test_a_sites_sample_is_uniform_over_all_its_images() -> None:
    """The operating point is fitted to a uniform sample of the site, not its latest images: in a
    site read with its positives last, the sample still holds both classes in proportion."""
    from engine.methods.idipt_plus._units import Unit

    unit = Unit.empty(0, "slide", 200, 1, 0)
    margins = np.r_[np.full(2000, -5.0), np.full(2000, 5.0)]  # negatives first, positives last
    for i, m in enumerate(margins):
        unit.add(float(m), np.zeros(1), i, seed=1)
    sample, _ = unit.sample()
    assert sample.shape == (200,) and 0.4 < float(np.mean(sample > 0)) < 0.6
    assert unit.margin_sum == pytest.approx(0.0) and unit.count == 4000


# ------------------------------------------------------------------------------------ the reference
