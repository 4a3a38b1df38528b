"""Loading checkpoints and model cards."""

from __future__ import annotations

import json
import os
import pickle
import shutil
from pathlib import Path

import pytest
import torch
from hostile_files import within
from support import TINY_CARD, card_beside

from engine import ModelCard, ModelLoadError, load_model, save_model


def test_roundtrip_and_fingerprint(tiny_model_path: Path) -> None:
    a = load_model(tiny_model_path)
    b = load_model(tiny_model_path)
    assert a.card == TINY_CARD
    assert a.fingerprint == b.fingerprint
    assert not a.model.training
    assert all(not p.requires_grad for p in a.model.parameters())


def test_mismatched_checkpoint_names_what_differs(tiny_model_path: Path, tmp_path: Path) -> None:
    wrong = tmp_path / "wrong.safetensors"
    shutil.copy(tiny_model_path, wrong)
    card = ModelCard(
        arch=TINY_CARD.arch, classes=("a", "b", "c"), img_size=32, model_kwargs={"depth": 3, "patch_size": 8}
    )
    (tmp_path / "wrong.json").write_text(json.dumps(card.to_json()))
    with pytest.raises(ModelLoadError) as info:
        load_model(wrong)
    message = str(info.value)
    assert "missing" in message and "blocks.2" in message
    assert "head.weight: expected (3, 192), checkpoint has (2, 192)" in message


def test_torch_file_is_loaded_weights_only(tiny_model_path: Path, tmp_path: Path) -> None:
    loaded = load_model(tiny_model_path)
    pt = tmp_path / "m.pt"
    torch.save({"state_dict": loaded.model.state_dict()}, pt)
    (tmp_path / "m.json").write_text(json.dumps(TINY_CARD.to_json()))
    assert load_model(pt).fingerprint == loaded.fingerprint


class _Payload:
    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (print, ("PAYLOAD EXECUTED",))


def test_pickle_payload_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pt = tmp_path / "evil.pt"
    with pt.open("wb") as fh:
        pickle.dump({"weight": _Payload()}, fh)
    (tmp_path / "evil.json").write_text(json.dumps(TINY_CARD.to_json()))
    with pytest.raises(ModelLoadError, match="cannot be loaded safely"):
        load_model(pt)
    assert "PAYLOAD EXECUTED" not in capsys.readouterr().out


def test_missing_and_broken_cards(tmp_path: Path, tiny_model_path: Path) -> None:
    lone = tmp_path / "lone.safetensors"
    shutil.copy(tiny_model_path, lone)
    with pytest.raises(ModelLoadError, match="model card not found"):
        load_model(lone)
    (tmp_path / "lone.json").write_text("{not json")
    with pytest.raises(ModelLoadError, match="unreadable"):
        load_model(lone)
    (tmp_path / "lone.json").write_text(json.dumps({"arch": "vit_tiny_patch16_224"}))
    with pytest.raises(ModelLoadError, match="missing field"):
        load_model(lone)
    truncated = tmp_path / "t.safetensors"
    truncated.write_bytes(tiny_model_path.read_bytes()[:1000])
    (tmp_path / "t.json").write_text(json.dumps(TINY_CARD.to_json()))
    with pytest.raises(ModelLoadError, match="not a readable safetensors"):
        load_model(truncated)


def test_save_model_writes_card(tmp_path: Path) -> None:
    model = TINY_CARD.build()
    card_path = save_model(model, TINY_CARD, tmp_path / "x.safetensors")
    assert json.loads(card_path.read_text())["classes"] == ["normal", "tumor"]


# --- issue 13: cards are untrusted input: types, bounds, shapes before any allocation --------------


class _RealBuild(BaseException):
    """Raised by the spy when a model would be built outside the meta device (not caught as Exception)."""


