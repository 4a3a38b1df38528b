"""What a run feeds the model: a folder of images or the tissue tiles of a slide.

A source is an immutable list of :class:`StreamItem` in arrival order, with ground truth when the
folder provides it (class sub-folders named after the model's classes, or a labels CSV). The
stream loop (:mod:`engine.run.stream`) reads its items; ``f2tta run`` and the app open the same
sources, so a folder has the same identity (:attr:`FolderSource.source_id`) and item keys in both.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from engine.errors import SourceError
from engine.io.arrival import ORDERS, interleave, listing_order
from engine.io.content import content_part, same_content
from engine.io.images import list_images
from engine.io.slides import Slide, SlideError, Tile, TilePlan
from engine.io.tables import LABEL_COLUMNS, PATH_COLUMNS, FileIndex, parse_label, read_labels, read_order

logger = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_MIN_TISSUE",
    "LABEL_COLUMNS",
    "LABEL_FILES",
    "MANIFEST_FILES",
    "ORDERS",
    "PATH_COLUMNS",
    "FolderSource",
    "SlideSource",
    "Source",
    "SourceError",
    "StreamItem",
    "arrived_since",
    "open_folder",
    "open_slide_source",
    "parse_label",
    "reopen_slide",
    "same_place_other_slide",
    "source_hash",
]

#: Smallest share of tissue a slide tile needs to be processed (the app's setting starts here too).
DEFAULT_MIN_TISSUE = 0.25
LABEL_FILES = ("labels.csv", "ground_truth.csv", "labels.tsv")
MANIFEST_FILES = ("manifest.csv", "manifest.txt")


@dataclass(frozen=True)
class StreamItem:
    """One image to show the model, in arrival order."""

    position: int  # 0-based position in the source's arrival order
    key: str  # stable identifier within the source (relative path, or tile "x,y")
    name: str  # what the table shows
    path: Path | None = None  # image file (folder sources)
    tile: Tile | None = None  # tile (slide sources)
    ground_truth: int | None = None  # class index when known
    site: str | None = None  # the site it belongs to when not its source's (the benchmark's known sites)


@dataclass(frozen=True)
class FolderSource:
    """Images under a folder, in arrival order."""

    root: Path
    order: str  # one of engine.io.arrival.ORDERS
    items: tuple[StreamItem, ...]
    label_origin: str | None = None  # where ground truth came from, if anywhere
    notes: tuple[str, ...] = ()  # user-facing remarks (skipped files, unknown labels)
    kind: str = "folder"
    seed: int = 0  # the interleaved order's seed (0 for the other orders)

    @property
    def source_id(self) -> str:
        return str(self.root.resolve())

    @property
    def display_name(self) -> str:
        return self.root.name or str(self.root)


@dataclass(frozen=True)
class SlideSource:
    """Tissue tiles of a whole-slide image, in reading order."""

    path: Path
    plan: TilePlan
    thumbnail: np.ndarray = field(repr=False)  # (H, W, 3) uint8 overview
    dimensions: tuple[int, int]  # level-0 (width, height)
    vendor: str
    items: tuple[StreamItem, ...]
    notes: tuple[str, ...] = ()
    kind: str = "slide"
    label_origin: str | None = None
    content: str = ""  # the slide file's content fingerprint (engine.io.slides.Slide.content)

    @property
    def source_id(self) -> str:
        # Another tile size or resolution cuts other tiles, so it is another source; another file
        # at the same path (replaced) is another slide, so it is another source too.
        place = f"{self.path.resolve()}|{self.plan.tile_size}px@{self.plan.footprint}"
        return f"{place}{CONTENT_MARK}{content_part(self.content)}" if self.content else place

    @property
    def display_name(self) -> str:
        return self.path.name


Source = FolderSource | SlideSource


#: What separates a slide source's place (path, tile size and footprint) from its content.
CONTENT_MARK = "|content "


def slide_place(source_id: str) -> str:
    """The path, tile size and footprint of a slide source's identity, without its content (a
    slide recorded before slides were identified by content has no content part)."""
    return source_id.rsplit(CONTENT_MARK, 1)[0]


def same_place_other_slide(a: str, b: str) -> bool:
    """Whether source identities ``a`` and ``b`` are two slides at one path, cut alike: the file
    there was replaced between them."""
    return a != b and slide_place(a) == slide_place(b) and CONTENT_MARK in a + b


def source_hash(source_id: str) -> str:
    """A short, file-name-safe digest of a source identifier (any name the file system gives)."""
    return hashlib.sha1(source_id.encode("utf-8", "surrogateescape")).hexdigest()[:16]


def _relative(root: Path, path: Path) -> str:
    return path.relative_to(root).as_posix()


def _label_from_folders(rel: str, classes: Sequence[str]) -> int | None:
    folded = [c.casefold() for c in classes]
    for part in reversed(Path(rel).parts[:-1]):
        if part.casefold() in folded:
            return folded.index(part.casefold())
    return None


def open_folder(
    root: str | Path,
    classes: Sequence[str],
    order: str = "name",
    manifest: str | Path | None = None,
    labels_csv: str | Path | None = None,
    seed: int = 0,
) -> FolderSource:
    """List a folder's images (recursively) in arrival order, with ground truth when present.

    Tables (manifest, labels) are read as streams and matched to the listed files
    (:mod:`engine.io.tables`): a bare file name is used only when it names one file.

    Args:
        root: the folder.
        classes: the model's class names, to recognise class sub-folders and label values.
        order: ``"name"``, ``"mtime"``, ``"manifest"`` (the order of the files in a manifest) or
            ``"interleaved"`` (a seeded shuffle of the name order, :mod:`engine.io.arrival`).
        manifest: the manifest file; ``manifest.csv``/``manifest.txt`` in ``root`` when omitted.
        labels_csv: a labels CSV; ``labels.csv`` in ``root`` (or the manifest's label column) when omitted.
        seed: the interleaved order's seed (ignored by the other orders).

    Raises:
        SourceError: the folder does not exist or holds no images, the manifest is missing, or a
            table cannot be read or names a file ambiguously.
    """
    root = Path(root)
    if not root.is_dir():
        raise SourceError(f"{root}: not a folder")
    if order not in ORDERS:
        raise SourceError(f"unknown arrival order {order!r}; use one of {', '.join(ORDERS)}")
    notes: list[str] = []
    files = list_images(root, order="mtime" if listing_order(order) == "mtime" else "name")
    by_rel = {_relative(root, p): p for p in files}
    index = FileIndex(list(by_rel))
    manifest_path: Path | None = None
    if order == "manifest":
        manifest_path = (
            Path(manifest)
            if manifest
            else next((root / n for n in MANIFEST_FILES if (root / n).is_file()), None)
        )
        if manifest_path is None:
            raise SourceError(f"{root}: arrival order 'manifest' needs a {' or '.join(MANIFEST_FILES)} file")
        ordered, missing = read_order(manifest_path, index, manifest_path.name)
        if missing:
            notes.append(f"{manifest_path.name}: {missing} listed file(s) were not found under {root}")
        if len(files) > len(ordered):
            notes.append(
                f"{manifest_path.name}: {len(files) - len(ordered)} image(s) not in the manifest were left out"
            )
        files = [by_rel[rel] for rel in ordered]
    if not files:
        raise SourceError(f"{root}: no images found (looked for .png, .jpg, .tif, .bmp recursively)")

    labels: dict[str, int] = {}
    label_origin: str | None = None
    table_path = (
        Path(labels_csv)
        if labels_csv
        else next((root / n for n in LABEL_FILES if (root / n).is_file()), None)
    )
    if table_path is not None:
        labels, label_notes = read_labels(table_path, index, classes, table_path.name)
        notes += label_notes
        label_origin = table_path.name if labels else None
    elif manifest_path is not None:
        labels, label_notes = read_labels(manifest_path, index, classes, "manifest")
        notes += label_notes
        label_origin = "manifest" if labels else None

    items = []
    from_folders = 0
    for position, path in enumerate(files):
        rel = _relative(root, path)
        truth = labels.get(rel) if labels else None
        if truth is None and not labels:
            truth = _label_from_folders(rel, classes)
            from_folders += truth is not None
        items.append(StreamItem(position, rel, rel, path=path, ground_truth=truth))
    if from_folders:
        label_origin = "class sub-folders"
    if order == "interleaved":
        return FolderSource(root, order, interleave(items, seed), label_origin, tuple(notes), seed=seed)
    return FolderSource(root, order, tuple(items), label_origin, tuple(notes))


def arrived_since(source: FolderSource, classes: Sequence[str], manifest: str | Path | None = None) -> int:
    """How many images ``source``'s folder lists now that were not there when it was listed.

    They arrived while a run went through ``source`` (a folder being copied into); the next run
    over the folder takes them. The folder is listed again as ``source`` was (its order, seed and
    manifest); a folder that can no longer be listed counts none.
    """
    try:
        now = open_folder(source.root, classes, source.order, manifest, seed=source.seed)
    except (SourceError, OSError):
        return 0
    before = {item.key for item in source.items}
    return sum(item.key not in before for item in now.items)


def open_slide_source(
    path: str | Path, tile_size: int, target_mpp: float | None, min_tissue: float = DEFAULT_MIN_TISSUE
) -> SlideSource:
    """Open a slide, find its tissue and plan tiles of ``tile_size`` pixels in reading order.

    Raises:
        engine.io.slides.SlideError: the slide cannot be opened.
        SourceError: no tissue was found.
    """
    path = Path(path)
    with Slide(path) as slide:
        thumbnail = slide.thumbnail()
        plan = slide.plan_tiles(tile_size, target_mpp, min_tissue=min_tissue, thumbnail=thumbnail)
        dimensions = slide.dimensions
        vendor = slide.format
        content = slide.content
        slide.check_unchanged()  # the plan and the fingerprint are of one file
    if not plan.tiles:
        raise SourceError(
            f"{path}: no tissue found (saturation threshold {plan.tissue_threshold:.0f}, "
            f"minimum tissue per tile {min_tissue:.0%}); lower the minimum in Settings"
        )
    items = tuple(StreamItem(t.index, t.key, t.label, tile=t) for t in plan.tiles)
    notes = (plan.warning,) if plan.warning else ()
    return SlideSource(path, plan, thumbnail, dimensions, vendor, items, notes, content=content)


def reopen_slide(source: SlideSource) -> Slide:
    """The slide of ``source`` opened again to read its tiles, refused when the file at its path is
    no longer the slide it was planned on.

    Raises:
        engine.io.slides.SlideError: it cannot be opened, or it was replaced (transient: the next
            opening plans the file there as a new input).
    """
    slide = Slide(source.path)
    try:
        if source.content and not same_content(slide.content, source.content):
            raise SlideError(
                f"{source.path}: the slide file was replaced while it was being opened; open it again",
                transient=True,
            )
    except BaseException:
        slide.close()
        raise
    return slide
