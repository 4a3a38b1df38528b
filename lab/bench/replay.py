"""Replaying decisions from cached source passes: the benchmark for methods that read only the source pass.

I-DiPT+'s reported decisions, FOA's back-to-source shift and the source model itself depend on
each image's *source pass* (logits, pre-logit features, block 1's per-channel token statistics)
and on the earlier images' source passes, never on the prompts. So a stream can be replayed in
any order, with any class mix and any setting, from source passes computed once per model and
image (:class:`PassCache`), instead of running the model again for every stream. Passes are
computed one image at a time (batch 1), exactly as a live step computes them, so a replay decides
exactly as the live run did (``tests/test_replay.py``).

:func:`replay` runs one method over one stream and returns per-image predictions, the source
predictions and, for I-DiPT+, each decision's path, site group and threshold.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError, safe_open
from safetensors.numpy import save

from engine.data.readers import read_array
from engine.errors import F2TTAError
from engine.methods.foa_shift import FOAShiftConfig
from engine.methods.idipt_plus import PATHS, IDiPTPlusConfig, OperatingPoint, ReferenceArrays
from engine.model.card import LoadedModel, _sha256_file, card_path_for, load_model
from engine.model.source_reference import SourceReference, appearance_statistics
from engine.run.session import Session
from engine.util.atomic import atomic_write_bytes

logger = logging.getLogger(__name__)

REPLAYABLE = ("source", "idipt+", "foa-shift")
_FORMAT = "1"
_ARRAYS = ("logits", "features", "stats")


class ReplayError(F2TTAError):
    """Source passes cannot be computed or replayed (unreadable image, damaged cache, unknown method)."""


@dataclass(frozen=True)
class SourcePasses:
    """Source passes of a list of images, in its order.

    Attributes:
        logits: ``(N, C)`` float32 source logits.
        features: ``(N, D)`` float32 pre-logit features.
        stats: ``(N, 2W)`` float32 per-channel mean and std of block 1's output patch tokens.
    """

    logits: np.ndarray
    features: np.ndarray
    stats: np.ndarray

    def __len__(self) -> int:
        return int(self.logits.shape[0])

    def take(self, index: np.ndarray) -> SourcePasses:
        return SourcePasses(self.logits[index], self.features[index], self.stats[index])


def compute_passes(
    session: Session, images: Sequence[Path | np.ndarray], progress: Callable[[int], None] | None = None
) -> SourcePasses:
    """Source passes of image files or arrays, one image at a time, as :meth:`Session.step` computes them.

    Raises:
        ReplayError: an image cannot be read (the benchmark's data must be readable).
    """
    size = session.card.img_size
    logits, features, stats = [], [], []
    with torch.no_grad():
        for image in images:
            try:
                x = session.preprocess(image if isinstance(image, np.ndarray) else read_array(image, size))
            except (OSError, ValueError, F2TTAError) as exc:
                raise ReplayError(f"{image}: cannot be read for its source pass ({exc})") from exc
            out = session.model.source_pass(x)
            logits.append(out.logits[0].float().cpu().numpy())
            features.append(out.features[0].float().cpu().numpy())
            stats.append(
                appearance_statistics(out.block1_out, session.model.num_prefix_tokens)[0]
                .float()
                .cpu()
                .numpy()
            )
            if progress is not None:
                progress(1)
    if not logits:
        raise ReplayError("no image to compute source passes of")
    return SourcePasses(np.stack(logits), np.stack(features), np.stack(stats))


class PassCache:
    """Source passes kept on disk, one file per (model, image list, device); computed once."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)

    @staticmethod
    def key(model: Path, images: Sequence[Path], device: str) -> str:
        h = hashlib.sha256(f"{_FORMAT}\0{device}\0".encode())
        h.update(_sha256_file(model).encode())
        h.update(_sha256_file(card_path_for(model)).encode())
        for path in images:
            st = path.stat()
            h.update(f"{path}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
        return h.hexdigest()

    def passes(
        self,
        model: Path,
        images: Sequence[Path],
        device: str = "cpu",
        progress: Callable[[int], None] | None = None,
    ) -> SourcePasses:
        """The cached passes of ``images`` under ``model``, computed (and stored) when absent."""
        key = self.key(model, images, device)
        path = self.directory / f"passes-{key[:32]}.safetensors"
        if path.is_file():
            try:
                return read_passes(path, key, len(images))
            except (OSError, ValueError, KeyError, SafetensorError) as exc:
                logger.warning("recomputing the unusable pass cache %s: %s", path, exc)
        session = Session(load_model(model), method="source", device=device)
        passes = compute_passes(session, images, progress)
        write_passes(path, key, passes)
        return passes


def write_passes(
    path: Path, key: str, passes: SourcePasses, extra: dict[str, np.ndarray] | None = None
) -> None:
    """Store ``passes`` (and ``extra`` arrays) atomically under ``key``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tensors = {name: np.ascontiguousarray(getattr(passes, name)) for name in _ARRAYS}
    tensors.update({name: np.ascontiguousarray(a) for name, a in (extra or {}).items()})
    atomic_write_bytes(path, save(tensors, metadata={"key": key, "format": _FORMAT}))


def read_passes(path: Path, key: str, n: int) -> SourcePasses:
    with safe_open(str(path), framework="np") as fh:
        meta = fh.metadata() or {}
        if meta.get("key") != key or meta.get("format") != _FORMAT:
            raise ValueError("the file's key or format differs")
        arrays = {name: fh.get_tensor(name) for name in _ARRAYS}
    if any(a.shape[0] != n or not np.isfinite(a).all() for a in arrays.values()):
        raise ValueError("arrays of another length, or non-finite values")
    return SourcePasses(**arrays)


@dataclass
class Replayed:
    """One method replayed along one stream (arrays in stream order).

    Attributes:
        preds: ``(n,)`` the method's predictions.
        source_preds: ``(n,)`` the source model's.
        path: ``(n,)`` index into :data:`engine.methods.idipt_plus.PATHS` (I-DiPT+), else -1.
        group: ``(n,)`` the site group (I-DiPT+; -1 for none).
        threshold: ``(n,)`` the threshold on the source margin used (I-DiPT+; 0 elsewhere).
        margin: ``(n,)`` the source margin ``l_1 - l_0`` (nan for more than two classes).
        candidates: per candidate, ``(n,)`` its threshold when each image was decided
            (I-DiPT+ with an operating point; empty elsewhere).
    """

    preds: np.ndarray
    source_preds: np.ndarray
    path: np.ndarray
    group: np.ndarray
    threshold: np.ndarray
    margin: np.ndarray = field(default_factory=lambda: np.zeros(0))
    candidates: dict[str, np.ndarray] = field(default_factory=dict)


def replay(
    method: str,
    passes: SourcePasses,
    reference: SourceReference | None,
    loaded: LoadedModel,
    config: Any = None,
    seed: int = 0,
    sites: Sequence[str] | np.ndarray | None = None,
) -> Replayed:
    """Replay ``method`` over ``passes`` taken in their order (the stream's).

    Args:
        method: one of :data:`REPLAYABLE`.
        passes: the stream's source passes, in arrival order.
        reference: the model's source reference (I-DiPT+ and FOA-shift need it; None: source decisions).
        loaded: the model (FOA-shift classifies shifted features with its head).
        config: the method's config (defaults when None).
        seed: the session seed (I-DiPT+'s bootstraps).
        sites: ``(n,)`` each image's site as the method is told it (``--known-sites``: the
            folder or slide it came from); None: the free-form protocol, sites unknown.
    """
    if method not in REPLAYABLE:
        raise ReplayError(f"{method!r} cannot be replayed; replayable: {', '.join(REPLAYABLE)}")
    n = len(passes)
    source_preds = passes.logits.argmax(axis=1)
    path = np.full(n, -1, dtype=np.int8)
    group = np.full(n, -1, dtype=np.int32)
    threshold = np.zeros(n, dtype=np.float32)
    logits = passes.logits.astype(np.float64)
    margin = logits[:, 1] - logits[:, 0] if logits.shape[1] == 2 else np.full(n, np.nan)
    if method == "source":
        return Replayed(source_preds.copy(), source_preds, path, group, threshold, margin)
    if method == "foa-shift":
        preds = source_preds.copy() if reference is None else _foa_shift(passes, reference, loaded, config)
        return Replayed(preds, source_preds, path, group, threshold, margin)
    cfg: IDiPTPlusConfig = config if config is not None else IDiPTPlusConfig()
    preds = source_preds.copy()
    if reference is None or not cfg.operating_point or passes.logits.shape[1] != 2:
        path[:] = PATHS.index("not-accepted")  # as the live method records it: the source decision
        return Replayed(preds, source_preds, path, group, threshold, margin)
    head: Any = loaded.model.head  # a timm ViT's linear head
    arrays = ReferenceArrays.from_reference(reference, cfg.feature_dims, head)
    candidates: dict[str, np.ndarray] = {}
    op = OperatingPoint(cfg.operating_point_settings(), reference.radius, seed, arrays.source_margin)
    for i in range(n):
        obs = arrays.observe(passes.logits[i], passes.features[i], passes.stats[i])
        decision = op.step(obs, cfg.source_gate, None if sites is None else str(sites[i]))
        if not cfg.report_operating_point:
            decision = decision.held_for_review()
        preds[i] = int(decision.positive(obs.margin))
        path[i] = PATHS.index(decision.path)
        group[i] = decision.group
        threshold[i] = decision.threshold
        for name, value in decision.candidates.items():
            candidates.setdefault(name, np.full(n, np.nan))[i] = value
    return Replayed(preds, source_preds, path, group, threshold, margin, candidates)


def _foa_shift(
    passes: SourcePasses, reference: SourceReference, loaded: LoadedModel, config: Any
) -> np.ndarray:
    """FOA-shift's predictions (``engine.methods.foa_shift``), with the same float32 operations on the CPU."""
    cfg: FOAShiftConfig = config if config is not None else FOAShiftConfig()
    head: Any = loaded.model.head  # a timm ViT's linear head, read without moving the model
    weight, bias = head.weight.detach().cpu().float(), head.bias.detach().cpu().float()
    source_mean = reference.feature_mean.cpu().float()
    running = source_mean.clone()
    feats = torch.from_numpy(passes.features)
    preds = np.empty(len(passes), dtype=np.int64)
    with torch.no_grad():
        for i in range(len(passes)):
            row = feats[i : i + 1]
            running = cfg.alpha * row[0] + (1.0 - cfg.alpha) * running
            logits = torch.nn.functional.linear(row + cfg.gamma * (source_mean - running), weight, bias)
            preds[i] = int(logits[0].argmax())
    return preds
