"""One site of a cohort, run as ``f2tta run`` runs one input: the same job, journal and outputs.

:func:`run_site` is what every way of running a cohort calls for a site -- in the driver's own
process (serial), in a local worker process or in a Ray task -- with plain, picklable arguments
(:class:`SiteSettings`, the same for every site, and :class:`SiteTask`), and returns a
:class:`SiteResult` of plain values. The site's state folder is an ordinary ``f2tta run`` state
(its own journal and lock), so a worker killed mid-site loses nothing: the site is run again
and continues where its last save left it (:mod:`engine.run.journal`), and it can be opened on
its own in the app (``f2tta-studio --state COHORT/sites/SITE``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from engine.errors import F2TTAError
from engine.model.gate import NotApplicableError
from engine.run.certify import certify, marks_from_file, write_certified
from engine.run.lock import LockedError
from engine.run.outputs import config_path, geojson_path
from engine.run.review import SiteReview, what_adapting_changed
from engine.run.runner import (
    EXIT_FAILED,
    EXIT_NOT_APPLICABLE,
    EXIT_USAGE,
    FolderJob,
    JobOptions,
    exit_code,
    open_job,
    write_geojson,
    write_run_config,
)
from engine.run.session import Session
from engine.run.stream import MapSkipped, Predicted, Skipped, StreamRun
from engine.util.bounded_json import require_int, require_object, require_str

#: Lines of a site's skips and guard events kept for the console (all are in its .skipped.csv).
MAX_MESSAGES = 20
#: How long a site whose state another process holds is waited for (a worker of a killed run
#: that has not died yet) before it is reported "in use".
LOCK_WAIT_SECONDS = 20.0


@dataclass(frozen=True)
class SiteSettings:
    """What every site of a cohort runs with (``f2tta run``'s options)."""

    model: Path
    method: str
    method_config: Any
    device: str = "auto"
    seed: int = 0
    precision: str = "auto"
    compiled: bool = False
    # How each site's job runs; its command and review files are the site's.
    job: JobOptions = field(default_factory=JobOptions)
    max_skipped: float = 0.5
    threads: int | None = None  # torch threads of the process that runs the site (None: as it is)
    record: dict[str, Any] = field(default_factory=dict)  # the run's arguments, for .config.json


@dataclass(frozen=True)
class SiteTask:
    """One site to run: its input, its state folder and its predictions CSV."""

    site: str
    path: Path
    kind: str  # "slide" or "folder"
    state: Path
    out: Path
    label: str = ""
    reviews: Path | None = None


@dataclass
class SiteResult:
    """What running a site gave, in plain values (the cohort summary's row)."""

    site: str
    status: str = "not run"
    code: int = 0
    images: int = 0  # items of the input as listed now (a slide's tissue tiles)
    processed: int = 0  # of those, processed by this run and the earlier ones
    processed_now: int = 0
    skipped: int = 0  # skipped for good (unreadable)
    to_retry: int = 0  # skipped by this run only (tried again by the next)
    decisions: dict[str, int] = field(default_factory=dict)  # per class, as the reports decide them
    decided_by: str = ""  # the rule that decides the site now
    adapting: str = ""  # how many decisions adapting changed, or why none
    review: str = ""  # the site's review: marks used, certificates
    message: str = ""  # why the site did not finish, when it did not
    seconds: float = 0.0
    messages: list[str] = field(default_factory=list)  # console lines (skips, guard events)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("messages")
        return data

    @classmethod
    def from_json(cls, data: object, where: str) -> SiteResult:
        """A result as :meth:`to_json` wrote it, every field's type and size checked.

        Raises:
            SchemaError: a field is missing or of the wrong type.
        """
        obj = require_object(data, where)
        counts = require_object(obj.get("decisions", {}), f"{where}.decisions")
        big = 1 << 40
        seconds = obj.get("seconds", 0.0)
        return cls(
            site=require_str(obj.get("site"), f"{where}.site", 200),
            status=require_str(obj.get("status"), f"{where}.status", 40),
            code=require_int(obj.get("code"), f"{where}.code", 0, 255),
            images=require_int(obj.get("images"), f"{where}.images", 0, big),
            processed=require_int(obj.get("processed"), f"{where}.processed", 0, big),
            processed_now=require_int(obj.get("processed_now"), f"{where}.processed_now", 0, big),
            skipped=require_int(obj.get("skipped"), f"{where}.skipped", 0, big),
            to_retry=require_int(obj.get("to_retry"), f"{where}.to_retry", 0, big),
            decisions={
                require_str(k, f"{where}.decisions", 200): require_int(v, f"{where}.decisions", 0, big)
                for k, v in list(counts.items())[:1000]
            },
            decided_by=require_str(obj.get("decided_by", ""), f"{where}.decided_by"),
            adapting=require_str(obj.get("adapting", ""), f"{where}.adapting"),
            review=require_str(obj.get("review", ""), f"{where}.review"),
            message=require_str(obj.get("message", ""), f"{where}.message", 8192),
            seconds=float(seconds) if isinstance(seconds, int | float) and seconds >= 0 else 0.0,
        )


def _open(settings: SiteSettings, task: SiteTask) -> FolderJob:
    session = Session(
        settings.model,
        method=settings.method,
        method_config=settings.method_config,
        device=settings.device,
        seed=settings.seed,
        precision=settings.precision,
        compiled=settings.compiled,
    )
    options = replace(
        settings.job,
        command=f"f2tta run (cohort site {task.site}) --input {task.path}",
        reviews=task.reviews is not None,
        # marks to apply: I-DiPT's prompted decisions made in the run, as their comparison may need them
        prompted="behind" if task.reviews is not None else settings.job.prompted,
    )
    return open_job(session, task.path, task.state, task.out, options, slide=task.kind == "slide")


def _open_waiting(settings: SiteSettings, task: SiteTask, wait: float) -> FolderJob:
    """:func:`_open`, tried again for ``wait`` seconds while another process holds the site's state."""
    deadline = time.monotonic() + wait
    while True:
        try:
            return _open(settings, task)
        except LockedError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.5)


