"""F²TTA engine: frozen timm ViTs adapted at test time (I-DiPT and baselines), no Qt.

The desktop app and the CLI use only the names exported here.
"""

from __future__ import annotations

from engine._atomic import atomic_write_bytes
from engine._device import select_device
from engine._guard import GuardConfig, GuardEvent
from engine._version import __version__
from engine.errors import (
    STEP_EVENT_ATTR,
    F2TTAError,
    F2TTAWarning,
    ImageReadError,
    ModelLoadError,
    StateError,
)
from engine.images import IMAGE_EXTENSIONS, list_images, read_image
from engine.methods import (
    IDiPT,
    IDiPTConfig,
    MethodOutput,
    SourceOnly,
    TTAMethod,
    get_method_class,
    list_methods,
    method_config_class,
    register_method,
)
from engine.model_card import LoadedModel, ModelCard, load_model, save_model
from engine.prompted_vit import PrefixPrompts, PromptedViT
from engine.session import Session, StepResult
from engine.slides import Slide, SlideError, Tile, TilePlan

__all__ = [
    "IMAGE_EXTENSIONS",
    "STEP_EVENT_ATTR",
    "F2TTAError",
    "F2TTAWarning",
    "GuardConfig",
    "GuardEvent",
    "IDiPT",
    "IDiPTConfig",
    "ImageReadError",
    "LoadedModel",
    "MethodOutput",
    "ModelCard",
    "ModelLoadError",
    "PrefixPrompts",
    "PromptedViT",
    "Session",
    "Slide",
    "SlideError",
    "SourceOnly",
    "StateError",
    "StepResult",
    "TTAMethod",
    "Tile",
    "TilePlan",
    "__version__",
    "atomic_write_bytes",
    "get_method_class",
    "list_images",
    "list_methods",
    "load_model",
    "method_config_class",
    "read_image",
    "register_method",
    "save_model",
    "select_device",
]
