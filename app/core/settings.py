"""User settings (Qt-free): model, device, method and its hyper-parameters, stored as JSON."""

from __future__ import annotations

import dataclasses
import getpass
import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app._engine import (
    DEFAULT_METHOD,
    MAPS,
    MAX_BATCH,
    FieldInfo,
    JsonFileError,
    coerce,
    fields_of,
    load_model,
    read_json_file,
)
from app.core.projects import DEFAULT_PROJECT, studio_home

logger = logging.getLogger(__name__)

RESOURCES = Path(__file__).resolve().parents[2] / "resources"
DEMO_MODEL = RESOURCES / "demo" / "model.safetensors"  # histology, the default model
FUNDUS_DEMO_MODEL = RESOURCES / "demo-fundus" / "model.safetensors"
TISSUE_DEMO_MODEL = RESOURCES / "demo-tissue" / "model.safetensors"  # four classes (issue 39)
DEMO_MODELS = {"histology": DEMO_MODEL, "fundus": FUNDUS_DEMO_MODEL, "tissue": TISSUE_DEMO_MODEL}
DEMO_SETS = {kind: RESOURCES / "demo-sets" / kind for kind in DEMO_MODELS}
DEMO_PROJECTS = {"histology": "Demo histology", "fundus": "Demo fundus", "tissue": "Demo tissue types"}
#: Each demo in a menu item or button: "Try the histology demo".
DEMO_NAMES = {"histology": "histology", "fundus": "fundus", "tissue": "four-class tissue"}

FOLDER_KINDS = ("folder", "slide", "export", "model")  # the file dialogs that remember where they were
ModelCheck = Callable[[str], "str | None"]  # model path text -> why it cannot be used (None: fine)


def available_demos() -> set[str]:
    """The demo kinds whose model and image set are both installed."""
    return {kind for kind, path in DEMO_MODELS.items() if path.is_file() and DEMO_SETS[kind].is_dir()}


def check_model(text: str) -> str | None:
    """Why the model at ``text`` cannot be used (None when it loads); empty text is the demo model.

    The settings dialog calls this before it saves a model path: the checkpoint is loaded exactly
    as a session would (card beside it, checksum, shapes), so a bad path is refused where it is typed.
    """
    path = Path(text).expanduser() if text.strip() else DEMO_MODEL
    if not path.exists():
        return f"{path}: no such file"
    if path.is_dir():
        return f"{path}: a folder, not a checkpoint (choose the .safetensors file)"
    try:
        load_model(path)
    except Exception as exc:  # ModelLoadError names the problem; anything else is reported as it is
        return f"{path}: {exc}"
    return None


@dataclass(frozen=True)
class AppSettings:
    """What the settings dialog edits; command-line options override it for one session."""

    model: str = ""  # checkpoint path; empty = the demo model shipped in resources/demo
    device: str = "auto"  # "auto" (CUDA, then MPS, then CPU), "cpu", "cuda", "cuda:1", "mps"
    method: str = DEFAULT_METHOD  # registered adaptation method
    method_config: dict[str, Any] = field(default_factory=dict)  # overrides of the method's defaults
    order: str = "name"  # arrival order of folder images: "name", "mtime", "manifest" or "interleaved"
    order_seed: int = 0  # seed of the interleaved order
    min_tissue: float = 0.25  # smallest tissue fraction of a slide tile to process it (0-1)
    low_confidence: float = 0.6  # below this confidence a prediction counts as low-confidence (0-1)
    overlay_opacity: float = 0.45  # heat-map opacity (0-1)
    project: str = DEFAULT_PROJECT  # the project the adaptation state is kept in
    autosave_every: int = 100  # save the state every this many images during a run (0 = only at stop)
    batch: int = 0  # images per model step (0 = chosen from the device: 16 on a CPU, 64 on CUDA)
    maps: str = "behind"  # "behind": decisions first, uncertainty maps after them; "inline": together
    reviewer: str = ""  # the name kept with each review mark; empty = the operating system's user name
    folders: dict[str, str] = field(default_factory=dict)  # where each file dialog starts (FOLDER_KINDS)
    maximized: bool = False  # the window was maximised when it closed: it opens so again

    def model_path(self) -> Path:
        return Path(self.model).expanduser() if self.model else DEMO_MODEL

    def reviewer_name(self) -> str:
        """The reviewer's name: the setting, else the operating system's user name."""
        if self.reviewer.strip():
            return self.reviewer.strip()
        try:
            return getpass.getuser()
        except (OSError, KeyError, ImportError):  # no user name in the environment or the password database
            return "unknown reviewer"

    def start_folders(self) -> dict[str, str]:
        """Where the file dialogs start, by kind (only the known kinds and text paths are kept)."""
        return {
            k: v
            for k, v in self.folders.items()
            if k in FOLDER_KINDS and isinstance(v, str) and len(v) < 4096
        }

    def remember_folder(self, kind: str, folder: Path) -> AppSettings:
        """These settings with ``folder`` as where the ``kind`` dialog starts next time."""
        return dataclasses.replace(self, folders={**self.start_folders(), kind: str(folder)})

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> AppSettings:
        if "project" not in data and "profile" in data:  # written before projects had their name
            data = {**data, "project": data["profile"]}
        defaults = cls()
        kwargs: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            if f.name not in data:
                continue
            value, default = data[f.name], getattr(defaults, f.name)
            if isinstance(default, bool) or type(value) is type(default):
                kwargs[f.name] = value
            elif isinstance(default, float) and isinstance(value, int):
                kwargs[f.name] = float(value)
        if not 0 <= kwargs.get("batch", 0) <= MAX_BATCH:
            del kwargs["batch"]  # out of range (an edited file): chosen from the device again
        if kwargs.get("maps", "behind") not in MAPS:
            del kwargs["maps"]
        return cls(**kwargs)


