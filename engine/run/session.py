"""The session API shared by the CLI and the desktop app: one image in, one :class:`StepResult` out."""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image

from engine._version import __version__
from engine.config import build_config, differences
from engine.errors import StateError
from engine.io.images import read_image, to_rgb
from engine.methods import DEFAULT_METHOD, TTAMethod, get_method_class, method_for_config
from engine.model.card import LoadedModel, ModelCard, load_model
from engine.model.prompted_vit import PromptedViT
from engine.model.source_reference import SourceReference, find_reference
from engine.run.guard import CollapseGuard, GuardConfig, GuardEvent
from engine.run.state import read_state, write_state
from engine.run.step import SettingsMismatchError, StepResult
from engine.util.device import select_device

logger = logging.getLogger(__name__)


def _token_indices(tokens: torch.Tensor | None) -> np.ndarray:
    """The first image's patch indices ``(k,)`` as int64 (empty when the method marks none)."""
    if tokens is None:
        return np.zeros(0, dtype=np.int64)
    return tokens[0].cpu().numpy().astype(np.int64)


ImageInput = Image.Image | np.ndarray | str | Path


class Session:
    """A source model plus one adaptation method, fed one image at a time.

    Args:
        model: checkpoint path (card JSON beside it) or an already loaded model.
        method: a registered method name (``engine.list_methods()``); by default the method whose
            config class ``method_config`` is, else :data:`engine.DEFAULT_METHOD`.
        method_config: the method's config dataclass (its defaults when None).
        device: ``None``/``"auto"`` (CUDA, MPS, CPU) or an explicit device.
        seed: seeds every random choice of the method.
        guard: the collapse guard's settings (on by default).
    """

    def __init__(
        self,
        model: str | Path | LoadedModel,
        method: str | None = None,
        method_config: Any = None,
        device: str | torch.device | None = None,
        seed: int = 0,
        guard: GuardConfig | None = None,
    ) -> None:
        loaded = model if isinstance(model, LoadedModel) else load_model(model)
        self.loaded = loaded
        self.card: ModelCard = loaded.card
        self.fingerprint = loaded.fingerprint
        self.device = select_device(device)
        self.model = PromptedViT(loaded.model.to(self.device))
        if method is None:  # the method whose config was given, else the default
            method = method_for_config(method_config) if method_config is not None else DEFAULT_METHOD
        self.method_name = method
        self.seed = seed
        cls = get_method_class(method)
        self.method: TTAMethod = cls(self.model, method_config, seed=seed)
        self.reference: SourceReference | None = (
            None  # the model's source statistics, when a method reads them
        )
        if cls.uses_reference:
            self.reference = find_reference(loaded.path, self.fingerprint, self.card.num_classes, self.model)
            self.method.use_reference(self.reference)
        self._mean = torch.tensor(self.card.mean, dtype=torch.float32).view(3, 1, 1)
        self._std = torch.tensor(self.card.std, dtype=torch.float32).view(3, 1, 1)
        self.guard_config = guard or GuardConfig()
        self._source_x: torch.Tensor | None = None  # source images given to fit_source_statistics
        self._reset_counters()

    def _reset_counters(self) -> None:
        self.images_seen = 0
        self.hist_adapted = [0] * self.card.num_classes
        self.hist_source = [0] * self.card.num_classes
        self.updated_at: str | None = None
        self.guard = CollapseGuard(self.guard_config, self.card.num_classes)
        self.events: list[GuardEvent] = []

    # ------------------------------------------------------------------ inputs
    def preprocess(self, image: ImageInput) -> torch.Tensor:
        """Resize to the model's input size and normalise: ``(1, 3, S, S)`` on the session device."""
        if isinstance(image, (str, Path)):
            image = read_image(image)
        elif isinstance(image, np.ndarray):
            arr = image
            if arr.ndim == 2:
                arr = np.stack([arr] * 3, axis=-1)
            if arr.ndim != 3 or arr.shape[2] not in (3, 4):
                raise ValueError(f"expected an HxWx3 image array, got shape {arr.shape}")
            if arr.dtype != np.uint8:
                raise ValueError(f"expected a uint8 image array, got {arr.dtype}")
            image = Image.fromarray(np.ascontiguousarray(arr[..., :3]))
        img = to_rgb(image) if image.mode != "RGB" else image
        size = self.card.img_size
        if img.size != (size, size):
            img = img.resize((size, size), Image.Resampling.BILINEAR)
        x = torch.from_numpy(np.asarray(img, dtype=np.float32).copy()).permute(2, 0, 1) / 255.0
        x = (x - self._mean) / self._std
        return x.unsqueeze(0).to(self.device)

    @property
    def uses_source_statistics(self) -> bool:
        """Whether the method aligns with source feature statistics (VPTTA, DPCore)."""
        return self.method.takes_source_images

    def fit_source_statistics(self, images: Sequence[ImageInput]) -> None:
        """Give the method its source-statistics reference from source-domain images.

        VPTTA and DPCore align test features with the source domain's; by default they estimate
        that reference from the first images of the stream. Source images given here replace
        that estimate (as the original methods read it from source data) and are applied again
        after every reset.

        Raises:
            ValueError: the method uses no source statistics, or ``images`` is empty.
        """
        if not self.uses_source_statistics:
            raise ValueError(f"method {self.method_name!r} uses no source statistics")
        if not images:
            raise ValueError("no source images given")
        self._source_x = torch.cat([self.preprocess(im) for im in images])
        self._refit_source_statistics()

    def _refit_source_statistics(self) -> None:
        if self._source_x is not None:
            self.method.fit_source_statistics(self._source_x)

    # ------------------------------------------------------------------ the step
    def step(self, image: ImageInput, site: str | None = None) -> StepResult:
        """Adapt to one image and return its predictions (the image counts as seen).

        Args:
            image: the image.
            site: the site it belongs to (the folder or slide it was loaded from); None when
                nobody says, as in the paper's free-form protocol.
        """
        start = time.perf_counter()
        x = self.preprocess(image)
        self.method.site = site
        out = self.method.forward_and_adapt(x)
        probs = out.logits.detach().float().softmax(dim=-1)[0].cpu().numpy()
        source_probs = out.source_logits.detach().float().softmax(dim=-1)[0].cpu().numpy()
        pred, src = int(probs.argmax()), int(source_probs.argmax())
        self.hist_adapted[pred] += 1
        self.hist_source[src] += 1
        grid = self.model.grid
        unc = None
        if out.uncertainty is not None:
            unc = out.uncertainty[0].detach().float().cpu().numpy().reshape(grid)
        event: GuardEvent | None = None
        action = self.guard.observe(self.images_seen, pred, src) if self.method.collapse_check else None
        if action is not None:
            if action == "recover":
                what = self.method.recover()
                self._refit_source_statistics()  # a recover that resets drops given statistics
            else:
                what = self._full_reset()
            event = self.guard.describe(self.images_seen, self.card.classes[pred], action, what)
            self.events.append(event)  # the saved history; callers hear of it in StepResult.guard_event
        result = StepResult(
            index=self.images_seen,
            probs=probs,
            prediction=pred,
            confidence=float(probs[pred]),
            source_probs=source_probs,
            source_prediction=src,
            uncertainty=unc,
            uncertain_tokens=_token_indices(out.uncertain_tokens),
            reliable_tokens=_token_indices(out.reliable_tokens),
            grid=grid,
            seconds=time.perf_counter() - start,
            diagnostics=dict(out.diagnostics),
            guard_event=event,
            update_skipped=out.update_skipped,
            views_kept=out.views_kept,
            decision=out.decision,
            hist_adapted=tuple(self.hist_adapted),
            hist_source=tuple(self.hist_source),
        )
        self.images_seen += 1
        self.updated_at = datetime.now(UTC).isoformat(timespec="seconds")
        return result

    def _saved_config(self, origin: str, saved: Any, keep_saved: bool) -> Any:
        """The method config to continue with: the session's, or the saved one when so asked."""
        current = self.method.config_dict()
        if saved == current:
            return self.method.config
        cls = type(self.method).config_class
        if not isinstance(saved, dict):
            raise StateError(f"{origin}: the saved method settings are not a JSON object")
        if not keep_saved:
            raise SettingsMismatchError(origin, self.method_name, differences(cls, saved, current))
        try:
            cfg = build_config(cls, saved) if cls is not None else None
        except ValueError as exc:
            raise StateError(
                f"{origin}: the saved method settings are invalid: {exc}. A state saved by an earlier "
                f"version of {self.method_name} cannot be continued by this one: start a new state "
                "directory (or profile); the old one is left as it is"
            ) from exc
        logger.info("state %s: continuing with its saved %s settings", origin, self.method_name)
        return cfg

    def _full_reset(self) -> str:
        self.method.reset()
        self._refit_source_statistics()
        return "collapse came back, adaptation reset to the source model"

    def reset(self) -> None:
        """Back to the source model: the method's initial state, counters at zero."""
        self.method.reset()
        self._refit_source_statistics()
        self._reset_counters()

    # ------------------------------------------------------------------ persistence
    def config_dict(self) -> dict[str, Any]:
        """The run's configuration as JSON-able data."""
        return {
            "software_version": __version__,
            "method": self.method_name,
            "method_config": self.method.config_dict(),
            "seed": self.seed,
            "guard": dataclasses.asdict(self.guard_config),
            "device": str(self.device),
            "source_statistics_images": None if self._source_x is None else int(self._source_x.shape[0]),
            "model": {
                "path": str(self.loaded.path) if self.loaded.path else None,
                "fingerprint": self.fingerprint,
                "card": self.card.to_json(),
            },
        }

    def _meta(self, extra: dict[str, Any] | None) -> dict[str, Any]:
        return {
            "software_version": __version__,
            "method": self.method_name,
            "method_config": self.method.config_dict(),
            "model_fingerprint": self.fingerprint,
            "model_arch": self.card.arch,
            "seed": self.seed,
            "images_seen": self.images_seen,
            "hist_adapted": self.hist_adapted,
            "hist_source": self.hist_source,
            "updated_at": self.updated_at,
            "method_state": self.method.state_meta(),
            "guard": self.guard.state(),
            "events": [e.to_json() for e in self.events[-200:]],
            "extra": extra or {},
        }

    def save(self, directory: str | Path, extra: dict[str, Any] | None = None) -> Path:
        """Write the adaptation state atomically (previous copy kept as ``.backup``).

        Args:
            directory: the state directory (created when missing).
            extra: JSON-able data stored with the state (e.g. the processed image list).

        Raises:
            OSError: the location is not writable; the previous state is untouched.
        """
        return write_state(directory, self.method.state_tensors(), self._meta(extra))

    def state_fingerprint(self) -> str:
        """A short hash of the current adaptation state (tensors and counters)."""
        h = hashlib.sha256()
        tensors = self.method.state_tensors()
        for name in sorted(tensors):
            t = tensors[name].detach().to("cpu").contiguous()
            h.update(name.encode())
            if t.numel():
                h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
        h.update(str(self.images_seen).encode())
        return h.hexdigest()[:16]

    def load(
        self, directory: str | Path, use_backup: bool = False, keep_saved_settings: bool = False
    ) -> dict[str, Any]:
        """Restore a saved state; on any problem raise :class:`StateError` and change nothing.

        Args:
            directory: the state directory.
            use_backup: read the previous good copy (``state.safetensors.backup``).
            keep_saved_settings: when the state was saved with other method settings, continue
                with the saved ones (the caller asked for none); when False such a state is
                refused with :class:`SettingsMismatchError`, never silently overridden.

        Returns:
            The ``extra`` dict saved with the state.
        """
        tensors, meta = read_state(directory, use_backup=use_backup)
        origin = str(Path(directory))
        if meta.get("model_fingerprint") != self.fingerprint:
            raise StateError(
                f"{origin}: the state belongs to another model (arch {meta.get('model_arch')!r}, fingerprint "
                f"{meta.get('model_fingerprint')!r}); this session runs {self.card.arch!r} "
                f"with fingerprint {self.fingerprint!r}"
            )
        if meta.get("method") != self.method_name:
            raise StateError(
                f"{origin}: the state was made by method {meta.get('method')!r}, this session runs "
                f"{self.method_name!r}"
            )
        cfg = self._saved_config(origin, meta.get("method_config", {}), keep_saved_settings)
        mode = self.model.mode
        try:
            candidate = type(self.method)(self.model, cfg, seed=int(meta.get("seed", self.seed)))
            if candidate.uses_reference:
                candidate.use_reference(self.reference)
            candidate.load_state(tensors, meta["method_state"])
            hist_a = [int(v) for v in meta["hist_adapted"]]
            hist_s = [int(v) for v in meta["hist_source"]]
            seen = int(meta["images_seen"])
            if len(hist_a) != self.card.num_classes or len(hist_s) != self.card.num_classes:
                raise ValueError("class counts are for another number of classes")
        except (KeyError, ValueError, TypeError, RuntimeError) as exc:
            self.model.mode = mode
            raise StateError(f"{origin}: the state does not fit this model and method ({exc})") from exc
        try:
            guard = CollapseGuard(self.guard_config, self.card.num_classes)
            guard.load(meta.get("guard", {}))
            events = [
                GuardEvent(int(e["index"]), str(e["action"]), str(e["message"]))
                for e in meta.get("events", [])
            ]
        except (KeyError, ValueError, TypeError) as exc:
            raise StateError(f"{origin}: the collapse-guard record is invalid ({exc})") from exc
        self.method = candidate
        self.guard = guard
        self.events = events
        self.seed = candidate.seed
        self.images_seen = seen
        self.hist_adapted, self.hist_source = hist_a, hist_s
        self.updated_at = meta.get("updated_at")
        extra: dict[str, Any] = meta.get("extra", {})
        return extra
