"""F²TTA engine: frozen timm ViTs adapted at test time (I-DiPT and baselines), no Qt.

The names here are the public API, what a user of the engine imports: a model, a folder or a
slide, a session, the loop over a stream, its journal and rows, the review. Everything else is
imported from the module that defines it, as the app does in one place (``app/_engine.py``).

The names are imported when first used (PEP 562), so ``import engine`` and ``f2tta --help`` do
not load torch; only :mod:`engine._omp` runs at once (before anything imports torch).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# First of all: libgomp reads OpenMP's wait policy once, when torch loads it (engine/_omp.py).
from engine import _omp  # noqa: F401
from engine._version import __version__ as __version__

#: Each module of the public API and the names it gives.
_PUBLIC = {
    "engine.errors": "F2TTAError F2TTAWarning ImageReadError ModelLoadError StateError",
    "engine.model.card": "LoadedModel ModelCard load_model save_model",
    "engine.io.sources": "FolderSource SlideSource StreamItem open_folder open_slide_source",
    "engine.io.images": "list_images read_image",
    "engine.methods": "DEFAULT_METHOD MethodOutput TTAMethod get_method_class list_methods register_method",
    "engine.run.session": "Session",
    "engine.run.stream": "Failed Mapped MapSkipped Outcome Paused Predicted Prompted RunSummary Saved Skipped StreamRun",
    "engine.run.journal": "Journal",
    "engine.run.rows": "PredictionRow",
    "engine.run.review": "SiteReview",
    "engine.review.marks": "ReviewMark",
}
_HOME = {name: module for module, names in _PUBLIC.items() for name in names.split()}
__all__ = ["__version__", *_HOME]

if TYPE_CHECKING:  # the same names for type checkers (tests/test_cli_fast.py: the two lists agree)
    from engine.errors import F2TTAError as F2TTAError
    from engine.errors import F2TTAWarning as F2TTAWarning
    from engine.errors import ImageReadError as ImageReadError
    from engine.errors import ModelLoadError as ModelLoadError
    from engine.errors import StateError as StateError
    from engine.io.images import list_images as list_images
    from engine.io.images import read_image as read_image
    from engine.io.sources import FolderSource as FolderSource
    from engine.io.sources import SlideSource as SlideSource
    from engine.io.sources import StreamItem as StreamItem
    from engine.io.sources import open_folder as open_folder
    from engine.io.sources import open_slide_source as open_slide_source
    from engine.methods import DEFAULT_METHOD as DEFAULT_METHOD
    from engine.methods import MethodOutput as MethodOutput
    from engine.methods import TTAMethod as TTAMethod
    from engine.methods import get_method_class as get_method_class
    from engine.methods import list_methods as list_methods
    from engine.methods import register_method as register_method
    from engine.model.card import LoadedModel as LoadedModel
    from engine.model.card import ModelCard as ModelCard
    from engine.model.card import load_model as load_model
    from engine.model.card import save_model as save_model
    from engine.review.marks import ReviewMark as ReviewMark
    from engine.run.journal import Journal as Journal
    from engine.run.review import SiteReview as SiteReview
    from engine.run.rows import PredictionRow as PredictionRow
    from engine.run.session import Session as Session
    from engine.run.stream import Failed as Failed
    from engine.run.stream import Mapped as Mapped
    from engine.run.stream import MapSkipped as MapSkipped
    from engine.run.stream import Outcome as Outcome
    from engine.run.stream import Paused as Paused
    from engine.run.stream import Predicted as Predicted
    from engine.run.stream import Prompted as Prompted
    from engine.run.stream import RunSummary as RunSummary
    from engine.run.stream import Saved as Saved
    from engine.run.stream import Skipped as Skipped
    from engine.run.stream import StreamRun as StreamRun


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module 'engine' has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOME[name]), name)
    globals()[name] = value  # the next lookup finds it at once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOME})