def run_site(
    settings: SiteSettings,
    task: SiteTask,
    started: Callable[[StreamRun], None] | None = None,
    lock_wait: float = LOCK_WAIT_SECONDS,
) -> SiteResult:
    """Run one site to its end (or until its run is asked to stop) and say how it went.

    Args:
        settings: the cohort's settings.
        task: the site.
        started: called with the site's run once it is open (the caller may ask it to stop).
        lock_wait: seconds to wait for a site state that another process holds.

    Returns:
        The site's result; its ``code`` is what ``f2tta run`` on the site alone would exit with.
    """
    start = time.perf_counter()
    if settings.threads:
        torch.set_num_threads(settings.threads)
    result = SiteResult(task.site)
    try:
        job = _open_waiting(settings, task, lock_wait)
    except NotApplicableError as exc:
        result.status, result.code = "not applicable", EXIT_NOT_APPLICABLE
        result.message = (
            "; ".join(w.message for w in exc.warnings)
            + " (nothing was processed; --accept-warnings processes it anyway)"
        )
    except LockedError as exc:
        result.status, result.code, result.message = "in use", EXIT_USAGE, str(exc)
    except (F2TTAError, ValueError, KeyError, OSError) as exc:
        result.status, result.code, result.message = "refused", EXIT_USAGE, str(exc) or type(exc).__name__
    else:
        try:
            _run(job, settings, task, result, started)
        finally:
            job.close()
    result.seconds = round(time.perf_counter() - start, 3)
    return result


def _note(result: SiteResult, line: str) -> None:
    if len(result.messages) < MAX_MESSAGES:
        result.messages.append(line)
    elif len(result.messages) == MAX_MESSAGES:
        result.messages.append("... (more in the site's .skipped.csv)")


