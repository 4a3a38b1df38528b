"""The CUDA (or MPS) path: every method, the prompted ViT and I-DiPT+'s replay on the accelerator.

Marked ``gpu``: skipped where no accelerator is present (``tests/conftest.py``). On a machine
with one: ``python -m pytest -m gpu tests/test_gpu.py -o addopts=''`` (``benchmarks/gpu_check.sh``
runs it with the step-cost benchmark).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from support import random_images

from engine import Session, list_methods, load_model
from engine.io.sources import StreamItem
from engine.methods.idipt_plus import PATHS, IDiPTPlusConfig
from engine.model.prompted_vit import PrefixPrompts, PromptedViT
from engine.run.outcomes import Predicted
from engine.run.stream import StreamRun
from lab.bench.replay import compute_passes, replay
from lab.synth.generate import generate_arrays
from tests.test_methods import _config

pytestmark = pytest.mark.gpu
DEVICE = "cuda" if torch.cuda.is_available() else "mps"
DEMO = Path(__file__).resolve().parents[1] / "resources" / "demo" / "model.safetensors"


@pytest.mark.parametrize("name", list_methods())
def test_every_method_steps_on_the_accelerator(tiny_model_path: Path, name: str) -> None:
    session = Session(tiny_model_path, method=name, method_config=_config(name), device=DEVICE, seed=0)
    assert session.device.type == DEVICE
    for img in random_images(4, size=36):
        r = session.step(img)
        assert np.isfinite(r.probs).all() and r.probs.sum() == pytest.approx(1.0, abs=1e-4)
        assert np.isfinite(r.source_probs).all()


def test_fresh_gated_prompts_reproduce_the_source_on_the_accelerator(tiny_model_path: Path) -> None:
    vit = load_model(tiny_model_path).model.to(DEVICE)
    pv = PromptedViT(vit)
    x = torch.randn(3, 3, 32, 32, generator=torch.Generator().manual_seed(1)).to(DEVICE)
    prompts = PrefixPrompts.from_prompts([[torch.randn(pv.depth, 12, pv.attn_dim).to(DEVICE)]] * 3)
    with torch.no_grad():
        out = pv(x, prompts, torch.zeros(pv.depth, pv.num_heads, device=DEVICE))
        assert torch.allclose(out, vit(x), atol=1e-5)
        assert torch.equal(pv.source_pass(x).logits, vit(x))


def test_idipt_plus_replay_decides_as_the_live_run_on_the_accelerator() -> None:
    images = []
    for site in ("site1", "site2", "site4"):
        arrays, _ = generate_arrays("histo", site, 40, size=96, seed=7)
        images += list(arrays)
    stream = [images[i] for i in np.random.default_rng(0).permutation(len(images))]
    # reported without review, so the accelerator's decisions at site thresholds are compared too
    # (review first, the default, reports the source model's until a review certifies a candidate)
    config = IDiPTPlusConfig(
        min_images=10, bootstrap=8, join=1.5, source_gate=True, report_operating_point=True
    )
    live = Session(DEMO, method="idipt+", method_config=config, device=DEVICE, seed=3)
    steps = [live.step(img) for img in stream]
    passes = compute_passes(Session(load_model(DEMO), method="source", device=DEVICE), stream)
    replayed = replay("idipt+", passes, live.reference, live.loaded, config, seed=3)
    assert np.array_equal(np.array([s.prediction for s in steps]), replayed.preds)
    assert np.array_equal(
        np.array([PATHS.index(s.decision.path) for s in steps if s.decision]), replayed.path
    )
    thresholds = np.array([s.decision.threshold for s in steps if s.decision], dtype=np.float32)
    assert np.array_equal(thresholds, replayed.threshold)
    assert int((replayed.path == PATHS.index("accepted")).sum()) > 0
    assert int((replayed.preds != replayed.source_preds).sum()) > 0


@pytest.mark.parametrize("name", ["source", "idipt"])
def test_batched_steps_on_the_accelerator(tiny_model_path: Path, name: str) -> None:
    images = random_images(8, size=36, seed=2)
    one = Session(tiny_model_path, method=name, method_config=_config(name), device=DEVICE, seed=0)
    many = Session(tiny_model_path, method=name, method_config=_config(name), device=DEVICE, seed=0)
    singles = [one.step(img) for img in images]
    batched = many.step_batch(images)
    assert [r.source_prediction for r in batched] == [r.source_prediction for r in singles]
    for r in batched:
        assert np.isfinite(r.probs).all() and r.probs.sum() == pytest.approx(1.0, abs=1e-4)
    if name == "idipt":
        assert all(r.uncertainty is not None and np.isfinite(r.uncertainty).all() for r in batched)


def test_batched_uncertainty_on_the_accelerator_is_the_one_image_at_a_time(tiny_model_path: Path) -> None:
    """The dropout masks are drawn on the device, one seed per image: batches do not change them."""
    images = random_images(6, size=36, seed=4)
    one = Session(tiny_model_path, method="idipt", method_config=_config("idipt"), device=DEVICE, seed=1)
    many = Session(tiny_model_path, method="idipt", method_config=_config("idipt"), device=DEVICE, seed=1)
    singles = [one.step(img) for img in images]
    batched = many.step_batch(images[:3]) + many.step_batch(images[3:])
    for a, b in zip(singles, batched, strict=True):
        assert a.uncertainty is not None and b.uncertainty is not None
        assert np.allclose(a.uncertainty, b.uncertainty, atol=1e-5)
        shared = set(a.uncertain_tokens.tolist()) & set(b.uncertain_tokens.tolist())
        assert len(shared) >= 0.8 * len(a.uncertain_tokens), "the same T_U up to near ties"


def test_passes_looking_ahead_decide_as_taking_turns_on_the_accelerator() -> None:
    """On CUDA the loop runs the next batch's decision pass on a worker thread by default
    (``engine/run/ahead.py``): the decisions and the state are those of taking turns."""
    if DEVICE != "cuda":
        pytest.skip("the loop looks ahead on CUDA only")
    arrays, _ = generate_arrays("histo", "site2", 48, size=96, seed=5)
    images = list(arrays)
    items = [StreamItem(i, f"im{i:03d}", f"im{i:03d}") for i in range(len(images))]
    runs = {}
    for look_ahead in (False, True):
        session = Session(DEMO, method="idipt+", device=DEVICE, seed=3)
        run = StreamRun(
            session, items, lambda item: images[item.position], source_id="site", batch=8, maps="behind"
        )
        assert run.look_ahead == (DEVICE == "cuda")
        run.look_ahead = look_ahead
        rows = [o.row for o in run.outcomes() if isinstance(o, Predicted)]
        runs[look_ahead] = (rows, session.state_fingerprint())
    (turns, turns_state), (ahead, ahead_state) = runs[False], runs[True]
    assert [r.prediction for r in ahead] == [r.prediction for r in turns] and len(ahead) == 48
    assert [r.decision_path for r in ahead] == [r.decision_path for r in turns]
    assert [r.candidates for r in ahead] == [r.candidates for r in turns]
    assert ahead_state == turns_state
