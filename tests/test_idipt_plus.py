"""I-DiPT+: the operating-point estimator, its guard, the source reference and the method's state."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from support import random_images

from engine import Session, get_method_class, load_model
from engine.errors import StateError
from engine.methods.foa_shift import FOAShiftConfig
from engine.methods.idipt_plus import (
    IDiPTPlus,
    IDiPTPlusConfig,
    Observation,
    OperatingPoint,
    fit_operating_point,
)
from engine.methods.idipt_plus._mixture import margin_threshold
from engine.methods.idipt_plus._state import load_operating_point, operating_point_state
from engine.methods.t3a import T3AConfig
from engine.model.prompted_vit import PromptedViT
from engine.model.source_reference import (
    ReferenceError,
    find_reference,
    fit_reference,
    load_reference,
    reference_path,
    save_reference,
)

SMALL = dict(get_method_class("idipt+").test_settings)  # I-DiPT's, inherited
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
@pytest.fixture(scope="module")
def referenced_model(tiny_model_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model copied with a source reference fitted on random images."""
    folder = tmp_path_factory.mktemp("referenced")
    path = folder / "tiny.safetensors"
    shutil.copy(tiny_model_path, path)
    shutil.copy(tiny_model_path.with_suffix(".json"), path.with_suffix(".json"))
    loaded = load_model(path)
    session = Session(loaded, method="source")
    x = torch.cat([session.preprocess(img) for img in random_images(40, size=32, seed=9)])
    y = torch.arange(40) % 2
    ref = fit_reference(session.model, [(x[:20], y[:20]), (x[20:], y[20:])], 2, loaded.fingerprint)
    save_reference(ref, reference_path(path), {"test": True})
    return path


def test_reference_round_trips_and_names_its_model(referenced_model: Path) -> None:
    loaded = load_model(referenced_model)
    model = PromptedViT(loaded.model)
    ref = find_reference(referenced_model, loaded.fingerprint, 2, model)
    assert ref is not None and ref.images == 40 and ref.bandwidth > 0
    assert ref.appearance_basis.shape[1] == 2 * model.embed_dim
    # the class directions are projected out of the appearance space
    with torch.no_grad():
        source = model.source_pass(Session(loaded, method="source").preprocess(random_images(1, size=32)[0]))
    assert ref.appearance(source.block1_out, model.num_prefix_tokens).shape == (
        1,
        ref.appearance_basis.shape[0],
    )
    with pytest.raises(ReferenceError, match="another model"):
        load_reference(reference_path(referenced_model), "0" * 16, 2, model.embed_dim, model.embed_dim)
    with pytest.raises(ReferenceError, match="shape"):
        load_reference(
            reference_path(referenced_model), loaded.fingerprint, 3, model.embed_dim, model.embed_dim
        )


