"""The next batch's decision pass on a worker thread while the current batch is decided (issue 41).

A method that decides from the source pass
(:attr:`~engine.methods.base.TTAMethod.decides_from_source_pass`) splits its decisions in two (:meth:`~engine.methods.base.TTAMethod.decide`): the pass of the frozen
model, which reads no state of the method, and the decisions from it, which advance the state in
arrival order. On an accelerator the stream loop runs the first for batch k + 1 on a worker thread
while the host decides and records batch k, so the GPU's work and the host's overlap instead of
taking turns (``docs/benchmark.md``, "GPU, 2026-11-29"). The decisions are the same: the pass is a
function of the images alone, the decisions are still taken one batch after the other on the
stream's own thread, and a pass that failed is taken again there, where the loop's handling of a
failed step (running out of memory included) sees it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
import torch

from engine.io.sources import StreamItem
from engine.run.reading import Decoded
from engine.run.session import Session
from engine.run.step import PassedBatch, StepResult


def looks_ahead(session: Session) -> bool:
    """Whether a run's decisions look ahead by default: on CUDA, for a method that decides from
    the source pass, with an eager forward (a compiled one keeps its graphs on one thread). On the
    CPU the pass and the host share the cores: the decisions take turns, as before."""
    return (
        session.device.type == "cuda" and session.method.decides_from_source_pass and session.compiled is None
    )


def chunks(
    decoded: Iterator[tuple[StreamItem, Decoded]],
    batch: Callable[[], int],
    prime: Callable[[list[tuple[StreamItem, Decoded]]], None] | None = None,
) -> Iterator[list[tuple[StreamItem, Decoded]]]:
    """The items in order, a chunk of up to ``batch()`` readable ones (and the unreadable among
    them) at a time: the loop's batch, which running out of memory makes smaller. With ``prime``,
    each chunk is primed before the one before it is given out, so its pass runs while that one
    is decided."""
    if prime is None:
        while chunk := _chunk(decoded, batch):
            yield chunk
        return
    current = _chunk(decoded, batch)
    if current:
        prime(current)
    while current:
        following = _chunk(decoded, batch)
        if following:
            prime(following)
        yield current
        current = following


def _chunk(
    decoded: Iterator[tuple[StreamItem, Decoded]], batch: Callable[[], int]
) -> list[tuple[StreamItem, Decoded]]:
    chunk: list[tuple[StreamItem, Decoded]] = []
    readable, size = 0, batch()
    for item, d in decoded:
        chunk.append((item, d))
        readable += not isinstance(d, Exception)
        if readable >= size:
            break
    return chunk


class DecisionsAhead:
    """The decisions-only step of a session, its passes taken ahead on one worker thread.

    :meth:`prime` starts the pass of a batch's pixels; calling the object with the same pixels (the
    same arrays, in order) decides from that pass, or takes the whole step here when none was
    primed for them or the pass failed. :meth:`close` waits for the worker: the model is not used
    by two threads once the decisions are over.
    """

    def __init__(self, session: Session) -> None:
        self.session = session
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="f2tta-decision-pass")
        self._primed: list[tuple[list[np.ndarray], Future[PassedBatch]]] = []

    def prime(self, chunk: list[tuple[StreamItem, Decoded]]) -> None:
        """Start the pass of a chunk's readable pixels (a chunk of the stream loop: items with what
        reading them gave, an exception for an unreadable one)."""
        pixels = [d.pixels for _, d in chunk if not isinstance(d, Exception)]
        if pixels:
            self._primed.append((pixels, self._pool.submit(self._pass, pixels)))

    def _pass(self, pixels: list[np.ndarray]) -> PassedBatch:
        device = self.session.device
        if device.type == "cuda":
            with torch.cuda.device(device):
                return self.session.decision_pass(pixels)
        return self.session.decision_pass(pixels)

    def __call__(self, pixels: list[np.ndarray], sites: Sequence[str | None]) -> list[StepResult]:
        match = next((i for i, (primed, _) in enumerate(self._primed) if _same(primed, pixels)), None)
        if match is None:
            # Not primed as asked: the loop split a batch (out of memory); its pass is of no use.
            if self._primed and pixels and self._primed[0][0][0] is pixels[0]:
                self._primed.pop(0)[1].cancel()
            return self.session.step_batch(pixels, sites, decisions_only=True)
        for _, stale in self._primed[:match]:
            stale.cancel()
        future = self._primed[match][1]
        del self._primed[: match + 1]
        try:
            batch = future.result()
        except Exception:  # taken again here, where the loop's handling of a failed step sees it
            return self.session.step_batch(pixels, sites, decisions_only=True)
        return self.session.decide_passed(batch, sites)

    def close(self) -> None:
        for _, future in self._primed:
            future.cancel()
        self._primed.clear()
        self._pool.shutdown(wait=True, cancel_futures=True)


def _same(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    """The same arrays in the same order (not equal values: the same images of the stream)."""
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))