def _run(
    job: FolderJob,
    settings: SiteSettings,
    task: SiteTask,
    result: SiteResult,
    started: Callable[[StreamRun], None] | None,
) -> None:
    record = {**settings.record, "input": str(task.path), "state": str(task.state), "out": str(task.out)}
    record.update(site=task.site, batch=job.run.batch)
    record["applicability_warnings"] = [{"check": w.check, "message": w.message} for w in job.warnings]
    for note in (*(f"warning (accepted): {w.message}" for w in job.warnings), *job.notes):
        _note(result, note)
    write_run_config(config_path(task.out), job.session, record)
    run = job.run
    if started is not None:
        started(run)
    for outcome in run.outcomes():
        if isinstance(outcome, Predicted) and outcome.step.guard_event is not None:
            _note(result, f"{outcome.item.name}: {outcome.step.guard_event.message}")
        elif isinstance(outcome, MapSkipped):
            _note(result, f"no uncertainty map for {outcome.item.name}: {outcome.reason} (decision kept)")
        elif isinstance(outcome, Skipped):
            again = " (tried again next run)" if outcome.transient else ""
            _note(result, f"skipped {outcome.item.name}: {outcome.reason}{again}")
    summary = run.summary
    sid = job.source.source_id
    if (summary.mapped or summary.maps_skipped) and summary.saved:
        job.outputs.rewrite(job.journal.rows(sid))  # the maps reach the CSV
    present = {item.key for item in job.source.items}
    journal_record = job.journal.record.get(sid)
    result.images = summary.total
    result.processed = job.resumed_rows + summary.processed
    result.processed_now = summary.processed
    result.skipped = sum(key in present for key, _ in journal_record.skipped) if journal_record else 0
    result.to_retry = sum(s.transient for s in summary.skipped)
    code, why = exit_code(summary, job.resumed_rows, settings.max_skipped)
    if task.kind == "slide":
        try:
            write_geojson(job, geojson_path(task.out))
        except (OSError, F2TTAError) as exc:
            code, why = max(code, EXIT_FAILED), f"the slide's GeoJSON cannot be written: {exc}"
    if summary.failure is None:
        try:
            _review(job, task, result, summary.decided_all)
        except (OSError, F2TTAError) as exc:
            code = max(code, EXIT_FAILED)
            why = f"the run finished, but its review marks could not be applied: {exc}"
    result.code, result.message = code, why
    result.status = _status(code, summary.stopped)


def _status(code: int, stopped: bool) -> str:
    if code == 0:
        return "done"
    if stopped:
        return "interrupted"
    return {3: "too many skipped", EXIT_NOT_APPLICABLE: "not applicable"}.get(code, "failed")


def _review(job: FolderJob, task: SiteTask, result: SiteResult, complete: bool) -> None:
    """The site's decisions as its reports decide them, what decides them, and its reviews file
    applied (``OUT.certified.csv`` and ``OUT.certificates.json``) when the manifest gives one
    (``complete``: every image of the site is decided)."""
    classes = job.session.card.classes
    rows = job.journal.rows(job.source.source_id)
    review = SiteReview(None, job.source.source_id, len(classes))
    review.complete = complete
    try:
        review.open(rows)
        if task.reviews is not None:
            used, unknown_items, unknown_classes = marks_from_file(task.reviews, review, classes)
            certify(review)
            write_certified(task.out, review, classes)
            verdicts = [f"{c.candidate.words}: {c.verdict.words}" for c in review.comparisons()]
            result.review = (
                f"{used} mark(s) of {task.reviews.name} used"
                + (f", {unknown_items} naming no image of this site" if unknown_items else "")
                + (f", {unknown_classes} with a class the model does not have" if unknown_classes else "")
                + f"; {len(verdicts)} comparison(s): "
                + (", ".join(verdicts) if verdicts else review.why_empty())
            )
        else:
            result.review = (
                "no review marks given (reviewed per site: the manifest's reviews column, or the app)"
            )
        decisions = review.decisions()
        result.decisions = {name: int((decisions == k).sum()) for k, name in enumerate(classes)}
        in_use = review.in_use()
        result.decided_by = (
            in_use[0].rule.words
            if len(in_use) == 1
            else "; ".join(f"{p.part} ({p.images} images): {p.rule.words}" for p in in_use)
        )
        result.adapting = what_adapting_changed(rows, decisions)
    finally:
        review.close()
