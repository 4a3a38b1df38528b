"""Projects: the adaptation state of one site with its model, kept between sessions (Qt-free).
:mod:`app.core.project_lines` says what a project shows, :mod:`app.core.recent` the folders and
slides opened in it.

A project is a folder under ``<studio home>/profiles/<name>/`` (the folder and ``profile.json``
keep the names they had when projects were called site profiles, so every project written
before opens unchanged)::

    profile.json        name, created/updated times, images seen, model and method (for listing)
    inputs.json         the folders and slides opened in it (:mod:`app.core.recent`)
    review/             review marks, overlays and certificates per folder or slide
    state/              the project's journal (:mod:`engine.run.journal`): the engine's state, one rows
                        file per source, the lock -- the same format as ``f2tta run --state``

So ``f2tta run --state <project>/state`` continues a project, and a ``f2tta run`` state directory
opens in the app as a project (``f2tta-studio --state DIR``). Rows are written before the state
and cut back to what the state lists when the journal opens: nothing is lost or counted twice.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import sys
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from app._engine import (
    Journal,
    JsonFileError,
    SchemaError,
    Session,
    StateError,
    atomic_write_bytes,
    read_json_file,
    require_int,
    require_object,
    require_str,
)

STATE_JSON = "state.json"  # the human-readable copy of a state's metadata (engine.run.state)

logger = logging.getLogger(__name__)

ENV_HOME = "F2TTA_STUDIO_HOME"
DEFAULT_PROJECT = "default"
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9 ._-]{0,63}")  # matched whole (fullmatch): no "evil\n"
MAX_PROFILE_BYTES = 64 * 1024  # a profile.json is a few hundred bytes
MAX_PROFILE_DEPTH = 16


class ProjectError(ValueError):
    """A project name or folder cannot be used; the message is meant for the user."""


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


def valid_name(name: str) -> bool:
    """``name`` is a project name as it is (a folder named ``evil\n`` made by hand is not one)."""
    return _NAME_RE.fullmatch(name) is not None


def check_name(name: str) -> str:
    name = name.strip()
    if not valid_name(name):
        raise ProjectError(
            f"{name!r} is not a valid project name: use 1-64 letters, digits, spaces, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return name


@dataclass(frozen=True)
class ProjectInfo:
    """What the project list shows."""

    name: str
    path: Path
    images_seen: int = 0
    created: str | None = None
    updated: str | None = None
    model_fingerprint: str | None = None
    method: str | None = None
    state_fingerprint: str | None = None
    model_path: str | None = None  # the checkpoint this project runs (each project remembers its model)
    method_config: dict[str, Any] | None = None  # the method's settings it runs with
    model_sha256: str | None = None  # the checkpoint's content when the project was made with it
    damaged: str | None = None  # why profile.json cannot be used (the project is disabled), else None
    #: What the project is, whatever its name or home: its reports are owned by it (None: not yet made).
    project_id: str | None = None

    def summary(self, seen: int | None = None) -> str:
        """One line for the status bar; ``seen`` is the live count while a run has unsaved images."""
        count = self.images_seen if seen is None else seen
        text = f"Project '{self.name}': {count} images seen"
        if self.updated:
            text += f", saved {self.updated.replace('T', ' ')[:16]}"
        if count > self.images_seen:
            text += f" ({count - self.images_seen} not saved yet)"
        return text


class Project:
    """One project folder, or a journal directory used as one (``external``).

    Args:
        path: the project folder (or the journal directory itself when ``external``).
        external: ``path`` is a journal directory written by ``f2tta run`` (no profile.json).
    """

    def __init__(self, path: Path, external: bool = False) -> None:
        self.path = path
        self.name = path.name
        self.external = external
        self.state_dir = path if external else path / "state"

    def info(self) -> ProjectInfo:
        """The project's listing; a damaged profile.json gives a listing that says why (``damaged``)."""
        try:
            data = self.read_info()
        except ProjectError as exc:
            return ProjectInfo(name=self.name, path=self.path, damaged=str(exc))
        return ProjectInfo(
            name=self.name,
            path=self.path,
            images_seen=data.get("images_seen", 0) or 0,
            created=data.get("created"),
            updated=data.get("updated") or data.get("updated_at"),
            model_fingerprint=data.get("model_fingerprint"),
            method=data.get("method"),
            state_fingerprint=data.get("state_fingerprint"),
            model_path=data.get("model_path"),
            method_config=data.get("method_config"),
            model_sha256=data.get("model_sha256"),
            project_id=f"state {self.state_dir.resolve()}" if self.external else data.get("id"),
        )

    def read_info(self) -> dict[str, Any]:
        """profile.json (or, for a journal directory, its state.json), checked field by field; {}
        when there is none.

        Raises:
            ProjectError: it cannot be used (too large, too deep, not JSON, not a regular file, a
                field of the wrong type); the message names the file and what to do.
        """
        path = self.state_dir / STATE_JSON if self.external else self.path / "profile.json"
        what = f"{path.name} of project {self.name!r}"
        try:
            data = read_json_file(path, what=what, max_bytes=MAX_PROFILE_BYTES, max_depth=MAX_PROFILE_DEPTH)
            return _checked_info(require_object(data, what))
        except FileNotFoundError:
            return {}
        except (JsonFileError, SchemaError, OSError) as exc:
            text = str(exc) if isinstance(exc, JsonFileError) else f"{what} ({path}): {exc}"
            raise ProjectError(f"{text}. Repair or remove that file, or choose another project.") from exc

    def _write_info(self, **changes: Any) -> ProjectInfo:
        """profile.json with ``changes`` (a damaged one is never overwritten: ProjectError)."""
        if not self.external:
            data = self.read_info()
            data.update(changes)
            data.setdefault("created", now_iso())
            data.setdefault("id", uuid.uuid4().hex)  # made once, kept through renames
            data["name"] = self.name
            _atomic_write_text(self.path / "profile.json", json.dumps(data, indent=2) + "\n")
        return self.info()

    def open_journal(self) -> Journal:
        """The project's journal, locked for this process.

        Raises:
            engine.StateError: the directory cannot be used, or another process holds it.
        """
        legacy = self.path / "rows"  # projects written before the journal kept rows beside state/
        if not self.external and legacy.is_dir() and not (self.state_dir / "rows").exists():
            self.state_dir.mkdir(parents=True, exist_ok=True)
            os.replace(legacy, self.state_dir / "rows")
        return Journal(self.state_dir, command=f"f2tta-studio, project {self.name!r}")

    def note_saved(self, session: Session) -> ProjectInfo:
        """Record in profile.json what the state just saved holds (for the project list)."""
        return self._write_info(
            images_seen=int(session.images_seen),
            updated=now_iso(),
            model_fingerprint=session.fingerprint,
            method=session.method_name,
            state_fingerprint=session.state_fingerprint(),
        )

    def note_model(
        self, model_path: str, sha256: str, method: str, method_config: dict[str, Any]
    ) -> ProjectInfo:
        """Remember the model (where it is and its content) and the method this project runs:
        selecting the project selects them, and a model file whose content changed is refused."""
        info = self.info()
        now = (model_path, sha256 or info.model_sha256, method, method_config)
        if (info.model_path, info.model_sha256, info.method, info.method_config) == now:
            return info
        return self._write_info(
            model_path=model_path, model_sha256=now[1], method=method, method_config=method_config
        )

    def note_cleared(self) -> ProjectInfo:
        return self._write_info(images_seen=0, updated=now_iso(), state_fingerprint=None)


