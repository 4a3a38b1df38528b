"""The collapse guard: detection, recovery, escalation, persistence."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import pytest
import torch
from support import random_images

from engine import Session
from engine.methods import IDiPTConfig, base
from engine.methods.base import MethodOutput, TTAMethod
from engine.run.guard import CollapseGuard, GuardConfig


class _Collapsing(TTAMethod):
    """Predicts class 0 for everything while its 'source' alternates; counts recover() calls."""

    recovered: ClassVar[int] = 0

    def forward_and_adapt(self, x: torch.Tensor) -> MethodOutput:
        self.steps += 1
        src = torch.tensor([[0.0, 1.0]]) if self.steps % 2 else torch.tensor([[1.0, 0.0]])
        return MethodOutput(logits=torch.tensor([[5.0, 0.0]]), source_logits=src)

    def recover(self) -> str:
        type(self).recovered += 1
        return "test recovery"


def test_detects_collapse_only_when_source_disagrees() -> None:
    guard = CollapseGuard(GuardConfig(window=10), num_classes=2)
    # the source also says class 0: a genuine run of one class, no action
    assert all(guard.observe(i, 0, 0) is None for i in range(30))
    guard = CollapseGuard(GuardConfig(window=10), num_classes=2)
    actions = [guard.observe(i, 0, i % 2) for i in range(60)]
    assert actions[9] == "recover"  # first full window
    assert actions[19] == "reset"  # came back within two windows
    assert [a for a in actions if a] == ["recover", "reset", "reset", "reset", "reset", "reset"]
    assert CollapseGuard(GuardConfig(enabled=False), 2).observe(0, 0, 1) is None


@pytest.fixture
def collapsing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Registers the fake method for one test only (the registry is shared by other tests)."""
    monkeypatch.setitem(base._REGISTRY, "test_collapsing", _Collapsing)
    monkeypatch.setattr(_Collapsing, "name", "test_collapsing")


@pytest.mark.usefixtures("collapsing")
def test_session_recovers_reports_and_persists_events(tiny_model_path: Path, tmp_path: Path) -> None:
    session = Session(tiny_model_path, method="test_collapsing", guard=GuardConfig(window=8))
    before = _Collapsing.recovered
    results = [session.step(img) for img in random_images(8)]
    assert _Collapsing.recovered == before + 1
    event = results[-1].guard_event
    assert event is not None and event.action == "recover" and "test recovery" in event.message
    assert "collapse guard after 8 images" in event.message
    assert all(r.guard_event is None for r in results[:-1])
    assert [e.action for e in session.events] == ["recover"]
    session.save(tmp_path / "st")
    again = Session(tiny_model_path, method="test_collapsing", guard=GuardConfig(window=8))
    again.load(tmp_path / "st")
    assert [e.to_json() for e in again.events] == [e.to_json() for e in session.events]


def test_idipt_recover_clears_the_bank(tiny_model_path: Path) -> None:
    session = Session(tiny_model_path, method_config=IDiPTConfig(bank_size=3))
    for img in random_images(4):
        session.step(img)
    assert len(session.method.bank) == 3  # type: ignore[attr-defined]
    message = session.method.recover()
    assert "bank cleared" in message and len(session.method.bank) == 0  # type: ignore[attr-defined]
