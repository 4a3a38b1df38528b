"""The engine worker's answers made from what it holds (Qt-free): the session's description, one
image's result or skip, and the end of a run, as the immutable messages of :mod:`app.core.messages`."""

from __future__ import annotations

import numpy as np

from app._engine import Mapped, MapSkipped, Predicted, Prompted, RunSummary, Session, Skipped
from app.core.messages import ItemFailure, ItemResult, RunEnded, RunReason, SessionInfo, SessionRequest
from app.core.overlay import Overlay, preview_array
from app.core.projects import Project, ProjectInfo
from app.core.reviews import OverlayStore
from app.worker.io import PREVIEW_SIZE, card_checksum, frozen


def session_info(
    session: Session, request: SessionRequest, project: Project, project_error: str | None
) -> SessionInfo:
    """What the UI is told about a loaded session and its project."""
    return SessionInfo(
        card=session.card,
        model_path=str(request.model),
        method=session.method_name,
        device=str(session.device),
        fingerprint=session.fingerprint,
        state_fingerprint=session.state_fingerprint(),
        images_seen=int(session.images_seen),
        config=session.config_dict(),
        project=project.info(),
        project_error=project_error,
        weights_sha256=card_checksum(request.model),
    )


def item_result(
    outcome: Predicted | Mapped | MapSkipped | Prompted, overlays: OverlayStore | None
) -> ItemResult:
    """A predicted image with its overlay (kept in ``overlays`` too) and its preview; or the map of
    an image decided earlier (``map_only``: its row with the map, or saying it has none); or I-DiPT's
    prompted decision of an image mapped earlier (``prompted_only``: its row with it)."""
    if isinstance(outcome, Prompted):
        return ItemResult(outcome.row, Overlay.from_step((1, 1), None, None, None), None, _NONE, True, True)
    if isinstance(outcome, MapSkipped):
        return ItemResult(outcome.row, Overlay.from_step((1, 1), None, None, None), None, _NONE, True)
    made = outcome.step if isinstance(outcome, Predicted) else outcome.map
    overlay = Overlay.from_step(made.grid, made.uncertainty, made.uncertain_tokens, made.reliable_tokens)
    if overlays is not None and made.uncertainty is not None:
        overlays.add(outcome.row.key, overlay)
    if isinstance(outcome, Mapped):
        return ItemResult(outcome.row, overlay, None, _NONE, True)
    preview = preview_array(outcome.image, PREVIEW_SIZE)
    return ItemResult(outcome.row, overlay, preview, frozen(outcome.step.probs))


_NONE = frozen(np.zeros(0, dtype=np.float32))  # a map brings no probabilities of its own


def item_failure(outcome: Skipped) -> ItemFailure:
    """A skipped image, named in its message once."""
    item = outcome.item
    text = f"{item.name}: {outcome.reason}" if item.name not in outcome.reason else outcome.reason
    if outcome.transient:
        text += " (tried again next run)"
    return ItemFailure(item.position, item.name, text, outcome.transient)


def run_ended(summary: RunSummary, error: str, fingerprint: str, project: ProjectInfo | None) -> RunEnded:
    """How a run ended; ``error``: the loop itself failed (a bug), which outranks the summary."""
    s = summary
    message = error or (s.failure.message if s.failure else s.save_error or "")
    reason: RunReason = "failed" if error or s.failed else "stopped" if s.stopped else "finished"
    maps = (s.mapped, s.maps_skipped, s.maps_pending)
    return RunEnded(
        reason, s.processed, len(s.skipped), s.saved, project, fingerprint, message, maps, s.prompted
    )
