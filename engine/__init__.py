"""F²TTA engine: frozen timm ViTs adapted at test time (I-DiPT and baselines), no Qt.

The desktop app uses only the names exported here (through ``app/_engine.py``); the CLI, the
benchmark and the tests import from the sub-packages (``docs/architecture.md``).

The names are imported when first used (PEP 562), so ``import engine`` and ``f2tta --help`` do
not load torch; only :mod:`engine._omp` runs at once (before anything imports torch).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# First of all: libgomp reads OpenMP's wait policy once, when torch loads it (engine/_omp.py).
from engine import _omp  # noqa: F401
from engine._version import __version__

if TYPE_CHECKING:
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
        reopen_slide,
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
    from engine.model.gate import (
        GateWarning,
        NotApplicableError,
        check_source,
        judge_source,
        subfolder_warning,
    )
    from engine.model.kind import (
        KIND_NAMES,
        KIND_SAMPLES,
        Kind,
        KindTally,
        dominant_kind,
        image_kind,
        model_kind,
    )
    from engine.model.prompted_vit import PrefixPrompts, PromptedViT
    from engine.review import (
        REVERTED,
        UNDECIDED,
        VERDICTS,
        VERIFIED,
        CertificateError,
    )
    from engine.review.ladder import NOT_BETTER, PROMOTED
    from engine.review.marks import MarkError, ReviewMark
    from engine.run.batch import MAX_BATCH, default_batch
    from engine.run.certificates import Certificate, SiteCertificates, site_certificates
    from engine.run.decisions import decision_summary, describe_decision
    from engine.run.geojson import tiles_geojson, tiles_geojson_bytes
    from engine.run.guard import GuardConfig, GuardEvent
    from engine.run.inputs import input_notes, processed_here
    from engine.run.journal import Journal, in_recorded_order
    from engine.run.lock import LockedError
    from engine.run.review import SiteReview
    from engine.run.review_outlook import ANSWERS_WHEN_CLEARLY_BETTER, outlook
    from engine.run.review_parts import PartRule
    from engine.run.rows import (
        CSV_COLUMNS,
        MAP_PENDING,
        PredictionRow,
        escape_cell,
        make_row,
        predictions_csv,
    )
    from engine.run.session import Session
    from engine.run.step import SettingsMismatchError, StepResult
    from engine.run.stream import (
        MAPS,
        Failed,
        Mapped,
        MapSkipped,
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
    from engine.util.bounded_json import (
        JsonFileError,
        SchemaError,
        read_json_file,
        require_int,
        require_list,
        require_object,
        require_str,
    )
    from engine.util.device import select_device
    from engine.util.files import (
        NotRegularOutputError,
        UnsafeFileError,
        check_output,
        open_append,
        read_regular,
    )
    from engine.util.jsonlines import KeyedJsonLines
    from engine.util.text import shown
    from engine.vocabulary import DecisionPath, Rule, Verdict

#: Each exported name -> (module, name in that module), imported on first use.
_LAZY: dict[str, tuple[str, str]] = {
    "FieldInfo": ("engine.config", "FieldInfo"),
    "build_config": ("engine.config", "build_config"),
    "coerce": ("engine.config", "coerce"),
    "fields_of": ("engine.config", "fields_of"),
    "F2TTAError": ("engine.errors", "F2TTAError"),
    "F2TTAWarning": ("engine.errors", "F2TTAWarning"),
    "ImageReadError": ("engine.errors", "ImageReadError"),
    "ModelLoadError": ("engine.errors", "ModelLoadError"),
    "StateError": ("engine.errors", "StateError"),
    "ORDERS": ("engine.io.arrival", "ORDERS"),
    "check_class_sorted": ("engine.io.arrival", "class_sorted_warning"),
    "IMAGE_EXTENSIONS": ("engine.io.images", "IMAGE_EXTENSIONS"),
    "list_images": ("engine.io.images", "list_images"),
    "read_image": ("engine.io.images", "read_image"),
    "Slide": ("engine.io.slides", "Slide"),
    "SlideError": ("engine.io.slides", "SlideError"),
    "Tile": ("engine.io.slides", "Tile"),
    "TilePlan": ("engine.io.slides", "TilePlan"),
    "tissue_mask": ("engine.io.slides", "tissue_mask"),
    "FolderSource": ("engine.io.sources", "FolderSource"),
    "SlideSource": ("engine.io.sources", "SlideSource"),
    "Source": ("engine.io.sources", "Source"),
    "SourceError": ("engine.io.sources", "SourceError"),
    "StreamItem": ("engine.io.sources", "StreamItem"),
    "open_folder": ("engine.io.sources", "open_folder"),
    "open_slide_source": ("engine.io.sources", "open_slide_source"),
    "reopen_slide": ("engine.io.sources", "reopen_slide"),
    "input_notes": ("engine.run.inputs", "input_notes"),
    "processed_here": ("engine.run.inputs", "processed_here"),
    "parse_label": ("engine.io.sources", "parse_label"),
    "source_hash": ("engine.io.sources", "source_hash"),
    "DEFAULT_METHOD": ("engine.methods", "DEFAULT_METHOD"),
    "IDiPT": ("engine.methods", "IDiPT"),
    "IDiPTConfig": ("engine.methods", "IDiPTConfig"),
    "MethodOutput": ("engine.methods", "MethodOutput"),
    "SourceOnly": ("engine.methods", "SourceOnly"),
    "TTAMethod": ("engine.methods", "TTAMethod"),
    "get_method_class": ("engine.methods", "get_method_class"),
    "list_methods": ("engine.methods", "list_methods"),
    "method_config": ("engine.methods", "method_config"),
    "method_config_class": ("engine.methods", "method_config_class"),
    "register_method": ("engine.methods", "register_method"),
    "LoadedModel": ("engine.model.card", "LoadedModel"),
    "ModelCard": ("engine.model.card", "ModelCard"),
    "load_model": ("engine.model.card", "load_model"),
    "save_model": ("engine.model.card", "save_model"),
    "GateWarning": ("engine.model.gate", "GateWarning"),
    "NotApplicableError": ("engine.model.gate", "NotApplicableError"),
    "check_source": ("engine.model.gate", "check_source"),
    "judge_source": ("engine.model.gate", "judge_source"),
    "subfolder_warning": ("engine.model.gate", "subfolder_warning"),
    "KIND_NAMES": ("engine.model.kind", "KIND_NAMES"),
    "KIND_SAMPLES": ("engine.model.kind", "KIND_SAMPLES"),
    "Kind": ("engine.model.kind", "Kind"),
    "KindTally": ("engine.model.kind", "KindTally"),
    "dominant_kind": ("engine.model.kind", "dominant_kind"),
    "image_kind": ("engine.model.kind", "image_kind"),
    "model_kind": ("engine.model.kind", "model_kind"),
    "PrefixPrompts": ("engine.model.prompted_vit", "PrefixPrompts"),
    "PromptedViT": ("engine.model.prompted_vit", "PromptedViT"),
    "REVERTED": ("engine.review", "REVERTED"),
    "UNDECIDED": ("engine.review", "UNDECIDED"),
    "VERDICTS": ("engine.review", "VERDICTS"),
    "VERIFIED": ("engine.review", "VERIFIED"),
    "CertificateError": ("engine.review", "CertificateError"),
    "NOT_BETTER": ("engine.review.ladder", "NOT_BETTER"),
    "PROMOTED": ("engine.review.ladder", "PROMOTED"),
    "MarkError": ("engine.review.marks", "MarkError"),
    "ReviewMark": ("engine.review.marks", "ReviewMark"),
    "Certificate": ("engine.run.certificates", "Certificate"),
    "SiteCertificates": ("engine.run.certificates", "SiteCertificates"),
    "site_certificates": ("engine.run.certificates", "site_certificates"),
    "SiteReview": ("engine.run.review", "SiteReview"),
    "outlook": ("engine.run.review_outlook", "outlook"),
    "ANSWERS_WHEN_CLEARLY_BETTER": ("engine.run.review_outlook", "ANSWERS_WHEN_CLEARLY_BETTER"),
    "PartRule": ("engine.run.review_parts", "PartRule"),
    "DecisionPath": ("engine.vocabulary", "DecisionPath"),
    "Rule": ("engine.vocabulary", "Rule"),
    "Verdict": ("engine.vocabulary", "Verdict"),
    "MAX_BATCH": ("engine.run.batch", "MAX_BATCH"),
    "default_batch": ("engine.run.batch", "default_batch"),
    "tiles_geojson": ("engine.run.geojson", "tiles_geojson"),
    "tiles_geojson_bytes": ("engine.run.geojson", "tiles_geojson_bytes"),
    "GuardConfig": ("engine.run.guard", "GuardConfig"),
    "GuardEvent": ("engine.run.guard", "GuardEvent"),
    "Journal": ("engine.run.journal", "Journal"),
    "in_recorded_order": ("engine.run.journal", "in_recorded_order"),
    "LockedError": ("engine.run.lock", "LockedError"),
    "CSV_COLUMNS": ("engine.run.rows", "CSV_COLUMNS"),
    "PredictionRow": ("engine.run.rows", "PredictionRow"),
    "decision_summary": ("engine.run.decisions", "decision_summary"),
    "describe_decision": ("engine.run.decisions", "describe_decision"),
    "MAPS": ("engine.run.stream", "MAPS"),
    "MAP_PENDING": ("engine.run.rows", "MAP_PENDING"),
    "MapSkipped": ("engine.run.stream", "MapSkipped"),
    "Mapped": ("engine.run.stream", "Mapped"),
    "escape_cell": ("engine.run.rows", "escape_cell"),
    "make_row": ("engine.run.rows", "make_row"),
    "predictions_csv": ("engine.run.rows", "predictions_csv"),
    "Session": ("engine.run.session", "Session"),
    "SettingsMismatchError": ("engine.run.step", "SettingsMismatchError"),
    "StepResult": ("engine.run.step", "StepResult"),
    "Failed": ("engine.run.stream", "Failed"),
    "Outcome": ("engine.run.stream", "Outcome"),
    "Paused": ("engine.run.stream", "Paused"),
    "Picture": ("engine.run.stream", "Picture"),
    "Predicted": ("engine.run.stream", "Predicted"),
    "Reader": ("engine.run.stream", "Reader"),
    "RunSummary": ("engine.run.stream", "RunSummary"),
    "Saved": ("engine.run.stream", "Saved"),
    "Skipped": ("engine.run.stream", "Skipped"),
    "StreamRun": ("engine.run.stream", "StreamRun"),
    "read_item": ("engine.run.stream", "read_item"),
    "tile_reader": ("engine.run.stream", "tile_reader"),
    "atomic_write_bytes": ("engine.util.atomic", "atomic_write_bytes"),
    "select_device": ("engine.util.device", "select_device"),
    "NotRegularOutputError": ("engine.util.files", "NotRegularOutputError"),
    "UnsafeFileError": ("engine.util.files", "UnsafeFileError"),
    "check_output": ("engine.util.files", "check_output"),
    "open_append": ("engine.util.files", "open_append"),
    "read_regular": ("engine.util.files", "read_regular"),
    "JsonFileError": ("engine.util.bounded_json", "JsonFileError"),
    "SchemaError": ("engine.util.bounded_json", "SchemaError"),
    "read_json_file": ("engine.util.bounded_json", "read_json_file"),
    "require_int": ("engine.util.bounded_json", "require_int"),
    "require_list": ("engine.util.bounded_json", "require_list"),
    "require_object": ("engine.util.bounded_json", "require_object"),
    "require_str": ("engine.util.bounded_json", "require_str"),
    "KeyedJsonLines": ("engine.util.jsonlines", "KeyedJsonLines"),
    "shown": ("engine.util.text", "shown"),
}


def __getattr__(name: str) -> Any:
    try:
        module, attribute = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'engine' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value  # the next lookup finds it at once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "ANSWERS_WHEN_CLEARLY_BETTER",
    "CSV_COLUMNS",
    "DEFAULT_METHOD",
    "IMAGE_EXTENSIONS",
    "KIND_NAMES",
    "KIND_SAMPLES",
    "MAPS",
    "MAP_PENDING",
    "MAX_BATCH",
    "NOT_BETTER",
    "ORDERS",
    "PROMOTED",
    "REVERTED",
    "UNDECIDED",
    "VERDICTS",
    "VERIFIED",
    "Certificate",
    "CertificateError",
    "DecisionPath",
    "F2TTAError",
    "F2TTAWarning",
    "Failed",
    "FieldInfo",
    "FolderSource",
    "GateWarning",
    "GuardConfig",
    "GuardEvent",
    "IDiPT",
    "IDiPTConfig",
    "ImageReadError",
    "Journal",
    "JsonFileError",
    "KeyedJsonLines",
    "Kind",
    "KindTally",
    "LoadedModel",
    "LockedError",
    "MapSkipped",
    "Mapped",
    "MarkError",
    "MethodOutput",
    "ModelCard",
    "ModelLoadError",
    "NotApplicableError",
    "NotRegularOutputError",
    "Outcome",
    "PartRule",
    "Paused",
    "Picture",
    "Predicted",
    "PredictionRow",
    "PrefixPrompts",
    "PromptedViT",
    "Reader",
    "ReviewMark",
    "Rule",
    "RunSummary",
    "Saved",
    "SchemaError",
    "Session",
    "SettingsMismatchError",
    "SiteCertificates",
    "SiteReview",
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
    "Verdict",
    "__version__",
    "atomic_write_bytes",
    "build_config",
    "check_class_sorted",
    "check_output",
    "check_source",
    "coerce",
    "decision_summary",
    "default_batch",
    "describe_decision",
    "dominant_kind",
    "escape_cell",
    "fields_of",
    "get_method_class",
    "image_kind",
    "in_recorded_order",
    "input_notes",
    "judge_source",
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
    "outlook",
    "parse_label",
    "predictions_csv",
    "processed_here",
    "read_image",
    "read_item",
    "read_json_file",
    "read_regular",
    "register_method",
    "reopen_slide",
    "require_int",
    "require_list",
    "require_object",
    "require_str",
    "save_model",
    "select_device",
    "shown",
    "site_certificates",
    "source_hash",
    "subfolder_warning",
    "tile_reader",
    "tiles_geojson",
    "tiles_geojson_bytes",
    "tissue_mask",
]
