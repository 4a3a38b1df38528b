"""One prediction row per processed image, and the predictions CSV made of them.

:class:`PredictionRow` is what every consumer of the stream loop records about an image: the
journal keeps it (one JSON line per image), the app shows it in its table, ``f2tta run`` and the
app's export write it as a CSV row with the same columns (:data:`CSV_COLUMNS`).

CSV cells that a spreadsheet would read as a formula (text beginning with ``=``, ``+``, ``-``,
``@``, a tab or a carriage return: file and class names can) are written with a leading ``'``,
as the OWASP guidance on CSV injection recommends; numbers are written as plain numbers.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from engine.errors import F2TTAError
from engine.io.sources import StreamItem
from engine.methods.decision import DecisionRecord
from engine.run.step import StepResult

CSV_COLUMNS = (
    "index",
    "position",
    "item",
    "prediction",
    "confidence",
    "p_positive",
    "source_prediction",
    "source_confidence",
    "changed_by_adaptation",
    "uncertainty",
    "ground_truth",
    "correct",
    "source_correct",
    "tile_col",
    "tile_row",
    "x",
    "y",
    "width",
    "height",
    "seconds",
    "update_skipped",
    "guard_event",
    "decision_path",
    "site_group",
    "decision_threshold",
    "decision_reason",
    "map",
)
#: The columns of predictions CSVs written before decision paths were recorded; such a file is
#: still read back (resuming an older run) and is rewritten with :data:`CSV_COLUMNS`.
LEGACY_CSV_COLUMNS = CSV_COLUMNS[:22]
#: Every older header read back: before decision paths, and before the ``map`` column.
LEGACY_CSV_HEADERS = (LEGACY_CSV_COLUMNS, CSV_COLUMNS[:26])
#: :attr:`PredictionRow.map_status` of a row decided before its uncertainty map was made (the map
#: step runs behind the decisions), and of one whose image could not be read again for it.
MAP_PENDING, MAP_UNREADABLE = "pending", "unreadable"
CANDIDATE_DECIMALS = 6  # a candidate's threshold is kept to this many decimals (rows in memory too)
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")
# File names that are not valid UTF-8 (possible on Linux) round-trip through the CSVs byte for byte.
CSV_ERRORS = "surrogateescape"
_FLOATS = ("confidence", "positive_prob", "source_confidence", "uncertainty", "seconds")


class OutputError(F2TTAError):
    """An output file cannot be used (it belongs to another run, or was changed beyond reading)."""


@dataclass(frozen=True)
class PredictionRow:
    """What is recorded about one processed image (no arrays: rows are kept for every image)."""

    index: int  # arrival index reported by the engine (counts every image the state has seen)
    position: int  # position within its source's arrival order
    key: str  # stable identifier within the source
    name: str  # file path relative to the folder, or tile position
    prediction: int  # adapted model's class index
    prediction_label: str
    confidence: float  # adapted model's probability of its prediction (0-1)
    positive_prob: float  # adapted model's probability of the card's positive class (0-1)
    source_prediction: int  # frozen source model's class index
    source_label: str
    source_confidence: float
    uncertainty: float  # mean per-token uncertainty (nan when the method has none)
    ground_truth: int | None
    truth_label: str | None
    seconds: float  # engine time for this image
    tile: tuple[int, int, int, int, int, int] | None = None  # (col, row, x, y, width, height) of a slide tile
    guard_message: str = ""  # what the collapse guard did after this image (empty: it did not act)
    update_skipped: bool = False  # the method skipped its update on this image (non-finite loss)
    decision_path: str = ""  # where the decision came from (I-DiPT+: engine.run.step.DecisionRecord.path)
    site_group: int | None = None  # the site group it was judged in (I-DiPT+; None: none)
    decision_threshold: float | None = None  # threshold on the source margin it was decided by
    decision_reason: str = ""  # why that path (the guard that failed, ...)
    source_margin: float | None = None  # the source margin l_1 - l_0 (with more classes: source_classes)
    # with more than two classes: (reference, alternative), the margin being the log-probability of
    # the most likely other class less the reference class's (engine.review.images.calls)
    source_classes: tuple[int, int] | None = None
    # with more than two classes: the source model's log-probability of every class, kept to
    # CANDIDATE_DECIMALS (the class-balance correction decides from them: engine.review.balance)
    source_log_probs: tuple[float, ...] | None = None
    candidates: tuple[
        tuple[str, float], ...
    ] = ()  # the site's candidate thresholds (never reported uncertified)
    prompted_prediction: int | None = None  # I-DiPT's prompted model's class (None: not computed)
    map_status: str = ""  # "" the map is there (or the method makes none); MAP_PENDING; MAP_UNREADABLE
    # "" the prompted decision is there (or the method makes none); MAP_PENDING: its prompt step is
    # still to come (it runs when asked for); MAP_UNREADABLE: the image could not be read for it
    prompted_status: str = ""
    content: str = ""  # the content fingerprint of the file decided (engine.io.content; "" a tile)
    restored: bool = False  # True for rows read back from a journal (no overlay available)

    @property
    def changed(self) -> bool:
        """Adaptation changed the source model's prediction."""
        return self.prediction != self.source_prediction

    @property
    def correct(self) -> bool | None:
        return None if self.ground_truth is None else self.prediction == self.ground_truth

    @property
    def source_correct(self) -> bool | None:
        return None if self.ground_truth is None else self.source_prediction == self.ground_truth

    @property
    def agreement(self) -> str:
        """Adapted prediction vs. ground truth, with the source model's outcome when it differs."""
        if self.ground_truth is None:
            return ""
        if self.correct and not self.source_correct:
            return "correct (fixed)"
        if not self.correct and self.source_correct:
            return "wrong (broken)"
        return "correct" if self.correct else "wrong"

    def to_json(self) -> dict[str, Any]:
        # The fields as they are, not dataclasses.asdict: that copies every tuple deeply, and was
        # the largest host cost of a decision on a GPU's time scale (docs/benchmark.md, issue 41).
        data = {name: getattr(self, name) for name in _ROW_FIELDS}
        # Events are rare: leave the defaults out so the journal's rows files stay small.
        if not self.guard_message:
            data.pop("guard_message")
        if not self.update_skipped:
            data.pop("update_skipped")
        for key in (
            "decision_path",
            "site_group",
            "decision_threshold",
            "decision_reason",
            "source_margin",
            "source_classes",
            "source_log_probs",
            "prompted_prediction",
            "map_status",
            "prompted_status",
            "content",
        ):
            if data[key] in ("", None):
                data.pop(key)
        if self.candidates:
            data["candidates"] = {
                name: (kept(v) if math.isfinite(v) else None) for name, v in self.candidates
            }
        else:
            data.pop("candidates")
        if self.tile is not None:
            data["tile"] = list(self.tile)
        if self.source_classes is not None:
            data["source_classes"] = list(self.source_classes)
        if self.source_log_probs is not None:
            data["source_log_probs"] = list(self.source_log_probs)
        for key in _FLOATS:
            value = data[key]
            data[key] = None if not math.isfinite(value) else round(float(value), 6)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PredictionRow:
        """Inverse of :meth:`to_json` (marks the row ``restored``).

        Raises:
            KeyError, TypeError, ValueError: ``data`` is not a row.
        """
        names = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in names}
        for key in _FLOATS:
            kwargs[key] = math.nan if kwargs.get(key) is None else float(kwargs[key])
        for key in ("index", "position", "prediction", "source_prediction"):
            kwargs[key] = int(kwargs[key])
        for key in ("key", "name", "prediction_label", "source_label"):
            kwargs[key] = str(kwargs[key])
        if kwargs.get("tile") is not None:
            kwargs["tile"] = tuple(int(v) for v in kwargs["tile"])
            if len(kwargs["tile"]) != 6:
                raise ValueError("a tile has six numbers")
        kwargs["guard_message"] = str(kwargs.get("guard_message") or "")
        kwargs["update_skipped"] = bool(kwargs.get("update_skipped", False))
        kwargs["decision_path"] = str(kwargs.get("decision_path") or "")
        kwargs["decision_reason"] = str(kwargs.get("decision_reason") or "")
        kwargs["map_status"] = str(kwargs.get("map_status") or "")
        kwargs["prompted_status"] = str(kwargs.get("prompted_status") or "")
        kwargs["content"] = str(kwargs.get("content") or "")
        group = kwargs.get("site_group")
        kwargs["site_group"] = None if group is None else int(group)
        threshold = kwargs.get("decision_threshold")
        kwargs["decision_threshold"] = None if threshold is None else float(threshold)
        margin = kwargs.get("source_margin")
        kwargs["source_margin"] = None if margin is None else float(margin)
        pair = kwargs.get("source_classes")
        if pair is not None:
            kwargs["source_classes"] = (int(pair[0]), int(pair[1]))
            if len(pair) != 2 or min(kwargs["source_classes"]) < 0 or pair[0] == pair[1]:
                raise ValueError("a row's source classes are two class indices")
        if kwargs.get("source_log_probs") is not None:
            kwargs["source_log_probs"] = _log_probs_read(kwargs)
        prompted = kwargs.get("prompted_prediction")
        kwargs["prompted_prediction"] = None if prompted is None else int(prompted)
        candidates = kwargs.get("candidates") or {}
        if not isinstance(candidates, dict):
            raise TypeError("a row's candidates are an object of thresholds")
        kwargs["candidates"] = tuple(
            (str(k), math.nan if v is None else float(v)) for k, v in candidates.items()
        )
        kwargs["restored"] = True
        return cls(**kwargs)


