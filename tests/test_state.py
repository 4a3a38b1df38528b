"""Saving and loading adaptation state: bit-identical continuation, refusal of bad files."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch

from engine import IDiPTConfig, ModelCard, Session, StateError, save_model
from engine.state import STATE_FILE, read_state
from tests.conftest import random_images


def _session(path: Path, **cfg: object) -> Session:
    return Session(path, method_config=IDiPTConfig(bank_size=4, **cfg), seed=0)  # type: ignore[arg-type]


def test_save_load_continue_is_bit_identical(tiny_model_path: Path, tmp_path: Path) -> None:
    imgs = random_images(24)
    uninterrupted = _session(tiny_model_path)
    expected = [uninterrupted.step(i) for i in imgs]

    first = _session(tiny_model_path)
    for i in imgs[:10]:
        first.step(i)
    first.save(tmp_path / "state", extra={"note": "x"})
    resumed = _session(tiny_model_path)
    assert resumed.load(tmp_path / "state") == {"note": "x"}
    assert resumed.images_seen == 10
    for img, exp in zip(imgs[10:], expected[10:], strict=True):
        got = resumed.step(img)
        assert got.index == exp.index
        assert np.array_equal(got.probs, exp.probs)
        assert got.uncertainty is not None and exp.uncertainty is not None
        assert np.array_equal(got.uncertainty, exp.uncertainty)
    assert resumed.state_fingerprint() == uninterrupted.state_fingerprint()


def _saved_twice(model: Path, directory: Path) -> tuple[Session, str]:
    s = _session(model)
    for i in random_images(3):
        s.step(i)
    s.save(directory)
    good = s.state_fingerprint()
    for i in random_images(3, seed=2):
        s.step(i)
    s.save(directory)  # the first save is now the backup
    return s, good


@pytest.mark.parametrize("damage", ["truncate", "bitflip", "empty", "garbage"])
def test_damaged_state_is_refused_and_backup_stays_readable(
    tiny_model_path: Path, tmp_path: Path, damage: str
) -> None:
    directory = tmp_path / "state"
    _, backup_fingerprint = _saved_twice(tiny_model_path, directory)
    path = directory / STATE_FILE
    data = bytearray(path.read_bytes())
    if damage == "truncate":
        data = data[: len(data) // 2]
    elif damage == "bitflip":
        data[-100] ^= 0x10
    elif damage == "empty":
        data = bytearray()
    else:
        data = bytearray(b"\x00" * 8 + b"hello")
    path.write_bytes(bytes(data))

    target = _session(tiny_model_path)
    for i in random_images(2, seed=7):
        target.step(i)
    before = target.state_fingerprint()
    with pytest.raises(StateError, match=str(path.name)):
        target.load(directory)
    assert target.state_fingerprint() == before and target.images_seen == 2  # unchanged
    target.load(directory, use_backup=True)
    assert target.state_fingerprint() == backup_fingerprint


def test_foreign_model_state_is_refused(tiny_model_path: Path, tmp_path: Path) -> None:
    s = _session(tiny_model_path)
    s.step(random_images(1)[0])
    s.save(tmp_path / "state")
    torch.manual_seed(123)
    other_card = ModelCard(
        arch="vit_tiny_patch16_224",
        classes=("normal", "tumor"),
        img_size=32,
        model_kwargs={"depth": 2, "patch_size": 8},
    )
    other_path = tmp_path / "other.safetensors"
    save_model(other_card.build(), other_card, other_path)
    other = _session(other_path)
    with pytest.raises(StateError, match="belongs to another model"):
        other.load(tmp_path / "state")
    source = Session(tiny_model_path, method="source")
    with pytest.raises(StateError, match="method 'idipt'"):
        source.load(tmp_path / "state")


def test_state_has_no_pickle_and_readable_json(tiny_model_path: Path, tmp_path: Path) -> None:
    s = _session(tiny_model_path)
    for i in random_images(5):
        s.step(i)
    s.save(tmp_path / "st")
    tensors, meta = read_state(tmp_path / "st")
    assert {"phi_i", "gate", "bank.keys", "bank.specific", "bank.invariant", "rng.cpu"} <= set(tensors)
    assert any(k.startswith("optim.") for k in tensors)
    assert meta["images_seen"] == 5 and meta["model_fingerprint"] == s.fingerprint
    assert meta["method_config"]["bank_size"] == 4
    assert (tmp_path / "st" / "state.json").read_text().startswith("{")
    assert b"\x80\x04" not in (tmp_path / "st" / STATE_FILE).read_bytes()[:64]  # not a pickle stream


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions")
def test_unwritable_location_fails_loudly_and_keeps_state(tiny_model_path: Path, tmp_path: Path) -> None:
    s = _session(tiny_model_path)
    s.step(random_images(1)[0])
    directory = tmp_path / "st"
    s.save(directory)
    good = (directory / STATE_FILE).read_bytes()
    s.step(random_images(1, seed=3)[0])
    directory.chmod(0o500)
    try:
        with pytest.raises(OSError):
            s.save(directory)
    finally:
        directory.chmod(0o700)
    assert (directory / STATE_FILE).read_bytes() == good


def test_full_disk_fails_loudly_and_keeps_state(
    tiny_model_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    import engine._atomic

    s = _session(tiny_model_path)
    s.step(random_images(1)[0])
    directory = tmp_path / "st"
    s.save(directory)
    good = (directory / STATE_FILE).read_bytes()
    s.step(random_images(1, seed=3)[0])

    def no_space(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(engine._atomic.os, "fsync", no_space)
    with pytest.raises(OSError, match="No space left"):
        s.save(directory)
    monkeypatch.undo()
    assert (directory / STATE_FILE).read_bytes() == good
    assert sorted(p.name for p in directory.iterdir()) == ["state.json", STATE_FILE]  # no temp files left
