"""Overlays kept with a project beside the review marks, one file per source (Qt-free).

Overlays (the per-patch uncertainty map and the two patch sets, a few hundred bytes per image)
are kept beside the review marks, so a review resumes after a restart with its overlays and the
PDF can show them. Both live in ``<project>/review/``::

    <source hash>.marks.jsonl      the review marks and the comparisons' starts (the engine's
                                   engine.review.marks: bound to the source, read back as times)
    <source hash>.overlays.jsonl   one overlay per line (float16 map and int16 patch indices, base64)

Lines are appended and flushed as they are made; a line cut short by a crash is dropped when the
file is read, and reading rewrites the file with one line per key when it holds more.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from app._engine import KeyedJsonLines, UnsafeFileError, source_hash
from app.core.overlay import Overlay

T = TypeVar("T")

logger = logging.getLogger(__name__)

REVIEW_DIR = "review"


def source_file(folder: Path, source_id: str, suffix: str) -> Path:
    """``<folder>/<hash of source_id>.<suffix>``."""
    return folder / f"{source_hash(source_id)}.{suffix}"


def _read_kept(file: KeyedJsonLines, keep: Callable[[dict[str, Any]], bool]) -> dict[str, dict[str, Any]]:
    """The last record of each key that ``keep`` accepts; compacts the file when it shrinks.

    A file that cannot be read is logged and reads as empty (the review goes on without it).
    """
    try:
        records, lines = file.read()
    except (OSError, UnsafeFileError) as exc:
        logger.warning("%s cannot be read: %s", file.path, exc)
        return {}
    found = {k: r for k, r in records.items() if keep(r)}
    if len(found) < lines:
        try:
            file.rewrite(found.values())
        except OSError as exc:
            logger.warning("%s cannot be compacted: %s", file.path, exc)
    return found


class _SourceStore:
    """One source's JSON-lines file in a profile's review folder.

    Args:
        folder: the profile's review folder.
        source_id: the source's identity (as in the journal).
    """

    SUFFIX = ""  # the file's name after the source's hash

    def __init__(self, folder: Path, source_id: str) -> None:
        self.folder, self.source_id = folder, source_id
        # Overlays grow with the source's images and are read off the GUI thread: streamed, not bounded.
        self._file = KeyedJsonLines(source_file(folder, source_id, self.SUFFIX), key="k", max_bytes=None)

    @property
    def path(self) -> Path:
        return self._file.path

    def _load(
        self, keep: Callable[[dict[str, Any]], bool], parse: Callable[[str, dict[str, Any]], T]
    ) -> dict[str, T]:
        """The records ``keep`` accepts, parsed by key; records ``parse`` cannot read are dropped."""
        out = {}
        for key, record in _read_kept(self._file, keep).items():
            try:
                out[key] = parse(key, record)
            except (KeyError, TypeError, ValueError):
                continue
        return out

    def close(self) -> None:
        self._file.close()


def _b64(array: np.ndarray) -> str:
    return base64.b64encode(np.ascontiguousarray(array).tobytes()).decode("ascii")


def _array(text: str, dtype: type, writeable: bool = False) -> np.ndarray:
    out: np.ndarray = np.frombuffer(base64.b64decode(text), dtype=dtype).copy()
    out.setflags(write=writeable)
    return out


def overlay_record(key: str, overlay: Overlay) -> dict[str, Any]:
    """One overlay as a JSON record (float16 map, int16 patch indices)."""
    return {
        "k": key,
        "g": list(overlay.grid),
        "u": None if overlay.uncertainty is None else _b64(overlay.uncertainty.astype(np.float16)),
        "tu": _b64(overlay.uncertain_tokens.astype(np.int16)),
        "tr": _b64(overlay.reliable_tokens.astype(np.int16)),
    }


def overlay_from_record(record: dict[str, Any]) -> Overlay:
    """Inverse of :func:`overlay_record`.

    Raises:
        KeyError, TypeError, ValueError: ``record`` is not an overlay.
    """
    gh, gw = (int(v) for v in record["g"])
    if not (0 < gh <= 512 and 0 < gw <= 512):
        raise ValueError("grid out of range")
    heat = None
    if record.get("u") is not None:
        heat = _array(str(record["u"]), np.float16).reshape(gh, gw)
    tokens = [_array(str(record[k]), np.int16).astype(np.int32) for k in ("tu", "tr")]
    for t in tokens:
        if t.size and (t.min() < 0 or t.max() >= gh * gw):
            raise ValueError("patch index out of range")
        t.setflags(write=False)
    return Overlay((gh, gw), heat, tokens[0], tokens[1])


class OverlayStore(_SourceStore):
    """The overlays of one source's images in a profile, written by the engine worker (see
    :class:`_SourceStore` for the arguments)."""

    SUFFIX = "overlays.jsonl"

    def __init__(self, folder: Path, source_id: str) -> None:
        super().__init__(folder, source_id)
        self.failed = False  # a write failed: overlays are no longer kept for this source

    def load(self, keys: Iterable[str]) -> dict[str, Overlay]:
        """The overlays of ``keys`` (those of images no longer in the journal are dropped)."""
        wanted = set(keys)
        return self._load(lambda r: str(r.get("k")) in wanted, lambda _key, r: overlay_from_record(r))

    def add(self, key: str, overlay: Overlay) -> None:
        """Append an overlay; a failure is logged once and overlays stop being kept (the run goes on)."""
        if self.failed:
            return
        try:
            self._file.append(overlay_record(key, overlay))
        except OSError as exc:
            self.failed = True
            logger.warning(
                "overlays are not kept from here on: %s cannot be written (%s)", self._file.path, exc
            )
