"""Invariants of I-DiPT: frozen backbone, what gets gradients, UoM, the bank, determinism."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch
from support import random_images

from engine import Session, load_model
from engine.methods import IDiPT, IDiPTConfig
from engine.methods.idipt import PromptBank
from engine.methods.parts.fft import low_freq_amplitude, low_freq_window
from engine.methods.parts.uom import mc_dropout_uncertainty, select_tokens
from engine.model.prompted_vit import PromptedViT


def _session(path: Path, seed: int = 0, **cfg: object) -> Session:
    return Session(path, method="idipt", method_config=IDiPTConfig(**cfg), seed=seed)  # type: ignore[arg-type]


def test_backbone_bit_identical_after_many_steps(tiny_model_path: Path) -> None:
    session = _session(tiny_model_path, bank_size=5)
    before = {k: v.clone() for k, v in session.model.vit.state_dict().items()}
    for img in random_images(40):
        session.step(img)
    after = session.model.vit.state_dict()
    assert before.keys() == after.keys()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert all(p.grad is None and not p.requires_grad for p in session.model.vit.parameters())


def test_only_prompts_gates_and_graphs_receive_gradients(tiny_model_path: Path) -> None:
    session = _session(tiny_model_path, bank_size=3)
    method = session.method
    assert isinstance(method, IDiPT)
    seen: list[set[int]] = []
    original_step = method.optimizer.step

    def recording_step(*args: object, **kwargs: object) -> object:
        seen.append({id(p) for g in method.optimizer.param_groups for p in g["params"] if p.grad is not None})
        return original_step(*args, **kwargs)  # type: ignore[arg-type]

    method.optimizer.step = recording_step  # type: ignore[method-assign]
    for img in random_images(6):
        session.step(img)
    graph_ids = {id(p) for p in [*method.graph_s.parameters(), *method.graph_i.parameters()]}
    expected_persistent = {id(method.phi_i), id(method.gate)}
    # While the bank fills the graphs are not used; once it is full they get gradients too.
    assert seen[0] == expected_persistent
    assert graph_ids <= seen[-1]
    assert seen[-1] <= expected_persistent | graph_ids
    backbone_ids = {id(p) for p in session.model.vit.parameters()}
    assert not any(backbone_ids & s for s in seen)


def test_dropout_zero_gives_zero_uncertainty(tiny_model_path: Path) -> None:
    pv = PromptedViT(load_model(tiny_model_path).model)
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        u = mc_dropout_uncertainty(pv, pv.source_pass(x), passes=10, p=0.0, generator=torch.Generator())
        u_drop = mc_dropout_uncertainty(pv, pv.source_pass(x), passes=10, p=0.1, generator=torch.Generator())
    assert u.shape == (2, 16)
    assert torch.count_nonzero(u) == 0
    assert bool((u_drop > 0).all())


def test_linear_shortcut_equals_explicit_mlp_tail(tiny_model_path: Path) -> None:
    """The channel-mean shortcut gives the same uncertainty as running fc2 for every pass."""
    pv = PromptedViT(load_model(tiny_model_path).model)
    x = torch.randn(1, 3, 32, 32)
    with torch.no_grad():
        source = pv.source_pass(x)
        fast = mc_dropout_uncertainty(pv, source, 10, 0.1, torch.Generator().manual_seed(5))
        pv.pooled_tail_projection = lambda: None  # type: ignore[method-assign]
        slow = mc_dropout_uncertainty(pv, source, 10, 0.1, torch.Generator().manual_seed(5))
    torch.testing.assert_close(fast, slow, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("percent", [0.0, 10.0, 30.0, 50.0])
def test_token_sets_disjoint_and_sized(percent: float) -> None:
    u = torch.rand(3, 196, generator=torch.Generator().manual_seed(1))
    u[0] = 0.0  # all ties
    t_u, t_r = select_tokens(u, percent)
    k = round(196 * percent / 100)
    assert t_u.shape == t_r.shape == (3, k)
    for row in range(3):
        assert not set(t_u[row].tolist()) & set(t_r[row].tolist())
        if k and row:
            assert u[row, t_u[row]].min() >= u[row, t_r[row]].max()


def test_step_reports_token_sets_and_uncertainty(tiny_model_path: Path) -> None:
    session = _session(tiny_model_path)
    r = session.step(random_images(1)[0])
    assert r.uncertainty is not None and r.uncertainty.shape == r.grid == (4, 4)
    assert len(r.uncertain_tokens) == len(r.reliable_tokens) == round(16 * 0.3)
    assert not set(r.uncertain_tokens) & set(r.reliable_tokens)
    assert (
        r.uncertainty.reshape(-1)[r.uncertain_tokens].min()
        >= r.uncertainty.reshape(-1)[r.reliable_tokens].max()
    )
    for key in (
        "loss",
        "phi_specific_norm",
        "phi_invariant_norm",
        "gate_mean_abs",
    ):
        assert key in r.diagnostics
    assert sum(r.hist_adapted) == sum(r.hist_source) == 1
    assert r.views_kept in (0, 1, 2) and not r.update_skipped and r.guard_event is None


def test_bank_is_fifo_and_bounded() -> None:
    bank = PromptBank(capacity=4, temperature=0.1)
    for i in range(10):
        bank.enqueue(
            torch.full((6,), float(i)), torch.full((2, 2, 3), float(i)), torch.full((2, 2, 3), -float(i))
        )
        assert len(bank) == min(i + 1, 4)
    assert bank.keys is not None and bank.specific is not None
    assert bank.keys[:, 0].tolist() == [6.0, 7.0, 8.0, 9.0]
    assert bank.specific[:, 0, 0, 0].tolist() == [6.0, 7.0, 8.0, 9.0]
    w = bank.weights(torch.ones(6))
    assert torch.isclose(w.sum(), torch.tensor(1.0))


def test_session_bank_never_exceeds_capacity(tiny_model_path: Path) -> None:
    session = _session(tiny_model_path, bank_size=4)
    sizes = [session.step(img).diagnostics["bank_size"] for img in random_images(10)]
    assert sizes == [0, 1, 2, 3, 4, 4, 4, 4, 4, 4]  # bank size before each step's enqueue
    method = session.method
    assert isinstance(method, IDiPT) and len(method.bank) == 4


def test_key_equals_numpy_fft() -> None:
    rng = np.random.default_rng(0)
    image = rng.normal(size=(3, 50, 64)).astype(np.float32)
    beta = 0.1
    key = low_freq_amplitude(torch.from_numpy(image), beta).numpy()
    amp = np.abs(np.fft.fftshift(np.fft.fft2(image.astype(np.float64)), axes=(-2, -1)))
    rows, cols = low_freq_window(50, 64, beta)
    assert (rows.stop - rows.start, cols.stop - cols.start) == (10, 12)
    expected = amp[:, 25 - 5 : 25 + 5, 32 - 6 : 32 + 6].reshape(-1)
    np.testing.assert_allclose(key, expected, rtol=1e-4, atol=1e-3)


def test_steps_are_deterministic_for_a_seed(tiny_model_path: Path) -> None:
    imgs = random_images(25)
    a, b, c = (
        _session(tiny_model_path, bank_size=5),
        _session(tiny_model_path, bank_size=5),
        _session(tiny_model_path, seed=1, bank_size=5),
    )
    ra = [a.step(i) for i in imgs]
    rb = [b.step(i) for i in imgs]
    rc = [c.step(i) for i in imgs]
    for x, y in zip(ra, rb, strict=True):
        assert np.array_equal(x.probs, y.probs)
        assert x.uncertainty is not None and y.uncertainty is not None
        assert np.array_equal(x.uncertainty, y.uncertainty)
        assert np.array_equal(x.uncertain_tokens, y.uncertain_tokens)
    assert a.state_fingerprint() == b.state_fingerprint() != c.state_fingerprint()
    assert any(not np.array_equal(x.uncertainty, z.uncertainty) for x, z in zip(ra, rc, strict=True))  # type: ignore[arg-type]


def test_reset_restores_the_initial_state(tiny_model_path: Path) -> None:
    session = _session(tiny_model_path, bank_size=3)
    fresh = session.state_fingerprint()
    img = random_images(1)[0]
    first = session.step(img)
    for i in random_images(8, seed=4):
        session.step(i)
    assert session.state_fingerprint() != fresh
    session.reset()
    assert session.images_seen == 0 and session.state_fingerprint() == fresh
    again = session.step(img)
    assert np.array_equal(first.probs, again.probs)


@pytest.mark.parametrize(
    "switches",
    [
        {"use_uom": False},
        {"use_pgd": False},
        {"use_graphs": False},
        {"prompt_mode": "prefix"},
        {"mc_dropout": 0.0},
    ],
)
def test_ablation_switches_run(tiny_model_path: Path, switches: dict[str, object]) -> None:
    session = _session(tiny_model_path, bank_size=3, **switches)
    results = [session.step(img) for img in random_images(6)]
    assert all(np.isfinite(r.probs).all() and abs(r.probs.sum() - 1) < 1e-5 for r in results)
    method = session.method
    assert isinstance(method, IDiPT)
    assert len(method.bank) == (0 if switches.get("use_pgd") is False else 3)


def test_fresh_session_predicts_like_the_source_model_at_first(tiny_model_path: Path) -> None:
    session = _session(tiny_model_path)
    r = session.step(random_images(1)[0])
    # The first update only moves the zero gate by about one learning rate: outputs barely change.
    np.testing.assert_allclose(r.probs, r.source_probs, atol=1e-2)


def test_nonfinite_loss_skips_the_update(tiny_model_path: Path) -> None:
    session = _session(tiny_model_path)
    method = session.method
    assert isinstance(method, IDiPT)
    session.step(random_images(1)[0])
    before = session.state_fingerprint()
    phi_i = method.phi_i.detach().clone()
    with torch.no_grad():
        method.phi_s_init.fill_(float("nan"))  # poisons the image-specific view
    r = session.step(random_images(1, seed=9)[0])
    assert r.update_skipped
    assert torch.equal(method.phi_i.detach(), phi_i)
    assert np.isfinite(r.probs).all()
    assert session.state_fingerprint() != before  # the counters moved on, the prompts did not


def test_hard_consistency_target_uses_the_source_argmax(tiny_model_path: Path) -> None:
    # Same seed, first image: same token sets, same (not yet updated) view logits q, so with two
    # classes the hard loss -log q_c gives q_c, from which the soft loss follows.
    img = random_images(1, seed=5)[0]
    soft = _session(tiny_model_path, evidence_check=False).step(img)
    hard = _session(tiny_model_path, consistency_target="hard", evidence_check=False).step(img)
    c = int(np.argmax(soft.source_probs))
    p_c = float(soft.source_probs[c])
    for view in ("loss_specific", "loss_invariant"):
        q_c = float(np.exp(-hard.diagnostics[view]))
        expected = -(p_c * np.log(q_c) + (1 - p_c) * np.log(1 - q_c))
        assert soft.diagnostics[view] == pytest.approx(expected, rel=1e-4)
        assert hard.diagnostics[view] != pytest.approx(soft.diagnostics[view], rel=1e-6)
    with pytest.raises(ValueError):
        IDiPTConfig(consistency_target="argmax")  # type: ignore[arg-type]


def _flip_views(session: Session, rows: tuple[int, ...]) -> None:
    """Make the masked views ``rows`` (of the batch of two) predict the other class."""
    model = session.method.model
    forward = model.forward_tokens

    def flipped(tokens: torch.Tensor, *args: object, **kwargs: object) -> torch.Tensor:
        logits = forward(tokens, *args, **kwargs)  # type: ignore[arg-type]
        if logits.shape[0] == 2:
            sign = torch.ones(2, 1)
            sign[list(rows)] = -1.0
            logits = logits * sign
        return logits

    model.forward_tokens = flipped  # type: ignore[method-assign]


@pytest.mark.parametrize("rows", [(), (0,), (1,), (0, 1)])
def test_evidence_check_drops_views_that_lost_the_source_class(
    tiny_model_path: Path, rows: tuple[int, ...]
) -> None:
    warm, img = random_images(2, seed=21)
    plain = _session(tiny_model_path, evidence_check=False)
    checked = _session(tiny_model_path)
    # One ordinary step first, so Adam has momentum that a skipped step must not apply.
    assert plain.step(warm).diagnostics["loss"] == checked.step(warm).diagnostics["loss"]
    _flip_views(plain, rows)
    _flip_views(checked, rows)
    method = checked.method
    assert isinstance(method, IDiPT)
    gate = method.gate.detach().clone()
    plain_step, checked_step = plain.step(img), checked.step(img)
    a, b = plain_step.diagnostics, checked_step.diagnostics
    for index, view in enumerate(("loss_specific", "loss_invariant")):
        if index in rows:  # the view lost the source class: its loss is dropped
            assert a[view] > 0.1 and b[view] == 0.0
        else:
            assert b[view] == pytest.approx(a[view], rel=1e-5)
    assert checked_step.views_kept == 2 - len(rows)
    # With no view kept there is nothing to learn: no Adam step, so the gate has not moved.
    assert torch.equal(method.gate.detach(), gate) == (len(rows) == 2)


def test_config_validation() -> None:
    with pytest.raises(ValueError):
        IDiPTConfig(mask_percent=100)
    assert IDiPTConfig(mask_percent=90).mask_percent == 90  # the paper sweeps K up to 90 %
    with pytest.raises(ValueError):
        IDiPTConfig(prompt_len_specific=7)
    fields = {f.name: f.default for f in dataclasses.fields(IDiPTConfig)}
    paper = {
        "prompt_len_specific": 8,
        "prompt_len_invariant": 4,
        "mc_passes": 10,
        "mask_percent": 30.0,
        "bank_size": 20,
        "beta": 0.1,
        "gamma": 0.9,
        "graph_dim": 512,
        "lr": 1e-3,
    }
    assert {k: fields[k] for k in paper} == paper
