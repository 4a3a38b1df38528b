"""Saving and loading adaptation state: bit-identical continuation, refusal of bad files."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
from support import TINY_CARD, random_images

from engine import Session, StateError, save_model
from engine.methods import IDiPTConfig
from engine.run.state import STATE_FILE, read_state


def _session(path: Path, **cfg: object) -> Session:
    return Session(path, method_config=IDiPTConfig(bank_size=4, **cfg), seed=0)  # type: ignore[arg-type]


def _saved_then_stepped(model_path: Path, directory: Path) -> tuple[Session, bytes]:
    """A session saved to ``directory`` after one image and stepped once more; the saved bytes."""
    s = _session(model_path)
    s.step(random_images(1)[0])
    s.save(directory)
    good = (directory / STATE_FILE).read_bytes()
    s.step(random_images(1, seed=3)[0])
    return s, good


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
    other_card = dataclasses.replace(TINY_CARD, source_domain="")  # the same card, other weights
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
    directory = tmp_path / "st"
    s, good = _saved_then_stepped(tiny_model_path, directory)
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

    import engine.util.atomic

    directory = tmp_path / "st"
    s, good = _saved_then_stepped(tiny_model_path, directory)

    def no_space(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(engine.util.atomic.os, "fsync", no_space)
    with pytest.raises(OSError, match="No space left"):
        s.save(directory)
    monkeypatch.undo()
    assert (directory / STATE_FILE).read_bytes() == good
    assert sorted(p.name for p in directory.iterdir()) == ["state.json", STATE_FILE]  # no temp files left


# --- issue 13: crafted, misplaced and oversized states are refused with the way back --------------


def _craft(directory: Path, meta_json: str, tensors: dict[str, torch.Tensor]) -> None:
    """Write a state whose metadata is ``meta_json`` verbatim, with a valid checksum."""
    from safetensors.torch import save as st_save

    from engine.run.state import _digest

    data = st_save(tensors, metadata={"f2tta_meta": meta_json, "f2tta_sha256": _digest(meta_json, tensors)})
    (directory / STATE_FILE).write_bytes(data)


@pytest.fixture
def saved(tiny_model_path: Path, tmp_path: Path) -> tuple[Path, dict[str, torch.Tensor], dict[str, object]]:
    """A state directory saved twice (so it has a good backup), and the tensors and metadata of the last save."""
    directory = tmp_path / "st"
    _saved_twice(tiny_model_path, directory)
    tensors, meta = read_state(directory)
    return directory, tensors, meta


def test_metadata_nested_100000_deep_is_refused(
    saved: tuple[Path, dict[str, torch.Tensor], dict[str, object]],
) -> None:
    directory, tensors, meta = saved
    deep = "[" * 100_000 + "]" * 100_000
    _craft(directory, json.dumps(meta)[:-1] + f', "extra": {{"x": {deep}}}}}', tensors)
    with pytest.raises(StateError, match="nested 100002 levels deep exceeds the limit of 64"):
        read_state(directory)


def test_header_nested_100000_deep_is_refused(
    saved: tuple[Path, dict[str, torch.Tensor], dict[str, object]],
) -> None:
    directory, _, _ = saved
    header = b"[" * 100_000 + b"]" * 100_000
    (directory / STATE_FILE).write_bytes(struct.pack("<Q", len(header)) + header)
    with pytest.raises(StateError, match="nested 100000 levels deep"):
        read_state(directory)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("guard", [], "guard must be an object, not a list"),
        ("extra", [], "extra must be an object, not a list"),
        ("method_state", [1, 2], "method_state must be an object, not a list"),
        ("events", [[1, "reset", "x"]], r"events\[0\] must be an object, not a list"),
        ("guard", {"window": [[0, 1, 2]]}, r"guard.window\[0\] holds 3 entries, more than the limit of 2"),
        ("images_seen", "5", "images_seen must be an integer, not a string"),
    ],
)
def test_wrong_types_in_the_metadata_are_refused(
    tiny_model_path: Path,
    saved: tuple[Path, dict[str, torch.Tensor], dict[str, object]],
    key: str,
    value: object,
    message: str,
) -> None:
    directory, tensors, meta = saved
    _craft(directory, json.dumps({**meta, key: value}), tensors)
    target = _session(tiny_model_path)
    before = target.state_fingerprint()
    with pytest.raises(StateError, match=message):
        target.load(directory)
    assert target.state_fingerprint() == before and target.images_seen == 0


def test_fifo_as_the_state_file_is_refused_at_once(
    saved: tuple[Path, dict[str, torch.Tensor], dict[str, object]],
) -> None:
    from hostile_files import within

    directory, _, _ = saved
    (directory / STATE_FILE).unlink()
    os.mkfifo(directory / STATE_FILE)
    with pytest.raises(StateError, match=r"not a regular file: it is a named pipe \(FIFO\)"):
        within(10, lambda: read_state(directory))  # blocked for ever before


@pytest.mark.parametrize("target", ["/dev/zero", "outside"])
def test_state_symlinked_out_of_its_folder_is_refused(
    saved: tuple[Path, dict[str, torch.Tensor], dict[str, object]], tmp_path: Path, target: str
) -> None:
    directory, _, _ = saved
    state = directory / STATE_FILE
    if target == "outside":
        target = str(tmp_path / "elsewhere.safetensors")
        shutil.copy(state, target)  # a valid state, but not this folder's
    state.unlink()
    state.symlink_to(target)
    with pytest.raises(StateError, match=f"a symbolic link to {target}, outside the state folder"):
        read_state(directory)


def test_symlink_inside_the_state_folder_is_followed(
    saved: tuple[Path, dict[str, torch.Tensor], dict[str, object]],
) -> None:
    directory, _, meta = saved
    state = directory / STATE_FILE
    state.rename(directory / "kept.safetensors")
    state.symlink_to("kept.safetensors")
    assert read_state(directory)[1]["images_seen"] == meta["images_seen"]


def test_oversized_state_is_refused_before_reading(
    saved: tuple[Path, dict[str, torch.Tensor], dict[str, object]], monkeypatch: pytest.MonkeyPatch
) -> None:
    import engine.run.state

    directory, _, _ = saved
    monkeypatch.setattr(engine.run.state, "MAX_STATE_BYTES", 1000)
    with pytest.raises(StateError, match=r"state file of \d+ bytes exceeds the limit of 1000 bytes"):
        read_state(directory)


def test_refusal_names_the_backup_and_its_restore_command_works(
    tiny_model_path: Path, saved: tuple[Path, dict[str, torch.Tensor], dict[str, object]]
) -> None:
    directory, _, _ = saved
    state = directory / STATE_FILE
    state.write_bytes(state.read_bytes()[:100])  # damaged
    with pytest.raises(StateError) as info:
        _session(tiny_model_path).load(directory)
    message = str(info.value)
    assert f"The previous good state is kept in {state}.backup; to restore it, run: " in message
    command = message.split("to restore it, run: ", 1)[1]
    damaged = state.read_bytes()
    subprocess.run(command, shell=True, check=True)
    assert (directory / "state.safetensors.damaged").read_bytes() == damaged  # kept for inspection
    restored = _session(tiny_model_path)
    restored.load(directory)  # the backup is the state now
    assert restored.images_seen == 3


def test_refusal_says_when_there_is_no_usable_backup(
    saved: tuple[Path, dict[str, torch.Tensor], dict[str, object]],
) -> None:
    directory, _, _ = saved
    state = directory / STATE_FILE
    state.write_bytes(b"garbage garbage")
    backup = directory / (STATE_FILE + ".backup")
    backup.write_bytes(b"also garbage")
    with pytest.raises(StateError, match="The backup copy is not usable either"):
        read_state(directory)
    backup.unlink()
    with pytest.raises(StateError, match=r"There is no backup copy \(.*backup does not exist\)"):
        read_state(directory)


def test_the_readable_copy_holds_the_metadata_with_its_record_on_one_line() -> None:
    from engine.run.state import readable_json

    meta = {"images_seen": 3, "method": "source", "extra": {"sources": {"a": {"processed": ["1,2", "3,4"]}}}}
    text = readable_json(meta)
    assert json.loads(text) == meta
    assert '  "images_seen": 3,' in text.splitlines()
    assert '  "extra": {"sources": {"a": {"processed": ["1,2", "3,4"]}}}' in text.splitlines()
    assert json.loads(readable_json({"images_seen": 1})) == {"images_seen": 1}
    assert json.loads(readable_json({"extra": {}})) == {"extra": {}}