#: The fields a row's JSON line holds (all but ``restored``, which only a row read back has).
_ROW_FIELDS = tuple(f.name for f in dataclasses.fields(PredictionRow) if f.name != "restored")


def without_map(row: PredictionRow, prompt_step: bool = False) -> PredictionRow:
    """``row`` as its decision made it, its map pending (what the map step adds taken away;
    ``prompt_step``: the method's prompted decision comes from a prompt step, pending too)."""
    return dataclasses.replace(
        row,
        uncertainty=math.nan,
        update_skipped=False,
        prompted_prediction=None,
        map_status=MAP_PENDING,
        prompted_status=MAP_PENDING if prompt_step else "",
    )


def without_prompted(row: PredictionRow) -> PredictionRow:
    """``row`` with its prompted decision pending (what the prompt step adds taken away)."""
    return dataclasses.replace(
        row, update_skipped=False, prompted_prediction=None, prompted_status=MAP_PENDING
    )


def make_row(
    item: StreamItem, step: StepResult, classes: Sequence[str], positive_class: int, content: str = ""
) -> PredictionRow:
    """The row of ``item`` from the engine's result for it (``content``: its file's fingerprint)."""
    tile = None
    if item.tile is not None:
        t = item.tile
        tile = (t.col, t.row, t.x, t.y, t.width, t.height)
    truth = item.ground_truth
    probs, pred, src = step.probs, step.prediction, step.source_prediction
    return PredictionRow(
        index=step.index,
        position=item.position,
        key=item.key,
        name=item.name,
        prediction=pred,
        prediction_label=classes[pred],
        confidence=float(probs[pred]),
        positive_prob=float(probs[positive_class]) if positive_class < len(probs) else math.nan,
        source_prediction=src,
        source_label=classes[src],
        source_confidence=float(step.source_probs[src]),
        uncertainty=step.mean_uncertainty,
        ground_truth=truth,
        truth_label=None if truth is None else classes[truth],
        seconds=float(step.seconds),
        tile=tile,
        guard_message="" if step.guard_event is None else step.guard_event.message,
        update_skipped=step.update_skipped,
        content=content,
        **(
            decision_fields(step.decision) | many_class_margin(step.source_probs, classes, step.decision, src)
        ),
    )


