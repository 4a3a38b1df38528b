"""What decided a row, for people: one line per row and a summary per site group and decision path.

Read from the rows' decision fields (:class:`engine.run.rows.PredictionRow`, filled from I-DiPT+'s
:class:`engine.methods.decision.DecisionRecord`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from engine.run.rows import PredictionRow
from engine.vocabulary import DecisionPath


def describe_decision(row: PredictionRow) -> str:
    """One line for people: what decided the row (empty when the method records none).

    The reported decision of I-DiPT+ is always the source (original) model's: at its own threshold,
    or at the threshold its site's operating point moved to; the line says which, and why.
    """
    if not row.decision_path:
        return ""
    where = f" (site {row.site_group})" if row.site_group is not None else ""
    threshold = row.decision_threshold
    if row.decision_path == DecisionPath.ACCEPTED and threshold:
        what = f"the site threshold, unreviewed ({threshold:+.2f} on the original model's score){where}"
    elif row.decision_path == DecisionPath.SOURCE_LIKE:
        what = "the original model (the image looks like the training site's)"
    else:
        what = f"the original model{where}"
    reason = (
        f": {row.decision_reason}"
        if row.decision_reason and row.decision_reason not in (row.decision_path, DecisionPath.ACCEPTED)
        else ""
    )
    return f"decided by {what}{reason}"


def decision_summary(rows: Iterable[PredictionRow]) -> list[dict[str, Any]]:
    """What adaptation changed, per site group and decision path (rows with a recorded decision).

    One entry per (group, path) in order of the group's first image: ``images``, ``changed``
    (decisions that differ from the source model's) and, where the truth is known, ``fixed``
    and ``broken``, with ``labelled`` the images whose truth is known.
    """
    out: dict[tuple[int | None, str], dict[str, Any]] = {}
    for row in sorted(rows, key=lambda r: r.index):
        if not row.decision_path:
            continue
        entry = out.setdefault(
            (row.site_group, row.decision_path),
            {
                "group": row.site_group,
                "path": row.decision_path,
                "images": 0,
                "changed": 0,
                "labelled": 0,
                "fixed": 0,
                "broken": 0,
            },
        )
        entry["images"] += 1
        entry["changed"] += int(row.changed)
        if row.correct is not None:
            entry["labelled"] += 1
            entry["fixed"] += int(bool(row.correct) and not row.source_correct)
            entry["broken"] += int(not row.correct and bool(row.source_correct))
    return list(out.values())
