"""The committed suite's endpoints on (model, site) units, fixed before the second suite ran.

A *cell* is one site of one stream (a kind, a source model, a class mix, a δ, a protocol); the
cells of one (model, site) pair share their images and their model, so they are not independent:
the unit of evaluation is the **(model, site) unit**, per protocol (``docs/benchmark.md``):

* **error closed** of a unit: over its cells, the errors the method removed from the source
  model's, as a share of the errors a per-site threshold chosen *with the labels* would have
  removed (the best threshold on the source margin for that cell's images: what no label-free
  method can beat with the source model's ranking): ``Σ(source errors − method errors) /
  Σ(source errors − best-threshold errors)``. Units whose source model is already at the best
  threshold (nothing to close) are left out of the median. Reported: the median over target
  units.
* **harmed**: a unit is harmed when one of its cells has the one-sided 95 % upper bound of its
  paired difference (exact, McNemar) below −1 point: the method is worse there beyond chance.
* cells whose difference is below −1 point, fixed and broken images, the target mean gain.
* in the units a clinician weighs (issue 37): the **median unit's gain** in points (a unit's gain:
  the mean of its cells' differences), and the **share of the source model's errors removed**,
  pooled over target units and at the median unit (``Σ(source errors − method errors) / Σ
  source errors``).

Every variant (label-free as decided and retroactive; after K reviews per site with each reviewer
noise, retroactive and online) gets the same endpoints.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from lab.bench.paired import Paired, mcnemar_interval

HARM_POINT = -1.0  # a unit is harmed when a cell's one-sided 95 % upper bound lies below this
ONE_SIDED = 0.90  # the two-sided confidence whose upper end is the one-sided 95 % bound


def best_threshold_errors(margins: np.ndarray, labels: np.ndarray) -> int:
    """The fewest errors any threshold on the source margin makes on these images (class 1 above it)."""
    n = int(labels.shape[0])
    if n == 0:
        return 0
    order = np.argsort(margins, kind="stable")
    y = labels[order]
    # threshold below every image: all called 1, errors = the 0s; moving it past image i flips it
    errors = int(np.sum(y == 0)) + np.cumsum(np.where(y == 1, 1, -1))
    return int(min(int(np.sum(y == 0)), int(errors.min())))


def upper_bound(result: Paired) -> float:
    """The one-sided 95 % upper bound of the paired difference in points."""
    return mcnemar_interval(result.fixed, result.broken, result.images, ONE_SIDED)[1]


@dataclass(frozen=True)
class UnitCell:
    """What the endpoints need of one cell for one variant."""

    model: str
    site: str
    source_site: bool
    result: Paired
    best_errors: int  # the best threshold's errors on the cell's images

    @classmethod
    def from_cell_json(cls, cell: Mapping[str, Any], variant: str) -> UnitCell:
        """The ``variant`` of a cell as a suite's cells file holds it
        (:meth:`lab.bench.suite_stream.SuiteCell.to_json`)."""
        result = Paired.from_json(cell["methods"][variant])
        return cls(cell["model"], cell["site"], cell["source_site"], result, cell["best_threshold_errors"])


def unit_endpoints(cells: Sequence[UnitCell]) -> dict[str, Any]:
    """The endpoints of one variant over its cells (see the module docstring)."""
    units: dict[tuple[str, str], list[UnitCell]] = {}
    for c in cells:
        units.setdefault((c.model, c.site), []).append(c)
    closed: list[float] = []
    gains: list[float] = []
    removed: list[float] = []
    source_total = removed_total = 0
    harmed: list[dict[str, Any]] = []
    for (model, site), group in units.items():
        worst = min(group, key=lambda c: upper_bound(c.result))
        if upper_bound(worst.result) < HARM_POINT:
            harmed.append({"model": model, "site": site, "upper_bound": upper_bound(worst.result)})
        if group[0].source_site:
            continue
        source_errors = sum(_errors(c.result, source=True) for c in group)
        method_errors = sum(_errors(c.result, source=False) for c in group)
        gains.append(float(np.mean([c.result.delta for c in group])))
        source_total += source_errors
        removed_total += source_errors - method_errors
        if source_errors:
            removed.append((source_errors - method_errors) / source_errors)
        closable = source_errors - sum(c.best_errors for c in group)
        if closable > 0:
            closed.append((source_errors - method_errors) / closable)
    targets = [c for c in cells if not c.source_site]
    return {
        "units": len(units),
        "target_units_with_closable_error": len(closed),
        "median_error_closed": float(np.median(closed)) if closed else float("nan"),
        "error_closed_quartiles": [float(q) for q in np.quantile(closed, [0.25, 0.75])] if closed else [],
        "harmed_units": harmed,
        "cells": len(cells),
        "cells_below_source_by_1": sum(c.result.delta < -1.0 for c in cells),
        "worst_cell_difference": min((c.result.delta for c in cells), default=0.0),
        "target_mean_gain": float(np.mean([c.result.delta for c in targets])) if targets else 0.0,
        "median_unit_gain": float(np.median(gains)) if gains else 0.0,
        "errors_removed_pooled": removed_total / source_total if source_total else 0.0,
        "errors_removed_median": float(np.median(removed)) if removed else 0.0,
        "fixed": sum(c.result.fixed for c in cells),
        "broken": sum(c.result.broken for c in cells),
        "changed_share": sum(c.result.fixed + c.result.broken for c in cells)
        / max(sum(c.result.images for c in cells), 1),
    }


def _errors(result: Paired, source: bool) -> int:
    acc = result.source_acc if source else result.adapted_acc
    return round(result.images * (100.0 - acc) / 100.0)