#: Class names a model with more than two classes may give its reference class (the one a site
#: threshold is set against), compared without case; with none of them, class 0 is the reference.
REFERENCE_NAMES = ("normal", "negative", "benign", "healthy", "background")


def reference_class(classes: Sequence[str]) -> int:
    """The class a site threshold of a model with more than two classes is set against: the one
    class named as :data:`REFERENCE_NAMES` says, else class 0 (two classes: class 0, always)."""
    if len(classes) > 2:
        named = [i for i, c in enumerate(classes) if c.strip().lower() in REFERENCE_NAMES]
        if len(named) == 1:
            return named[0]
    return 0


def many_class_margin(
    source_probs: Sequence[float] | np.ndarray,
    classes: Sequence[str],
    decision: DecisionRecord | None,
    prediction: int | None = None,
) -> dict[str, Any]:
    """With more than two classes and a decision record, the source margin against the reference
    class and the two classes it chooses between (``docs/review-certificates.md``, "More than two
    classes"): ``log p_a - log p_r`` with ``a`` the most likely other class, so a threshold ``t``
    calls ``a`` where the margin exceeds it and ``r`` elsewhere (``t`` = 0: the source model's
    call, as ``l_1 - l_0`` for two classes), and every class's log-probability where they are what
    a journal reads back (:func:`log_probs_problem`; ``prediction``: the source model's, its most
    likely class when None). Empty otherwise (two classes keep the method's)."""
    probs = [float(p) for p in source_probs]
    if decision is None or len(probs) <= 2 or len(probs) != len(classes):
        return {}
    ref = reference_class(classes)
    other = max((i for i in range(len(probs)) if i != ref), key=lambda i: probs[i])
    tiny = 1e-30  # a probability that underflowed to 0 keeps the margin finite
    margin = math.log(max(probs[other], tiny)) - math.log(max(probs[ref], tiny))
    out: dict[str, Any] = {"source_margin": margin, "source_classes": (ref, other)}
    logs = tuple(kept(math.log(max(p, tiny))) for p in probs)
    if prediction is None:
        prediction = max(range(len(probs)), key=lambda i: probs[i])
    if not log_probs_problem(
        logs, prediction, (ref, other), margin
    ):  # kept only as a journal reads them back
        out["source_log_probs"] = logs
    return out


