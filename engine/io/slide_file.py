"""What is checked of a slide file before OpenSlide reads it: the size of the tile a read decodes,
and that the file read is still the file opened.

OpenSlide decodes a stored tile whole whatever the area asked for, into a buffer it allocates
first; a tiled TIFF declaring one 65 536 x 65 536 tile made it ask for 17 GB and abort the process
(issue 42, item 3). The stored tile of every level read is bounded (:data:`MAX_TILE_PIXELS`) from
the sizes OpenSlide reports (``openslide.level[N].tile-width``) before any read of that level.

A slide replaced at the same path during a run had its remaining tiles read from the new file,
on the old one's plan (issue 42, item 6). A slide remembers the file it opened (device, inode,
size and times, :func:`engine.io.content.identity`) and every read checks, before and after, that
the path still names it; its :attr:`SlideFile.content` fingerprint identifies it across runs.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from engine.errors import F2TTAError
from engine.io.content import Identity, fingerprint_fd, identity
from engine.util.closing import Closing
from engine.util.files import UnsafeFileError, open_regular

# Most pixels of one stored tile of a level that is read (OpenSlide decodes a stored tile whole, at
# 4 bytes a pixel: 256 MiB; slides store tiles of 240 to 1 024 pixels a side).
MAX_TILE_PIXELS = 8192 * 8192


class SlideError(F2TTAError):
    """A slide cannot be opened or read; the message names the file and the reason.

    Attributes:
        transient: True when trying again later may succeed (the slide file could not be
            opened again after a failed read: moved, or its share went away).
    """

    def __init__(self, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


def why(exc: BaseException) -> str:
    """An exception as a reason: its message, or its type when the message is empty."""
    return str(exc) or type(exc).__name__


class SlideFile(Closing):
    """The checks of an open slide (:class:`engine.io.slides.Slide` is one)."""

    path: Path
    _slide: Any  # the OpenSlide handle
    #: The file opened (device, inode, size, times): a read checks the path still names it.
    identity: Identity
    _content: str | None = None

    def check_unchanged(self) -> None:
        """Refuse to go on when the path no longer names the file opened (replaced or rewritten):
        a tile read now could be of another slide than the one planned.

        Raises:
            SlideError: transient (the next run opens the file there as the input it is).
        """
        try:
            now = identity(os.stat(self.path))
        except OSError as exc:
            raise SlideError(
                f"{self.path}: the slide cannot be opened again, its file is gone ({why(exc)}); tried again "
                "next run",
                transient=True,
            ) from exc
        if now != self.identity:
            raise SlideError(
                f"{self.path}: the slide file changed since it was opened (replaced or rewritten); no tile "
                "is read from it in this run, so the two are never mixed (the next run takes the file "
                "there as a new input)",
                transient=True,
            )

    @property
    def content(self) -> str:
        """The content fingerprint of the slide file (:mod:`engine.io.content`) with OpenSlide's
        ``quickhash-1`` (its properties and smallest level): what tells a slide replaced at the same
        path from the one recorded.

        Raises:
            SlideError: the file cannot be read, or is no longer the one opened (transient).
        """
        if self._content is None:
            quick = str(self._slide.properties.get("openslide.quickhash-1", ""))
            try:
                fh, st = open_regular(self.path)
            except UnsafeFileError as exc:
                raise SlideError(f"{self.path}: {exc.reason}", transient=exc.transient) from exc
            with fh:
                if identity(st) != self.identity:
                    self.check_unchanged()
                self._content = fingerprint_fd(fh.fileno(), st, [quick.encode()])
        return self._content

    def stored_tile(self, level: int) -> tuple[int, int] | None:
        """The ``(width, height)`` of the tiles level ``level`` is stored in, as OpenSlide reports
        it; None when it does not (no uniform tile size)."""
        sides = []
        for side in ("width", "height"):
            try:
                value = int(self._slide.properties.get(f"openslide.level[{level}].tile-{side}", ""))
            except ValueError:
                return None
            if value <= 0:
                return None
            sides.append(value)
        return sides[0], sides[1]

    def check_level(self, level: int) -> None:
        """Refuse to read level ``level`` when one of its stored tiles is too large to decode.

        Raises:
            SlideError: the level's tiles hold more than :data:`MAX_TILE_PIXELS` pixels each
                (permanent: the file says so).
        """
        size = self.stored_tile(level)
        if size is None or size[0] * size[1] <= MAX_TILE_PIXELS:
            return
        width, height = size
        raise SlideError(
            f"{self.path}: level {level} of the slide is stored in tiles of {width} x {height} pixels; "
            f"reading any part of it would decode {width * height * 4 / 1e9:.1f} GB at once (the limit is "
            f"{MAX_TILE_PIXELS:,} pixels a tile). Save the slide again with smaller tiles (512 x 512 is usual)"
        )
