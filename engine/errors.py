"""Exceptions and warnings the engine raises; each carries a message meant for the user."""

from __future__ import annotations


class F2TTAError(Exception):
    """Base class of every error the engine reports to users."""


class ModelLoadError(F2TTAError):
    """A checkpoint or model card cannot be used (missing, corrupt, other architecture)."""


class StateError(F2TTAError):
    """A saved adaptation state cannot be loaded (corrupt, foreign model, wrong version)."""


class ImageReadError(F2TTAError):
    """An image file cannot be read; the message names the path and the reason."""


class F2TTAWarning(UserWarning):
    """Warnings issued by the engine (tests turn these into errors)."""