def log_probs_problem(
    log_probs: Sequence[float], prediction: int, pair: tuple[int, int] | None, margin: float | None
) -> str:
    """What is wrong with a row's source log-probabilities (empty: nothing): more than two finite
    values, none above 0, their probabilities adding up to 1, their largest the source model's
    prediction, and the margin against the reference class the one they give (each up to the
    journal's rounding). A row whose values fail is never written (:func:`many_class_margin`), so
    one read back that fails was changed by hand."""
    values = np.asarray(log_probs, dtype=np.float64)
    tol = 1e-4  # well above the rounding to CANDIDATE_DECIMALS, far below any real difference
    if values.ndim != 1 or values.size <= 2 or not bool(np.isfinite(values).all()):
        return "its source log-probabilities are not more than two finite numbers"
    if float(values.max()) > tol or abs(float(np.exp(values).sum()) - 1.0) > 1e-3:
        return "its source log-probabilities are not the log of probabilities adding up to 1"
    if not 0 <= prediction < values.size or values[prediction] < float(values.max()) - tol:
        return "its source log-probabilities do not make the source model's prediction the most likely class"
    if pair is not None and (max(pair) >= values.size or margin is None):
        return "its source log-probabilities do not hold its source classes"
    if pair is not None and margin is not None and abs(values[pair[1]] - values[pair[0]] - margin) > tol:
        return "its source log-probabilities do not give its source margin"
    return ""


def _log_probs_read(kwargs: dict[str, Any]) -> tuple[float, ...]:
    """A journal row's ``source_log_probs``, checked (:func:`log_probs_problem`).

    Raises:
        ValueError: they were changed by hand (the message says how).
    """
    raw = kwargs["source_log_probs"]
    if not isinstance(raw, list) or not all(isinstance(v, (int, float)) for v in raw):
        raise ValueError("a row's source log-probabilities are a list of numbers")
    values = tuple(float(v) for v in raw)
    why = log_probs_problem(
        values, kwargs["source_prediction"], kwargs.get("source_classes"), kwargs.get("source_margin")
    )
    if why:
        raise ValueError(f"row {kwargs['key']!r}: {why}")
    return values


def decision_fields(decision: DecisionRecord | None) -> dict[str, Any]:
    """The row fields of a step's decision record (empty for methods without one)."""
    if decision is None:
        return {}
    return {
        "decision_path": decision.path,
        "site_group": decision.group if decision.group >= 0 else None,
        "decision_threshold": float(decision.threshold),
        "decision_reason": decision.reason,
        "source_margin": float(decision.margin) if math.isfinite(decision.margin) else None,
        # as the journal keeps them (to_json): a comparison frozen on the rows in memory freezes the
        # threshold a reopened project reads back (a block recorded on the unrounded one was set
        # aside on reopening, and with it the certificate)
        "candidates": tuple((name, kept(value)) for name, value in decision.candidates),
        "prompted_prediction": decision.prompted if decision.prompted >= 0 else None,
    }


def kept(value: float) -> float:
    """A candidate's threshold as the journal keeps it (6 decimals; nan stays nan)."""
    return round(float(value), CANDIDATE_DECIMALS) if math.isfinite(value) else math.nan


def escape_cell(text: str) -> str:
    """``text`` made safe to open in a spreadsheet: a leading ``'`` before a formula character."""
    return "'" + text if text.startswith(FORMULA_PREFIXES) else text


def unescape_cell(text: str) -> str:
    """Inverse of :func:`escape_cell` (a spreadsheet may also have dropped the ``'`` itself)."""
    return text[1:] if text.startswith("'") and text[1:].startswith(FORMULA_PREFIXES) else text


def _num(value: float, digits: int = 6) -> str:
    # rounded to the journal's 6 decimals first, so a CSV rewritten from the journal reads as the one
    # written live: 0.00234999 s was "0.0023" live but "0.0024" after the journal's 0.00235
    return "" if not math.isfinite(value) else f"{round(value, 6):.{digits}f}"


