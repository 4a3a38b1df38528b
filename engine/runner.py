"""The headless job: stream a folder through a session, write predictions, save and resume state.

Crash consistency: a prediction row is flushed to the CSV before the state that reflects it is
saved, and the state records the ordered list of processed images. On resume the CSV is cut back
to the rows the state reflects (rows written after the last save are recomputed, never
duplicated), so every image ends up in the CSV exactly once and the state equals the state after
the last finished image whose row survived.
"""

from __future__ import annotations

import csv
import io
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine._atomic import atomic_write_bytes
from engine.errors import ImageReadError, StateError
from engine.images import read_image
from engine.session import Session, StepResult
from engine.state import has_state

logger = logging.getLogger(__name__)

PRED_COLUMNS = ("index", "path", "prediction", "confidence", "source_prediction", "mean_uncertainty")
SKIP_COLUMNS = ("path", "reason")
# File names that are not valid UTF-8 (possible on Linux) round-trip through the CSVs byte for byte.
_ERRORS = "surrogateescape"


def skipped_path(out_csv: Path) -> Path:
    """``preds.csv`` -> ``preds.skipped.csv``."""
    return out_csv.with_name(out_csv.stem + ".skipped" + out_csv.suffix)


@dataclass
class RunSummary:
    processed: int = 0  # images adapted in this invocation
    resumed_from: int = 0  # images already reflected in the state when it started
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, reason) found in this invocation
    interrupted: bool = False
    total: int = 0  # images in the input


def _read_rows(path: Path) -> list[dict[str, str]]:
    if not path.exists():
        return []
    with path.open(newline="", encoding="utf-8", errors=_ERRORS) as fh:
        return list(csv.DictReader(fh))


def _rewrite_csv(path: Path, columns: Sequence[str], rows: Sequence[dict[str, str]]) -> None:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({c: row.get(c, "") for c in columns})
    atomic_write_bytes(path, buf.getvalue().encode("utf-8", errors=_ERRORS))


def result_row(result: StepResult, rel: str, classes: Sequence[str]) -> dict[str, str]:
    return {
        "index": str(result.index),
        "path": rel,
        "prediction": classes[result.prediction],
        "confidence": f"{result.confidence:.6f}",
        "source_prediction": classes[result.source_prediction],
        "mean_uncertainty": f"{result.mean_uncertainty:.6g}",
    }


class _AppendCSV:
    """A CSV opened for appending whose rows reach the disk on :meth:`sync`."""

    def __init__(self, path: Path, columns: Sequence[str]) -> None:
        new = not path.exists() or path.stat().st_size == 0
        self.fh = path.open("a", newline="", encoding="utf-8", errors=_ERRORS)
        self.writer = csv.DictWriter(self.fh, fieldnames=list(columns), lineterminator="\n")
        if new:
            self.writer.writeheader()

    def write(self, row: dict[str, str]) -> None:
        self.writer.writerow(row)
        self.fh.flush()

    def sync(self) -> None:
        self.fh.flush()
        os.fsync(self.fh.fileno())

    def close(self) -> None:
        self.sync()
        self.fh.close()


def run_stream(
    session: Session,
    root: Path,
    images: Sequence[Path],
    out_csv: Path,
    state_dir: Path,
    save_every: int = 50,
    should_stop: Callable[[], bool] = lambda: False,
    on_result: Callable[[StepResult, str], None] | None = None,
    on_skip: Callable[[str, str], None] | None = None,
    on_start: Callable[[int], None] | None = None,
) -> RunSummary:
    """Adapt to ``images`` in order, resuming from ``state_dir`` when it holds a state.

    Args:
        session: a fresh session (its state is replaced by the saved one when resuming).
        root: the input folder; CSV paths are relative to it.
        images: arrival order.
        out_csv: predictions, one row per image, appended as they are made.
        state_dir: where the adaptation state is saved (every ``save_every`` images and at the end).
        should_stop: polled after every image; True saves and returns early.
        on_result / on_skip / on_start: callbacks for progress displays (``on_start`` gets the
            number of images already done, skipped ones included).

    Raises:
        StateError: the saved state belongs to another model or method, or is corrupt.
    """
    summary = RunSummary(total=len(images))
    processed: list[str] = []
    skipped_known: list[list[str]] = []
    rows = _read_rows(out_csv)
    if has_state(state_dir):
        extra = session.load(state_dir)
        processed = [str(p) for p in extra.get("processed", [])]
        skipped_known = [list(map(str, s)) for s in extra.get("skipped", [])]
        kept = rows[: len(processed)]
        if [r.get("path") for r in kept] != processed:
            raise StateError(
                f"{out_csv} does not match the state in {state_dir}: the CSV's first {len(processed)} rows "
                "are not the images the state has seen; use a new --out or --state"
            )
        if len(rows) > len(kept):
            logger.info(
                "dropping %d prediction rows written after the last saved state", len(rows) - len(kept)
            )
        _rewrite_csv(out_csv, PRED_COLUMNS, kept)
        summary.resumed_from = len(processed)
    else:
        if rows:
            logger.warning("%s has rows but %s holds no state: starting over", out_csv, state_dir)
        _rewrite_csv(out_csv, PRED_COLUMNS, [])
    skip_csv = skipped_path(out_csv)
    _rewrite_csv(skip_csv, SKIP_COLUMNS, [{"path": p, "reason": r} for p, r in skipped_known])

    done = set(processed) | {p for p, _ in skipped_known}
    if on_start is not None:
        on_start(len(done))
    classes = session.card.classes
    preds = _AppendCSV(out_csv, PRED_COLUMNS)
    skips = _AppendCSV(skip_csv, SKIP_COLUMNS)

    def save() -> None:
        preds.sync()
        skips.sync()
        session.save(state_dir, extra={"processed": processed, "skipped": skipped_known, "root": str(root)})

    since_save = 0
    try:
        for path in images:
            rel = path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)
            if rel in done:
                continue
            try:
                image = read_image(path)
                result = session.step(image)
            except (ImageReadError, ValueError, RuntimeError, MemoryError) as exc:
                reason = str(exc) if isinstance(exc, ImageReadError) else f"{type(exc).__name__}: {exc}"
                logger.debug("skipped %s: %s", rel, reason)
                skipped_known.append([rel, reason])
                summary.skipped.append((rel, reason))
                skips.write({"path": rel, "reason": reason})
                if on_skip is not None:
                    on_skip(rel, reason)
                continue
            preds.write(result_row(result, rel, classes))
            processed.append(rel)
            summary.processed += 1
            since_save += 1
            if on_result is not None:
                on_result(result, rel)
            if since_save >= save_every:
                save()
                since_save = 0
            if should_stop():
                summary.interrupted = True
                break
        save()
    finally:
        preds.close()
        skips.close()
    return summary


def run_config(session: Session, args: dict[str, Any]) -> dict[str, Any]:
    """The configuration a run records next to its outputs."""
    return {"session": session.config_dict(), "run": args}
