"""Reading a source's items for the stream loop: readers, the skip a failure means, and reading ahead.

A *reader* decodes one item: :func:`read_item` a folder's file, :class:`TileReader` a slide's tile
(the benchmark has its own). :func:`read_ahead` runs a reader on a small pool of threads, a
bounded number of items ahead of the model, and hands the items back in arrival order, so the
model does not wait on decoding (PIL, OpenSlide and numpy release the GIL while they work) and
memory holds at most ``depth`` decoded items whatever the source's length.

A slide's tiles are read through one OpenSlide handle per reading thread: a failed read leaves a
handle in its error state (:mod:`engine.io.slides` reopens it), which must not touch the reads of
the other threads, nor the handle the app reads its previews from.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import logging
import threading
from collections import deque
from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass
from typing import NamedTuple, TypeVar

import numpy as np
from PIL import Image

from engine.errors import F2TTAError, ImageReadError
from engine.io.content import same_content
from engine.io.slides import Slide, SlideError, TilePlan
from engine.io.sources import StreamItem

logger = logging.getLogger(__name__)

Picture = Image.Image | np.ndarray
#: Decodes an item: its picture, or its picture and the content fingerprint of the file it was
#: read from (:mod:`engine.io.content`; a folder's pictures), recorded with its decision.
Reader = Callable[[StreamItem], Picture | tuple[Picture, str]]
T = TypeVar("T")


class Read(NamedTuple):
    """An item as read (or as much of it as is kept), as the model's pixels, and the content
    fingerprint of its file ("" for a slide's tile: the slide's is its source's)."""

    picture: Picture
    pixels: np.ndarray
    content: str = ""


#: An item read, or why it cannot be.
Decoded = Read | Exception


def read_item(item: StreamItem) -> tuple[Picture, str]:
    """Read a folder item's file, with its content fingerprint (slide tiles need the open slide:
    see :func:`tile_reader`)."""
    from engine.io.content import read_image_content

    if item.path is None:
        raise ValueError(f"{item.name}: no file to read")
    return read_image_content(item.path)


class TileReader:
    """A reader of a slide source's tiles, with an OpenSlide handle of its own per thread.

    Args:
        slide: the open slide (read from the thread that opened it, as before; other threads
            open their own handle of the same file on their first tile).
        plan: the source's tile plan.

    Call :meth:`close` when the run is over (the stream loop does): it closes the handles the
    reader opened, never ``slide``.
    """

    def __init__(self, slide: Slide, plan: TilePlan) -> None:
        self.slide = slide
        self.plan = plan
        self._owner = threading.get_ident()
        self._local = threading.local()
        self._opened: list[Slide] = []
        self._lock = threading.Lock()

    def _handle(self) -> Slide:
        if threading.get_ident() == self._owner:
            return self.slide
        handle: Slide | None = getattr(self._local, "slide", None)
        if handle is None:
            try:
                handle = Slide(self.slide.path)
            except SlideError as exc:  # moved or unmounted since it was opened: it may come back
                raise SlideError(str(exc), transient=True) from exc
            if handle.identity != self.slide.identity:  # another file at the path: never mixed in
                handle.close()
                self.slide.check_unchanged()
                raise SlideError(
                    f"{self.slide.path}: the slide file changed since it was opened", transient=True
                )
            self._local.slide = handle
            with self._lock:
                self._opened.append(handle)
        return handle

    def __call__(self, item: StreamItem) -> Picture:
        if item.tile is None:
            raise ValueError(f"{item.name}: not a tile")
        return self._handle().read_tile(self.plan, item.tile)

    def close(self) -> None:
        """Close the handles opened by other threads (each thread's handle is dropped with them)."""
        with self._lock:
            opened, self._opened = self._opened, []
        for handle in opened:
            handle.close()


def tile_reader(slide: Slide, plan: TilePlan) -> TileReader:
    """A reader of a slide source's tiles (the slide stays open while the run lasts)."""
    return TileReader(slide, plan)


def decode(
    reader: Reader, prepare: Callable[[Picture], np.ndarray], item: StreamItem, keep: bool | int
) -> Decoded:
    """``item`` as read (or as much of it as is kept) and as the model's pixels, or why it cannot be.

    Args:
        reader: decodes the item.
        prepare: the model's pixels of a picture (:meth:`engine.Session.prepare`).
        item: the item.
        keep: what is kept of the picture as read: True all of it, False only the model's pixels,
            a number of pixels its longest side at most (a preview: what is read ahead is held
            until the model takes it, and 192 photographs of 2 400 x 2 000 pixels, three batches of
            64, are 2.8 GB held whole).
    """
    try:
        got = reader(item)
        picture, content = got if isinstance(got, tuple) else (got, "")
        pixels = prepare(picture)
        kept = (picture if keep else pixels) if isinstance(keep, bool) else reduced(picture, keep)
    except Exception as exc:  # every failure of reading becomes a skip (see skip_for)
        return exc
    return Read(kept, pixels, content)


def reduced(picture: Picture, side: int) -> Picture:
    """``picture`` with its longest side at most ``side`` pixels (bilinear, the proportions kept);
    the picture itself when it is that small already."""
    image = picture if isinstance(picture, Image.Image) else Image.fromarray(np.asarray(picture, np.uint8))
    if max(image.size) <= side:
        return picture
    image = image.convert("RGB") if image.mode != "RGB" else image.copy()
    image.thumbnail((side, side), Image.Resampling.BILINEAR)
    return image


def skip_for(item: StreamItem, exc: Exception) -> Skipped:
    """The skip an exception of reading means (see :mod:`engine.run.stream` for the classes)."""
    if isinstance(exc, ImageReadError):
        reason = str(getattr(exc, "reason", "") or exc)
        return Skipped(item, reason, transient=bool(getattr(exc, "transient", False)))
    if isinstance(exc, OSError):  # the file system, not the content: try again next time
        return Skipped(item, f"cannot be read now ({exc.strerror or exc})", transient=True)
    if isinstance(exc, F2TTAError):
        return Skipped(item, str(exc), transient=bool(getattr(exc, "transient", False)))
    logger.debug("reading %s failed", item.name, exc_info=exc)
    return Skipped(item, f"unreadable ({type(exc).__name__}: {exc})")


@dataclass(frozen=True)
class Skipped:
    """An item that could not be read; ``transient``: the next run tries it again."""

    item: StreamItem
    reason: str
    transient: bool = False


def read_ahead(
    items: Iterable[StreamItem], read: Callable[[StreamItem], T], workers: int, depth: int
) -> Generator[tuple[StreamItem, T]]:
    """``(item, read(item))`` in the order of ``items``, read by ``workers`` threads, ``depth`` ahead.

    ``read`` must not raise (it returns its failure instead). With ``workers`` or ``depth`` 0 each
    item is read when it is asked for. Closing the iterator cancels what was not started and
    waits for the reads under way (at most ``workers``).
    """
    if workers <= 0 or depth <= 0:
        for item in items:
            yield item, read(item)
        return
    pool = cf.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="f2tta-read")
    queue: deque[tuple[StreamItem, cf.Future[T]]] = deque()
    source = iter(items)
    try:
        for item in source:
            queue.append((item, pool.submit(read, item)))
            if len(queue) >= depth:
                break
        while queue:
            item, future = queue.popleft()
            following = next(source, None)
            if following is not None:
                queue.append((following, pool.submit(read, following)))
            yield item, future.result()
    finally:
        for _, future in queue:
            future.cancel()
        with contextlib.suppress(RuntimeError):
            pool.shutdown(wait=True, cancel_futures=True)


class GoneError(LookupError):
    """A decided item that is no longer in its source (a file removed since it was decided)."""


def same_picture(item: StreamItem, decoded: Decoded, decided: str) -> Decoded:
    """``decoded``, or why it cannot have the map of the decision made on the picture whose content
    fingerprint is ``decided``: the file was replaced or changed since (the fingerprints differ), so a
    map made now would be of another picture than the one decided."""
    if isinstance(decoded, Exception) or not decided or not decoded.content:
        return decoded
    if same_content(decided, decoded.content):
        return decoded
    reason = (
        "the file changed since its decision (replaced or rewritten): its decision is of the picture as it "
        "was then, and no map is made from the new one"
    )
    return ImageReadError(f"{item.name}: {reason}", reason=reason)