def csv_cells(row: PredictionRow) -> list[str]:
    """The row's cells in :data:`CSV_COLUMNS` order, text escaped."""
    tile = row.tile or ("", "", "", "", "", "")
    correct = "" if row.correct is None else str(int(row.correct))
    source_correct = "" if row.source_correct is None else str(int(row.source_correct))
    return [
        str(row.index),
        str(row.position),
        escape_cell(row.name),
        escape_cell(row.prediction_label),
        _num(row.confidence),
        _num(row.positive_prob),
        escape_cell(row.source_label),
        _num(row.source_confidence),
        str(int(row.changed)),
        _num(row.uncertainty),
        escape_cell(row.truth_label or ""),
        correct,
        source_correct,
        *(str(v) for v in tile),
        _num(row.seconds, 4),
        str(int(row.update_skipped)),
        escape_cell(row.guard_message),
        row.decision_path,
        "" if row.site_group is None else str(row.site_group),
        "" if row.decision_threshold is None else _num(row.decision_threshold),
        escape_cell(row.decision_reason),
        map_cell(row),
    ]


def map_cell(row: PredictionRow) -> str:
    """The CSV's ``map`` cell: ``pending``, ``unreadable`` (no map will come), ``done``, or empty
    for a method that makes no uncertainty map."""
    if row.map_status:
        return row.map_status
    return "done" if math.isfinite(row.uncertainty) else ""


def csv_text(header: Sequence[str], records: Iterable[Sequence[str]]) -> str:
    """A whole CSV (header first), quoted by the csv module (names may hold commas and quotes)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(records)
    return buf.getvalue()


def predictions_csv(rows: Iterable[PredictionRow]) -> str:
    """The predictions CSV of ``rows`` in arrival order."""
    return csv_text(CSV_COLUMNS, (csv_cells(r) for r in sorted(rows, key=lambda r: r.index)))


def read_csv_records(
    path: Path, columns: Sequence[str], legacy: Sequence[Sequence[str]] = (), limit: int | None = None
) -> list[dict[str, str]]:
    """The records of a CSV this project wrote, read back as a spreadsheet may have left it.

    A byte-order mark, Windows line ends and quoting that differs from ours are accepted; a
    header that is not ``columns`` (columns renamed, dropped, reordered) is refused unless it is
    one of the ``legacy`` headers an earlier version wrote (its records then get empty cells for
    the newer columns), and so is a record with more cells than the header. A last line cut short
    by a crash is dropped. The file is read as a stream, and with ``limit`` no further than its
    first ``limit`` records (60 MB of junk after them were read whole: 3.5 GB and two minutes).

    Raises:
        OutputError: the file was changed beyond reading back; the message says how.
    """
    lines: list[list[str]] = []
    try:
        with path.open("rb") as raw:  # a line cut short by a crash: the file does not end a line
            size = raw.seek(0, os.SEEK_END)
            raw.seek(max(size - 1, 0))
            complete = size == 0 or raw.read(1) in (b"\n", b"\r")
        with path.open(encoding="utf-8-sig", errors=CSV_ERRORS, newline="") as fh:
            torn_blank = False  # the last line read had no cell with text
            for cells in csv.reader(fh):
                torn_blank = not any(c.strip() for c in cells)
                if not torn_blank:
                    lines.append(cells)
                if limit is not None and len(lines) > limit + 1:  # the header, the records, one more
                    complete = True  # what was kept is followed by more: none of it was cut short
                    break
    except OSError as exc:
        raise OutputError(f"{path}: cannot be read ({exc.strerror or exc})") from exc
    except csv.Error as exc:
        raise OutputError(f"{path}: cannot be read back as a CSV ({exc})") from exc
    if not complete and lines and not torn_blank:
        lines.pop()  # torn by a crash mid-row: the journal has the row if it counted
    if not lines:
        return []
    header = [c.strip() for c in lines[0]]
    if header in [list(h) for h in legacy]:
        columns = header
    if header != list(columns):
        raise OutputError(
            f"{path}: its columns are not the ones this program writes (found {', '.join(header[:8])}"
            f"{', ...' if len(header) > 8 else ''}); it was edited or written by something else"
        )
    records = []
    for number, cells in enumerate(lines[1:] if limit is None else lines[1 : limit + 1], start=2):
        if len(cells) > len(columns):
            raise OutputError(f"{path}: line {number} has {len(cells)} cells, the header {len(columns)}")
        records.append(dict(zip(columns, [*cells, *[""] * (len(columns) - len(cells))], strict=True)))
    return records
