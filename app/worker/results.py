"""The engine worker's answers made from what it holds (Qt-free): the session's description, one
image's result or skip, and the end of a run, as the immutable messages of :mod:`app.core.messages`."""

from __future__ import annotations

from app._engine import Predicted, RunSummary, Session, Skipped
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


def item_result(outcome: Predicted, overlays: OverlayStore | None) -> ItemResult:
    """A predicted image with its overlay (kept in ``overlays`` too) and its preview."""
    step = outcome.step
    overlay = Overlay.from_step(step.grid, step.uncertainty, step.uncertain_tokens, step.reliable_tokens)
    preview = preview_array(outcome.image, PREVIEW_SIZE)
    if overlays is not None:
        overlays.add(outcome.row.key, overlay)
    return ItemResult(outcome.row, overlay, preview, frozen(step.probs))


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
    return RunEnded(reason, s.processed, len(s.skipped), s.saved, project, fingerprint, message)
