"""Shared fixtures: tiny generated models and images; nothing is downloaded."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
import pytest
import torch
from support import TINY_CARD, ModalDialogInTest, random_images

from engine import save_model

# Tests run tiny models: one thread avoids OpenMP spin-waiting when the two cores are shared.
torch.set_num_threads(1)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if torch.cuda.is_available() or torch.backends.mps.is_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA or MPS device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


@pytest.fixture(scope="session")
def tiny_model_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A randomly initialised 2-block ViT (32 px, 4x4 patches of 8 px) saved as checkpoint + card."""
    torch.manual_seed(0)
    model = TINY_CARD.build()
    path = tmp_path_factory.mktemp("model") / "tiny.safetensors"
    save_model(model, TINY_CARD, path)
    return path


@pytest.fixture
def images() -> list[np.ndarray]:
    return random_images(30)


# -- the desktop app (tests/app_studio.py) ------------------------------------------------------
@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The app tests' model: a 2-block ViT that also records a training resolution (1 µm/px)."""
    from app_fixtures import make_model

    return make_model(tmp_path_factory.mktemp("model"), mpp=1.0)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("F2TTA_STUDIO_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


@pytest.fixture
def studio(qtbot: object, home: Path, model: Path) -> Iterator[object]:
    from app_studio import Studio

    s = Studio(qtbot, home, model)
    yield s
    for studio_app in s.apps:
        s.close(studio_app)
        assert not studio_app.engine_thread.isRunning()


@pytest.fixture(scope="session", autouse=True)
def _no_user_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """No test writes the user's real data folder: a test that asks for none gets one of this
    session's (each of `make test`'s parallel workers has its own session, so two workers never
    share projects, the recent list or the app's one-instance lock)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("F2TTA_STUDIO_HOME", str(tmp_path_factory.mktemp("studio-home")))
        yield


@pytest.fixture(autouse=True)
def _collection_given_back() -> Iterator[None]:
    """After a test that built a StudioApp (its worker threads ended), CPython collects as usual."""
    yield
    collector = sys.modules.get("app.runtime.collector")
    if collector is not None:
        collector.give_back()


@pytest.fixture(autouse=True)
def _modal_dialogs_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    """A modal dialog in a test raises at once (pytest-qt fails the test with it) instead of
    holding the test until its timeout with nobody to press a button; a test that expects a
    question answers it by replacing the window's ``confirm`` (or the asking function)."""
    if "PySide6.QtWidgets" not in sys.modules:
        try:
            import PySide6.QtWidgets  # noqa: F401
        except ImportError:  # the engine's tests run without the app's extras
            return
    from PySide6.QtWidgets import QDialog, QFileDialog, QInputDialog, QMessageBox

    def refuse(what: str) -> object:
        def raiser(*args: object, **kwargs: object) -> object:
            texts = [a for a in args if isinstance(a, str)]
            if args and isinstance(args[0], QDialog):  # exec(): the dialog itself says what it asks
                texts = [args[0].windowTitle()] + (
                    [args[0].text()] if isinstance(args[0], QMessageBox) else []
                )
            raise ModalDialogInTest(f"a modal {what} opened in a test: {texts}")

        return raiser

    monkeypatch.setattr(QDialog, "exec", refuse("dialog"))
    monkeypatch.setattr(QMessageBox, "exec", refuse("message box"))
    for name in ("getExistingDirectory", "getOpenFileName", "getSaveFileName"):
        monkeypatch.setattr(QFileDialog, name, refuse(f"file dialog ({name})"))
    for name in ("getText", "getItem", "getInt"):
        monkeypatch.setattr(QInputDialog, name, refuse(f"input dialog ({name})"))


# -- the bench tests (tests/bench_fixtures.py) ----------------------------------------------------
@pytest.fixture(scope="module")
def bench_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from bench_fixtures import write_dataset

    return write_dataset(tmp_path_factory.mktemp("bench") / "data")


@pytest.fixture(scope="module")
def site_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from bench_fixtures import site_model_at

    return site_model_at(tmp_path_factory.mktemp("bench-model") / "tiny.safetensors")
