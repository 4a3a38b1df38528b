"""What crosses between the UI thread and the engine worker: frozen dataclasses only (Qt-free).

Requests go to the worker; everything else comes back. Arrays are read-only copies, never live
tensors, so they can be read on either thread.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from app._engine import ModelCard, PredictionRow, Source
from app.overlay import Overlay
from app.profiles import ProfileInfo

RunReason = Literal["finished", "stopped", "failed"]


@dataclass(frozen=True)
class SessionRequest:
    model: Path
    method: str
    method_config: dict[str, Any] = field(default_factory=dict)
    device: str = "auto"
    profile: str = "default"
    home: Path | None = None  # studio home (profiles), None = default
    autosave_every: int = 100
    state_dir: Path | None = None  # a journal directory to use instead of the profile (f2tta run's --state)


@dataclass(frozen=True)
class SessionInfo:
    card: ModelCard
    model_path: str
    method: str
    device: str
    fingerprint: str
    state_fingerprint: str
    images_seen: int
    config: dict[str, Any]
    profile: ProfileInfo
    profile_error: str | None = None  # the profile's state cannot be used; reset it to use it


@dataclass(frozen=True)
class SourceRequest:
    path: Path
    kind: Literal["folder", "slide"]
    order: str = "name"
    manifest: Path | None = None
    min_tissue: float = 0.25


@dataclass(frozen=True)
class SourceOpened:
    source: Source
    done: int  # items processed or skipped for good by earlier runs
    restored_rows: tuple[PredictionRow, ...]


@dataclass(frozen=True)
class ItemResult:
    row: PredictionRow
    overlay: Overlay
    preview: np.ndarray | None  # (H, W, 3) uint8, read-only
    probs: np.ndarray  # (C,) float32, read-only


@dataclass(frozen=True)
class ItemFailure:
    position: int
    name: str
    message: str
    retried: bool = False  # a transient failure: the next run tries the image again


@dataclass(frozen=True)
class RunEnded:
    reason: RunReason
    processed: int  # images processed in this run
    failed: int  # images that could not be read in this run
    saved: bool  # the state was written to the profile
    profile: ProfileInfo | None
    state_fingerprint: str
    message: str = ""
