"""The suite's work folder: one process at a time, and each model's files kept as one unit.

A source model is three files written one after another (the checkpoint, its card, its source
reference) and a kill can fall between any two. :class:`ModelUnit` makes them one unit: after
training, a manifest (``MODEL.unit.json``) is written last, atomically, naming each file with its
size and SHA-256. On resume a unit is used only when its manifest is there and every file matches
it, and when its card says it was trained as the recipe asks (size, epochs, patience, seed,
source site, training data); anything else is removed and trained again, never used and never
fatal. A folder made before manifests existed is adopted when all three files are there and
load (the reference against the checkpoint's fingerprint). The source passes are a unit of their
own already: one atomic file whose key is the SHA-256 of the checkpoint and the card
(:class:`lab.bench.replay.PassCache`), checked when read and recomputed when unusable.

:class:`WorkFolder` holds the folder's lock while data, models and passes are made (a second
``f2tta bench-suite`` on the same folder is told who holds it) and removes the temp files a
killed writer left (``.NAME.….tmp``, e.g. a 7 MB half-written checkpoint).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.errors import F2TTAError
from engine.model.card import ModelCard, card_path_for, load_model, read_card
from engine.model.prompted_vit import PromptedViT
from engine.model.source_reference import find_reference, reference_path
from engine.run.lock import DirectoryLock
from engine.util.atomic import atomic_write_bytes
from engine.util.bounded_json import loads_bounded
from engine.util.closing import Closing
from engine.util.files import UnsafeFileError, open_regular, read_regular

logger = logging.getLogger(__name__)

UNIT_FORMAT = 1
_TEMP_FILE = re.compile(r"^\..+\.tmp$")  # what engine.util.atomic and save_model leave when killed
_MAX_MANIFEST = 1 << 16
#: Folders of the work folder whose files are written atomically (temp file, then rename).
ATOMIC_FOLDERS = ("models", "passes")


class WorkFolder(Closing):
    """The work folder, locked for this process; temp files of killed writers removed.

    Raises:
        engine.run.lock.LockedError: another process uses the folder (the message names it).
        OSError: the folder cannot be made or locked.
    """

    def __init__(self, work: Path, command: str = "f2tta bench-suite") -> None:
        self.path = Path(work)
        self.path.mkdir(parents=True, exist_ok=True)
        self._lock = DirectoryLock(self.path, command)
        for name in ATOMIC_FOLDERS:
            remove_temp_files(self.path / name)

    def close(self) -> None:
        self._lock.close()


def remove_temp_files(folder: Path) -> list[Path]:
    """Remove the temp files a killed writer left in ``folder``; the paths removed."""
    removed = []
    with contextlib.suppress(OSError):
        for entry in folder.iterdir():
            if _TEMP_FILE.match(entry.name) and entry.is_file() and not entry.is_symlink():
                logger.info("removing %s, left by an interrupted write", entry)
                with contextlib.suppress(OSError):
                    entry.unlink()
                    removed.append(entry)
    return removed


def _sha256(path: Path) -> str:
    fh, _ = open_regular(path)
    digest = hashlib.sha256()
    with fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def trained_with(card: ModelCard) -> dict[str, Any]:
    """What a model was trained with, from its card, in the terms a recipe sets."""
    training = card.training if isinstance(card.training, dict) else {}
    dataset = training.get("dataset")
    root = dataset.get("root") if isinstance(dataset, dict) else None
    return {
        "size": card.img_size,
        "epochs": training.get("max_epochs"),
        "patience": training.get("patience"),
        "seed": training.get("seed"),
        "source": card.source_domain,
        "train_data": Path(str(root)).name if root is not None else None,
    }


@dataclass(frozen=True)
class ModelUnit:
    """A source model's checkpoint, card and source reference, sealed by a manifest written last."""

    checkpoint: Path

    @property
    def manifest(self) -> Path:
        return self.checkpoint.with_name(self.checkpoint.stem + ".unit.json")

    @property
    def files(self) -> tuple[Path, Path, Path]:
        return self.checkpoint, card_path_for(self.checkpoint), reference_path(self.checkpoint)

    def problem(self, expected: dict[str, Any]) -> str | None:
        """Why the unit cannot be used as it is (None: it is whole and trained as ``expected``).

        A unit without a manifest from before manifests existed is checked by loading it, and
        sealed when it is whole.
        """
        if not any(p.exists() for p in (*self.files, self.manifest)):
            return "not trained yet"
        try:
            if not self.manifest.exists():
                self._adopt()
            listed = self._listed()
            for path in self.files:
                if path.name in listed and listed[path.name] != self._describe(path):
                    return f"{path.name} differs from what was written"
            card = read_card(self.files[1])
            wants_reference = isinstance(card.training, dict) and "source_reference" in card.training
            if sorted(listed) != sorted(p.name for p in self.files[: 3 if wants_reference else 2]):
                return f"the unit lists {', '.join(sorted(listed))}"
        except (F2TTAError, OSError, ValueError, UnsafeFileError) as exc:
            return str(exc)
        have = trained_with(card)
        if have != expected:
            changed = ", ".join(
                f"{k} {have.get(k)!r} -> {v!r}" for k, v in expected.items() if have.get(k) != v
            )
            return f"trained with other settings ({changed})"
        return None

    def _describe(self, path: Path) -> dict[str, Any]:
        return {"bytes": path.stat().st_size, "sha256": _sha256(path)}

    def _listed(self) -> dict[str, Any]:
        data = loads_bounded(
            read_regular(self.manifest, _MAX_MANIFEST, "unit manifest"), max_bytes=_MAX_MANIFEST, max_depth=4
        )
        files = data.get("files") if isinstance(data, dict) else None
        if not isinstance(data, dict) or data.get("format") != UNIT_FORMAT or not isinstance(files, dict):
            raise ValueError(f"{self.manifest.name} is not a unit manifest")
        return files

    def _adopt(self) -> None:
        """Seal a unit written before manifests, when its three files are there and load together.

        Raises:
            ValueError: a file is missing, or the reference does not belong to the checkpoint.
        """
        missing = [p.name for p in self.files if not p.exists()]
        if missing:
            raise ValueError(f"half written: {', '.join(missing)} missing")
        loaded = load_model(self.checkpoint)
        if (
            find_reference(
                self.checkpoint, loaded.fingerprint, loaded.card.num_classes, PromptedViT(loaded.model)
            )
            is None
        ):
            raise ValueError(f"{self.files[2].name} does not belong to {self.checkpoint.name}")
        self.seal()

    def seal(self) -> None:
        """Write the manifest of the unit's files as they are now (after they were all written)."""
        files = {p.name: self._describe(p) for p in self.files if p.exists()}
        data = {"format": UNIT_FORMAT, "files": files}
        atomic_write_bytes(self.manifest, (json.dumps(data, indent=2, sort_keys=True) + "\n").encode())

    def clear(self) -> None:
        """Remove the manifest first, then every file of the unit and the temp files of its writers."""
        for path in (self.manifest, *self.files):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        names = tuple(p.name for p in (self.manifest, *self.files))
        with contextlib.suppress(OSError):
            for entry in self.checkpoint.parent.iterdir():
                if _TEMP_FILE.match(entry.name) and entry.name[1:].startswith(names) and entry.is_file():
                    entry.unlink()
