"""Loading checkpoints and model cards."""

from __future__ import annotations

import json
import pickle
import shutil
from pathlib import Path

import pytest
import torch

from engine import ModelCard, ModelLoadError, load_model, save_model
from tests.conftest import TINY_CARD


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
