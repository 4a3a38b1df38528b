"""Site profiles: the adaptation state of one site, kept between sessions (Qt-free).

A profile is a folder under ``<studio home>/profiles/<name>/``::

    profile.json        name, created/updated times, images seen, model and method (for listing)
    state/              the engine session's saved state; its ``extra`` records, per source, the
                        keys of the images already processed (saved atomically with the state)
    rows/<hash>.jsonl   one table row per processed image of a source, appended as they are saved

Rows are appended *before* the state is saved, so the rows file is always a superset of what the
state says was processed; rows whose key the state does not list are ignored on reload (their
images were never part of a saved state and are processed again). Nothing is lost or counted twice.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import shutil
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from app._engine import PredictionRow, atomic_write_bytes

logger = logging.getLogger(__name__)

ENV_HOME = "F2TTA_STUDIO_HOME"
DEFAULT_PROFILE = "default"
EXTRA_FORMAT = "f2tta-studio/profile-1"
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ._-]{0,63}$")


class ProfileError(ValueError):
    """A profile name or folder cannot be used; the message is meant for the user."""


class SavableSession(Protocol):
    images_seen: int

    def save(self, directory: str | Path, extra: dict[str, Any] | None = None) -> Any: ...
    def load(self, directory: str | Path) -> dict[str, Any]: ...
    def state_fingerprint(self) -> str: ...


def studio_home() -> Path:
    """The user data folder (``$F2TTA_STUDIO_HOME`` overrides the platform default)."""
    env = os.environ.get(ENV_HOME)
    if env:
        return Path(env).expanduser()
    if sys.platform == "win32":
        base = Path(os.environ.get("APPDATA", Path.home() / "AppData" / "Roaming"))
        return base / "F2TTA Studio"
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / "F2TTA Studio"
    return Path(os.environ.get("XDG_DATA_HOME", Path.home() / ".local" / "share")) / "f2tta-studio"


def now_iso() -> str:
    return datetime.now(UTC).astimezone().isoformat(timespec="seconds")


def check_name(name: str) -> str:
    name = name.strip()
    if not _NAME_RE.match(name):
        raise ProfileError(
            f"{name!r} is not a valid profile name: use 1-64 letters, digits, spaces, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return name


@dataclass(frozen=True)
class ProfileInfo:
    """What the profile list shows."""

    name: str
    path: Path
    images_seen: int = 0
    created: str | None = None
    updated: str | None = None
    model_fingerprint: str | None = None
    method: str | None = None
    state_fingerprint: str | None = None

    def summary(self, seen: int | None = None) -> str:
        """One line for the status bar; ``seen`` is the live count while a run has unsaved images."""
        count = self.images_seen if seen is None else seen
        text = f"Profile '{self.name}': {count} images seen"
        if self.updated:
            text += f", saved {self.updated.replace('T', ' ')[:16]}"
        if count > self.images_seen:
            text += f" ({count - self.images_seen} not saved yet)"
        return text


@dataclass
class ProfileRecord:
    """Per-source keys of processed images; owned and mutated by the worker thread only."""

    processed: dict[str, list[str]] = field(default_factory=dict)
    unsaved_rows: dict[str, list[PredictionRow]] = field(default_factory=dict)

    def keys(self, source_id: str) -> set[str]:
        return set(self.processed.get(source_id, ()))

    def add(self, source_id: str, row: PredictionRow) -> None:
        self.processed.setdefault(source_id, []).append(row.key)
        self.unsaved_rows.setdefault(source_id, []).append(row)

    def to_extra(self) -> dict[str, Any]:
        return {"format": EXTRA_FORMAT, "saved": now_iso(), "processed": self.processed}

    @classmethod
    def from_extra(cls, extra: dict[str, Any] | None) -> ProfileRecord:
        if not extra or extra.get("format") != EXTRA_FORMAT:
            return cls()
        processed = extra.get("processed", {})
        if not isinstance(processed, dict):
            return cls()
        return cls(
            {str(k): [str(v) for v in keys] for k, keys in processed.items() if isinstance(keys, list)}
        )


class Profile:
    """One site profile folder."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.name = path.name

    @property
    def state_dir(self) -> Path:
        return self.path / "state"

    def rows_file(self, source_id: str) -> Path:
        return self.path / "rows" / f"{hashlib.sha1(source_id.encode()).hexdigest()[:16]}.jsonl"

    def has_state(self) -> bool:
        return self.state_dir.is_dir() and any(self.state_dir.iterdir())

    def info(self) -> ProfileInfo:
        try:
            data = json.loads((self.path / "profile.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = {}
        if not isinstance(data, dict):
            data = {}
        return ProfileInfo(
            name=self.name,
            path=self.path,
            images_seen=int(data.get("images_seen", 0) or 0),
            created=data.get("created"),
            updated=data.get("updated"),
            model_fingerprint=data.get("model_fingerprint"),
            method=data.get("method"),
            state_fingerprint=data.get("state_fingerprint"),
        )

    def _write_info(self, **changes: Any) -> ProfileInfo:
        data: dict[str, Any] = {}
        with contextlib.suppress(OSError, ValueError):
            data = json.loads((self.path / "profile.json").read_text(encoding="utf-8"))
        data.update(changes)
        data.setdefault("created", now_iso())
        data["name"] = self.name
        _atomic_write_text(self.path / "profile.json", json.dumps(data, indent=2) + "\n")
        return self.info()

    def load(self, session: SavableSession) -> ProfileRecord:
        """Restore the saved state into ``session`` (untouched when there is none).

        Raises:
            engine.StateError: the saved state is corrupt or belongs to another model/method.
        """
        if not self.has_state():
            return ProfileRecord()
        return ProfileRecord.from_extra(session.load(self.state_dir))

    def save(
        self, session: SavableSession, record: ProfileRecord, model_fingerprint: str, method: str
    ) -> ProfileInfo:
        """Append unsaved rows, then save the state with the processed keys, then the listing info.

        Raises:
            OSError, engine.F2TTAError: the state cannot be written; the previous state is kept.
        """
        for source_id, rows in record.unsaved_rows.items():
            if rows:
                self._append_rows(source_id, rows)
        record.unsaved_rows.clear()
        self.state_dir.mkdir(parents=True, exist_ok=True)
        session.save(self.state_dir, extra=record.to_extra())
        return self._write_info(
            images_seen=int(session.images_seen),
            updated=now_iso(),
            model_fingerprint=model_fingerprint,
            method=method,
            state_fingerprint=session.state_fingerprint(),
        )

    def _append_rows(self, source_id: str, rows: list[PredictionRow]) -> None:
        path = self.rows_file(source_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        text = "".join(json.dumps(row.to_json()) + "\n" for row in rows)
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())

    def read_rows(self, source_id: str, keys: set[str]) -> list[PredictionRow]:
        """Saved rows of a source whose keys are in ``keys`` (the last copy of each), in arrival order.

        Lines that are not kept (rows of images the state does not list, older copies of a row, a
        line cut short by a crash) are dropped from the file, so it holds at most one line per
        processed image however many runs were interrupted.
        """
        path = self.rows_file(source_id)
        rows: dict[str, PredictionRow] = {}
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError:
            return []
        for line in lines:
            try:
                row = PredictionRow.from_json(json.loads(line))
            except (ValueError, TypeError, KeyError):
                continue  # a line cut short by a crash
            if row.key in keys:
                rows[row.key] = row
        kept = sorted(rows.values(), key=lambda r: r.index)
        if len(kept) < len(lines):
            self._rewrite_rows(path, kept)
        return kept

    def _rewrite_rows(self, path: Path, rows: list[PredictionRow]) -> None:
        try:
            _atomic_write_text(path, "".join(json.dumps(row.to_json()) + "\n" for row in rows))
        except OSError as exc:  # housekeeping only: the rows read are still right
            logger.warning("profile %s: %s could not be compacted (%s)", self.name, path.name, exc)

    def clear(self) -> ProfileInfo:
        """Forget the adaptation state and every processed image (reset to the source model)."""
        for sub in (self.state_dir, self.path / "rows"):
            shutil.rmtree(sub, ignore_errors=True)
        return self._write_info(images_seen=0, updated=now_iso(), state_fingerprint=None)


class ProfileStore:
    """The profiles under a studio home folder."""

    def __init__(self, home: Path | None = None) -> None:
        self.root = (home or studio_home()) / "profiles"

    def names(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if p.is_dir() and _NAME_RE.match(p.name))

    def infos(self) -> list[ProfileInfo]:
        return [Profile(self.root / name).info() for name in self.names()]

    def open(self, name: str, create: bool = True) -> Profile:
        name = check_name(name)
        path = self.root / name
        if not path.is_dir():
            if not create:
                raise ProfileError(f"profile {name!r} does not exist")
            path.mkdir(parents=True, exist_ok=True)
            Profile(path)._write_info(images_seen=0)
        return Profile(path)


def _atomic_write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, text.encode("utf-8"))
