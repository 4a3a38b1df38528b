"""The tiny dataset and model the bench tests share (their fixtures, ``bench_data`` and
``site_model``, are in ``conftest.py``)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from support import TINY_CARD

from engine import save_model
from lab.bench import BenchSettings

DOMAINS = ("site1", "site2", "site3")


#: A suite recipe small enough for a test (``f2tta bench-suite``): one kind, one model, 20 images a
#: site; each test changes what it is about.
TINY_RECIPE: dict[str, object] = {
    "name": "tiny",
    "kinds": [{"kind": "histo", "train_seed": 5, "eval_seed": 6, "fragments": 4}],
    "training_seeds": [1],
    "train_per_site": 60,
    "eval_per_site": 60,
    "size": 32,
    "source": "site1",
    "epochs": 2,
    "patience": 2,
    "mixes": [0.5, "drift"],
    "deltas": [1.0],
    "images_per_site": 20,
    "stream_seed": 0,
    "methods": ["source", "idipt+", "foa-shift"],
}


def site_model_at(path: Path) -> Path:
    """The tiny random ViT, trained (so to speak) on site1, saved at ``path``."""
    torch.manual_seed(1)
    card = dataclasses.replace(TINY_CARD, source_domain="site1")
    save_model(card.build(), card, path)
    return path


def write_dataset(root: Path, per_class: int = 8) -> Path:
    rng = np.random.default_rng(5)
    for d, domain in enumerate(DOMAINS):
        for c, cls in enumerate(("normal", "tumor")):
            folder = root / domain / cls
            folder.mkdir(parents=True)
            for i in range(per_class):
                scale = rng.uniform(0.3, 1.0)
                img = rng.integers(0, 256, (32, 32, 3)) * scale + 10 * d + 5 * c
                Image.fromarray(img.clip(0, 255).astype(np.uint8)).save(folder / f"img{i}.png")
    return root


def bench_settings(data: Path, model: Path, **kw: object) -> BenchSettings:
    base: dict[str, object] = {"methods": ("source", "idipt"), "seeds": (0, 1), "threads": 1, "device": "cpu"}
    base.update(kw)
    return BenchSettings(data=data, model=model, **base)  # type: ignore[arg-type]
