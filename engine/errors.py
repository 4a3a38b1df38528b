"""Exceptions and warnings the engine raises; each carries a message meant for the user."""

from __future__ import annotations


class F2TTAError(Exception):
    """Base class of every error the engine reports to users."""


class ModelLoadError(F2TTAError):
    """A checkpoint or model card cannot be used (missing, corrupt, other architecture)."""


class StateError(F2TTAError):
    """A saved adaptation state cannot be loaded (corrupt, foreign model, wrong version)."""


class SourceError(F2TTAError, ValueError):
    """A folder, manifest or labels table cannot be used; the message is meant for the user."""


class ImageReadError(F2TTAError):
    """An image file cannot be read; the message names the path and the reason.

    Attributes:
        reason: the reason alone, without the path (what a skip list records).
        transient: True when reading again later may succeed: the file vanished, permission
            was denied, an I/O error occurred, or it is empty, changed while it was read, or
            failed to decode within :data:`engine.io.images.RECENT_WRITE_SECONDS` of its last
            modification (it may still be being copied). False when the content itself is
            unusable (corrupt, unsupported format, too large): reading again gives the same result.
    """

    def __init__(self, message: str, *, reason: str | None = None, transient: bool = False) -> None:
        super().__init__(message)
        self.reason = message if reason is None else reason
        self.transient = transient


class F2TTAWarning(UserWarning):
    """Warnings issued by the engine (tests turn these into errors)."""
