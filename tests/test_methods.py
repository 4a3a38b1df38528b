"""Invariants of every registered method: shapes, frozen source model, what adapts, reset, state.

Each method runs with a small configuration (each method's ``test_settings``) so that every code path (warm-up,
memory banks, coreset, augmentation, filters) is reached within a handful of 32-pixel images.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from support import random_images

from engine import Session, get_method_class, list_methods
from engine.methods.cotta import CoTTA
from engine.methods.dpcore import DPCore
from engine.methods.parts.augment import augment
from engine.methods.parts.hog import patch_hog
from engine.methods.parts.norm import AdaptedCopyMethod
from engine.methods.sar import SAR
from engine.methods.vptta import VPTTA

METHODS = list_methods()
#: Methods that update weights of a private copy of the backbone.
COPY_METHODS = [m for m in METHODS if issubclass(get_method_class(m), AdaptedCopyMethod)]
N_STEPS = 4
#: Methods with ``predict_after_update`` (the paper's protocol: update, then predict again).
AFTER_UPDATE_METHODS = [
    m
    for m in METHODS
    if dataclasses.is_dataclass(cls := get_method_class(m).config_class)
    and "predict_after_update" in {f.name for f in dataclasses.fields(cls)}
]


def _config(name: str, **overrides: Any) -> Any:
    cls = get_method_class(name).config_class
    if cls is None:
        return None
    return cls(**{**get_method_class(name).test_settings, **overrides})


def _session(path: Path, name: str, seed: int = 0, **overrides: Any) -> Session:
    return Session(path, method=name, method_config=_config(name, **overrides), seed=seed)


@pytest.fixture(scope="module", autouse=True)
def _one_thread() -> Iterator[None]:
    """Tiny models on shared cores: one intra-op thread is about ten times faster than two."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def imgs() -> list[np.ndarray]:
    return random_images(2 * N_STEPS, size=36)


@pytest.mark.parametrize("name", METHODS)
def test_outputs_are_probabilities_and_source_logits_are_the_source_models(
    tiny_model_path: Path, name: str, imgs: list[np.ndarray]
) -> None:
    session = _session(tiny_model_path, name)
    reference = Session(tiny_model_path, method="source")
    for img in imgs[:N_STEPS]:
        r = session.step(img)
        assert r.probs.shape == r.source_probs.shape == (2,)
        assert np.isfinite(r.probs).all() and abs(float(r.probs.sum()) - 1.0) < 1e-5
        np.testing.assert_allclose(r.source_probs, reference.step(img).probs, rtol=0, atol=1e-6)
        assert all(isinstance(v, (int, float, list, str)) for v in r.diagnostics.values())


@pytest.mark.parametrize("name", METHODS)
def test_source_model_is_bit_identical_and_only_claimed_parameters_change(
    tiny_model_path: Path, name: str, imgs: list[np.ndarray]
) -> None:
    session = _session(tiny_model_path, name)
    source = session.model.vit
    before = {k: v.clone() for k, v in source.state_dict().items()}
    for img in imgs[:N_STEPS]:
        session.step(img)
    after = source.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert all(not p.requires_grad and p.grad is None for p in source.parameters())
    method = session.method
    source_ids = {id(p) for p in source.parameters()}
    assert not source_ids & {id(p) for p in method.collect_params()}
    if isinstance(method, AdaptedCopyMethod):
        copy_params = dict(method.adapted.vit.named_parameters())
        changed = {n for n, p in source.named_parameters() if not torch.equal(p, copy_params[n])}
        assert changed, f"{name} adapted nothing"
        assert changed <= set(method.adapted_names)
        copy_buffers = dict(method.adapted.vit.named_buffers())
        assert all(torch.equal(b, copy_buffers[n]) for n, b in source.named_buffers())


@pytest.mark.parametrize("name", COPY_METHODS)
def test_tent_family_adapts_layernorm_affine_parameters_only(tiny_model_path: Path, name: str) -> None:
    method = _session(tiny_model_path, name).method
    assert isinstance(method, AdaptedCopyMethod)
    modules = dict(method.adapted.vit.named_modules())
    for param_name in method.adapted_names:
        module_name, _, leaf = param_name.rpartition(".")
        assert isinstance(modules[module_name], torch.nn.LayerNorm) and leaf in ("weight", "bias")
    if name == "sar":  # top quarter of blocks and the final norm frozen; depth 2 freezes no block
        assert not any(n.startswith("norm.") for n in method.adapted_names)


