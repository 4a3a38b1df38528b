"""The third site set (histo, lesion, fundus ``--sites v3``) and OCT's second (``oct --sites v2``).

Nothing here runs a model on a target site: the sites are compared by statistics of their images,
one measurable property per site that its mechanism sets (``lab/synth/_histo_v3.py``,
``_fundus_v3.py``, ``_oct_v2.py``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import site_set_checks as checks
from site_set_checks import Check, fine_detail, higher, lower, lum, roughness

NEW = [("histo", "v3"), ("lesion", "v3"), ("fundus", "v3"), ("oct", "v2")]


def _saturation(x: np.ndarray) -> np.ndarray:
    f = x.astype(np.float64)
    return np.asarray((f.max(3) - f.min(3)).mean((1, 2)))


def _red_minus_green(x: np.ndarray) -> np.ndarray:
    f = x.astype(np.float64)
    return np.asarray((f[..., 0] - f[..., 1]).mean((1, 2)))


def _clipped(x: np.ndarray) -> np.ndarray:
    return np.asarray((x.min(3) >= 250).mean((1, 2)))


def _streaks(x: np.ndarray) -> np.ndarray:
    """Roughness of the column means against the row means (streaks and seams run down the columns)."""
    y = lum(x)
    col, row = y.mean(1), y.mean(2)
    return np.asarray(roughness(col) / roughness(row))


def _top_centre(x: np.ndarray) -> np.ndarray:
    """Mean of the top 8 % of rows in the middle fifth of the columns."""
    n = x.shape[1]
    return np.asarray(lum(x)[:, : max(1, n * 8 // 100), 2 * n // 5 : 3 * n // 5].mean((1, 2)))


def _top(x: np.ndarray) -> np.ndarray:
    return np.asarray(lum(x)[:, : x.shape[1] // 5].mean((1, 2)))


def _darkest_column(x: np.ndarray) -> np.ndarray:
    """The darkest column's mean below the top third, relative to the median column (shadows, blinks)."""
    y = lum(x)
    col = y[:, y.shape[1] // 3 :].mean(1)
    return np.asarray(col.min(1) / np.median(col, 1))


_HISTO: dict[str, Check] = {
    # frozen section: a rapid, pale eosin
    "v3site2": lambda t, s: lower(_saturation(t), _saturation(s)),
    # trichrome: blue collagen, no pink stroma: red no longer above green
    "v3site3": lambda t, s: lower(_red_minus_green(t), _red_minus_green(s)),
    # line scan: streaks and seams down the columns in (nearly) every patch
    "v3site4": lambda t, s: (_streaks(t) > _streaks(s).max()).mean() >= 0.75,
    # over-exposure: highlights clipped at white
    "v3site5": lambda t, s: float(np.median(_clipped(t))) > 0.2 and _clipped(s).max() < 0.01,
}
PROPERTY: dict[tuple[str, str], dict[str, Check]] = {
    ("histo", "v3"): _HISTO,
    ("lesion", "v3"): _HISTO,
    ("fundus", "v3"): {
        # red-free: a grey image (every pixel R = G = B)
        "v3site2": lambda t, s: bool((_saturation(t) == 0).all()) and bool((_saturation(s) > 30).all()),
        # slide mount: the top of the field is cut off (black), where site1 shows retina
        "v3site3": lambda t, s: bool((_top_centre(t) < 5).all()) and bool((_top_centre(s) > 10).all()),
        # near infrared: grey, and brighter than the green-dominated image of site1
        "v3site4": lambda t, s: (
            bool((_saturation(t) == 0).all()) and higher(lum(t).mean((1, 2)), lum(s).mean((1, 2)))
        ),
        # video: captured at 40 % resolution, less fine detail
        "v3site5": lambda t, s: lower(fine_detail(t), fine_detail(s)),
    },
    ("oct", "v2"): {
        # false colour instead of grey
        "v2site2": lambda t, s: higher(_saturation(t), _saturation(s)) and bool((_saturation(s) == 0).all()),
        # mirror artefact: the retina folds into the top rows (the vitreous is black at site1)
        "v2site3": lambda t, s: higher(_top(t), _top(s)),
        # floaters' shadows and blinks: dark columns through the retina
        "v2site4": lambda t, s: (
            float(np.median(_darkest_column(t))) < 0.6 * float(np.median(_darkest_column(s)))
        ),
        # black-on-white display: the vitreous is white
        "v2site5": lambda t, s: higher(_top(t), _top(s)) and _top(t).min() > 200,
    },
}


TestSiteSet = checks.site_set_tests(NEW, PROPERTY)


def test_cli_third_set(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, printed = checks.synth_cli(tmp_path / "f", "fundus", "v3", capsys)
    assert "v3site5: " in printed
    meta, _ = checks.synth_cli(tmp_path / "o", "oct", "v2", capsys)
    assert meta["sites"]["v2site2"]["format"] == "jpeg"
