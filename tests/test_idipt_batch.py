"""I-DiPT on a batch (``IDiPT.adapt_batch_with_source``, ``docs/method.md``, "Batches").

What the batched step promises, each checked against the paper's per-image step
(:meth:`IDiPT.adapt_with_source`, which a batch of one still takes):

* through the batched code, a batch of one *is* the paper's step (same outputs and state);
* each image of a batch draws the uncertainty it would draw one after another;
* each image's prompt φ_S is tuned on its own loss only: it is the φ_S a single step of that
  image from the batch's starting state gives, and the bank takes the images in arrival order.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from support import random_images

from engine import Session
from engine.methods.idipt import IDiPT, IDiPTConfig
from engine.methods.parts.fft import low_freq_amplitude

CONFIGS = [
    {},
    {"use_graphs": False},
    {"use_uom": False},
    {"use_pgd": False},
    {"prompt_mode": "prefix"},
    {"consistency_target": "hard"},
    {"evidence_check": False},
]


def _session(model: Path, seed: int = 1, **overrides: Any) -> Session:
    config = IDiPTConfig(**{"bank_size": 3, "graph_dim": 16, "mc_passes": 3, **overrides})
    return Session(model, method="idipt", method_config=config, seed=seed)


def _method(session: Session) -> IDiPT:
    assert isinstance(session.method, IDiPT)
    return session.method


def _same_state(a: Session, b: Session, atol: float) -> None:
    ta, tb = a.method.state_tensors(), b.method.state_tensors()
    assert ta.keys() == tb.keys()
    for name in ta:
        assert torch.allclose(ta[name].float(), tb[name].float(), atol=atol, rtol=0), name


@pytest.mark.parametrize(
    "overrides", CONFIGS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "paper"
)
def test_a_batch_of_one_through_the_batched_code_is_the_papers_step(
    tiny_model_path: Path, overrides: dict[str, Any]
) -> None:
    paper, batched = _session(tiny_model_path, **overrides), _session(tiny_model_path, **overrides)
    for img in random_images(8, size=32, seed=4):  # the bank (3) fills: PGD and the graphs run
        x = paper.preprocess(img)
        expected, _ = _method(paper).adapt_with_source(x)
        got, _ = _method(batched).adapt_batch_with_source(x)
        assert torch.allclose(got.logits, expected.logits, atol=1e-5, rtol=0)
        assert torch.equal(got.source_logits, expected.source_logits)
        assert expected.uncertainty is not None and got.uncertainty is not None
        assert torch.equal(got.uncertainty, expected.uncertainty)
        assert got.views_kept_each == [expected.views_kept]
        assert got.updates_skipped == [expected.update_skipped]
        assert got.image_diagnostics["loss"][0] == pytest.approx(expected.diagnostics["loss"], abs=1e-5)
        _same_state(paper, batched, atol=1e-5)
    assert len(_method(batched).bank) == (3 if overrides.get("use_pgd", True) else 0)
    assert _method(batched).steps == 8


def test_a_step_of_one_image_is_the_papers_step(tiny_model_path: Path) -> None:
    """forward_and_adapt with one image never goes through the batched code."""
    paper, method = _session(tiny_model_path), _session(tiny_model_path)
    for img in random_images(5, size=32, seed=2):
        x = paper.preprocess(img)
        expected, _ = _method(paper).adapt_with_source(x)
        assert torch.equal(method.method.forward_and_adapt(x).logits, expected.logits)
    assert paper.state_fingerprint() == method.state_fingerprint()


def test_a_batch_draws_the_uncertainty_its_images_draw_one_by_one(tiny_model_path: Path) -> None:
    one, many = _session(tiny_model_path), _session(tiny_model_path)
    images = random_images(5, size=32, seed=6)
    x = torch.cat([one.preprocess(img) for img in images])
    out = many.method.forward_and_adapt(x)
    assert out.uncertainty is not None and out.uncertain_tokens is not None
    for k in range(len(images)):
        single, _ = _method(one).adapt_with_source(x[k : k + 1])
        assert single.uncertainty is not None and single.uncertain_tokens is not None
        assert torch.equal(out.uncertainty[k], single.uncertainty[0])
        assert torch.equal(out.uncertain_tokens[k], single.uncertain_tokens[0])
    assert torch.equal(_method(one).generator.get_state(), _method(many).generator.get_state())


@pytest.mark.parametrize("overrides", [{}, {"use_graphs": False}, {"prompt_mode": "prefix"}])
def test_each_image_is_tuned_on_its_own_loss_from_the_batchs_start(
    tiny_model_path: Path, overrides: dict[str, Any]
) -> None:
    # No dropout: every image's masks are the same whichever draws it gets, so a single step of
    # image k from the batch's start is comparable with its place in the batch.
    session = _session(tiny_model_path, bank_size=4, mc_dropout=0.0, **overrides)
    for img in random_images(6, size=32, seed=8):  # the bank is full: φ_S starts from it
        session.step(img)
    start = session.snapshot()
    images = random_images(4, size=32, seed=9)
    x = torch.cat([session.preprocess(img) for img in images])
    out = session.method.forward_and_adapt(x)
    assert out.updates_skipped == [False] * 4
    bank = _method(session).bank
    assert bank.specific is not None and bank.keys is not None
    tuned, keys = bank.specific.clone(), bank.keys.clone()  # the four images', in arrival order
    for k in range(4):
        assert torch.allclose(keys[k], low_freq_amplitude(x[k], session.method.config.beta))
        session.restore(start)
        _method(session).adapt_with_source(x[k : k + 1])
        alone = _method(session).bank.specific
        assert alone is not None
        assert torch.allclose(tuned[k], alone[-1], atol=1e-6, rtol=0), f"image {k}"
    assert (tuned[0] - tuned[1]).abs().max() > 1e-4, "the images' prompts differ"


def test_a_non_finite_loss_skips_the_batchs_update(tiny_model_path: Path) -> None:
    session = _session(tiny_model_path)
    for img in random_images(4, size=32, seed=1):
        session.step(img)
    before = {k: v.clone() for k, v in session.method.state_tensors().items() if k != "rng.cpu"}
    x = torch.cat([session.preprocess(img) for img in random_images(3, size=32, seed=2)])
    x[1] = float("nan")  # one image poisons the batch's loss
    out = session.method.forward_and_adapt(x)
    assert out.updates_skipped == [True, True, True]
    assert torch.isfinite(out.logits[0]).all() and torch.isfinite(out.logits[2]).all()
    after = {k: v for k, v in session.method.state_tensors().items() if k != "rng.cpu"}
    assert after.keys() == before.keys()
    assert all(torch.equal(after[k], before[k]) for k in before), "no prompt, graph or bank moved"


def test_batched_results_reach_the_session_per_image(tiny_model_path: Path) -> None:
    session = _session(tiny_model_path)
    results = session.step_batch(random_images(4, size=40, seed=3))
    assert [r.index for r in results] == [0, 1, 2, 3] and session.images_seen == 4
    losses = {r.diagnostics["loss"] for r in results}
    assert len(losses) == 4, "each image reports its own loss"
    for r in results:
        assert r.uncertainty is not None and r.uncertainty.shape == r.grid
        assert r.views_kept in (0, 1, 2) and np.isclose(r.probs.sum(), 1.0, atol=1e-5)
    assert results[-1].hist_adapted == tuple(session.hist_adapted)


def test_masks_drawn_on_a_device_do_not_depend_on_the_batch() -> None:
    """The accelerator's draws (checked here on the CPU's generator type): image k's masks are a
    function of its own seed, whichever batch it is in."""
    from engine.methods.parts.uom import device_masks

    cpu = torch.device("cpu")
    together = device_masks([11, 22, 33], 4, (5, 7), 0.1, cpu)
    assert together.shape == (4, 3, 5, 7) and together.dtype == torch.bool
    for k, seed in enumerate([11, 22, 33]):
        assert torch.equal(together[:, k : k + 1], device_masks([seed], 4, (5, 7), 0.1, cpu))
    assert not torch.equal(together[:, 0], together[:, 1])
    assert 0.8 < together.float().mean() < 1.0
