"""What crosses between the UI thread and the engine worker: frozen dataclasses only (Qt-free).

Requests go to the worker; everything else comes back. Arrays are read-only copies, never live
tensors, so they can be read on either thread.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from app._engine import GateWarning, ModelCard, PredictionRow, Source
from app.core.overlay import Overlay
from app.core.projects import ProjectInfo

RunReason = Literal["finished", "stopped", "failed"]


@dataclass(frozen=True)
class SessionRequest:
    model: Path
    method: str
    method_config: dict[str, Any] = field(default_factory=dict)
    device: str = "auto"
    project: str = "default"
    home: Path | None = None  # studio home (projects), None = default
    autosave_every: int = 100
    batch: int = 0  # images per model step (0: chosen from the device)
    maps: str = "behind"  # uncertainty maps behind the decisions (methods that allow it) or "inline"
    state_dir: Path | None = None  # a journal directory to use instead of the project (f2tta run's --state)
    #: The content (SHA-256) the project's model had when the project was made with it: a model
    #: file whose content differs since is refused (the project's state belongs to the old one).
    expected_sha256: str = ""


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
    project: ProjectInfo
    project_error: str | None = None  # the project's state cannot be used; reset it to use it
    weights_sha256: str = ""  # the checkpoint's SHA-256 recorded in its card (load_model checked it)


@dataclass(frozen=True)
class SourceRequest:
    path: Path
    kind: Literal["folder", "slide"]
    order: str = "name"  # name, mtime, manifest or interleaved (app.core.arrival)
    manifest: Path | None = None
    min_tissue: float = 0.25
    seed: int = 0  # the interleaved order's seed
    #: The order was chosen for this folder (the order menu, the banner's Interleave): it wins over
    #: the order the folder was begun in; otherwise a begun folder continues in its recorded order.
    order_chosen: bool = False


@dataclass(frozen=True)
class SourceOpened:
    source: Source
    done: int  # items processed or skipped for good by earlier runs
    restored_rows: tuple[PredictionRow, ...]
    overlays: dict[str, Overlay] = field(default_factory=dict)  # kept overlays of restored rows, by key
    review_dir: Path | None = None  # where the project keeps review marks and overlays
    tissue: np.ndarray | None = None  # slides: the tissue mask on the thumbnail's grid (bool)
    other_sources: int = 0  # other sources the project has adapted to
    other_images: int = 0  # images of those sources
    looks_like: str | None = None  # "histology" or "fundus" from a few of its images (app.core.applicability)
    gate: tuple[
        GateWarning, ...
    ] = ()  # the engine's applicability gate (check_source) for the session's model
    # a folder's sub-folders that are not classes of the model (engine.model.gate.subfolder_warning),
    # read on the worker thread: a folder of many images took 6 ms of the window's thread to check
    subfolders: str | None = None


@dataclass(frozen=True)
class RegionRequest:
    """A part of the open slide to show at screen resolution (level-0 pixel rectangle)."""

    ticket: int  # increases with each request; older answers are dropped
    x: int
    y: int
    width: int
    height: int
    max_side: int  # longest side of the image wanted, in pixels


@dataclass(frozen=True)
class RegionRead:
    request: RegionRequest
    rgb: np.ndarray  # (H, W, 3) uint8, read-only, covering the requested rectangle


@dataclass(frozen=True)
class ItemResult:
    row: PredictionRow
    overlay: Overlay
    preview: np.ndarray | None  # (H, W, 3) uint8, read-only
    probs: np.ndarray  # (C,) float32, read-only
    map_only: bool = False  # the map of an image decided earlier: ``row`` replaces its row (maps behind)
    # I-DiPT's prompted decision of an image mapped earlier (with ``map_only``): ``row`` replaces its
    # row, its overlay stays (the prompted decisions are made when a review reaches them)
    prompted_only: bool = False


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
    saved: bool  # the state was written to the project
    project: ProjectInfo | None
    state_fingerprint: str
    message: str = ""
    maps: tuple[int, int, int] = (0, 0, 0)  # uncertainty maps made behind, not made (unreadable), pending
    prompted: int = 0  # I-DiPT's prompted decisions made in this run (asked for by the review)