@pytest.mark.parametrize("name", METHODS)
def test_reset_restores_the_initial_state_exactly(
    tiny_model_path: Path, name: str, imgs: list[np.ndarray]
) -> None:
    session = _session(tiny_model_path, name)
    fresh_state = session.state_fingerprint()
    for img in imgs[:N_STEPS]:
        session.step(img)
    session.reset()
    assert session.state_fingerprint() == fresh_state
    fresh = _session(tiny_model_path, name)
    for img in imgs[N_STEPS:]:
        assert np.array_equal(session.step(img).probs, fresh.step(img).probs)
    assert session.state_fingerprint() == fresh.state_fingerprint()


@pytest.mark.parametrize("name", METHODS)
def test_save_load_continue_is_bit_identical(
    tiny_model_path: Path, tmp_path: Path, name: str, imgs: list[np.ndarray]
) -> None:
    first = _session(tiny_model_path, name)
    for img in imgs[:N_STEPS]:
        first.step(img)
    first.save(tmp_path / "state")
    expected = [first.step(img) for img in imgs[N_STEPS:]]
    resumed = _session(tiny_model_path, name)
    resumed.load(tmp_path / "state")
    for img, exp in zip(imgs[N_STEPS:], expected, strict=True):
        got = resumed.step(img)
        assert np.array_equal(got.probs, exp.probs)
        assert np.array_equal(got.uncertain_tokens, exp.uncertain_tokens)
    assert resumed.state_fingerprint() == first.state_fingerprint()


@pytest.mark.parametrize("name", METHODS)
def test_runs_are_deterministic_for_a_seed(tiny_model_path: Path, name: str, imgs: list[np.ndarray]) -> None:
    a, b = _session(tiny_model_path, name, seed=3), _session(tiny_model_path, name, seed=3)
    for img in imgs[:N_STEPS]:
        assert np.array_equal(a.step(img).probs, b.step(img).probs)
    assert a.state_fingerprint() == b.state_fingerprint()


@pytest.mark.parametrize("name", METHODS)
def test_config_round_trips_through_json_types(name: str) -> None:
    cls = get_method_class(name).config_class
    if cls is None:
        pytest.skip("no configuration")
    cfg = cls()
    for f in dataclasses.fields(cfg):
        assert isinstance(getattr(cfg, f.name), (bool, int, float, str)), f.name
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.lr = 1.0


