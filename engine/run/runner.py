"""The headless job behind ``f2tta run``: a folder or a slide through the stream loop, into a journal and a CSV.

:func:`open_folder_job` checks everything that can be checked before the first image -- the
output is not someone else's file, the state directory is writable, not in use and has room, the
saved state fits the model, method and settings -- and returns a :class:`FolderJob` whose
:attr:`~FolderJob.run` is iterated by the caller. The crash-consistency argument is the
journal's (:mod:`engine.run.journal`); the CSV is a view of the journal (:mod:`engine.run.outputs`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.errors import StateError
from engine.io.arrival import class_sorted_warning
from engine.io.slides import Slide
from engine.io.sources import (
    DEFAULT_MIN_TISSUE,
    FolderSource,
    SlideSource,
    Source,
    open_folder,
    open_slide_source,
    reopen_slide,
)
from engine.model.gate import GateWarning, NotApplicableError, check_source
from engine.run.geojson import geojson_bytes, tiles_geojson, written_for
from engine.run.inputs import input_notes, processed_here
from engine.run.journal import Journal, in_recorded_order
from engine.run.outputs import (
    CsvOutputs,
    check_out_before_journal,
    foreign_message,
    geojson_path,
    has_content,
    other_input_message,
    run_files,
)
from engine.run.rows import OutputError
from engine.run.session import Session
from engine.run.state import has_state
from engine.run.step import SettingsMismatchError
from engine.run.stream import Reader, RunSummary, Skipped, StreamRun, read_item, tile_reader
from engine.util.atomic import atomic_write_bytes
from engine.util.bounded_json import JsonFileError, read_json_file
from engine.util.files import NotRegularOutputError, UnsafeFileError, check_output, open_regular

logger = logging.getLogger(__name__)

EXIT_OK = 0
EXIT_FAILED = 1  # the model step failed or the state could not be saved
EXIT_USAGE = 2  # nothing was started: bad arguments, unusable input, output or state
EXIT_TOO_MANY_SKIPPED = 3  # the run ended, but too little of the input could be processed
EXIT_NOT_APPLICABLE = 4  # nothing was started: the applicability gate fired (engine.model.gate)
EXIT_INTERRUPTED = 130


@dataclass
class FolderJob:
    """An opened ``f2tta run`` (a folder or a slide): its session, source, journal, CSV outputs and
    the run to iterate."""

    session: Session
    source: Source
    journal: Journal
    outputs: CsvOutputs
    run: StreamRun
    resumed_rows: int  # images of the source as listed now that earlier runs processed
    warnings: tuple[GateWarning, ...] = ()  # the applicability gate's, accepted
    slide: Slide | None = None  # a slide source's open slide (closed with the job)
    notes: tuple[str, ...] = ()  # what changed in the input since the journal recorded it

    def close(self) -> None:
        """Close the CSVs, release the journal and close the slide (call after the run's final save)."""
        self.outputs.close()
        self.journal.close()
        if self.slide is not None:
            self.slide.close()


def journal_dir(path: Path) -> Path:
    """``path``, or its ``state/`` when ``path`` is an app profile folder (it holds ``profile.json``)."""
    return path / "state" if (path / "profile.json").is_file() and (path / "state").is_dir() else path


def project_model(path: Path) -> Path | None:
    """The checkpoint an app project records (``profile.json``'s ``model_path``) when ``path`` is
    the project's folder or its ``state/``; None otherwise, or when it records none.

    Raises:
        StateError: the project's ``profile.json`` cannot be read.
    """
    for project in (path, path.parent):
        profile = project / "profile.json"
        if profile.is_file() and (project / "state").is_dir():
            try:
                data = read_json_file(
                    profile, what="the project's profile.json", max_bytes=2**20, max_depth=8
                )
            except (JsonFileError, OSError) as exc:
                raise StateError(str(exc)) from exc
            model = data.get("model_path") if isinstance(data, dict) else None
            return Path(model) if isinstance(model, str) and model else None
    return None


def settings_advice(exc: SettingsMismatchError, state_dir: Path) -> str:
    """What to do when ``--set`` differs from the saved state's settings."""
    return (
        f"{exc}. The saved settings are never overridden: to continue with them, run again without "
        f"--set (or with the saved values); to start afresh with the new ones, use a new --state "
        f"directory (or move {state_dir} away)"
    )


@dataclass(frozen=True)
class JobOptions:
    """How a job runs, whatever its input (``f2tta run``'s options); what an input's kind does not
    use is ignored (the arrival order by a slide, ``min_tissue`` by a folder).

    Attributes:
        order / order_seed / manifest: a folder's arrival order (see
            :func:`engine.io.sources.open_folder`); None continues in the order and seed the journal
            recorded for this folder (an app profile's interleaved order too), else file name and seed 0.
        min_tissue: a slide's tissue share a tile needs (:func:`engine.io.sources.open_slide_source`).
        save_every: save the state every this many images.
        keep_saved_settings: a saved state made with other method settings is continued with
            them (no ``--set`` given); False refuses it.
        command: what the lock file says this process is doing.
        accept_warnings: go on when the applicability gate fires (its warnings are kept in
            :attr:`FolderJob.warnings`); False refuses with :class:`NotApplicableError`.
        reviews: the run will write review certificates beside the CSV; their files are
            checked and owned with the others (:func:`engine.run.outputs.run_files`).
        batch: images per model step (:class:`StreamRun`'s ``batch``).
        maps: where the uncertainty maps are made (:class:`StreamRun`'s ``maps``).
        prompted: when I-DiPT's prompted decisions are made (:class:`StreamRun`'s ``prompted``).
    """

    order: str | None = None
    order_seed: int | None = None
    manifest: Path | None = None
    min_tissue: float = DEFAULT_MIN_TISSUE
    save_every: int = 50
    keep_saved_settings: bool = True
    command: str = "f2tta run"
    accept_warnings: bool = False
    reviews: bool = False
    batch: int = 1
    maps: str = "inline"
    prompted: str = "behind"


def open_job(
    session: Session,
    path: Path,
    state_dir: Path,
    out_csv: Path,
    options: JobOptions = JobOptions(),
    slide: bool | None = None,
) -> FolderJob:
    """:func:`open_slide_job` when ``slide`` (None: when ``path`` is not a folder), else
    :func:`open_folder_job`."""
    opener = open_slide_job if (not path.is_dir() if slide is None else slide) else open_folder_job
    return opener(session, path, state_dir, out_csv, options)


def open_folder_job(
    session: Session, input_dir: Path, state_dir: Path, out_csv: Path, options: JobOptions = JobOptions()
) -> FolderJob:
    """Open everything a run needs, refusing before any file changes when something is wrong.

    Args:
        session: a fresh session (its state is replaced by the saved one when resuming).
        input_dir: the folder of images.
        state_dir: the journal directory (created when missing), or an app profile folder.
        out_csv: the predictions CSV; ``.skipped.csv`` beside it.
        options: how it runs (:class:`JobOptions`).

    Raises:
        F2TTAError: the input, the output or the state cannot be used; the message says why.
    """
    plan = _plan(state_dir, out_csv, options)
    order, order_seed, manifest = options.order, options.order_seed, options.manifest
    accept_warnings = options.accept_warnings
    # Listed before the journal is opened, so a folder that cannot be used changes no file.
    source = open_folder(input_dir, session.card.classes, order or "name", manifest, seed=order_seed or 0)
    # A folder a saved state may have begun continues in the order it was begun in, which only the
    # journal says: its class order is checked in that order, once the journal is open (a project
    # that interleaved a folder of class sub-folders was refused as "sorted by class").
    continued = order is None and has_state(plan.state_dir)
    warnings = list(_gate(source, session, accept_warnings, later=("class-sorted",) if continued else ()))

    def recorded(journal: Journal) -> FolderSource:
        if order is not None:
            return source
        ordered = in_recorded_order(source, journal, session.card.classes, manifest, order_seed)
        if continued:
            warnings.extend(_class_order(ordered, session, accept_warnings, warnings))
        return ordered

    return _open_job(session, recorded, read_item, warnings, plan)


def open_slide_job(
    session: Session, slide_path: Path, state_dir: Path, out_csv: Path, options: JobOptions = JobOptions()
) -> FolderJob:
    """:func:`open_folder_job` for a whole-slide image: its tissue tiles, cut as the app cuts them.

    The tiling, tissue detection, tile names and the source's identity are the app's
    (:func:`engine.io.sources.open_slide_source` at the model's input size and resolution), so a
    project's state continues here and the other way round. ``OUT.geojson`` beside the CSV gets
    the tiles for QuPath (:func:`write_geojson`).

    Raises:
        F2TTAError: the slide, the output or the state cannot be used; the message says why.
    """
    plan = _plan(state_dir, out_csv, options)
    state_dir = plan.state_dir
    geojson = geojson_path(out_csv)
    try:
        check_output(geojson)
    except NotRegularOutputError as exc:
        raise OutputError(str(exc)) from exc
    if has_content(geojson) and not (state_dir / "journal.json").exists():
        raise OutputError(foreign_message(geojson, state_dir))
    card = session.card
    source = open_slide_source(slide_path, card.img_size, card.mpp, options.min_tissue)
    warnings = _gate(source, session, options.accept_warnings)

    def claim(journal: Journal) -> SlideSource:
        owner = journal.output_owner(geojson)
        if owner is not None and owner != source.source_id:
            raise OutputError(other_input_message(geojson, owner, source.source_id))
        if owner is None and has_content(geojson):
            raise OutputError(foreign_message(geojson, state_dir))
        if has_content(geojson) and not _ours(geojson, str(source.path.resolve())):
            raise OutputError(
                f"{geojson} is not the slide's GeoJSON the state {state_dir} wrote (the file was edited or "
                "replaced); nothing was changed. Move it away and run again to write it afresh"
            )
        journal.claim_output(geojson, source.source_id)
        return source

    slide = reopen_slide(source)  # refused when the file there is no longer the one planned
    try:
        job = _open_job(session, claim, tile_reader(slide, source.plan), warnings, plan)
    except BaseException:
        slide.close()
        raise
    job.slide = slide
    return job


def _ours(path: Path, slide: str) -> bool:
    """Whether ``path`` (a regular file) still begins as :func:`write_geojson` wrote it for ``slide``."""
    try:
        fh, _ = open_regular(path)
    except UnsafeFileError as exc:
        raise OutputError(f"{path}: {exc.reason}") from exc
    with fh:
        head = fh.read(4096)
    return written_for(head, slide)


def _gate(
    source: Source, session: Session, accept_warnings: bool, later: tuple[str, ...] = ()
) -> tuple[GateWarning, ...]:
    """The applicability gate's warnings; refused unless accepted. The checks named in ``later``
    are left out here (checked on the source in the order it runs in: :func:`_class_order`)."""
    warnings = tuple(w for w in check_source(source, session.card) if w.check not in later)
    if warnings and not accept_warnings:
        raise NotApplicableError(warnings)
    return warnings


def _class_order(
    source: FolderSource, session: Session, accept_warnings: bool, earlier: list[GateWarning]
) -> tuple[GateWarning, ...]:
    """The class-sorted check on ``source`` in the order it continues in; refused unless accepted
    (with the ``earlier`` warnings, accepted already)."""
    text = class_sorted_warning([it.ground_truth for it in source.items], session.card.classes)
    if not text:
        return ()
    warning = GateWarning("class-sorted", text)
    if not accept_warnings:
        raise NotApplicableError([*earlier, warning])
    return (warning,)


@dataclass(frozen=True)
class _Plan:
    """Where a job writes, and how it runs."""

    state_dir: Path
    out_csv: Path
    files: tuple[Path, ...]  # every file the run writes (:func:`engine.run.outputs.run_files`), the CSV first
    options: JobOptions


def _plan(state_dir: Path, out_csv: Path, options: JobOptions) -> _Plan:
    """The job's plan, its outputs checked before the journal is opened (refused: nothing changed)."""
    state_dir = journal_dir(state_dir)
    files = run_files(out_csv, options.reviews)
    check_out_before_journal(files, state_dir)
    return _Plan(state_dir, out_csv, files, options)


def _open_job(
    session: Session,
    in_order: Callable[[Journal], Source],
    reader: Reader,
    warnings: Sequence[GateWarning],
    plan: _Plan,
) -> FolderJob:
    """The journal restored into ``session``, the CSVs rewritten from it, and the run to iterate.

    ``in_order`` gives the source in the order to continue it in, once the journal is open (and
    may refuse it, before any output is written, or add to ``warnings``).
    """
    journal = Journal(plan.state_dir, plan.options.command)
    try:
        try:
            journal.restore(session, keep_saved_settings=plan.options.keep_saved_settings)
        except SettingsMismatchError as exc:
            raise StateError(settings_advice(exc, plan.state_dir)) from exc
        source = in_order(journal)
        journal.check_space(session)
        rows = journal.rows(source.source_id)
        plan.out_csv.parent.mkdir(parents=True, exist_ok=True)
        outputs = CsvOutputs(plan.out_csv, journal, source.source_id, rows, plan.files[1:])
    except BaseException:
        journal.close()
        raise
    journal.outputs.append(outputs)
    notes = input_notes(journal, source, rows)

    def on_skip(skip: Skipped) -> None:
        outputs.add_skip(skip.item.name, skip.reason, skip.transient)

    run = StreamRun(
        session,
        source.items,
        reader,
        source_id=source.source_id,
        journal=journal,
        save_every=plan.options.save_every,
        on_row=outputs.add_row,
        on_skip=on_skip,
        arrival=(source.order, source.seed) if isinstance(source, FolderSource) else None,
        batch=plan.options.batch,
        maps=plan.options.maps,
        prompted=plan.options.prompted,
        keep_images=False,  # nothing shows them: memory holds only the model's pixels read ahead
    )
    resumed = processed_here((row.key for row in rows), source)
    return FolderJob(session, source, journal, outputs, run, resumed, tuple(warnings), notes=notes)


def write_geojson(job: FolderJob, path: Path) -> Path:
    """The slide's rows in the journal as GeoJSON for QuPath (:mod:`engine.run.geojson`), atomically.

    The document is the one the app exports for the same rows.
    """
    if not isinstance(job.source, SlideSource):
        raise ValueError("only a slide's tiles have GeoJSON")
    card = job.session.card
    rows = job.journal.rows(job.source.source_id)
    size = (int(job.source.dimensions[0]), int(job.source.dimensions[1]))  # polygons end at the slide's edge
    slide = str(job.source.path.resolve())
    content = geojson_bytes(tiles_geojson(rows, card.classes, slide, card.positive_class, size=size))
    atomic_write_bytes(path, content)
    return path


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
