"""The headless job behind ``f2tta run``: a folder through the stream loop, into a journal and a CSV.

:func:`open_folder_job` checks everything that can be checked before the first image -- the
output is not someone else's file, the state directory is writable, not in use and has room, the
saved state fits the model, method and settings -- and returns a :class:`FolderJob` whose
:attr:`~FolderJob.run` is iterated by the caller. The crash-consistency argument is the
journal's (:mod:`engine.run.journal`); the CSV is a view of the journal (:mod:`engine.run.outputs`).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.errors import StateError
from engine.io.sources import FolderSource, open_folder
from engine.model.gate import GateWarning, NotApplicableError, check_source
from engine.run.journal import Journal, in_recorded_order
from engine.run.outputs import CsvOutputs, check_out_before_journal, run_files
from engine.run.session import Session
from engine.run.step import SettingsMismatchError
from engine.run.stream import RunSummary, Skipped, StreamRun, read_item
from engine.util.atomic import atomic_write_bytes

logger = logging.getLogger(__name__)

EXIT_OK = 0
EXIT_FAILED = 1  # the model step failed or the state could not be saved
EXIT_USAGE = 2  # nothing was started: bad arguments, unusable input, output or state
EXIT_TOO_MANY_SKIPPED = 3  # the run ended, but too little of the input could be processed
EXIT_NOT_APPLICABLE = 4  # nothing was started: the applicability gate fired (engine.model.gate)
EXIT_INTERRUPTED = 130


@dataclass
class FolderJob:
    """An opened ``f2tta run``: its session, source, journal, CSV outputs and the run to iterate."""

    session: Session
    source: FolderSource
    journal: Journal
    outputs: CsvOutputs
    run: StreamRun
    resumed_rows: int  # images already processed by earlier runs
    warnings: tuple[GateWarning, ...] = ()  # the applicability gate's, accepted

    def close(self) -> None:
        """Close the CSVs and release the journal (call after the run's final save)."""
        self.outputs.close()
        self.journal.close()


def journal_dir(path: Path) -> Path:
    """``path``, or its ``state/`` when ``path`` is an app profile folder (it holds ``profile.json``)."""
    return path / "state" if (path / "profile.json").is_file() and (path / "state").is_dir() else path


def settings_advice(exc: SettingsMismatchError, state_dir: Path) -> str:
    """What to do when ``--set`` differs from the saved state's settings."""
    return (
        f"{exc}. The saved settings are never overridden: to continue with them, run again without "
        f"--set (or with the saved values); to start afresh with the new ones, use a new --state "
        f"directory (or move {state_dir} away)"
    )


def open_folder_job(
    session: Session,
    input_dir: Path,
    state_dir: Path,
    out_csv: Path,
    *,
    order: str | None = None,
    order_seed: int | None = None,
    manifest: Path | None = None,
    save_every: int = 50,
    keep_saved_settings: bool = True,
    command: str = "f2tta run",
    accept_warnings: bool = False,
    reviews: bool = False,
) -> FolderJob:
    """Open everything a run needs, refusing before any file changes when something is wrong.

    Args:
        session: a fresh session (its state is replaced by the saved one when resuming).
        input_dir: the folder of images.
        state_dir: the journal directory (created when missing), or an app profile folder.
        out_csv: the predictions CSV; ``.skipped.csv`` beside it.
        order / order_seed / manifest: arrival order (see :func:`engine.io.sources.open_folder`);
            None continues in the order and seed the journal recorded for this folder (an app
            profile's interleaved order too), else file name and seed 0.
        save_every: save the state every this many images.
        keep_saved_settings: a saved state made with other method settings is continued with
            them (no ``--set`` given); False refuses it.
        command: what the lock file says this process is doing.
        accept_warnings: go on when the applicability gate fires (its warnings are kept in
            :attr:`FolderJob.warnings`); False refuses with :class:`NotApplicableError`.
        reviews: the run will write review certificates beside ``out_csv``; their files are
            checked and owned with the others (:func:`engine.run.outputs.run_files`).

    Raises:
        F2TTAError: the input, the output or the state cannot be used; the message says why.
    """
    state_dir = journal_dir(state_dir)
    files = run_files(out_csv, reviews)
    check_out_before_journal(files, state_dir)
    # Listed before the journal is opened, so a folder that cannot be used changes no file.
    source = open_folder(input_dir, session.card.classes, order or "name", manifest, seed=order_seed or 0)
    warnings = check_source(source, session.card)
    if warnings and not accept_warnings:
        raise NotApplicableError(warnings)
    journal = Journal(state_dir, command)
    try:
        try:
            journal.restore(session, keep_saved_settings=keep_saved_settings)
        except SettingsMismatchError as exc:
            raise StateError(settings_advice(exc, state_dir)) from exc
        if order is None:
            source = in_recorded_order(source, journal, session.card.classes, manifest, order_seed)
        journal.check_space(session)
        rows = journal.rows(source.source_id)
        out_csv.parent.mkdir(parents=True, exist_ok=True)
        outputs = CsvOutputs(out_csv, journal, source.source_id, rows, files[1:])
    except BaseException:
        journal.close()
        raise
    journal.outputs.append(outputs)

    def on_skip(skip: Skipped) -> None:
        outputs.add_skip(skip.item.name, skip.reason, skip.transient)

    run = StreamRun(
        session,
        source.items,
        read_item,
        source_id=source.source_id,
        journal=journal,
        save_every=save_every,
        on_row=outputs.add_row,
        on_skip=on_skip,
        arrival=(source.order, source.seed),
    )
    return FolderJob(session, source, journal, outputs, run, len(rows), warnings)


def exit_code(summary: RunSummary, resumed: int, max_skipped: float) -> tuple[int, str]:
    """The exit code of a finished run and, when it is not 0, why.

    Args:
        summary: the run's summary.
        resumed: images processed by earlier runs.
        max_skipped: largest share of the input that may be left unprocessed (skipped for good,
            or transient and deferred) for the run to count as a success.
    """
    if summary.failure is not None:
        return EXIT_FAILED, summary.failure.message
    if summary.save_error is not None:
        return EXIT_FAILED, summary.save_error
    if summary.stopped:
        return EXIT_INTERRUPTED, "interrupted; run the same command again to continue"
    total = summary.total
    processed = resumed + summary.processed
    unprocessed = total - processed
    if total and processed == 0:
        return EXIT_TOO_MANY_SKIPPED, f"none of the {total} images could be processed"
    if total and unprocessed / total > max_skipped:
        return (
            EXIT_TOO_MANY_SKIPPED,
            f"{unprocessed} of {total} images could not be processed ({unprocessed / total:.0%}, more "
            f"than the allowed {max_skipped:.0%}; see the .skipped.csv)",
        )
    return EXIT_OK, ""


def write_run_config(path: Path, session: Session, args: dict[str, Any]) -> None:
    """The configuration a run records next to its outputs."""
    data = {"session": session.config_dict(), "run": args}
    atomic_write_bytes(path, (json.dumps(data, indent=2) + "\n").encode())
