"""Replaying decisions from cached source passes gives exactly the live run's decisions."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from engine import Session, load_model
from engine.methods.idipt_plus import PATHS, IDiPTPlusConfig
from lab.bench.replay import PassCache, ReplayError, compute_passes, replay
from lab.synth.generate import generate_arrays

DEMO = Path(__file__).resolve().parents[1] / "resources" / "demo" / "model.safetensors"
# Settings that make this short stream exercise every path (the identity holds for any setting).
CONFIG = IDiPTPlusConfig(
    min_images=10, bootstrap=8, join=1.5, source_gate=True, bank_size=2, graph_dim=16, mc_passes=3
)


@pytest.fixture(scope="module")
def stream() -> list[np.ndarray]:
    """Three generated histology sites, interleaved: the source site and two shifted ones."""
    images = []
    for site in ("site1", "site2", "site4"):
        arrays, _ = generate_arrays("histo", site, 40, size=96, seed=7)
        images += list(arrays)
    order = np.random.default_rng(0).permutation(len(images))
    return [images[i] for i in order]


@pytest.mark.parametrize("report", [True, False], ids=["reported", "review-first"])
def test_replay_decides_exactly_as_the_live_run(stream: list[np.ndarray], report: bool) -> None:
    config = dataclasses.replace(CONFIG, report_operating_point=report)
    live = Session(DEMO, method="idipt+", method_config=config, device="cpu", seed=3)
    steps = [live.step(img) for img in stream]
    passes = compute_passes(Session(load_model(DEMO), method="source", device="cpu"), stream)
    replayed = replay("idipt+", passes, live.reference, live.loaded, config, seed=3)
    paths = np.array([PATHS.index(s.decision.path) for s in steps if s.decision is not None])
    assert len(paths) == len(stream)
    assert np.array_equal(np.array([s.prediction for s in steps]), replayed.preds)
    assert np.array_equal(np.array([s.source_prediction for s in steps]), replayed.source_preds)
    assert np.array_equal(paths, replayed.path)
    thresholds = np.array([s.decision.threshold for s in steps if s.decision is not None], dtype=np.float32)
    assert np.array_equal(thresholds, replayed.threshold)
    guarded = replayed.candidates["guarded"]
    live_guarded = np.array([dict(s.decision.candidates).get("guarded", np.nan) for s in steps if s.decision])
    assert np.array_equal(np.isfinite(guarded), np.isfinite(live_guarded))
    # the stream exercises the operating point: some accepted, a candidate of the ladder either way
    assert int(np.isfinite(guarded).sum()) > 0
    if report:  # reported: those decisions are taken at the site's threshold, and some change
        assert int((replayed.path == PATHS.index("accepted")).sum()) > 0
        assert int((replayed.preds != replayed.source_preds).sum()) > 0
    else:  # review first: every decision is the source model's until a review certifies a candidate
        assert int((replayed.path == PATHS.index("accepted")).sum()) == 0
        assert int((replayed.path == PATHS.index("awaiting-review")).sum()) > 0
        assert np.array_equal(replayed.preds, replayed.source_preds)


def test_foa_shift_replay_matches_the_live_method(stream: list[np.ndarray]) -> None:
    live = Session(DEMO, method="foa-shift", device="cpu")
    preds = np.array([live.step(img).prediction for img in stream])
    passes = compute_passes(Session(load_model(DEMO), method="source", device="cpu"), stream)
    assert np.array_equal(replay("foa-shift", passes, live.reference, live.loaded).preds, preds)
    with pytest.raises(ReplayError, match="cannot be replayed"):
        replay("tent", passes, live.reference, live.loaded)


def test_pass_cache_computes_once_and_recomputes_a_damaged_file(
    tmp_path: Path, stream: list[np.ndarray]
) -> None:
    files = []
    for i, img in enumerate(stream[:6]):
        files.append(tmp_path / f"{i}.png")
        Image.fromarray(img).save(files[-1])
    cache = PassCache(tmp_path / "cache")
    first = cache.passes(DEMO, files)
    stored = list((tmp_path / "cache").glob("passes-*.safetensors"))
    assert len(stored) == 1
    assert np.array_equal(cache.passes(DEMO, files).logits, first.logits)
    stored[0].write_bytes(stored[0].read_bytes()[:100])  # damaged: recomputed, not trusted
    assert np.array_equal(cache.passes(DEMO, files).features, first.features)
    files[0].write_bytes(files[1].read_bytes())  # a changed image is a new key
    assert not np.array_equal(cache.passes(DEMO, files).logits[0], first.logits[0])
