"""The session API shared by the CLI and the desktop app: images in, one :class:`StepResult` each out."""

from __future__ import annotations

import contextlib
import copy
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

from engine._version import __version__
from engine.errors import StateError
from engine.methods import DEFAULT_METHOD, MethodOutput, TTAMethod, get_method_class, method_for_config
from engine.model.card import LoadedModel, ModelCard, load_model
from engine.model.prompted_vit import PromptedViT
from engine.model.source_reference import SourceReference, find_reference
from engine.run.accel import autocast_dtype, compile_forward
from engine.run.batch import ImageInput, model_pixels
from engine.run.card_record import card_record, check_card_record
from engine.run.guard import CollapseGuard, GuardConfig, GuardEvent
from engine.run.state import read_state, write_state
from engine.run.step import PassedBatch, StepResult, per_image, saved_config
from engine.util.device import select_device

logger = logging.getLogger(__name__)


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
        precision: ``"auto"`` (bf16 autocast on CUDA where the method allows it), ``"fp32"`` or
            ``"bf16"`` (:mod:`engine.run.accel`).
        compiled: run the model's forward compiled (methods that allow it; :mod:`engine.run.accel`).
    """

    def __init__(
        self,
        model: str | Path | LoadedModel,
        method: str | None = None,
        method_config: Any = None,
        device: str | torch.device | None = None,
        seed: int = 0,
        guard: GuardConfig | None = None,
        precision: str = "auto",
        compiled: bool = False,
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
        self.precision = precision
        self.autocast = autocast_dtype(self.device, cls.autocast_ok, precision)
        if compiled and not cls.compile_ok:
            raise ValueError(f"method {method!r} has no compiled step (SourceOnly has)")
        self.compiled = compile_forward(self.model, self.device) if compiled else None
        self.method: TTAMethod = cls(self.model, method_config, seed=seed)
        self.reference: SourceReference | None = (
            None  # the model's source statistics, when a method reads them
        )
        if cls.uses_reference:
            self.reference = find_reference(loaded.path, self.fingerprint, self.card.num_classes, self.model)
            self.method.use_reference(self.reference)
        self._mean = torch.tensor(self.card.mean, dtype=torch.float32, device=self.device).view(1, 3, 1, 1)
        self._std = torch.tensor(self.card.std, dtype=torch.float32, device=self.device).view(1, 3, 1, 1)
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
    def prepare(self, image: ImageInput) -> np.ndarray:
        """The CPU half of :meth:`preprocess` (thread-safe): RGB uint8 ``(S, S, 3)`` at the input size."""
        return model_pixels(image, self.card.img_size)

    def to_input(self, pixels: Sequence[np.ndarray]) -> torch.Tensor:
        """Prepared images (:meth:`prepare`) as the model's input ``(B, 3, S, S)``, normalised on the
        session device (sent as uint8: one transfer of a quarter of the float bytes)."""
        stacked = torch.from_numpy(np.stack(pixels)).to(self.device)
        x = stacked.permute(0, 3, 1, 2).to(torch.float32) / 255.0
        return (x - self._mean) / self._std

    def preprocess(self, image: ImageInput) -> torch.Tensor:
        """Resize to the model's input size and normalise: ``(1, 3, S, S)`` on the session device."""
        return self.to_input([self.prepare(image)])

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
    @property
    def max_batch(self) -> int | None:
        """The most images :meth:`step_batch` takes at once (None: any), the method's limit."""
        return self.method.max_batch

    def step(self, image: ImageInput, site: str | None = None) -> StepResult:
        """Adapt to one image and return its predictions (the image counts as seen).

        Args:
            image: the image.
            site: the site it belongs to (the folder or slide it was loaded from); None when
                nobody says, as in the paper's free-form protocol.
        """
        return self.step_batch([image], [site])[0]

    def step_batch(
        self,
        images: Sequence[ImageInput],
        sites: Sequence[str | None] | None = None,
        decisions_only: bool = False,
    ) -> list[StepResult]:
        """Adapt to images in one step of the method and return their predictions, in order.

        One image is the method's own step (the paper's, for I-DiPT). Several go through the
        method in one batch (what that means for each method: ``docs/method.md``, "Batches"); the
        collapse guard then watches them one by one in order, and acts after the batch's update.

        Args:
            images: the images, in arrival order.
            sites: each image's site (None, or None entries: nobody says).
            decisions_only: the method's decision step only (methods that decide from the source
                pass; the map step follows with :func:`engine.run.maps.map_batch`).

        Raises:
            ValueError: more images than :attr:`max_batch`, or sites of another length.
        """
        if not images:
            return []
        if decisions_only:
            return self.decide_passed(self.decision_pass(images), sites)
        named = self.check_batch(images, sites)
        start = time.perf_counter()
        x = self.to_input([self.prepare(image) for image in images])
        self.method.sites = named
        self.method.site = named[0]
        with self.autocast_context():
            out = self.method.forward_and_adapt(x)
        return self._results(out, len(images), start)

    def decision_pass(self, images: Sequence[ImageInput]) -> PassedBatch:
        """The part of a decisions-only step that reads no state of the method (the frozen model's
        pass of ``images``, on the host): it may run on another thread while the batch before is
        decided (``engine.run.ahead``); :meth:`decide_passed` decides from it.

        Raises:
            ValueError: more images than :attr:`max_batch`.
        """
        self.check_batch(images, None)
        start = time.perf_counter()
        x = self.to_input([self.prepare(image) for image in images])
        with torch.no_grad(), self.autocast_context():
            passed = self.method.decision_pass(x)
        return PassedBatch(passed, len(images), start)

    def decide_passed(
        self, batch: PassedBatch, sites: Sequence[str | None] | None = None
    ) -> list[StepResult]:
        """The decisions of a batch from its :meth:`decision_pass`, as :meth:`step_batch` with
        ``decisions_only`` makes them."""
        named = self.check_batch([None] * batch.images, sites)
        self.method.sites = named
        self.method.site = named[0]
        with self.autocast_context():
            out = self.method.decide_from_pass(batch.passed)
        return self._results(out, batch.images, batch.start)

    def check_batch(
        self, images: Sequence[Any], sites: Sequence[str | None] | None = None
    ) -> list[str | None]:
        """Each image's site, once the batch is known to fit the method (any of its steps).

        Raises:
            ValueError: more images than :attr:`max_batch`, or sites of another length.
        """
        limit = self.method.max_batch
        if limit is not None and len(images) > limit:
            raise ValueError(f"{self.method_name} takes at most {limit} image(s) per step, got {len(images)}")
        named: list[str | None] = list(sites) if sites is not None else [None] * len(images)
        if len(named) != len(images):
            raise ValueError(f"{len(images)} images and {len(named)} sites")
        return named

    def autocast_context(self) -> contextlib.AbstractContextManager[Any]:
        """bf16 autocast around a step where the session runs one (:mod:`engine.run.accel`)."""
        if self.autocast is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.autocast)

    def _results(self, out: MethodOutput, n: int, start: float) -> list[StepResult]:
        """Each image's result from the step's output (one transfer to the host for the batch)."""
        grid = self.model.grid
        results = []
        for image in per_image(out, n, grid, self.method_name):
            pred, src = int(image.probs.argmax()), int(image.source_probs.argmax())
            self.hist_adapted[pred] += 1
            self.hist_source[src] += 1
            results.append(
                StepResult(
                    index=self.images_seen,
                    probs=image.probs,
                    prediction=pred,
                    confidence=float(image.probs[pred]),
                    source_probs=image.source_probs,
                    source_prediction=src,
                    uncertainty=image.uncertainty,
                    uncertain_tokens=image.uncertain_tokens,
                    reliable_tokens=image.reliable_tokens,
                    grid=grid,
                    seconds=0.0,
                    diagnostics=image.diagnostics,
                    guard_event=self._watch(pred, src),
                    update_skipped=image.update_skipped,
                    views_kept=image.views_kept,
                    decision=image.decision,
                    hist_adapted=tuple(self.hist_adapted),
                    hist_source=tuple(self.hist_source),
                )
            )
            self.images_seen += 1
        self.updated_at = datetime.now(UTC).isoformat(timespec="seconds")
        seconds = (time.perf_counter() - start) / n  # a batch's time, shared by its images
        return [dataclasses.replace(r, seconds=seconds) for r in results]

    def _watch(self, pred: int, src: int) -> GuardEvent | None:
        """Let the collapse guard see one image's predictions; what it did, if it acted."""
        action = self.guard.observe(self.images_seen, pred, src) if self.method.collapse_check else None
        if action is None:
            return None
        if action == "recover":
            what = self.method.recover()
            self._refit_source_statistics()  # a recover that resets drops given statistics
        else:
            what = self._full_reset()
        event = self.guard.describe(self.images_seen, self.card.classes[pred], action, what)
        self.events.append(event)  # the saved history; callers hear of it in StepResult.guard_event
        return event

    def snapshot(self) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        """A copy of the method's state in host memory, for :meth:`restore` (a batch that ran out
        of memory: the copy takes none of the device's)."""
        tensors = {name: t.detach().to("cpu", copy=True) for name, t in self.method.state_tensors().items()}
        return tensors, copy.deepcopy(self.method.state_meta())

    def restore(self, snapshot: tuple[dict[str, torch.Tensor], dict[str, Any]]) -> None:
        """Put the method back into the state of :meth:`snapshot` (the counters are not touched:
        a step that raised did not count its images)."""
        self.method.load_state(*snapshot)

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
            "precision": self.precision if self.autocast is None else f"{self.precision} ({self.autocast})",
            "compiled": self.compiled is not None,
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
            "model_card": card_record(self.card),
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
        check_card_record(meta.get("model_card"), self.card, origin)
        if meta.get("method") != self.method_name:
            raise StateError(
                f"{origin}: the state was made by method {meta.get('method')!r}, this session runs "
                f"{self.method_name!r}"
            )
        cfg = saved_config(
            self.method, self.method_name, origin, meta.get("method_config", {}), keep_saved_settings
        )
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
