"""What is read ahead holds a preview, never the whole picture, in the app (issue 42, item 7).

The app's run kept every picture read ahead whole until the model took it, for the preview it
then makes of it: 260 photographs of 2 400 x 2 000 at a batch of 64 (three batches read ahead)
peaked at 5.6 GB, 4.3 GB over a batch of 1. Pictures are now reduced to the preview's size on the
reading threads; the preview the app shows is the one it made from the whole picture.
``benchmarks/read_ahead_memory.py`` measures the peak.
"""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import numpy as np
import pytest
from app_studio import Studio
from PIL import Image

import app.worker.engine_worker as engine_worker
from app.core.overlay import preview_array
from app.worker.io import PREVIEW_SIZE
from engine import Predicted, Session, StreamRun, open_folder, read_image
from engine.run.reading import reduced

SIZE = (1200, 1000)  # larger than a preview, small enough to write and read quickly


def _photos(folder: Path, count: int) -> Path:
    folder.mkdir(parents=True)
    rng = np.random.default_rng(3)
    for i in range(count):
        base = rng.integers(60, 200, (10, 12, 3), dtype=np.uint8)
        Image.fromarray(base).resize(SIZE, Image.Resampling.BICUBIC).save(
            folder / f"p{i:02d}.jpg", quality=90
        )
    return folder


def test_a_picture_read_ahead_is_kept_at_the_previews_size(tiny_model_path: Path, tmp_path: Path) -> None:
    folder = _photos(tmp_path / "site", 5)
    source = open_folder(folder, ("normal", "tumor"))
    run = StreamRun(
        Session(tiny_model_path, method="source"), source.items, batch=2, keep_images=PREVIEW_SIZE
    )
    kept = {o.item.key: o.image for o in run.outcomes() if isinstance(o, Predicted)}
    assert len(kept) == 5
    for key, image in kept.items():
        assert isinstance(image, Image.Image) and max(image.size) == PREVIEW_SIZE, image
        whole = read_image(folder / key)
        assert np.array_equal(preview_array(image, PREVIEW_SIZE), preview_array(whole, PREVIEW_SIZE)), key


@pytest.mark.parametrize("shape", [(20, 30, 3), (500, 300, 3)], ids=["small-tile", "large-tile"])
def test_a_tile_is_reduced_as_a_picture_is(shape: tuple[int, int, int]) -> None:
    tile = np.random.default_rng(0).integers(0, 256, shape, dtype=np.uint8)
    kept = reduced(tile, PREVIEW_SIZE)
    assert np.array_equal(preview_array(kept, PREVIEW_SIZE), preview_array(tile, PREVIEW_SIZE))
    assert kept is tile if max(shape) <= PREVIEW_SIZE else max(np.asarray(kept).shape) == PREVIEW_SIZE


def test_the_app_reads_ahead_previews_not_whole_pictures(
    studio: Studio, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _photos(tmp_path / "site", 6)
    sizes: list[tuple[int, int]] = []
    real = engine_worker.item_result

    def spy(outcome: object, overlays: object) -> object:
        if isinstance(outcome, Predicted):
            image = outcome.image
            sizes.append(image.size if isinstance(image, Image.Image) else image.shape[1::-1])
        return real(outcome, overlays)  # type: ignore[arg-type]

    monkeypatch.setattr(engine_worker, "item_result", spy)
    app = studio.open(batch=4)
    studio.open_folder(app, folder)
    studio.run_to_end(app)
    assert len(sizes) == 6
    assert all(max(size) <= PREVIEW_SIZE for size in sizes), sizes
    assert len(app.controller.model.rows) == 6
