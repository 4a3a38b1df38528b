"""The sixth site set (histo, lesion, fundus ``--sites v6``) and OCT's fifth (``oct --sites v5``).

Nothing here runs a model on a target site: the sites are compared by statistics of their images,
one measurable property per site that its mechanism sets (``lab/synth/_histo_v6.py``,
``_fundus_v6.py``, ``_oct_v5.py``). The sets are pinned with every other set in
``tests/data/site_set_pins.json`` (checked by ``test_synth_sites5.py``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import site_set_checks as checks
from numpy.lib.stride_tricks import sliding_window_view
from site_set_checks import Check, higher, lower, lum

from lab.synth import generate_arrays
from lab.synth._histo_v6 import _wavelet_compress
from lab.synth._oct_v5 import _drifting_psf, _spread

NEW = [("histo", "v6"), ("lesion", "v6"), ("fundus", "v6"), ("oct", "v5")]


def _dilate(mask: np.ndarray, r: int) -> np.ndarray:
    """A batch of masks (n, h, w) grown by ``r`` px (a square neighbourhood)."""
    padded = np.pad(mask, ((0, 0), (r, r), (r, r)))
    return np.asarray(sliding_window_view(padded, (2 * r + 1, 2 * r + 1), axis=(1, 2)).any((-2, -1)))


def _green_over_blue(x: np.ndarray) -> np.ndarray:
    """Per image, the mean of green minus blue (H&E: below zero; DAB's brown: above)."""
    f = x.astype(np.float64)
    return np.asarray((f[..., 1] - f[..., 2]).mean((1, 2)))


def _clefts(x: np.ndarray) -> np.ndarray:
    """Per image, how much brighter the pixels within 2 px of the nuclei are than those 4-5 px away."""
    y = lum(x)
    dark = y < np.median(y, axis=(1, 2), keepdims=True) - 40
    near = _dilate(dark, 2) & ~dark
    far = _dilate(dark, 5) & ~_dilate(dark, 3)
    return np.asarray([np.median(a[n]) - np.median(a[f]) for a, n, f in zip(y, near, far, strict=True)])


def _finest_diagonal_zero(x: np.ndarray) -> np.ndarray:
    """Per image, the share of the finest diagonal details of the luminance (LeGall 5/3) under 2 levels."""
    y = x.astype(np.float64) @ np.array([0.299, 0.587, 0.114])
    d = y[:, 1:-1:2] - 0.5 * (y[:, 0:-2:2] + y[:, 2::2])  # the wavelet's high band down the rows
    hh = d[:, :, 1:-1:2] - 0.5 * (d[:, :, 0:-2:2] + d[:, :, 2::2])  # and across them
    return np.asarray((np.abs(hh) < 2.0).mean((1, 2)))


def _equal_neighbours(x: np.ndarray) -> np.ndarray:
    """Per image, the share of horizontally adjacent pixels that are identical in every channel."""
    return np.asarray((x[:, :, 1:] == x[:, :, :-1]).all(3).mean((1, 2)))


def _white_in_the_corners(x: np.ndarray) -> np.ndarray:
    """Per image, white pixels in the top and bottom tenth of the rows outside the middle fifth of the columns."""
    n = x.shape[1]
    band = np.zeros((n, n), bool)
    band[: n // 10] = band[-(n // 10) :] = True
    band[:, 2 * n // 5 : 3 * n // 5] = False
    return np.asarray(((x.min(3) > 200) & band).sum((1, 2)))


def _combed(x: np.ndarray) -> np.ndarray:
    """Per image, the share of the green levels between the field's 5th and 95th percentile that never occur."""
    out = []
    for one, inside in zip(x, lum(x) > 20, strict=True):
        green = one[..., 1][inside]
        lo, hi = np.percentile(green, [5, 95]).astype(int)
        out.append(float((np.bincount(green, minlength=256)[lo : hi + 1] == 0).mean()))
    return np.asarray(out)


def _fringe_peak(x: np.ndarray) -> np.ndarray:
    """Per image, log10 of the strongest red-minus-green frequency 5-12 cycles across over the median there."""
    n = x.shape[1]
    inside = ~_dilate(lum(x) < 30, 3)
    fy, fx = np.meshgrid(np.fft.fftfreq(n) * n, np.fft.fftfreq(n) * n, indexing="ij")
    band = (np.hypot(fy, fx) >= 5) & (np.hypot(fy, fx) <= 12)
    out = []
    for one, m in zip(x.astype(np.float64), inside, strict=True):
        c = one[..., 0] - one[..., 1]
        power = np.abs(np.fft.fft2(np.where(m, c - c[m].mean(), 0.0))) ** 2
        out.append(float(np.log10(power[band].max() / np.median(power[band]))))
    return np.asarray(out)


def _disc_area(x: np.ndarray) -> np.ndarray:
    """Per image, the pixels as green as only the optic disc is."""
    return np.asarray((x[..., 1] > 130).sum((1, 2)))


def _bottom_brightness(x: np.ndarray) -> np.ndarray:
    """Per scan, the mean grey of its lowest fifth (the sclera and below)."""
    return np.asarray(lum(x)[:, int(0.8 * x.shape[1]) :].mean((1, 2)))


def _column_steps(x: np.ndarray) -> np.ndarray:
    """Per scan, the mean step in brightness between the column means of adjacent A-scans."""
    return np.asarray(np.abs(np.diff(lum(x).mean(1), axis=1)).mean(1))


def _dark_share(x: np.ndarray) -> np.ndarray:
    """Per scan, the share of pixels darker than a quarter of the grey scale."""
    return np.asarray((lum(x) < 64).mean((1, 2)))


def _depth_detail_below(x: np.ndarray) -> np.ndarray:
    """Per scan, in its lower half, the fine detail down the columns over that along the rows."""
    y = lum(x)[:, x.shape[1] // 2 :]
    down = np.abs(y[:, 1:-1] - (y[:, :-2] + y[:, 2:]) / 2).mean((1, 2))
    across = np.abs(y[:, :, 1:-1] - (y[:, :, :-2] + y[:, :, 2:]) / 2).mean((1, 2))
    return np.asarray(down / across)


_HISTO: dict[str, Check] = {
    # immunohistochemistry: DAB's brown (green above blue) where H&E is pink and purple
    "v6site2": lambda t, s: higher(_green_over_blue(t), _green_over_blue(s)),
    # delayed fixation: a clear cleft round every nucleus
    "v6site3": lambda t, s: higher(_clefts(t), _clefts(s)),
    # wavelet compression: the finest diagonal details quantised to zero
    "v6site4": lambda t, s: higher(_finest_diagonal_zero(t), _finest_diagonal_zero(s)),
    # a half-resolution level enlarged by nearest neighbour: pixels in equal pairs
    "v6site5": lambda t, s: (
        bool((_equal_neighbours(t) > 0.45).all()) and bool((_equal_neighbours(s) < 0.1).all())
    ),
}
PROPERTY: dict[tuple[str, str], dict[str, Check]] = {
    ("histo", "v6"): _HISTO,
    ("lesion", "v6"): _HISTO,
    ("fundus", "v6"): {
        # burnt-in annotations: white letters in the black corners
        "v6site2": lambda t, s: (
            bool((_white_in_the_corners(t) >= 20).all()) and not _white_in_the_corners(s).any()
        ),
        # automatic levels on a dim 8-bit image: a combed histogram
        "v6site3": lambda t, s: bool((_combed(t) > 0.4).all()) and bool((_combed(s) < 0.2).all()),
        # a photographed monitor: periodic colour fringes
        "v6site4": lambda t, s: higher(_fringe_peak(t), _fringe_peak(s)),
        # a 30-degree camera: the disc larger
        "v6site5": lambda t, s: higher(_disc_area(t), _disc_area(s)),
    },
    ("oct", "v5"): {
        # attenuation compensation: the depths below the retina bright
        "v5site2": lambda t, s: higher(_bottom_brightness(t), _bottom_brightness(s)),
        # sweep-to-sweep power: A-scans brighter and darker than their neighbours
        "v5site3": lambda t, s: higher(_column_steps(t), _column_steps(s)),
        # an equalised histogram: a quarter of the pixels in the darkest quarter of the grey scale
        "v5site4": lambda t, s: (
            bool((np.abs(_dark_share(t) - 0.25) < 0.03).all())
            and bool((np.abs(_dark_share(s) - 0.25) > 0.1).all())
        ),
        # the axial point-spread widening with depth: little detail in depth in the lower half
        "v5site5": lambda t, s: lower(_depth_detail_below(t), _depth_detail_below(s)),
    },
}


TestSiteSet = checks.site_set_tests(NEW, PROPERTY)


def test_the_wavelet_codec_is_a_codec() -> None:
    """With a tiny step the codec gives the image back (odd sides too); with the site's, it loses detail."""
    rng = np.random.default_rng(0)
    image = rng.uniform(0.0, 255.0, (33, 48, 3)).astype(np.float32)
    assert np.abs(_wavelet_compress(image, 1e-4) - image).max() < 0.01
    lossy = _wavelet_compress(image, 16.0)
    assert np.abs(lossy - image).mean() > 10.0 and abs(float(lossy.mean() - image.mean())) < 1.0


def test_the_drifting_point_spread_keeps_the_light_and_widens_with_depth() -> None:
    weights = _drifting_psf(96, 0.6, 3.2)
    lines = np.zeros((96, 2), np.float32)
    lines[20, 0] = lines[80, 1] = 1.0
    spread = _spread(lines, weights)
    assert np.allclose(spread.sum(0), 1.0, atol=1e-5)
    width = [
        float(np.sqrt((spread[:, k] * (np.arange(96) - row) ** 2).sum())) for k, row in ((0, 20), (1, 80))
    ]
    assert 0.8 < width[0] < 1.6 and 2.4 < width[1] < 3.2, width


def test_the_annotated_eye_follows_the_disc() -> None:
    """The burnt-in OD / OS names the eye whose disc lies on that side (a right eye's disc on the right)."""
    x = generate_arrays("fundus", "v6site2", 8, size=96, seed=0, sites="v6")[0]
    right = []
    for one in x:
        is_s = bool(one[1, 7].min() > 200)  # the second letter's top right pixel: lit in S, dark in D
        disc_right = bool(np.nonzero(one[20:76, :, 1] > 130)[1].mean() > 48)
        assert is_s != disc_right
        right.append(disc_right)
    assert any(right) and not all(right), "both eyes occur"


def test_cli_sixth_set(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    checks.synth_cli(tmp_path / "h", "lesion", "v6", capsys)
    meta, _ = checks.synth_cli(tmp_path / "f", "fundus", "v6", capsys)
    assert meta["sites"]["v6site4"]["format"] == "jpeg"
    checks.synth_cli(tmp_path / "o", "oct", "v5", capsys)