class ProjectStore:
    """The projects under a studio home folder."""

    def __init__(self, home: Path | None = None) -> None:
        self.root = (home or studio_home()) / "profiles"

    def names(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if valid_name(p.name) and p.is_dir())

    def infos(self) -> list[ProjectInfo]:
        return [Project(self.root / name).info() for name in self.names()]

    def info(self, name: str) -> ProjectInfo | None:
        """The listing of an existing project (None when there is none of that name)."""
        path = self.root / name
        return Project(path).info() if valid_name(name) and path.is_dir() else None

    def rename(self, old: str, new: str) -> Project:
        """Rename a project that no process uses.

        Raises:
            ProjectError: a name is invalid, the new one is taken, or the project is in use.
        """
        old, new = check_name(old), check_name(new)
        source, target = self.root / old, self.root / new
        if not source.is_dir():
            raise ProjectError(f"project {old!r} does not exist")
        if target.exists():
            raise ProjectError(f"a project named {new!r} exists already")
        Project(source).read_info()  # a damaged project is not renamed (its profile.json is rewritten)
        _check_unused(source)
        os.rename(source, target)
        project = Project(target)
        project._write_info()
        return project

    def delete(self, name: str) -> None:
        """Delete a project that no process uses (its state, rows, review marks and overlays).

        Raises:
            ProjectError: the name is invalid or the project is in use.
        """
        path = self.root / check_name(name)
        if not path.is_dir():
            return
        _check_unused(path)
        _remove_tree(path)

    def open(self, name: str, create: bool = True) -> Project:
        """The project ``name`` (made when missing and ``create``).

        Raises:
            ProjectError: the name is invalid, there is no such project (``create`` False), or its
                profile.json is damaged (the message names it: the project is not used).
        """
        name = check_name(name)
        path = self.root / name
        if not path.is_dir():
            if not create:
                raise ProjectError(f"project {name!r} does not exist")
            path.mkdir(parents=True, exist_ok=True)
            Project(path)._write_info(images_seen=0)
        project = Project(path)
        if "id" not in project.read_info():  # a damaged project is refused here, before anything writes
            try:
                project._write_info()  # a project made before projects had an identity gets one
            except OSError as exc:  # read-only: its reports are owned by its name, as before
                logger.warning("project %s cannot record its identity: %s", name, exc)
        return project


