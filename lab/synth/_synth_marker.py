"""The marker ``f2tta synth`` leaves in each site folder it writes, so ``--force`` replaces only that.

``--force`` used to remove a site folder whole: a folder of the same name that the user made,
or a ``notes.txt`` put beside the images, was deleted. Each site folder now holds
:data:`MARKER` (hidden, so dataset readers and folder listings pass it by), written when the
folder is created. A folder without it is never touched; in a folder with it only what the
generator writes is removed (the images ``<class>/NNNNNN.<ext>`` of the classes the marker names,
the class folders once empty, the marker), and anything else stays where it is.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Sequence
from pathlib import Path

from engine.errors import F2TTAError
from engine.util.atomic import atomic_write_bytes

logger = logging.getLogger(__name__)

MARKER = ".f2tta-synth.json"
MARKER_FORMAT = "f2tta-synth-site/1"
_GENERATED = re.compile(r"^\d{6}\.(png|jpg)$")  # the file names the generator writes


class SynthError(F2TTAError):
    """Generated data cannot be written (unknown kind, bad size, output folder in the way)."""


def mark(site_dir: Path, kind: str, site: str, classes: Sequence[str]) -> None:
    """Record that ``site_dir`` is written by the generator (before any image is)."""
    data = {"format": MARKER_FORMAT, "kind": kind, "site": site, "classes": list(classes)}
    atomic_write_bytes(site_dir / MARKER, (json.dumps(data, indent=2) + "\n").encode())


def _classes(site_dir: Path) -> list[str] | None:
    """The class folders the marker names, or None when there is no readable marker."""
    path = site_dir / MARKER
    if path.is_symlink() or not path.is_file():
        return None
    try:
        data = json.loads(path.read_bytes()[:65536])
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("format") != MARKER_FORMAT:
        return None
    classes = data.get("classes")
    if not isinstance(classes, list) or not all(isinstance(c, str) and c and "/" not in c for c in classes):
        return None
    return [c for c in classes if c not in (".", "..")]


def check_ours(site_dir: Path) -> None:
    """Refuse to replace a site folder the generator did not write.

    Raises:
        SynthError: ``site_dir`` is not a folder, is a symlink, or holds no marker.
    """
    if site_dir.is_symlink() or not site_dir.is_dir():
        raise SynthError(f"{site_dir} exists and is not a folder written by f2tta synth; nothing was changed")
    if _classes(site_dir) is None:
        raise SynthError(
            f"{site_dir} was not written by f2tta synth (it holds no {MARKER}); --force replaces only "
            "folders it wrote, so nothing was changed: move it away or choose another output folder"
        )


def remove_ours(site_dir: Path) -> None:
    """Remove what the generator wrote in ``site_dir`` (see the module notes); keep everything else."""
    classes = _classes(site_dir) or []
    kept: list[str] = []
    for name in classes:
        folder = site_dir / name
        if folder.is_symlink() or not folder.is_dir():
            continue
        with os.scandir(folder) as entries:
            for entry in entries:
                if _GENERATED.match(entry.name) and entry.is_file(follow_symlinks=False):
                    os.unlink(entry.path)
                else:
                    kept.append(f"{name}/{entry.name}")
        if not any(folder.iterdir()):
            folder.rmdir()
    (site_dir / MARKER).unlink()
    kept += sorted(p.name for p in site_dir.iterdir() if p.name not in classes)
    if kept:
        logger.info(
            "%s: kept %d file(s) f2tta synth did not write: %s", site_dir, len(kept), ", ".join(kept[:5])
        )


def marked_sites(out: Path) -> list[Path]:
    """The sub-folders of ``out`` (not symlinks) that hold a readable marker, sorted by name."""
    try:
        entries = sorted(out.iterdir())
    except OSError:
        return []
    return [d for d in entries if not d.is_symlink() and d.is_dir() and _classes(d) is not None]


def remove_stale(site_dir: Path) -> None:
    """Remove what the generator wrote in a site folder no longer generated, and the folder once empty."""
    remove_ours(site_dir)
    if not any(site_dir.iterdir()):
        site_dir.rmdir()
