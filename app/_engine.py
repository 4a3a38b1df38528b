"""The engine names the app uses, in one place (the app imports nothing else from ``engine``).

Everything here comes from ``engine``'s public ``__all__``.
"""

from __future__ import annotations

from engine import (
    STEP_EVENT_ATTR,
    F2TTAError,
    ImageReadError,
    ModelCard,
    ModelLoadError,
    Session,
    Slide,
    SlideError,
    StateError,
    StepResult,
    Tile,
    TilePlan,
    __version__,
    atomic_write_bytes,
    list_images,
    list_methods,
    load_model,
    method_config_class,
    read_image,
    save_model,
    select_device,
)

__all__ = [
    "STEP_EVENT_ATTR",
    "F2TTAError",
    "ImageReadError",
    "ModelCard",
    "ModelLoadError",
    "Session",
    "Slide",
    "SlideError",
    "StateError",
    "StepResult",
    "Tile",
    "TilePlan",
    "__version__",
    "atomic_write_bytes",
    "list_images",
    "list_methods",
    "load_model",
    "method_config_class",
    "read_image",
    "save_model",
    "select_device",
]