@pytest.fixture
def no_real_build(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """timm.create_model may only run on the meta device; returns the devices it ran on."""
    import timm

    real = timm.create_model
    devices: list[str] = []

    def spy(*args: object, **kwargs: object) -> torch.nn.Module:
        device = torch.empty(0).device.type
        devices.append(device)
        if device != "meta":
            raise _RealBuild(f"a model was built on {device} with {kwargs}")
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(timm, "create_model", spy)
    return devices


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"img_size": 20000}, r"img_size = 20000 is out of range \[8, 2048\]"),
        (
            {"model_kwargs": {"depth": 3000, "patch_size": 8}},
            r"model_kwargs.depth = 3000 is out of range \[1, 64\]",
        ),
        ({"model_kwargs": {"depth": 12, "patch_size": 8}}, r"missing 120 tensor\(s\), e.g. blocks.10"),
        ({"img_size": 512}, r"pos_embed: expected \(1, 4097, 192\), checkpoint has \(1, 17, 192\)"),
    ],
    ids=["img_size-20000", "depth-3000", "depth-12-vs-checkpoint-2", "img_size-512-vs-checkpoint-32"],
)
def test_card_is_checked_before_any_model_is_built(
    tiny_model_path: Path, tmp_path: Path, no_real_build: list[str], changes: dict[str, object], message: str
) -> None:
    checkpoint = card_beside(tiny_model_path, tmp_path, **changes)
    with pytest.raises(ModelLoadError, match=message):
        load_model(checkpoint)
    assert set(no_real_build) <= {"meta"}


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("std", [0, 0, 0], r"std\[0\] = 0.0 is out of range \[0.001, 10\]"),
        ("std", [0.5, -0.5, 0.5], r"std\[1\] = -0.5 is out of range"),
        ("mean", [0.5, 0.5, 7], r"mean\[2\] = 7.0 is out of range \[0, 1\]"),
        ("mpp", 0, r"mpp = 0.0 is out of range"),
        ("mpp", [], "mpp must be a number, not a list"),
        ("positive_class", 2, r"positive_class = 2 is out of range \[0, 1\]"),
        ("positive_class", "1", "positive_class must be an integer, not a string"),
        ("classes", {"normal": 0, "tumor": 1}, "classes must be a list, not an object"),
        ("classes", ["normal", "normal"], "names must be distinct"),
        ("classes", ["normal", ""], r"classes\[1\] must not be empty"),
        ("training", [], "training must be an object, not a list"),
        (
            "model_kwargs",
            {"depth": 2, "patch_size": 8, "checkpoint_path": "/etc/passwd"},
            "checkpoint_path is not allowed",
        ),
        (
            "model_kwargs",
            {"depth": 2, "patch_size": 8, "in_chans": 1},
            r"in_chans = 1 is out of range \[3, 3\]",
        ),
        (
            "model_kwargs",
            {"depth": 2, "patch_size": 8, "mlp_ratio": 1e9},
            r"mlp_ratio = 1000000000.0 is out of range",
        ),
        (
            "model_kwargs",
            {"depth": 2, "patch_size": 8, "drop_rate": float("nan")},
            r"drop_rate = nan is out of range",
        ),
        (
            "model_kwargs",
            {"depth": 2, "patch_size": 8, "num_heads": 0},
            r"num_heads = 0 is out of range \[1, 128\]",
        ),
        (
            "model_kwargs",
            {"depth": 2, "patch_size": 8, "embed_dim": 10**6},
            r"embed_dim = 1000000 is out of range",
        ),
        (
            "model_kwargs",
            {"depth": 2, "patch_size": 8, "reg_tokens": 10**6},
            r"reg_tokens = 1000000 is out of range",
        ),
        ("model_kwargs", {"depth": 2, "patch_size": 0}, r"patch_size = 0 is out of range"),
        ("arch", "not_a_timm_model", "is not a timm architecture"),
    ],
)
def test_card_fields_are_typed_and_bounded(
    tiny_model_path: Path, tmp_path: Path, no_real_build: list[str], field: str, value: object, message: str
) -> None:
    with pytest.raises(ModelLoadError, match=message):
        load_model(card_beside(tiny_model_path, tmp_path, **{field: value}))
    assert no_real_build == []  # refused from the card alone


def test_std_zero_card_built_in_code_is_refused(tiny_model_path: Path) -> None:
    card = ModelCard(
        arch=TINY_CARD.arch,
        classes=TINY_CARD.classes,
        img_size=32,
        std=(0.0, 0.0, 0.0),
        model_kwargs={"depth": 2, "patch_size": 8},
    )
    with pytest.raises(ModelLoadError, match=r"std\[0\]"):
        load_model(tiny_model_path, card=card)  # gave NaN confidences and exit code 0 before


def test_the_schema_checks_every_field_of_a_card() -> None:
    """The schema (``engine/model/card_schema.py``) reads a card's values by field name: a field
    added to :class:`ModelCard` that it does not check would pass unbounded."""
    import dataclasses
    from collections import UserDict

    from engine.model.card_schema import check_card

    class Read(UserDict[str, object]):
        def __init__(self, values: dict[str, object]) -> None:
            super().__init__(values)
            self.read: set[str] = set()

        def __getitem__(self, key: str) -> object:
            self.read.add(key)
            return super().__getitem__(key)

    values = Read(vars(TINY_CARD))
    check_card(values)
    assert values.read == {f.name for f in dataclasses.fields(ModelCard)}


def test_card_nested_100000_deep_is_refused(tiny_model_path: Path, tmp_path: Path) -> None:
    checkpoint = card_beside(tiny_model_path, tmp_path)
    card = json.loads((tmp_path / "m.json").read_text())
    text = json.dumps(card)[:-1] + ', "training": {"x": ' + "[" * 100_000 + "]" * 100_000 + "}}"
    (tmp_path / "m.json").write_text(text)
    with pytest.raises(ModelLoadError, match="nested 100002 levels deep exceeds the limit of 32"):
        load_model(checkpoint)


@pytest.mark.parametrize("which", ["card", "checkpoint"])
def test_fifo_card_or_checkpoint_is_refused_at_once(
    tiny_model_path: Path, tmp_path: Path, which: str
) -> None:
    checkpoint = card_beside(tiny_model_path, tmp_path)
    victim = tmp_path / ("m.json" if which == "card" else "m.safetensors")
    victim.unlink()
    os.mkfifo(victim)
    with pytest.raises(ModelLoadError, match=r"named pipe \(FIFO\)"):
        within(10, lambda: load_model(checkpoint))  # blocked for ever before