def _remove_tree(path: Path, attempts: int = 5) -> None:
    """``shutil.rmtree``, tried again when a file appears inside while it runs.

    The UI thread may still write a review file of the project (the certificates, at a state save
    it had queued) while the worker removes the folder: the removal then fails with "directory
    not empty". The writer's file is gone with the next attempt.

    Raises:
        OSError: the folder is still there after ``attempts`` tries.
    """
    for attempt in range(attempts):
        try:
            shutil.rmtree(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            if attempt == attempts - 1 or not path.exists():
                raise
            time.sleep(0.05)


def _check_unused(path: Path) -> None:
    """Take and release the project's journal lock: proves that no process uses it now.

    Raises:
        ProjectError: another process (or this one) holds it, or it cannot be opened.
    """
    try:
        Project(path).open_journal().close()
    except (StateError, OSError) as exc:
        raise ProjectError(f"project {path.name!r} is in use or cannot be changed: {exc}") from exc


_TEXT_FIELDS = (
    "name",
    "created",
    "updated",
    "updated_at",
    "model_fingerprint",
    "method",
    "state_fingerprint",
    "model_path",
    "model_sha256",
    "id",
)


def _checked_info(data: dict[str, Any]) -> dict[str, Any]:
    """profile.json's fields with their types checked (unknown fields are kept as they are).

    Raises:
        SchemaError: a field of the wrong type or size.
    """
    for key in _TEXT_FIELDS:
        if data.get(key) is not None:
            require_str(data[key], key)
    if data.get("images_seen") is not None:
        require_int(data["images_seen"], "images_seen", 0, 10**15)
    if data.get("method_config") is not None:
        require_object(data["method_config"], "method_config")
    return data


def _atomic_write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, text.encode("utf-8"))
