"""What the tests share besides fixtures: the tiny model card, a card beside a copy of the tiny
model, random images, a reader that fails on chosen items, and the error a modal dialog raises in a test.

Tests import these from here, never from ``conftest.py``: pytest imports ``conftest`` itself (as
``conftest``), and ``from tests.conftest import`` imported it a second time under another name,
running it twice (issue 27).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from PIL import Image

from engine import ImageReadError, ModelCard, StreamItem

if TYPE_CHECKING:
    from engine.methods.decision import DecisionRecord
    from engine.run.step import StepResult

TINY_CARD = ModelCard(
    arch="vit_tiny_patch16_224",
    classes=("normal", "tumor"),
    img_size=32,
    model_kwargs={"depth": 2, "patch_size": 8},
    source_domain="test",
)


def card_beside(tiny_model_path: Path, tmp_path: Path, **changes: object) -> Path:
    """A copy of the tiny model in ``tmp_path`` with its card's fields replaced by ``changes``."""
    checkpoint = tmp_path / "m.safetensors"
    shutil.copy(tiny_model_path, checkpoint)
    card = {**TINY_CARD.to_json(), **changes}
    (tmp_path / "m.json").write_text(json.dumps(card))
    return checkpoint


def random_images(n: int, size: int = 40, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, (size, size, 3), dtype=np.uint8) for _ in range(n)]


class ModalDialogInTest(AssertionError):
    """A test opened a modal dialog nobody answers: it would block until the test timeout."""


def referenced_copy(model: Path, path: Path) -> Path:
    """``model`` (a checkpoint and its card) copied to ``path`` with a source reference fitted on
    40 random images of two sites, so I-DiPT+'s operating point runs on it."""
    import torch

    from engine import Session, load_model
    from engine.model.source_reference import fit_reference, reference_path, save_reference

    shutil.copy(model, path)
    shutil.copy(model.with_suffix(".json"), path.with_suffix(".json"))
    loaded = load_model(path)
    session = Session(loaded, method="source")
    x = torch.cat([session.preprocess(img) for img in random_images(40, size=32, seed=9)])
    y = torch.arange(40) % 2
    ref = fit_reference(session.model, [(x[:20], y[:20]), (x[20:], y[20:])], 2, loaded.fingerprint)
    save_reference(ref, reference_path(path), {"test": True})
    return path


def learnt_accuracy(kind: str, site: str) -> float:
    """Accuracy on 200 held-out images of a generated site after training a model there with a
    reduced recipe (20 epochs, patience 6, 480 training and 120 validation images; seeded): the
    slow tests' check that a site's classes are learnable."""
    import torch

    from engine.training import TrainConfig, build_model, evaluate, fit
    from lab.synth import generate_arrays

    x, y = generate_arrays(kind, site, 800, seed=0)
    t = torch.from_numpy(x).permute(0, 3, 1, 2).contiguous()
    lab = torch.from_numpy(y)
    cfg = TrainConfig(epochs=20, patience=6)
    torch.manual_seed(0)
    model = build_model(cfg, 2)
    fit(model, (t[:480], lab[:480]), (t[480:600], lab[480:600]), cfg)
    return evaluate(model, (x[600:], y[600:]))


def two_class_step(decision: DecisionRecord, index: int = 0, source_prediction: int = 1) -> StepResult:
    """A method's step result for one image of a two-class model (0.3 / 0.7, called class 1) with
    ``decision`` as its decision record; the source model called ``source_prediction`` (its
    probabilities reversed where it called class 0)."""
    from engine.run.step import StepResult

    probs = np.array([0.3, 0.7], dtype=np.float32)
    return StepResult(
        index=index,
        probs=probs,
        prediction=1,
        confidence=0.7,
        source_probs=probs if source_prediction == 1 else probs[::-1].copy(),
        source_prediction=source_prediction,
        uncertainty=None,
        uncertain_tokens=np.zeros(0, int),
        reliable_tokens=np.zeros(0, int),
        grid=(2, 2),
        seconds=0.01,
        decision=decision,
    )


def failing_reader(
    unreadable: Collection[str], errors: Mapping[str, BaseException] | None = None
) -> Callable[[StreamItem], Image.Image]:
    """A stream reader of items' image files that raises, by item key, ``ImageReadError("KEY: not
    an image")`` for the ``unreadable`` keys and ``errors[KEY]`` for the others it names."""

    def reader(item: StreamItem) -> Image.Image:
        if item.key in unreadable:
            raise ImageReadError(f"{item.key}: not an image")
        if errors is not None and item.key in errors:
            raise errors[item.key]
        assert item.path is not None
        return Image.open(item.path).convert("RGB")

    return reader
