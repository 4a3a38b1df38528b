"""The map step behind the decisions: uncertainty maps for images already decided, in arrival order.

For a method that decides from the source pass alone (:attr:`TTAMethod.decides_from_source_pass`:
SourceOnly, I-DiPT+) the stream loop may record every decision first
(``Session.step_batch(..., decisions_only=True)``) and make the maps afterwards, through the same
batches: :func:`map_batch` runs the method's map step (MC dropout on the source pass) on images
decided before and returns what it adds to their rows (:func:`with_map`). The decisions are the
ones the inline step gives (the operating point reads only source passes); the maps too, taken in
the same batches from the same state (``docs/method.md``, "Decisions first, maps behind").

I-DiPT's prompted decision (I-DiPT+'s last candidate) has a step of its own, the *prompt step*
(:func:`prompt_batch`, :func:`with_prompted`): I-DiPT's prompt tuning, taken over the mapped
images in arrival order only when it is asked for (the review reaching that candidate, or the
run told to), so the default pays for it only where it is tested (``docs/method.md``, "The
prompted decision on demand").
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import torch

from engine.methods.base import MethodOutput
from engine.run.batch import ImageInput
from engine.run.rows import PredictionRow
from engine.run.session import Session
from engine.run.step import per_image


@dataclass(frozen=True)
class MapResult:
    """What the map step made for one image; only numpy arrays and Python scalars.

    Attributes:
        uncertainty: ``grid``-shaped per-token uncertainty.
        uncertain_tokens / reliable_tokens: flat row-major patch indices of T_U / T_R.
        grid: the patch grid ``(rows, cols)``.
        prompted: the class I-DiPT's prompted model gave the image (None: not computed).
        update_skipped: the method kept its last good state (non-finite loss or gradient).
        views_kept: masked views that entered the loss (None: no views).
        diagnostics: the step's scalars for this image.
        seconds: wall time of the map step, shared by its batch's images.
    """

    uncertainty: np.ndarray | None
    uncertain_tokens: np.ndarray
    reliable_tokens: np.ndarray
    grid: tuple[int, int]
    prompted: int | None
    update_skipped: bool = False
    views_kept: int | None = None
    diagnostics: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def mean_uncertainty(self) -> float:
        return float(self.uncertainty.mean()) if self.uncertainty is not None else math.nan


def map_batch(session: Session, images: Sequence[ImageInput]) -> list[MapResult]:
    """The map step of ``session``'s method on decided images, in arrival order.

    Raises:
        TypeError: the method has no map step.
        ValueError: more images than the method takes at once.
    """
    method = session.method
    if not method.has_map_step:
        raise TypeError(f"method {session.method_name!r} has no map step")
    return _stepped(session, images, method.map_step, prompted=False)


def _stepped(
    session: Session,
    images: Sequence[ImageInput],
    step: Callable[[torch.Tensor], MethodOutput],
    prompted: bool,
) -> list[MapResult]:
    """``step`` (the map step or the prompt step) on ``images``, one result each."""
    if not images:
        return []
    session.check_batch(images)
    start = time.perf_counter()
    x = session.to_input([session.prepare(image) for image in images])
    with session.autocast_context():
        out = step(x)
    grid = session.model.grid
    images_out = per_image(out, len(images), grid, session.method_name)
    seconds = (time.perf_counter() - start) / len(images)
    return [
        MapResult(
            uncertainty=image.uncertainty,
            uncertain_tokens=image.uncertain_tokens,
            reliable_tokens=image.reliable_tokens,
            grid=grid,
            prompted=int(image.probs.argmax()) if prompted else None,
            update_skipped=image.update_skipped,
            views_kept=image.views_kept,
            diagnostics=image.diagnostics,
            seconds=seconds,
        )
        for image in images_out
    ]


def with_map(row: PredictionRow, result: MapResult) -> PredictionRow:
    """``row`` (decided, its map pending) with what the map step made for its image: its map (the
    step updates nothing, and the prompted decision is the prompt step's, :func:`with_prompted`)."""
    return replace(row, uncertainty=result.mean_uncertainty, map_status="")


def prompt_batch(session: Session, images: Sequence[ImageInput]) -> list[MapResult]:
    """The prompt step of ``session``'s method on mapped images, in arrival order: I-DiPT's prompted
    decision of each (:attr:`MapResult.prompted`; the uncertainty it tuned from, the same as the map
    step's).

    Raises:
        TypeError: the method has no prompt step.
        ValueError: more images than the method takes at once.
    """
    method = session.method
    if not method.has_prompt_step():
        raise TypeError(f"method {session.method_name!r} has no prompt step")
    return _stepped(session, images, method.prompt_step, prompted=True)


def with_prompted(row: PredictionRow, result: MapResult) -> PredictionRow:
    """``row`` (its prompted decision pending) with the one the prompt step made for its image."""
    return replace(
        row,
        update_skipped=row.update_skipped or result.update_skipped,
        prompted_prediction=result.prompted,
        prompted_status="",
    )