@pytest.mark.parametrize("name", METHODS)
def test_batches_are_accepted_up_to_max_batch(tiny_model_path: Path, name: str) -> None:
    method = _session(tiny_model_path, name).method
    x = torch.randn(3, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    if method.max_batch == 1:
        with pytest.raises(ValueError, match="batch size must be 1"):
            method.forward_and_adapt(x)
        return
    for _ in range(2):
        out = method.forward_and_adapt(x)
        assert out.logits.shape == out.source_logits.shape == (3, 2)
        assert torch.isfinite(out.logits).all()


#: Settings under which a method's single pass is a plain prediction of its pre-step model: CoTTA
#: without augmentation averaging (and a teacher that visibly moves), DPCore with one step of a
#: new prompt from the initial one per image.
PLAIN_PASS: dict[str, dict[str, Any]] = {
    "cotta": {"confidence_threshold": 0.0, "ema_momentum": 0.5},
    "dpcore": {"ratio_threshold": 0.0, "ood_steps": 1},
}


def _inference(method: Any, x: torch.Tensor, after: bool) -> torch.Tensor:
    """A no-grad prediction by the method's inference model: the updated one, or the pre-step one."""
    with torch.no_grad():
        if isinstance(method, CoTTA):
            return method.teacher(x)
        if isinstance(method, DPCore):
            if after:
                assert method.core_prompts is not None
                return method.run(x, method.core_prompts[-1])[0]  # the prompt learned on x
            return method.run(x, method.prompt_init)[0]
        assert isinstance(method, AdaptedCopyMethod)
        return method.adapted(x)


@pytest.mark.parametrize("name", AFTER_UPDATE_METHODS)
def test_prediction_is_repeated_after_the_update_unless_disabled(
    tiny_model_path: Path, name: str, imgs: list[np.ndarray]
) -> None:
    overrides = PLAIN_PASS.get(name, {})
    after = _session(tiny_model_path, name, **overrides)
    single = _session(tiny_model_path, name, predict_after_update=False, **overrides)
    assert after.method.config.predict_after_update  # the default
    moved = 0
    for img in imgs[: N_STEPS + 1]:
        x = after.preprocess(img)
        before = _inference(after.method, x, after=False)
        out = after.method.forward_and_adapt(x)
        out_single = single.method.forward_and_adapt(x)
        # The flag changes what is returned, never the adaptation (nor the generator's draws).
        assert after.state_fingerprint() == single.state_fingerprint()
        if out.diagnostics.get("warmup") == 1.0:  # source statistics being estimated: no update
            assert torch.equal(out.logits, out_single.logits)
            continue
        assert torch.equal(out.logits, _inference(after.method, x, after=True))
        assert torch.equal(out_single.logits, before)
        moved += not torch.equal(out.logits, before)
    assert moved, f"{name}: the update never changed the prediction"


# ---------------------------------------------------------------------- method-specific behaviour
def test_sar_resets_on_collapse(tiny_model_path: Path, imgs: list[np.ndarray]) -> None:
    session = _session(tiny_model_path, "sar", reset_entropy=10.0)  # every moving average is "collapsed"
    for img in imgs[:3]:
        r = session.step(img)
        assert r.diagnostics["reset"] == 1.0
        assert np.array_equal(r.probs, r.source_probs)  # the copy is back at the source every step
    method = session.method
    assert isinstance(method, SAR) and method.resets == 3 and method.entropy_ema is None


def test_sar_filter_can_block_every_update(tiny_model_path: Path, imgs: list[np.ndarray]) -> None:
    session = _session(tiny_model_path, "sar", margin_factor=0.0)
    for img in imgs[:3]:
        assert session.step(img).diagnostics["reliable"] == 0.0
    method = session.method
    assert isinstance(method, SAR)
    assert all(
        torch.equal(p, s) for p, s in zip(method.backbone_params(), method.source_params(), strict=True)
    )


def test_cotta_teacher_trails_the_student(tiny_model_path: Path, imgs: list[np.ndarray]) -> None:
    session = _session(tiny_model_path, "cotta", restore_prob=0.0, ema_momentum=0.5)
    session.step(imgs[0])
    method = session.method
    assert isinstance(method, CoTTA)
    for t, s, src in zip(
        method.teacher_params(), method.backbone_params(), method.source_params(), strict=True
    ):
        torch.testing.assert_close(t, 0.5 * src + 0.5 * s.detach())


def test_cotta_full_restore_returns_the_student_to_the_source(
    tiny_model_path: Path, imgs: list[np.ndarray]
) -> None:
    session = _session(tiny_model_path, "cotta", restore_prob=1.0, params="all")
    session.step(imgs[0])
    method = session.method
    assert isinstance(method, CoTTA) and len(method.adapted_names) == len(
        list(session.model.vit.parameters())
    )
    assert all(
        torch.equal(p, s) for p, s in zip(method.backbone_params(), method.source_params(), strict=True)
    )


def test_augment_shapes_and_determinism() -> None:
    x = torch.randn(2, 3, 32, 32)
    a = augment(x, 3, torch.Generator().manual_seed(0))
    b = augment(x, 3, torch.Generator().manual_seed(0))
    assert a.shape == (6, 3, 32, 32) and torch.equal(a, b) and torch.isfinite(a).all()


def test_vptta_identity_prompt_is_a_no_op(tiny_model_path: Path) -> None:
    method = _session(tiny_model_path, "vptta").method
    assert isinstance(method, VPTTA)
    x = torch.randn(1, 3, 32, 32)
    torch.testing.assert_close(method.apply_prompt(x, torch.ones_like(method.prompt)), x, rtol=0, atol=1e-5)


def test_vptta_and_dpcore_warm_up_on_source_statistics(tiny_model_path: Path, imgs: list[np.ndarray]) -> None:
    for name in ("vptta", "dpcore"):
        session = _session(tiny_model_path, name, source_images=2)
        warm = [session.step(img) for img in imgs[:2]]
        assert all(r.diagnostics["warmup"] == 1.0 and np.array_equal(r.probs, r.source_probs) for r in warm)
        assert session.step(imgs[2]).diagnostics["warmup"] == 0.0


def test_session_source_statistics_skip_warm_up_and_survive_reset(
    tiny_model_path: Path, imgs: list[np.ndarray]
) -> None:
    for name in ("vptta", "dpcore"):
        session = _session(tiny_model_path, name, source_images=50)
        assert session.uses_source_statistics
        session.fit_source_statistics(imgs[:3])
        stats = session.method.source_stats  # type: ignore[attr-defined]
        ref = [t.clone() for t in stats.reference()]
        # Given statistics replace the stream warm-up: the first image already adapts.
        assert session.step(imgs[3]).diagnostics["warmup"] == 0.0
        assert session.config_dict()["source_statistics_images"] == 3
        session.reset()
        after = session.method.source_stats  # type: ignore[attr-defined]
        assert after.fitted and all(torch.equal(a, b) for a, b in zip(after.reference(), ref, strict=True))
        assert session.step(imgs[4]).diagnostics["warmup"] == 0.0
        # The collapse guard's "recover" resets these methods: the given statistics come back too.
        actions = iter(["recover", None])

        def scripted(*_: object, actions: Iterator[str | None] = actions) -> str | None:
            return next(actions)

        session.guard.observe = scripted  # type: ignore[method-assign]
        assert session.step(imgs[5]).guard_event is not None
        assert session.method.source_stats.fitted  # type: ignore[attr-defined]
        assert session.step(imgs[6]).diagnostics["warmup"] == 0.0
    plain = _session(tiny_model_path, "tent")
    assert not plain.uses_source_statistics
    with pytest.raises(ValueError, match="uses no source statistics"):
        plain.fit_source_statistics(imgs[:1])


def test_sar_reset_threshold_scales_with_the_classes(tiny_model_path: Path, imgs: list[np.ndarray]) -> None:
    from engine.methods.sar import SARConfig, reset_threshold

    assert reset_threshold(SARConfig(), 1000) == pytest.approx(0.2)
    assert reset_threshold(SARConfig(), 2) == pytest.approx(0.2 * math.log(2) / math.log(1000))
    assert reset_threshold(SARConfig(scale_reset_entropy=False), 2) == 0.2
    # A threshold above any entropy of C classes resets at every image that passes the filter;
    # the scaled default only below 0.02 nats, which a random model's entropies stay above.
    high = math.log(2) + 1.0
    always = _session(
        tiny_model_path, "sar", reset_entropy=high, scale_reset_entropy=False, margin_factor=1.0
    )
    scaled = _session(tiny_model_path, "sar", margin_factor=1.0)
    for img in imgs[:4]:
        assert always.step(img).diagnostics["reset"] == 1.0
        assert scaled.step(img).diagnostics["reset"] == 0.0


def test_dpcore_grows_a_coreset_and_reuses_it(tiny_model_path: Path, imgs: list[np.ndarray]) -> None:
    session = _session(tiny_model_path, "dpcore", ratio_threshold=1e9)  # every weighted prompt is "ID"
    method = session.method
    assert isinstance(method, DPCore)
    x = session.preprocess(imgs[0])
    method.fit_source_statistics(x)
    first = session.step(imgs[1])
    assert first.diagnostics["in_distribution"] == 0.0 and method.coreset_size() == 1
    for img in imgs[2:5]:
        assert session.step(img).diagnostics["in_distribution"] == 1.0
    assert method.coreset_size() == 1


def test_patch_hog_is_normalised_per_cell() -> None:
    x = torch.randn(2, 3, 32, 32)
    h = patch_hog(x, patch=16, cell=8, bins=9)
    assert h.shape == (2, 4, 3 * 9 * 4)
    norms = h.view(2, 4, 3, 9, 4).norm(dim=3)
    torch.testing.assert_close(norms, torch.ones_like(norms))


def test_session_takes_the_method_of_its_config_or_the_default(tiny_model_path: Path) -> None:
    from engine import DEFAULT_METHOD, Session
    from engine.methods import IDiPTConfig
    from engine.methods.tent import TentConfig

    assert Session(tiny_model_path, method_config=IDiPTConfig(bank_size=2)).method_name == "idipt"
    assert Session(tiny_model_path, method_config=TentConfig()).method_name == "tent"
    assert Session(tiny_model_path).method_name == DEFAULT_METHOD == "idipt+"
    with pytest.raises(TypeError, match="idipt\\+ expects"):
        Session(tiny_model_path, method="idipt+", method_config=IDiPTConfig())
