"""What the cohort tests share: small generated slides that differ, the CSVs without their timings,
and ``f2tta run`` on a cohort."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from app_fixtures import write_pyramid

from engine.cli import main as f2tta


def cohort_slide(path: Path, seed: int, size: tuple[int, int] = (384, 256)) -> Path:
    """A 3-level pyramid TIFF (0.5 µm/px) with an elliptic tissue region whose stain and place
    depend on ``seed``, so every slide gives other tiles."""
    w, h = size
    rng = np.random.default_rng(seed)
    img = np.full((h, w, 3), 242, np.uint8)
    yy, xx = np.mgrid[0:h, 0:w]
    cy, cx = h * rng.uniform(0.4, 0.6), w * rng.uniform(0.4, 0.6)
    tissue = ((yy - cy) / (h * 0.35)) ** 2 + ((xx - cx) / (w * 0.38)) ** 2 < 1
    base = np.array([170, 80, 160]) + rng.integers(-30, 30, 3)
    stain = np.clip(base + rng.normal(0, 25, (h, w, 3)), 0, 255).astype(np.uint8)
    img[tissue] = stain[tissue]
    return write_pyramid(path, img, 128, 0.5)


def cohort_slides(folder: Path, n: int, first_seed: int = 0) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    return [cohort_slide(folder / f"slide{i:02d}.tif", first_seed + i) for i in range(n)]


def csv_rows(path: Path) -> list[dict[str, str]]:
    """A predictions CSV's rows without the seconds column (a timing)."""
    with path.open(newline="") as fh:
        return [{k: v for k, v in r.items() if k != "seconds"} for r in csv.DictReader(fh)]


def summary_rows(out: Path) -> dict[str, dict[str, str]]:
    """The cohort summary's rows by site."""
    with (out / "cohort-summary.csv").open(newline="") as fh:
        return {r["site"]: r for r in csv.DictReader(fh)}


def cohort_argv(
    model: Path, inputs: Sequence[Path], state: Path, out: Path, *extra: str, method: str = "source"
) -> list[str]:
    """``f2tta run`` arguments for a cohort (after the program name)."""
    return [
        "run",
        "--model",
        str(model),
        "--input",
        *map(str, inputs),
        "--state",
        str(state),
        "--out",
        str(out),
        "--method",
        method,
        "--accept-warnings",
        "--no-progress",
        *extra,
    ]


def run_cohort(model: Path, inputs: Sequence[Path], state: Path, out: Path, *extra: str, **kw: str) -> int:
    return f2tta(cohort_argv(model, inputs, state, out, *extra, **kw))
