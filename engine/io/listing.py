"""Listing image folders in arrival order, without ever leaving the folder.

A symlink is followed only when its target lies inside the folder that is listed; a link that
leaves it (``in/everything -> /``) and a sub-folder that cannot be read are reported as
:class:`ListingProblem` (and logged by :func:`list_images`), never dropped without a word.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from engine.util.files import inside

logger = logging.getLogger(__name__)

IMAGE_EXTENSIONS = frozenset({".png", ".jpg", ".jpeg", ".tif", ".tiff", ".bmp", ".gif"})

Order = Literal["name", "mtime"]


@dataclass(frozen=True)
class ListingProblem:
    """Something under the listed folder that was left out, and why."""

    path: Path
    reason: str


@dataclass
class ImageListing:
    """The images found under a folder, and what could not be listed."""

    root: Path
    files: list[Path] = field(default_factory=list)
    problems: list[ListingProblem] = field(default_factory=list)


_DIGITS = re.compile(r"([0-9]+)")

NameKey = tuple[tuple[int | str, ...], str]


def natural_key(text: str) -> NameKey:
    """A sort key total over any name: numbers compared as numbers (``img2`` before ``img10``).

    Only ASCII digit runs are numbers (``²`` or ``١`` are text: ``int()`` refused ``1²2``), parts
    alternate text, number, text, ... so two keys compare like with like, and equal keys
    (``A.png``, ``a.png``; ``01``, ``1``) are ordered by the name itself.
    """
    parts = _DIGITS.split(text)
    return tuple(int(p) if i % 2 else p.casefold() for i, p in enumerate(parts)), text


def iter_image_files(
    root: str | Path,
    problems: list[ListingProblem] | None = None,
    boundary: str | Path | None = None,
    follow_outside: bool = False,
) -> Iterator[Path]:
    """Yield the image files under ``root`` recursively (hidden names skipped), each folder once.

    Args:
        root: the folder to list; paths are yielded under it as given, symlinks unresolved.
        problems: receives what was left out: links leaving ``boundary``, dangling links,
            folders that cannot be listed.
        boundary: the folder that symlinks may not leave; ``root`` when omitted.
        follow_outside: follow symlinks wherever they lead (each folder is still listed once).
    """
    root = Path(root)
    fence = root if boundary is None else Path(boundary)
    real_root = os.path.realpath(fence)
    found = problems if problems is not None else []
    seen: set[tuple[int, int]] = set()
    pending = [root]
    while pending:
        folder = pending.pop()
        try:
            st = os.stat(folder)
            if (st.st_dev, st.st_ino) in seen:  # reached twice through an inner link
                continue
            seen.add((st.st_dev, st.st_ino))
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            found.append(
                ListingProblem(
                    folder, f"folder cannot be listed ({exc.strerror or exc}); its images are left out"
                )
            )
            continue
        subfolders: list[Path] = []
        for entry in entries:
            if entry.name.startswith("."):
                continue
            path = folder / entry.name
            is_image = Path(entry.name).suffix.lower() in IMAGE_EXTENSIONS
            try:
                if entry.is_symlink():
                    target = os.path.realpath(path)
                    if not os.path.exists(target):
                        if is_image:
                            found.append(
                                ListingProblem(path, f"symbolic link to {target}, which does not exist")
                            )
                        continue
                    if not follow_outside and not inside(target, real_root):
                        if is_image or os.path.isdir(target):
                            found.append(
                                ListingProblem(
                                    path,
                                    f"symbolic link to {target} leaves the input folder {fence}; not followed",
                                )
                            )
                        continue
                is_dir = entry.is_dir()
            except OSError as exc:
                found.append(ListingProblem(path, f"cannot be examined ({exc.strerror or exc})"))
                continue
            if is_dir:
                subfolders.append(path)
            elif is_image:
                yield path
        pending.extend(reversed(subfolders))


def scan_images(root: str | Path, order: Order = "name") -> ImageListing:
    """All images under ``root`` in arrival order, and what was left out.

    Args:
        root: a folder (searched recursively, never outside itself).
        order: ``"name"`` sorts by relative path with numbers compared as numbers
            (``img2`` before ``img10``); ``"mtime"`` by modification time, then name.
    """
    if order not in ("name", "mtime"):
        raise ValueError(f"unknown order {order!r}; use 'name' or 'mtime'")
    root = Path(root)
    listing = ImageListing(root)
    files = list(iter_image_files(root, listing.problems))

    def name_key(p: Path) -> NameKey:
        return natural_key(p.relative_to(root).as_posix())

    if order == "name":
        files.sort(key=name_key)
    else:

        def mtime(p: Path) -> float:
            try:
                return p.stat().st_mtime
            except OSError:
                return float("inf")

        files.sort(key=lambda p: (mtime(p), name_key(p)))
    listing.files = files
    return listing


def list_images(root: str | Path, order: Order = "name") -> list[Path]:
    """The images of :func:`scan_images`; each problem is logged as a warning."""
    listing = scan_images(root, order)
    for problem in listing.problems:
        logger.warning("%s: %s", problem.path, problem.reason)
    return listing.files
