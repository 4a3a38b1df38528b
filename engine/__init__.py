"""F²TTA engine: frozen timm ViTs adapted at test time (I-DiPT and baselines), no Qt.

The desktop app uses only the names exported here (through ``app/_engine.py``); the CLI, the
benchmark and the tests import from the sub-packages (``docs/architecture.md``).
"""

from __future__ import annotations

# First of all: libgomp reads OpenMP's wait policy once, when torch loads it (engine/_omp.py).
from engine import _omp  # noqa: F401

# isort: split

from engine._version import __version__
from engine.config import FieldInfo, build_config, coerce, fields_of
from engine.errors import (
    F2TTAError,
    F2TTAWarning,
    ImageReadError,
    ModelLoadError,
    StateError,
)
from engine.io.arrival import ORDERS
from engine.io.arrival import class_sorted_warning as check_class_sorted
from engine.io.images import IMAGE_EXTENSIONS, list_images, read_image
from engine.io.slides import Slide, SlideError, Tile, TilePlan, tissue_mask
from engine.io.sources import (
    FolderSource,
    SlideSource,
    Source,
    SourceError,
    StreamItem,
    open_folder,
    open_slide_source,
    parse_label,
    source_hash,
)
from engine.methods import (
    DEFAULT_METHOD,
    IDiPT,
    IDiPTConfig,
    MethodOutput,
    SourceOnly,
    TTAMethod,
    get_method_class,
    list_methods,
    method_config,
    method_config_class,
    register_method,
)
from engine.model.card import LoadedModel, ModelCard, load_model, save_model
from engine.model.kind import KIND_SAMPLES, Kind, KindTally, dominant_kind, image_kind, model_kind
from engine.model.prompted_vit import PrefixPrompts, PromptedViT
from engine.review import (
    REVERTED,
    UNDECIDED,
    VERDICTS,
    VERIFIED,
    Certificate,
    CertificateBook,
    CertificateError,
    ReviewQueue,
)
from engine.run.guard import GuardConfig, GuardEvent
from engine.run.journal import Journal
from engine.run.lock import LockedError
from engine.run.rows import (
    CSV_COLUMNS,
    PredictionRow,
    decision_summary,
    describe_decision,
    escape_cell,
    make_row,
    predictions_csv,
)
from engine.run.session import Session
from engine.run.step import SettingsMismatchError, StepResult
from engine.run.stream import (
    Failed,
    Outcome,
    Paused,
    Picture,
    Predicted,
    Reader,
    RunSummary,
    Saved,
    Skipped,
    StreamRun,
    read_item,
    tile_reader,
)
from engine.util.atomic import atomic_write_bytes
from engine.util.device import select_device
from engine.util.files import NotRegularOutputError, UnsafeFileError, check_output, open_append, read_regular
from engine.util.jsonlines import KeyedJsonLines
from engine.util.text import shown

__all__ = [
    "CSV_COLUMNS",
    "DEFAULT_METHOD",
    "IMAGE_EXTENSIONS",
    "KIND_SAMPLES",
    "ORDERS",
    "REVERTED",
    "UNDECIDED",
    "VERDICTS",
    "VERIFIED",
    "Certificate",
    "CertificateBook",
    "CertificateError",
    "F2TTAError",
    "F2TTAWarning",
    "Failed",
    "FieldInfo",
    "FolderSource",
    "GuardConfig",
    "GuardEvent",
    "IDiPT",
    "IDiPTConfig",
    "ImageReadError",
    "Journal",
    "KeyedJsonLines",
    "Kind",
    "KindTally",
    "LoadedModel",
    "LockedError",
    "MethodOutput",
    "ModelCard",
    "ModelLoadError",
    "NotRegularOutputError",
    "Outcome",
    "Paused",
    "Picture",
    "Predicted",
    "PredictionRow",
    "PrefixPrompts",
    "PromptedViT",
    "Reader",
    "ReviewQueue",
    "RunSummary",
    "Saved",
    "Session",
    "SettingsMismatchError",
    "Skipped",
    "Slide",
    "SlideError",
    "SlideSource",
    "Source",
    "SourceError",
    "SourceOnly",
    "StateError",
    "StepResult",
    "StreamItem",
    "StreamRun",
    "TTAMethod",
    "Tile",
    "TilePlan",
    "UnsafeFileError",
    "__version__",
    "atomic_write_bytes",
    "build_config",
    "check_class_sorted",
    "check_output",
    "coerce",
    "decision_summary",
    "describe_decision",
    "dominant_kind",
    "escape_cell",
    "fields_of",
    "get_method_class",
    "image_kind",
    "list_images",
    "list_methods",
    "load_model",
    "make_row",
    "method_config",
    "method_config_class",
    "model_kind",
    "open_append",
    "open_folder",
    "open_slide_source",
    "parse_label",
    "predictions_csv",
    "read_image",
    "read_item",
    "read_regular",
    "register_method",
    "save_model",
    "select_device",
    "shown",
    "source_hash",
    "tile_reader",
    "tissue_mask",
]
