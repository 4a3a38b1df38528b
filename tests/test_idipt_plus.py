"""I-DiPT+: the operating-point estimator, its guard, the source reference and the method's state."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from engine import Session, load_model
from engine.errors import StateError
from engine.methods.foa_shift import FOAShiftConfig
from engine.methods.idipt_plus import IDiPTPlus, IDiPTPlusConfig, NeighbourhoodMemory, decide, fit_mixture
from engine.methods.idipt_plus._operating_point import OperatingPointSettings, name_components
from engine.methods.t3a import T3AConfig
from engine.prompted_vit import PromptedViT
from engine.source_reference import (
    ReferenceError,
    find_reference,
    fit_reference,
    load_reference,
    reference_path,
    save_reference,
)
from tests.conftest import random_images

SMALL = {"bank_size": 2, "graph_dim": 16, "mc_passes": 3}
SETTINGS = OperatingPointSettings(
    neighbours=100, bandwidth=1.0, min_weight=10.0, min_separation=4.0, min_share=0.05, iterations=50
)


def _memory(appearance: torch.Tensor, features: torch.Tensor, logits: torch.Tensor) -> NeighbourhoodMemory:
    mem = NeighbourhoodMemory(
        1000, appearance.shape[1], features.shape[1], logits.shape[1], None, torch.device("cpu")
    )
    for a, f, lg in zip(appearance, features, logits, strict=True):
        mem.add(a, f, lg, None)
    return mem


def _site(n: int, positive_share: float, threshold_shift: float, seed: int = 0) -> tuple[torch.Tensor, ...]:
    """One generated "site": two feature clusters whose source logits put the threshold off.

    Class 0 sits at -3, class 1 at +3 along the first feature axis (noise sd 0.8). The source
    model's logit margin is ``2 (x - threshold_shift)``: with a shift of 3.5 it calls most
    positives negative, yet still ranks them above the negatives.
    """
    gen = torch.Generator().manual_seed(seed)
    labels = (torch.rand(n, generator=gen) < positive_share).long()
    feats = torch.randn(n, 2, generator=gen) * 0.8
    feats[:, 0] += torch.where(labels == 1, 3.0, -3.0)
    logits = torch.stack([torch.zeros(n), 2.0 * (feats[:, 0] - threshold_shift)], dim=1)
    appearance = torch.randn(n, 3, generator=gen) * 0.1  # one site: everybody looks alike
    return appearance, feats, logits, labels


def _accuracy(
    appearance: torch.Tensor, feats: torch.Tensor, logits: torch.Tensor, labels: torch.Tensor
) -> tuple[float, float]:
    """Leave-one-out accuracy of the threshold and the posterior decisions (the source's where refused).

    Each image is decided from all the others (the memory never holds the image itself).
    """
    hits_threshold = hits_posterior = 0
    for i in range(len(labels)):
        rest = torch.cat([torch.arange(i), torch.arange(i + 1, len(labels))])
        mem = _memory(appearance[rest], feats[rest], logits[rest])
        d = decide(mem, appearance[i], feats[i], logits[i], bandwidth=1.0, settings=SETTINGS)
        margin = float(logits[i, 1] - logits[i, 0])
        by_threshold = int(margin > d.threshold) if d.threshold is not None else int(margin > 0)
        hits_threshold += int(by_threshold == int(labels[i]))
        hits_posterior += int(int(d.posterior.argmax()) == int(labels[i]))
    return hits_threshold / len(labels), hits_posterior / len(labels)


# ------------------------------------------------------------------------------------ the estimator
def test_mixture_recovers_separated_clusters_and_their_shares() -> None:
    gen = torch.Generator().manual_seed(0)
    x = torch.cat([torch.randn(80, 2, generator=gen) - 4.0, torch.randn(20, 2, generator=gen) + 4.0]).double()
    init = torch.nn.functional.one_hot((x[:, 0] > -3.0).long(), 2).double()  # a badly placed start
    resp, means, var, shares = fit_mixture(x, torch.ones(100, dtype=torch.float64), init, 100)
    assert shares.tolist() == pytest.approx([0.8, 0.2], abs=0.01)
    assert var.tolist() == pytest.approx([1.0, 1.0], abs=0.3)  # the clusters' unit noise, tied
    assert means[0, 0] == pytest.approx(-4.0, abs=0.35) and means[1, 0] == pytest.approx(4.0, abs=0.5)
    assert bool((resp.argmax(dim=1)[:80] == 0).all()) and bool((resp.argmax(dim=1)[80:] == 1).all())
    # weights count: the same points, the second cluster weighted five times over
    w = torch.cat([torch.ones(80), torch.full((20,), 5.0)]).double()
    _, _, _, weighted = fit_mixture(x, w, init, 100)
    assert weighted.tolist() == pytest.approx([80 / 180, 100 / 180], abs=0.01)


def test_components_are_named_by_ranking_not_by_vote() -> None:
    # The source calls class 1 in neither component, but ranks the second one higher.
    resp = torch.tensor([[1.0, 0.0]] * 5 + [[0.0, 1.0]] * 5).double()
    probs = torch.tensor([[0.98, 0.02]] * 5 + [[0.7, 0.3]] * 5).double()
    assert name_components(resp, torch.ones(10).double(), probs) == [0, 1]
    assert name_components(resp.flip(1), torch.ones(10).double(), probs) == [1, 0]


@pytest.mark.parametrize("share", [0.5, 0.2, 0.8])
def test_a_moved_threshold_is_corrected_under_any_prior(share: float) -> None:
    appearance, feats, logits, labels = _site(160, share, threshold_shift=3.5)
    source_acc = float((logits.argmax(dim=1) == labels).float().mean())
    assert source_acc < 0.9  # the source threshold cuts into the positives
    by_threshold, by_posterior = _accuracy(appearance, feats, logits, labels)
    assert by_threshold >= 0.97 and by_posterior >= 0.97


@pytest.mark.parametrize("share", [0.5, 0.2, 0.8])
def test_a_right_threshold_is_kept(share: float) -> None:
    appearance, feats, logits, labels = _site(160, share, threshold_shift=0.0)
    source_acc = float((logits.argmax(dim=1) == labels).float().mean())
    by_threshold, by_posterior = _accuracy(appearance, feats, logits, labels)
    assert min(by_threshold, by_posterior) >= source_acc - 0.01


def test_guard_keeps_the_source_decision_without_class_structure() -> None:
    gen = torch.Generator().manual_seed(3)
    feats = torch.randn(200, 2, generator=gen)  # one Gaussian: any split is an artefact
    logits = torch.stack([torch.zeros(200), 3.0 * feats[:, 0]], dim=1)
    appearance = torch.zeros(200, 3)
    mem = _memory(appearance[1:], feats[1:], logits[1:])
    d = decide(mem, appearance[0], feats[0], logits[0], 1.0, SETTINGS)
    assert not d.accepted and 2.0 < d.separation < SETTINGS.min_separation
    assert torch.equal(d.posterior, logits[0].softmax(dim=-1)) and d.threshold is None


def test_guard_needs_a_neighbourhood_that_looks_alike() -> None:
    appearance, feats, logits, _ = _site(100, 0.5, threshold_shift=3.5)
    empty = NeighbourhoodMemory(10, 3, 2, 2, None, torch.device("cpu"))
    assert not decide(empty, appearance[0], feats[0], logits[0], 1.0, SETTINGS).accepted
    mem = _memory(appearance[1:], feats[1:], logits[1:])
    far = appearance[0] + 25.0  # another site: kernel weights vanish
    d = decide(mem, far, feats[0], logits[0], 1.0, SETTINGS)
    assert not d.accepted and d.weight < SETTINGS.min_weight
    near = decide(mem, appearance[0], feats[0], logits[0], 1.0, SETTINGS)
    assert near.accepted and near.weight > 90


def test_two_sites_are_told_apart_by_appearance() -> None:
    # Site A's threshold is moved one way, site B's the other; they look different.
    a_app, a_feat, a_prob, a_lab = _site(120, 0.5, threshold_shift=3.5, seed=1)
    b_app, b_feat, b_prob, b_lab = _site(120, 0.5, threshold_shift=-3.5, seed=2)
    b_app = b_app + 5.0
    app, feat, prob, lab = (
        torch.cat(p) for p in ((a_app, b_app), (a_feat, b_feat), (a_prob, b_prob), (a_lab, b_lab))
    )
    source_acc = float((prob.argmax(dim=1) == lab).float().mean())
    assert source_acc < 0.85
    assert min(_accuracy(app, feat, prob, lab)) >= 0.95


def test_memory_is_a_ring_and_round_trips() -> None:
    mem = NeighbourhoodMemory(3, 2, 1, 2, 4, torch.device("cpu"))
    for i in range(5):
        mem.add(
            torch.full((2,), float(i)),
            torch.full((1,), float(i)),
            torch.tensor([0.5, 0.5]),
            torch.full((4,), float(i)),
        )
    assert mem.size == 3 and mem.count == 5
    assert sorted(mem.appearance[:, 0].tolist()) == [2.0, 3.0, 4.0]
    saved = mem.state_tensors("m")
    other = NeighbourhoodMemory(3, 2, 1, 2, 4, torch.device("cpu"))
    other.load_state("m", saved, 5)
    assert torch.equal(other.appearance, mem.appearance) and torch.equal(other.full, mem.full)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        NeighbourhoodMemory(2, 2, 1, 2, 4, torch.device("cpu")).load_state("m", saved, 5)
    with pytest.raises(ValueError):
        NeighbourhoodMemory(3, 2, 1, 2, None, torch.device("cpu")).load_state("m", saved, 5)


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
    assert "source reference ignored" in caplog.text and "behaves as idipt" in caplog.text
    assert session.reference is None


# ------------------------------------------------------------------------------------ the method
def test_without_a_reference_idipt_plus_is_idipt(tiny_model_path: Path) -> None:
    from engine import IDiPTConfig

    plus = Session(tiny_model_path, method="idipt+", method_config=IDiPTPlusConfig(**SMALL), seed=4)
    plain = Session(tiny_model_path, method="idipt", method_config=IDiPTConfig(**SMALL), seed=4)
    for img in random_images(6, size=32):
        a, b = plus.step(img), plain.step(img)
        assert np.array_equal(a.probs, b.probs)


def test_with_a_reference_the_stream_is_remembered_and_resumes_exactly(
    referenced_model: Path, tmp_path: Path
) -> None:
    # any neighbourhood decides; the reference was fitted on images like these, so no source gate
    cfg = IDiPTPlusConfig(
        **SMALL, min_weight=0.0, min_separation=0.0, min_share=0.0, source_gate=False, prompt_target=True
    )
    session = Session(referenced_model, method="idipt+", method_config=cfg, seed=1)
    method = session.method
    assert isinstance(method, IDiPTPlus) and method.memory is not None
    imgs = random_images(12, size=32, seed=1)  # the source calls the first one class 0, the rest 1
    results = [session.step(img) for img in imgs[:6]]
    assert method.memory.size == 6
    assert results[0].diagnostics["op_accepted"] == 0.0  # nothing remembered yet
    assert any(r.diagnostics["op_accepted"] == 1.0 for r in results[1:])
    session.save(tmp_path / "state")
    rest = [session.step(img).probs for img in imgs[6:]]
    again = Session(referenced_model, method="idipt+", method_config=cfg, seed=1)
    again.load(tmp_path / "state")
    assert again.method.memory.size == 6  # type: ignore[attr-defined]
    for img, expected in zip(imgs[6:], rest, strict=True):
        assert np.array_equal(again.step(img).probs, expected)
    session.reset()
    assert method.memory.size == 0 and session.reference is not None


def test_prompts_are_fitted_to_the_source_prediction_unless_asked(referenced_model: Path) -> None:
    imgs = random_images(5, size=32, seed=1)
    for prompt_target in (False, True):
        cfg = IDiPTPlusConfig(
            **SMALL,
            min_weight=0.0,
            min_separation=0.0,
            min_share=0.0,
            source_gate=False,
            prompt_target=prompt_target,
        )
        session = Session(referenced_model, method="idipt+", method_config=cfg, seed=1)
        for img in imgs[:4]:
            session.step(img)
        method = session.method
        assert isinstance(method, IDiPTPlus)
        with torch.no_grad():
            source = method.model.source_pass(session.preprocess(imgs[4]))
            target = method._consistency_target(source)
        decision = method._pending[4] if method._pending is not None else None
        assert decision is not None and decision.accepted
        corrected = method._pending[5] if method._pending is not None else None
        assert corrected is not None  # the threshold decision's logits
        expected = corrected.softmax(dim=-1) if prompt_target else source.logits.softmax(dim=-1)
        assert torch.equal(target, expected)


def test_source_like_images_keep_the_source_decision(referenced_model: Path) -> None:
    cfg = IDiPTPlusConfig(**SMALL, min_weight=0.0, min_separation=0.0, min_share=0.0)
    session = Session(referenced_model, method="idipt+", method_config=cfg, seed=1)
    # the reference was fitted on random images of this kind: most look like the source domain
    results = [session.step(img) for img in random_images(12, size=32, seed=1)]
    gated = [r for r in results if r.diagnostics["op_source_like"] == 1.0]
    assert len(gated) >= 6
    assert all(r.diagnostics["op_accepted"] == 0.0 for r in gated)
    assert all(np.array_equal(r.probs, r.source_probs) for r in gated)  # the source model's prediction
    # a flat grey image is nothing like the noise the reference saw: outside the source radius
    shifted = session.step(np.full((32, 32, 3), 128, dtype=np.uint8))
    assert shifted.diagnostics["op_source_like"] == 0.0


def test_state_with_a_memory_needs_the_reference(
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