def settings_path() -> Path:
    return studio_home() / "settings.json"


MAX_SETTINGS_BYTES = 256 * 1024  # a settings.json is a few kB
MAX_SETTINGS_DEPTH = 16


def load_settings(path: Path | None = None) -> AppSettings:
    """The saved settings; the defaults when there are none or the file cannot be used (said in
    the log, naming the file): a damaged settings.json never stops the app."""
    path = path or settings_path()
    try:
        data = read_json_file(
            path, what="settings.json", max_bytes=MAX_SETTINGS_BYTES, max_depth=MAX_SETTINGS_DEPTH
        )
    except FileNotFoundError:
        return AppSettings()
    except (OSError, JsonFileError) as exc:
        logger.warning("ignoring the settings, the defaults are used: %s", exc)
        return AppSettings()
    if not isinstance(data, dict):
        logger.warning("ignoring the settings in %s (not a JSON object), the defaults are used", path)
        return AppSettings()
    return AppSettings.from_json(data)


def save_settings(settings: AppSettings, path: Path | None = None) -> None:
    path = path or settings_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(settings.to_json(), indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)


FieldSpec = FieldInfo  # one editable hyper-parameter: name, kind, default, help, choices, bounds


def config_fields(config_class: type | None) -> list[FieldInfo]:
    """The settable fields of a method's config dataclass, for the "Advanced" form.

    Help texts and bounds come from the fields' metadata (:func:`engine.config.setting`), so they
    are there in a frozen bundle that carries no source code.
    """
    return fields_of(config_class)


def clean_overrides(fields: list[FieldInfo], values: dict[str, Any]) -> dict[str, Any]:
    """Keep only overrides that name a field, are valid for it and differ from the default."""
    out: dict[str, Any] = {}
    for spec in fields:
        if spec.name not in values:
            continue
        value = values[spec.name]
        if isinstance(value, str) and spec.kind is not str:
            try:
                value = coerce(spec, value)
            except ValueError:
                continue
        try:
            value = spec.check(value)
        except ValueError:
            continue
        if value != spec.default:
            out[spec.name] = value
    return out


def method_fields() -> dict[str, list[FieldInfo]]:
    """Every registered method with the editable fields of its config dataclass."""
    from app._engine import list_methods, method_config_class

    return {name: config_fields(method_config_class(name)) for name in list_methods()}


def available_devices() -> list[str]:
    """Device choices for this machine: "auto", "cpu" and the accelerators that are present."""
    from app._engine import select_device

    devices = ["auto", "cpu"]
    for name in ("cuda", "mps"):
        try:
            select_device(name)
        except (ValueError, RuntimeError):
            continue
        devices.append(name)
    return devices
