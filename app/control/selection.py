"""What the user looks at: the selected image, the table's rows, the slide's tiles, the filter
(part of the controller, Qt-free).

The run model chooses the image shown (the newest one while following, or the row the user
picked); this part shows it in the window, answers clicks on table rows and slide tiles, and keeps
the table's filter and the overlay's opacity in the settings.
"""

from __future__ import annotations

import dataclasses

from app.control.status import ControllerContext
from app.core.filters import RowFilter, uncertainty_threshold
from app.core.run_items import Selection, image_title


class SelectionController:
    """The selection, the filter and the overlay's opacity (see the module notes).

    Args:
        ctx: what the controller's parts share.
    """

    def __init__(self, ctx: ControllerContext) -> None:
        self.ctx = ctx
        self.view, self.model, self.state, self.status = ctx.view, ctx.model, ctx.state, ctx.status

    def show_selection(self, sel: Selection) -> None:
        """Show the image the run model selected (the newest one while following)."""
        if sel.row is not None and sel.row.tile is not None:
            self.view.highlight_tile(sel.row.tile[1], sel.row.tile[0])
        if sel.preview is None:
            self.view.show_image(None, None, f"Loading {sel.name} …")
        else:
            title = image_title(sel.row, sel.overlay is not None, sel.review)
            self.view.show_image(sel.preview, sel.overlay, title, sel.keep_view, sel.levels)
        if sel.keep_view:
            self.view.scroll_to_newest()

    def on_worker_preview_failed(self, position: int, message: str) -> None:
        """An image chosen for display cannot be read again: say so instead of "Loading …"."""
        self.status.log("warning", f"The image cannot be shown: {message}")
        if position == self.model.selected:
            self.view.show_image(None, None, f"Cannot be shown: {message}")

    def on_window_position_selected(self, position: int) -> None:
        """The user chose a table row: show it, and centre the slide on its tile."""
        self.model.select(position)
        row = self.model.row_at(position)
        if row is not None and row.tile is not None:
            self.view.highlight_tile(row.tile[1], row.tile[0], True)

    def on_window_tile_clicked(self, row: int, col: int) -> None:
        position = self.model.position_of_cell(row, col)
        index = self.model.row_index(position) if position is not None else None
        if position is not None and index is not None:
            self.view.select_row(index)
            self.model.select(position)

    def on_window_filter_changed(self, row_filter: RowFilter) -> None:
        if row_filter.mode == "uncertain":
            threshold = uncertainty_threshold(self.model.rows)
            self.view.apply_filter(dataclasses.replace(row_filter, high_uncertainty=threshold))
        if row_filter.low_confidence != self.state.settings.low_confidence:
            self.state.change_settings(low_confidence=row_filter.low_confidence)
            self.model.set_low_confidence(row_filter.low_confidence)

    def on_window_opacity_changed(self, value: float) -> None:
        self.state.change_settings(overlay_opacity=value)
