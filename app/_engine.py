"""The engine names the app uses, in one place (the app imports nothing else from ``engine``).

The engine's public API (``engine/__init__.py``) and what else the app needs of the engine, each
name from the module that defines it.
"""

from __future__ import annotations

from engine import DEFAULT_METHOD as DEFAULT_METHOD
from engine import F2TTAError as F2TTAError
from engine import Failed as Failed
from engine import FolderSource as FolderSource
from engine import Journal as Journal
from engine import Mapped as Mapped
from engine import MapSkipped as MapSkipped
from engine import ModelCard as ModelCard
from engine import Outcome as Outcome
from engine import Paused as Paused
from engine import Predicted as Predicted
from engine import PredictionRow as PredictionRow
from engine import Prompted as Prompted
from engine import ReviewMark as ReviewMark
from engine import RunSummary as RunSummary
from engine import Saved as Saved
from engine import Session as Session
from engine import SiteReview as SiteReview
from engine import Skipped as Skipped
from engine import SlideSource as SlideSource
from engine import StateError as StateError
from engine import StreamRun as StreamRun
from engine import __version__ as __version__
from engine import get_method_class as get_method_class
from engine import list_images as list_images
from engine import list_methods as list_methods
from engine import load_model as load_model
from engine import open_folder as open_folder
from engine import open_slide_source as open_slide_source
from engine import read_image as read_image
from engine.config import FieldInfo as FieldInfo
from engine.config import coerce as coerce
from engine.config import fields_of as fields_of
from engine.io.arrival import class_sorted_warning
from engine.io.slides import Slide as Slide
from engine.io.slides import Tile as Tile
from engine.io.slides import tissue_mask as tissue_mask
from engine.io.sources import Source as Source
from engine.io.sources import SourceError as SourceError
from engine.io.sources import reopen_slide as reopen_slide
from engine.io.sources import source_hash as source_hash
from engine.methods import method_config as method_config
from engine.methods import method_config_class as method_config_class
from engine.model.gate import GateWarning as GateWarning
from engine.model.gate import check_source as check_source
from engine.model.gate import judge_source as judge_source
from engine.model.gate import subfolder_warning as subfolder_warning
from engine.model.kind import KIND_NAMES as KIND_NAMES
from engine.model.kind import Kind as Kind
from engine.model.kind import KindTally as KindTally
from engine.model.kind import dominant_kind as dominant_kind
from engine.model.kind import image_kind as image_kind
from engine.model.kind import model_kind as model_kind
from engine.run.batch import MAX_BATCH as MAX_BATCH
from engine.run.batch import default_batch as default_batch
from engine.run.certificates import Certificate as Certificate
from engine.run.certificates import SiteCertificates as SiteCertificates
from engine.run.certificates import site_certificates as site_certificates
from engine.run.cohort_state import COHORT_FILE as COHORT_FILE
from engine.run.cohort_state import SiteRecord as SiteRecord
from engine.run.cohort_state import is_cohort_state as is_cohort_state
from engine.run.cohort_state import read_record as read_record
from engine.run.cohort_state import site_out as site_out
from engine.run.decisions import decision_summary as decision_summary
from engine.run.decisions import describe_decision as describe_decision
from engine.run.geojson import geojson_bytes as geojson_bytes
from engine.run.geojson import tiles_geojson as tiles_geojson
from engine.run.inputs import input_notes as input_notes
from engine.run.inputs import processed_here as processed_here
from engine.run.journal import in_recorded_order as in_recorded_order
from engine.run.outputs import config_path as config_path
from engine.run.review_outlook import ANSWERS_WHEN_CLEARLY_BETTER as ANSWERS_WHEN_CLEARLY_BETTER
from engine.run.review_outlook import IN_A_REPORT as IN_A_REPORT
from engine.run.review_outlook import IN_THE_APP as IN_THE_APP
from engine.run.review_outlook import outlook as outlook
from engine.run.review_parts import PartRule as PartRule
from engine.run.rows import MAP_PENDING as MAP_PENDING
from engine.run.rows import escape_cell as escape_cell
from engine.run.rows import make_row as make_row
from engine.run.rows import predictions_csv as predictions_csv
from engine.run.step import SettingsMismatchError as SettingsMismatchError
from engine.run.stream import MAPS as MAPS
from engine.run.stream import Picture as Picture
from engine.run.stream import read_item as read_item
from engine.run.stream import tile_reader as tile_reader
from engine.util.atomic import atomic_write_bytes as atomic_write_bytes
from engine.util.bounded_json import JsonFileError as JsonFileError
from engine.util.bounded_json import SchemaError as SchemaError
from engine.util.bounded_json import read_json_file as read_json_file
from engine.util.bounded_json import require_int as require_int
from engine.util.bounded_json import require_object as require_object
from engine.util.bounded_json import require_str as require_str
from engine.util.device import select_device as select_device
from engine.util.files import NotRegularOutputError as NotRegularOutputError
from engine.util.files import UnsafeFileError as UnsafeFileError
from engine.util.files import check_output as check_output
from engine.util.jsonlines import KeyedJsonLines as KeyedJsonLines
from engine.util.text import shown as shown
from engine.vocabulary import DecisionPath as DecisionPath
from engine.vocabulary import Rule as Rule
from engine.vocabulary import Verdict as Verdict

#: The app's name for the check that a folder's files arrive sorted by class.
check_class_sorted = class_sorted_warning
