"""The fourth site set (histo, lesion, fundus ``--sites v4``) and OCT's third (``oct --sites v3``).

Nothing here runs a model on a target site: the sites are compared by statistics of their images,
one measurable property per site that its mechanism sets (``lab/synth/_histo_v4.py``,
``_fundus_v4.py``, ``_oct_v3.py``). Every set is pinned in test_synth_sites5.py.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import site_set_checks as checks
from site_set_checks import Check, fine_detail, higher, lower, lum, roughness

from lab.synth._optics import blur_yx

NEW = [("histo", "v4"), ("lesion", "v4"), ("fundus", "v4"), ("oct", "v3")]

# Every set's images (these among them) are pinned in test_synth_sites5.py, and that the fourth sets
# exist is part of its test that every set is pinned.


def _mean_lum(x: np.ndarray) -> np.ndarray:
    return np.asarray(lum(x).mean((1, 2)))


def _difference(x: np.ndarray, a: int, b: int) -> np.ndarray:
    """Mean of channel ``a`` minus channel ``b`` per image."""
    f = x.astype(np.float64)
    return np.asarray((f[..., a] - f[..., b]).mean((1, 2)))


def _corners(x: np.ndarray) -> np.ndarray:
    """The brightest of the four corner boxes (a sixteenth of the side) per image."""
    k = max(1, x.shape[1] // 16)
    y = lum(x)
    boxes = [y[:, :k, :k], y[:, :k, -k:], y[:, -k:, :k], y[:, -k:, -k:]]
    return np.asarray(np.stack([b.mean((1, 2)) for b in boxes]).max(0))


def _bands(x: np.ndarray) -> np.ndarray:
    """Roughness of the row means against the column means, in the middle of the field."""
    y = lum(x)
    n = x.shape[1]
    mid, inner = slice(n // 3, 2 * n // 3), slice(n // 4, 3 * n // 4)
    row, col = y[:, :, mid].mean(2)[:, inner], y[:, mid, :].mean(1)[:, inner]
    return np.asarray(roughness(row) / roughness(col))


def _aspect(x: np.ndarray) -> np.ndarray:
    """The field's width over its height: lit pixels along the middle row over the middle column."""
    y = lum(x)
    n = x.shape[1]
    return np.asarray((y[:, n // 2, :] > 15).sum(1) / (y[:, :, n // 2] > 15).sum(1))


def _large_scale(x: np.ndarray) -> np.ndarray:
    """Spread of the luminance blurred over 8 px, in the middle half (the field's slow changes)."""
    n = x.shape[1]
    smooth = np.stack([blur_yx(one.astype(np.float32), 8 * n / 96, 8 * n / 96) for one in lum(x)])
    return np.asarray(smooth[:, n // 4 : 3 * n // 4, n // 4 : 3 * n // 4].std((1, 2)))


def _axial_over_lateral(x: np.ndarray) -> np.ndarray:
    """Fine detail down the columns (depth) over fine detail along the rows."""
    y = lum(x)
    down = np.abs(y[:, 1:-1] - (y[:, :-2] + y[:, 2:]) / 2).mean((1, 2))
    across = np.abs(y[:, :, 1:-1] - (y[:, :, :-2] + y[:, :, 2:]) / 2).mean((1, 2))
    return np.asarray(down / across)


def _layer_lags(x: np.ndarray) -> np.ndarray:
    """Spread across the scan of the depth shift that aligns each block of A-scans with the mean A-scan."""
    y = lum(x)
    n = x.shape[1]
    b = max(1, n // 12)
    blocks = y[:, n // 3 :, : n // b * b].reshape(len(x), n - n // 3, n // b, b).mean(3)
    out = []
    for scan in blocks:
        ref = scan.mean(1)[10:-10]
        best = [
            int(np.argmax([np.corrcoef(np.roll(col, k)[10:-10], ref)[0, 1] for k in range(-8, 9)])) - 8
            for col in scan.T
        ]
        out.append(float(np.std(best)))
    return np.asarray(out)


def _vitreous_line(x: np.ndarray) -> np.ndarray:
    """The brightest column of the top fifth (the vitreous) over the median column there."""
    y = lum(x)
    col = y[:, : x.shape[1] // 5].mean(1)
    return np.asarray(col.max(1) / (np.median(col, 1) + 1.0))


_HISTO: dict[str, Check] = {
    # Giemsa-like: blue-grey cytoplasm instead of pink, blue well above red
    "v4site2": lambda t, s: higher(_difference(t, 2, 0), _difference(s, 2, 0)),
    # fluorescence: a dark background
    "v4site3": lambda t, s: lower(_mean_lum(t), _mean_lum(s)) and _mean_lum(t).max() < 100,
    # archival: bleached eosin and brown haematoxylin, blue no longer far above green
    "v4site4": lambda t, s: higher(_difference(t, 1, 2), _difference(s, 1, 2)),
    # eyepiece: the field stop leaves the corners black
    "v4site5": lambda t, s: bool((_corners(t) < 8).all()) and bool((_corners(s) > 60).all()),
}
PROPERTY: dict[tuple[str, str], dict[str, Check]] = {
    ("histo", "v4"): _HISTO,
    ("lesion", "v4"): _HISTO,
    ("fundus", "v4"): {
        # rolling shutter: bands across the rows in every image
        "v4site2": lambda t, s: bool((_bands(t) > _bands(s).max()).all()),
        # motion blur: less fine detail
        "v4site3": lambda t, s: lower(fine_detail(t), fine_detail(s)),
        # squeezed frame: the field is narrower than tall
        "v4site4": lambda t, s: bool((_aspect(t) < 0.85).all()) and bool((_aspect(s) > 0.95).all()),
        # local contrast normalisation: the slow changes across the field flattened
        "v4site5": lambda t, s: lower(_large_scale(t), _large_scale(s)),
    },
    ("oct", "v3"): {
        # linear intensity: most of the scan sinks towards black
        "v3site2": lambda t, s: lower(_mean_lum(t), _mean_lum(s)),
        # dispersion: blurred in depth, not across
        "v3site3": lambda t, s: lower(_axial_over_lateral(t), _axial_over_lateral(s)),
        # flattened to the RPE: the A-scans line up in depth
        "v3site4": lambda t, s: float(np.median(_layer_lags(t))) < 0.4 * float(np.median(_layer_lags(s))),
        # specular saturation: a bright line through the vitreous in every scan
        "v3site5": lambda t, s: (
            bool((_vitreous_line(t) > 3.0).all()) and bool((_vitreous_line(s) < 3.0).all())
        ),
    },
}


TestSiteSet = checks.site_set_tests(NEW, PROPERTY)


def test_cli_fourth_set(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    meta, printed = checks.synth_cli(tmp_path / "h", "histo", "v4", capsys)
    assert "v4site5: " in printed
    assert meta["sites"]["v4site5"]["format"] == "jpeg" and meta["sites"]["v4site3"]["format"] == "png"
    checks.synth_cli(tmp_path / "o", "oct", "v3", capsys)
