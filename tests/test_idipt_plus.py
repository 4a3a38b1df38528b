"""I-DiPT+ with a model: the source reference, decisions, state with groups, batches and the
prompted candidate (the operating point alone: tests/test_operating_point.py)."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from support import random_images, referenced_copy

from engine import Session, get_method_class, load_model
from engine.errors import StateError
from engine.methods.foa_shift import FOAShiftConfig
from engine.methods.idipt_plus import (
    ACCEPTED,
    HELD,
    Decision,
    IDiPTPlus,
    IDiPTPlusConfig,
)
from engine.methods.t3a import T3AConfig
from engine.model.prompted_vit import PromptedViT
from engine.model.source_reference import (
    ReferenceError,
    find_reference,
    load_reference,
    reference_path,
)
from engine.run.step import saved_config

SMALL = dict(get_method_class("idipt+").test_settings)  # I-DiPT's, inherited
SETTINGS = IDiPTPlusConfig().operating_point_settings()


@pytest.fixture(scope="module")
def referenced_model(tiny_model_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model copied with a source reference fitted on random images."""
    return referenced_copy(tiny_model_path, tmp_path_factory.mktemp("referenced") / "tiny.safetensors")


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


@pytest.mark.parametrize("report", [False, True], ids=["review-first", "reported"])
def test_an_accepted_operating_point_decides_only_when_reported(
    referenced_model: Path, report: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review first, in the method's own loop: an operating point its guards accepted is held and the
    source model decides every image, unless ``report_operating_point`` is on (review certifies)."""
    cfg = IDiPTPlusConfig(**SMALL, report_operating_point=report)
    session = Session(referenced_model, method="idipt+", method_config=cfg, seed=1)
    method = session.method
    assert isinstance(method, IDiPTPlus) and method.operating_point is not None
    # Every image's unit accepted at a threshold above every margin: reported, that moves every image.
    accepted = Decision(ACCEPTED, 0, 50.0, ACCEPTED, site="folder", candidates={"guarded": 50.0})
    monkeypatch.setattr(method.operating_point, "step", lambda obs, gate, site: accepted)
    results = [session.step(img, site="folder") for img in random_images(6, size=32, seed=2)]
    paths = [r.decision.path if r.decision is not None else None for r in results]
    if report:
        assert paths == [ACCEPTED] * 6 and [r.prediction for r in results] == [0] * 6
        assert not any(np.array_equal(r.probs, r.source_probs) for r in results)
    else:
        assert paths == [HELD] * 6 and all(np.array_equal(r.probs, r.source_probs) for r in results)


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
        saved_config(session.method, "idipt+", "old-state", saved, keep_saved=True)
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
