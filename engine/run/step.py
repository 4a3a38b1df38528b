"""What one adaptation step returns, and the refusal of a state saved with other settings.

(:class:`DecisionRecord`, what a method records about a decision, lives with the methods in
:mod:`engine.methods.decision`.)

Both cross from the engine to its callers (the stream loop, the app, the benchmark), so they hold
only numpy arrays, Python scalars and frozen dataclasses: safe to pass between threads.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from engine.config import build_config, differences
from engine.errors import StateError
from engine.methods.base import MethodOutput
from engine.methods.decision import DecisionRecord
from engine.run.guard import GuardEvent


class SettingsMismatchError(StateError):
    """A saved state was made with other method settings than the session's.

    Attributes:
        differences: one ``name: saved, now`` line per differing setting.
    """

    def __init__(self, origin: str, method: str, differences: list[str]) -> None:
        self.origin = origin
        self.differences = differences
        super().__init__(
            f"{origin}: the state was saved with other {method} settings ({'; '.join(differences)})"
        )


@dataclass(frozen=True)
class StepResult:
    """The outcome of one image; only numpy arrays and Python scalars (safe across threads).

    Attributes:
        index: arrival index of the image in this session's stream (0-based, survives save/load).
        probs: ``(C,)`` class probabilities of the adapted model.
        prediction: the adapted model's class index.
        confidence: ``probs[prediction]``.
        source_probs: ``(C,)`` probabilities of the frozen source model.
        source_prediction: the source model's class index.
        uncertainty: ``grid``-shaped per-token uncertainty, or None for methods without one.
        uncertain_tokens: flat row-major patch indices of T_U (empty if none).
        reliable_tokens: flat row-major patch indices of T_R (empty if none).
        grid: the patch grid ``(rows, cols)``.
        seconds: wall time of the step, preprocessing included.
        diagnostics: the method's scalars (loss, norms, ...), for traces and plots.
        guard_event: what the collapse guard did after this image, None when it did not act.
        update_skipped: the method kept its last good state (non-finite loss or gradient).
        views_kept: masked views that entered the loss (I-DiPT), None for methods without views.
        hist_adapted / hist_source: predictions per class of the adapted / source model so far
            (this image included).
        decision: where the reported decision came from (I-DiPT+), None for other methods.
    """

    index: int
    probs: np.ndarray
    prediction: int
    confidence: float
    source_probs: np.ndarray
    source_prediction: int
    uncertainty: np.ndarray | None
    uncertain_tokens: np.ndarray
    reliable_tokens: np.ndarray
    grid: tuple[int, int]
    seconds: float
    diagnostics: dict[str, float] = field(default_factory=dict)
    guard_event: GuardEvent | None = None
    update_skipped: bool = False
    views_kept: int | None = None
    hist_adapted: tuple[int, ...] = ()
    hist_source: tuple[int, ...] = ()
    decision: DecisionRecord | None = None

    @property
    def mean_uncertainty(self) -> float:
        return float(self.uncertainty.mean()) if self.uncertainty is not None else math.nan

    @property
    def changed(self) -> bool:
        """True when adaptation changed the source model's decision."""
        return self.prediction != self.source_prediction


@dataclass(frozen=True)
class PassedBatch:
    """A batch's decision pass (:meth:`engine.run.session.Session.decision_pass`), waiting to be
    decided: what the method's pass returned, the number of images and when the pass started."""

    passed: Any
    images: int
    start: float


@dataclass(frozen=True)
class ImageOutput:
    """One image's part of a step's :class:`MethodOutput`, on the host (see :class:`StepResult`)."""

    probs: np.ndarray
    source_probs: np.ndarray
    uncertainty: np.ndarray | None
    uncertain_tokens: np.ndarray
    reliable_tokens: np.ndarray
    diagnostics: dict[str, float]
    update_skipped: bool
    views_kept: int | None
    decision: DecisionRecord | None


def per_image(out: MethodOutput, n: int, grid: tuple[int, int], method: str) -> list[ImageOutput]:
    """The ``n`` images' outputs of a step, brought to the host in one transfer (and one of tokens).

    Raises:
        ValueError: the method returned per-image values for another number of images.
    """
    probs = out.logits.detach().float().softmax(dim=-1)
    classes = probs.shape[1]
    parts = [probs, out.source_logits.detach().float().softmax(dim=-1)]
    if out.uncertainty is not None:
        parts.append(out.uncertainty.detach().float())
    host = torch.cat(parts, dim=1).cpu().numpy()
    uncertain, reliable = _token_indices(out.uncertain_tokens, n), _token_indices(out.reliable_tokens, n)
    skipped = out.updates_skipped or [out.update_skipped] * n
    views: list[int | None] = [*out.views_kept_each] if out.views_kept_each else [out.views_kept] * n
    decisions = out.decisions or [out.decision] * n
    if not len(skipped) == len(views) == len(decisions) == len(host) == n:
        raise ValueError(f"{method}: the step returned per-image values for another batch size")
    images = []
    for i in range(n):
        diagnostics = dict(out.diagnostics)
        diagnostics.update({k: float(v[i]) for k, v in out.image_diagnostics.items()})
        unc = None if out.uncertainty is None else host[i, 2 * classes :].reshape(grid).copy()
        images.append(
            ImageOutput(
                host[i, :classes].copy(),
                host[i, classes : 2 * classes].copy(),
                unc,
                uncertain[i],
                reliable[i],
                diagnostics,
                skipped[i],
                views[i],
                decisions[i],
            )
        )
    return images


def _token_indices(tokens: torch.Tensor | None, n: int) -> list[np.ndarray]:
    """Each image's patch indices ``(k,)`` as int64 (empty when the method marks none)."""
    if tokens is None:
        return [np.zeros(0, dtype=np.int64)] * n
    host = tokens.detach().cpu().numpy().astype(np.int64)
    return [host[i].copy() for i in range(n)]


def saved_config(method: Any, name: str, origin: str, saved: Any, keep_saved: bool) -> Any:
    """The method config a restored state continues with: ``method``'s own, or the saved one
    (``keep_saved``); a difference is refused with :class:`SettingsMismatchError` otherwise.

    Raises:
        StateError: the saved settings are not a JSON object, or not valid for this method.
    """
    current = method.config_dict()
    if saved == current:
        return method.config
    cls = type(method).config_class
    if not isinstance(saved, dict):
        raise StateError(f"{origin}: the saved method settings are not a JSON object")
    if not keep_saved:
        raise SettingsMismatchError(origin, name, differences(cls, saved, current))
    try:
        cfg = build_config(cls, saved) if cls is not None else None
    except ValueError as exc:
        raise StateError(
            f"{origin}: the saved method settings are invalid: {exc}. A state saved by an earlier "
            f"version of {name} cannot be continued by this one: start a new state "
            "directory (or profile); the old one is left as it is"
        ) from exc
    logging.getLogger("engine.run.session").info(
        "state %s: continuing with its saved %s settings", origin, name
    )
    return cfg
