"""I-DiPT+: I-DiPT with a per-appearance operating point (``_method``) and its estimator (``_operating_point``)."""

from __future__ import annotations

from engine.methods.idipt_plus._method import IDiPTPlus, IDiPTPlusConfig
from engine.methods.idipt_plus._operating_point import Decision, NeighbourhoodMemory, decide, fit_mixture

__all__ = ["Decision", "IDiPTPlus", "IDiPTPlusConfig", "NeighbourhoodMemory", "decide", "fit_mixture"]
