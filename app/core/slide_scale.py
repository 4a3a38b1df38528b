"""The slide's scale on screen (Qt-free): a scale bar of a round length and a magnification read-out.

Both come from the slide's level-0 resolution (microns per pixel, ``openslide.mpp-x``) and the
view's zoom (level-0 pixels per screen pixel). The magnification is the objective-equivalent one
pathologists read from a microscope: 10 µm/px ÷ microns per screen pixel, so a 0.25 µm/px scan is
40×, 0.5 µm/px 20× (the convention of Aperio's and QuPath's read-outs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

OBJECTIVE_UM = 10.0  # microns per pixel at 1× (0.25 µm/px reads 40×)
STEPS = (1.0, 2.0, 5.0)  # scale-bar lengths: 1, 2, 5 × a power of ten


@dataclass(frozen=True)
class ScaleBar:
    """A scale bar: its length on the slide, on the screen, and its label (``200 µm``, ``1 mm``)."""

    microns: float
    pixels: float
    label: str


def length_label(microns: float) -> str:
    """``0.5 µm``, ``20 µm``, ``1 mm``, ``2.5 mm``: a length in the unit a reader expects."""
    if microns >= 1000.0:
        return f"{microns / 1000.0:g} mm"
    return f"{microns:g} µm"


def scale_bar(um_per_screen_px: float, max_pixels: float = 120.0) -> ScaleBar | None:
    """The longest 1-2-5 length that fits in ``max_pixels`` on screen (None without a resolution)."""
    if not (math.isfinite(um_per_screen_px) and um_per_screen_px > 0 and max_pixels > 0):
        return None
    longest = um_per_screen_px * max_pixels  # microns the bar may cover
    power = 10.0 ** math.floor(math.log10(longest))
    microns = max(step * power for step in STEPS if step * power <= longest * (1 + 1e-9))
    return ScaleBar(microns, microns / um_per_screen_px, length_label(microns))


def magnification(um_per_screen_px: float) -> float:
    """The objective-equivalent magnification of a view showing ``um_per_screen_px`` (nan without one)."""
    if not (math.isfinite(um_per_screen_px) and um_per_screen_px > 0):
        return math.nan
    return OBJECTIVE_UM / um_per_screen_px


def readout(slide_mpp: float | None, downsample: float) -> str:
    """What the slide pane says about its zoom: ``≈ 5.0× · 2.00 µm/px`` or ``1:8 (no resolution)``.

    Args:
        slide_mpp: the slide's level-0 microns per pixel (None: the slide does not say).
        downsample: level-0 pixels per screen pixel in the current view.
    """
    if not (math.isfinite(downsample) and downsample > 0):
        return ""
    if slide_mpp is None or not (math.isfinite(slide_mpp) and slide_mpp > 0):
        zoom = f"1:{downsample:.3g}" if downsample >= 1 else f"{1 / downsample:.3g}:1"
        return f"zoom {zoom} · the slide does not record its resolution"
    shown = slide_mpp * downsample
    mag = magnification(shown)
    mag_text = f"{mag:.0f}×" if mag >= 9.95 else f"{mag:.1f}×"
    return f"≈ {mag_text} · {shown:.3g} µm/px"