def test_damaged_reference_is_refused_with_a_warning(
    referenced_model: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "m.safetensors"
    shutil.copy(referenced_model, path)
    shutil.copy(referenced_model.with_suffix(".json"), path.with_suffix(".json"))
    reference_path(path).write_bytes(reference_path(referenced_model).read_bytes()[:200])
    loaded = load_model(path)
    with caplog.at_level(logging.WARNING):
        assert find_reference(path, loaded.fingerprint, 2, PromptedViT(loaded.model)) is None
        session = Session(path, method="idipt+", method_config=IDiPTPlusConfig(**SMALL))
    assert "source reference ignored" in caplog.text and "operating point is off" in caplog.text
    assert session.reference is None


# ------------------------------------------------------------------------------------ the method
def test_without_a_reference_every_decision_is_the_source_models(
    tiny_model_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        plus = Session(tiny_model_path, method="idipt+", method_config=IDiPTPlusConfig(**SMALL), seed=4)
    assert "every decision is the source model's" in caplog.text
    for img in random_images(6, size=32):
        r = plus.step(img)
        assert np.array_equal(r.probs, r.source_probs)
        assert r.decision is not None and r.decision.path == "not-accepted"
        assert r.decision.reason == "no source reference"


def test_not_accepted_images_report_the_source_model_not_the_prompts(referenced_model: Path) -> None:
    """The fallback is the source model: I-DiPT's prompted prediction is never reported."""
    cfg = IDiPTPlusConfig(**SMALL, source_gate=False, lr=0.5)  # a large step: the prompts do move
    session = Session(referenced_model, method="idipt+", method_config=cfg, seed=1)
    results = [session.step(img, site="folder") for img in random_images(12, size=32, seed=1)]
    assert all(r.decision is not None and r.decision.path == "not-accepted" for r in results)
    assert all(np.array_equal(r.probs, r.source_probs) for r in results)
    assert results[0].decision is not None and results[0].decision.reason.startswith("too few images")
    assert all(
        r.decision is not None and r.decision.prompted in (0, 1) for r in results
    )  # recorded, not reported
    method = session.method
    assert isinstance(method, IDiPTPlus) and method.operating_point is not None
    assert [(u.site, u.count) for u in method.operating_point.units()] == [("folder", 12)]
    assert float(method.phi_i.detach().abs().sum()) > 0  # I-DiPT still runs inside


def test_with_a_reference_the_groups_are_saved_and_resume_exactly(
    referenced_model: Path, tmp_path: Path
) -> None:
    cfg = IDiPTPlusConfig(**SMALL, source_gate=False, min_images=10, min_edge=0.0, bootstrap=4)
    session = Session(referenced_model, method="idipt+", method_config=cfg, seed=1)
    imgs = random_images(30, size=32, seed=1)
    for img in imgs[:20]:
        session.step(img)
    session.save(tmp_path / "state")
    rest = [session.step(img) for img in imgs[20:]]
    again = Session(referenced_model, method="idipt+", method_config=cfg, seed=1)
    again.load(tmp_path / "state")
    for img, expected in zip(imgs[20:], rest, strict=True):
        got = again.step(img)
        assert np.array_equal(got.probs, expected.probs) and repr(got.decision) == repr(expected.decision)
    session.reset()
    method = session.method
    assert isinstance(method, IDiPTPlus) and method.operating_point is not None
    assert not method.operating_point.groups.groups and session.reference is not None


def test_source_like_images_keep_the_source_decision(referenced_model: Path) -> None:
    cfg = IDiPTPlusConfig(**SMALL, source_gate=True)  # the gate is off by default
    session = Session(referenced_model, method="idipt+", method_config=cfg, seed=1)
    # the reference was fitted on random images of this kind: most look like the source domain
    results = [session.step(img) for img in random_images(12, size=32, seed=1)]
    gated = [r for r in results if r.decision is not None and r.decision.path == "source-like"]
    assert len(gated) >= 6
    assert all(r.decision is not None and r.decision.group == -1 for r in gated)
    assert all(np.array_equal(r.probs, r.source_probs) for r in gated)
    # a flat grey image is nothing like the noise the reference saw: outside the source radius
    shifted = session.step(np.full((32, 32, 3), 128, dtype=np.uint8))
    assert shifted.decision is not None and shifted.decision.path != "source-like"


def test_a_site_of_one_class_does_not_trip_the_collapse_guard(referenced_model: Path) -> None:
    """The collapse guard does not watch idipt+ (it would wipe the evidence of a one-class site)."""
    session = Session(referenced_model, method="idipt+", method_config=IDiPTPlusConfig(**SMALL), seed=1)
    assert session.method.collapse_check is False
    assert Session(referenced_model, method="idipt", seed=1).method.collapse_check is True


def test_state_with_groups_needs_the_reference(
    referenced_model: Path, tiny_model_path: Path, tmp_path: Path
) -> None:
    session = Session(referenced_model, method="idipt+", method_config=IDiPTPlusConfig(**SMALL))
    session.step(random_images(1, size=32)[0])
    session.save(tmp_path / "state")
    bare = tmp_path / "bare.safetensors"
    shutil.copy(tiny_model_path, bare)
    shutil.copy(tiny_model_path.with_suffix(".json"), bare.with_suffix(".json"))
    other = Session(bare, method="idipt+", method_config=IDiPTPlusConfig(**SMALL))
    with pytest.raises(StateError, match="source reference"):
        other.load(tmp_path / "state")


def test_foa_shift_uses_the_reference_and_gamma_zero_is_the_source(referenced_model: Path) -> None:
    img = random_images(1, size=32)[0]
    still = Session(referenced_model, method="foa-shift", method_config=FOAShiftConfig(gamma=0.0)).step(img)
    assert np.array_equal(still.probs, still.source_probs)
    moved = Session(referenced_model, method="foa-shift").step(img)
    assert not np.array_equal(moved.probs, moved.source_probs)


def test_t3a_keeps_filter_k_supports_per_class(tiny_model_path: Path) -> None:
    session = Session(tiny_model_path, method="t3a", method_config=T3AConfig(filter_k=2))
    for img in random_images(9, size=32):
        session.step(img)
    method = session.method
    counts = torch.bincount(method.support_labels, minlength=2)  # type: ignore[attr-defined]
    assert int(counts.max()) <= 2 and int(counts.sum()) >= 2


def test_a_state_of_the_earlier_idipt_plus_is_refused_with_what_to_do(referenced_model: Path) -> None:
    session = Session(referenced_model, method="idipt+", method_config=IDiPTPlusConfig(**SMALL))
    saved = {
        **session.method.config_dict(),
        "neighbours": 100,
        "memory": 2000,
    }  # the earlier version's fields
    with pytest.raises(StateError, match="earlier version of idipt\\+ cannot be continued") as info:
        session._saved_config("old-state", saved, keep_saved=True)
    assert "memory, neighbours" in str(info.value)


def test_a_batch_decides_as_its_images_do_one_by_one(referenced_model: Path, tmp_path: Path) -> None:
    """I-DiPT+'s decisions come from source passes in arrival order: batches of 1, 7 and 32 give
    the same decisions, paths and sites (the source passes agree to float precision)."""
    from engine.io.sources import StreamItem
    from engine.run.stream import Predicted, StreamRun

    images = random_images(40, size=32, seed=4)
    items = [StreamItem(i, str(i), f"{i}.png", site="folder" if i % 3 else "slide") for i in range(40)]

    def run(batch: int) -> list[Predicted]:
        session = Session(referenced_model, method="idipt+", method_config=IDiPTPlusConfig(**SMALL), seed=1)
        stream = StreamRun(session, items, lambda item: images[item.position], batch=batch)
        return [o for o in stream.outcomes() if isinstance(o, Predicted)]

    one = run(1)
    for batch in (7, 32):
        other = run(batch)
        assert [p.step.prediction for p in other] == [p.step.prediction for p in one]
        for a, b in zip(other, one, strict=True):
            assert a.step.decision is not None and b.step.decision is not None
            assert (a.step.decision.path, a.step.decision.group, a.step.decision.site) == (
                b.step.decision.path,
                b.step.decision.group,
                b.step.decision.site,
            )
            assert a.step.decision.margin == pytest.approx(b.step.decision.margin, abs=1e-4)
    assert {p.step.decision.site for p in one if p.step.decision is not None} == {"folder", "slide"}


def test_without_the_prompted_candidate_only_the_source_pass_runs(referenced_model: Path) -> None:
    """``prompted_candidate`` off: the same decisions and uncertainty maps, no prompt tuning."""
    images = random_images(12, size=32, seed=6)
    tuned = Session(referenced_model, method="idipt+", method_config=IDiPTPlusConfig(**SMALL), seed=1)
    plain = Session(
        referenced_model,
        method="idipt+",
        method_config=IDiPTPlusConfig(**SMALL, prompted_candidate=False),
        seed=1,
    )
    for img in images:
        a, b = tuned.step(img, "folder"), plain.step(img, "folder")
        assert a.prediction == b.prediction and a.decision is not None and b.decision is not None
        assert (
            a.decision.path == b.decision.path and b.decision.prompted == -1 and a.decision.prompted in (0, 1)
        )
        assert b.uncertainty is not None and b.uncertainty.shape == a.uncertainty.shape  # type: ignore[union-attr]
    assert isinstance(plain.method, IDiPTPlus)
    assert float(plain.method.phi_i.detach().abs().sum()) == float(
        Session(referenced_model, method="idipt+", seed=1).method.phi_i.detach().abs().sum()  # type: ignore[attr-defined]
    )
