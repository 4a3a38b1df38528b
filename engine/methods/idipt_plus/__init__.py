"""I-DiPT+: I-DiPT whose reported decisions come from guarded per-site operating points.

``_method`` (the method), ``_operating_point`` (site groups' thresholds), ``_fit`` (one fit and
its guards), ``_groups`` (site groups by appearance), ``_mixture`` (the two-class mixture and
margin thresholds), ``_observe`` (source pass -> observation) and ``_state`` (saving the groups).
"""

from __future__ import annotations

from engine.methods.idipt_plus._candidates import CANDIDATES, THRESHOLD_CANDIDATES
from engine.methods.idipt_plus._fit import Fit, OperatingPointSettings, fit_operating_point
from engine.methods.idipt_plus._method import IDiPTPlus, IDiPTPlusConfig, decision_record
from engine.methods.idipt_plus._observe import ReferenceArrays
from engine.methods.idipt_plus._operating_point import (
    ACCEPTED,
    AWAITING_REVIEW,
    HELD,
    NOT_ACCEPTED,
    PATHS,
    SOURCE_LIKE,
    Decision,
    Observation,
    OperatingPoint,
)

__all__ = [
    "ACCEPTED",
    "AWAITING_REVIEW",
    "CANDIDATES",
    "HELD",
    "NOT_ACCEPTED",
    "PATHS",
    "SOURCE_LIKE",
    "THRESHOLD_CANDIDATES",
    "Decision",
    "Fit",
    "IDiPTPlus",
    "IDiPTPlusConfig",
    "Observation",
    "OperatingPoint",
    "OperatingPointSettings",
    "ReferenceArrays",
    "decision_record",
    "fit_operating_point",
]
