"""What the slide pane shows of an open slide: one value from the source to the view (Qt-free)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from app._engine import SlideSource


@dataclass(frozen=True)
class SlideDisplay:
    """A slide as the slide pane draws it.

    Attributes:
        thumbnail: ``(H, W, 3)`` uint8 overview.
        dimensions: level-0 (width, height) in pixels.
        grid: (rows, cols) of the tile grid.
        footprint: a tile's side in level-0 pixels.
        title: the caption.
        tissue: the tissue mask on the thumbnail's grid (None: not drawn).
        mpp: the slide's level-0 resolution in microns per pixel (None: the slide does not say);
            the pane's scale bar and magnification read-out come from it.
    """

    thumbnail: np.ndarray = field(repr=False)
    dimensions: tuple[int, int]
    grid: tuple[int, int]
    footprint: float
    title: str
    tissue: np.ndarray | None = field(default=None, repr=False)
    mpp: float | None = None
    positive: str = "positive class"  # the class whose probability the heat map shows (its colour bar)

    @classmethod
    def of(cls, source: SlideSource, tissue: np.ndarray | None = None) -> SlideDisplay:
        """The display of an open slide source: its overview, grid and a caption naming it."""
        caption = f"{source.display_name} · {source.vendor} · {source.plan.describe()}"
        plan = source.plan
        return cls(
            source.thumbnail, source.dimensions, plan.grid, plan.footprint, caption, tissue, plan.slide_mpp
        )
