"""A cohort as the app shows it: its sites with their progress and status, in plain words (Qt-free).

A cohort is what ``f2tta run`` writes when it runs several slides or folders, one site each
(``docs/cohort.md``): ``COHORT/cohort.json`` records the sites and each site's last result, and
``COHORT/sites/SITE/`` is that site's ordinary run state. :func:`read_cohort` reads the record
with the engine's own reader (:func:`app._engine.read_record`, which takes no lock, so a cohort
another process is running can be watched); nothing here writes into the cohort. What the app runs
to start or resume it is ``f2tta run`` itself (:func:`run_arguments`), over a manifest that names
every recorded site as recorded (:func:`write_manifest`), with the model and method its sites
were last run with (:func:`recorded_run`).
"""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from app._engine import (
    COHORT_FILE,
    JsonFileError,
    KeyedJsonLines,
    SiteRecord,
    StateError,
    UnsafeFileError,
    config_path,
    is_cohort_state,
    read_json_file,
    read_record,
    site_out,
)
from app.core.reviews import REVIEW_DIR

#: What each status of a site means, for a reader who does not know the engine's words.
STATUS_WORDS = {
    "done": "Done",
    "interrupted": "Stopped, can be resumed",
    "failed": "Failed",
    "refused": "Could not be opened",
    "not applicable": "Model may not apply (not run)",
    "too many skipped": "Too many unreadable images",
    "in use": "Open elsewhere, not run",
    "worker died": "Stopped unexpectedly",
    "not run": "Not run yet",
}
KIND_WORDS = {"slide": "Slide", "folder": "Folder of images"}
#: The run settings a resumed cohort takes again from its sites' last run (``f2tta run`` options).
_FLAGS = {"min_tissue": "--min-tissue", "max_skipped": "--max-skipped", "order": "--order", "seed": "--seed"}
#: Largest run record of a site read for the model and method (they are a few kB).
_MAX_CONFIG_BYTES = 1 << 22


@dataclass(frozen=True)
class CohortSite:
    """One site of a cohort, as listed in the app."""

    name: str
    kind: str  # "Slide" or "Folder of images"
    path: Path
    state: Path  # the site's run state (COHORT/sites/SITE)
    status: str  # in plain words (STATUS_WORDS)
    finished: bool  # its last run ended with every image processed
    ran: bool  # a run of the cohort has reported on it (its counts mean something)
    images: int = 0
    processed: int = 0
    skipped: int = 0
    decided_by: str = ""
    review: str = ""
    why: str = ""  # why it did not finish, when it did not
    adapting: str = ""


@dataclass(frozen=True)
class CohortSiteRequest:
    """A site of a cohort to open in the main window for review: its run state, its slide or
    folder, and the model it was run with (None: the one the app has)."""

    site: str
    state: Path
    source: Path
    model: Path | None = None
    method: str = ""  # the method the site was run with ("": the app's)
    method_config: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RecordedRun:
    """How the sites were last run: the model, method and options ``f2tta run`` was given."""

    model: Path | None = None
    method: str = ""
    options: tuple[str, ...] = ()  # further f2tta run arguments (--set, --min-tissue, ...)
    method_config: dict[str, Any] = field(default_factory=dict)  # the method's settings as run
    note: str = ""  # why the model is not known, when it is not


@dataclass
class Cohort:
    """What the app knows of a cohort folder; ``problem`` says why it cannot be used, when it cannot."""

    directory: Path
    out: Path | None = None
    sites: list[CohortSite] = field(default_factory=list)
    records: list[SiteRecord] = field(default_factory=list)
    problem: str = ""

    @property
    def name(self) -> str:
        return self.directory.name

    def counts(self) -> dict[str, int]:
        """How many sites are in each status (plain words), in the order first met."""
        counts: dict[str, int] = {}
        for site in self.sites:
            counts[site.status] = counts.get(site.status, 0) + 1
        return counts

    def summary(self) -> str:
        """One line: the sites and their images, by status."""
        if not self.sites:
            return "No sites recorded yet."
        images = sum(s.images for s in self.sites)
        processed = sum(s.processed for s in self.sites)
        statuses = ", ".join(f"{n} {status.lower()}" for status, n in self.counts().items())
        if not any(s.ran for s in self.sites):
            return f"{len(self.sites)} sites: {statuses}."
        where = "" if all(s.ran for s in self.sites) else " in the sites run so far"
        return f"{len(self.sites)} sites: {statuses}. {processed:,} of {images:,} images processed{where}."


def record_stamp(directory: Path) -> tuple[int, int] | None:
    """When and how large the cohort's record was last written (None: there is none), to read it
    again only when it changed."""
    try:
        st = os.stat(directory / COHORT_FILE)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def read_cohort(directory: Path) -> Cohort:
    """The cohort in ``directory`` with its sites, or with the reason it cannot be shown (a folder
    that is no cohort, a record another program wrote or that was damaged); nothing is written."""
    directory = Path(directory)
    cohort = Cohort(directory)
    if not directory.is_dir():
        cohort.problem = f"The folder {directory} does not exist."
        return cohort
    if not is_cohort_state(directory):
        cohort.problem = (
            f"{directory} is not a cohort: it holds no record of one ({COHORT_FILE}). A cohort is the "
            "state folder given to `f2tta run` with several slides or folders."
        )
        return cohort
    try:
        records, out = read_record(directory)
    except StateError as exc:
        cohort.problem = (
            f"The cohort's record cannot be read, and nothing was changed: {str(exc).removesuffix('; it was not changed')}. "
            "It cannot be run until its record is readable again (restore the file)."
        )
        return cohort
    cohort.out = Path(out) if out else None
    cohort.records = list(records.values())
    cohort.sites = [_site(directory, record) for record in cohort.records]
    return cohort


def _site(directory: Path, record: SiteRecord) -> CohortSite:
    result = record.result
    status = result.status if result is not None else "not run"
    return CohortSite(
        name=record.site,
        kind=KIND_WORDS.get(record.kind, record.kind),
        path=Path(record.path),
        state=directory / "sites" / record.site,
        status=STATUS_WORDS.get(status, status.capitalize()),
        finished=status == "done",
        ran=result is not None and status != "not run",
        images=result.images if result else 0,
        processed=result.processed if result else 0,
        skipped=result.skipped if result else 0,
        decided_by=_capital(result.decided_by) if result else "",
        review=review_words(directory / "sites" / record.site, result.review if result else ""),
        why=result.message if result else "",
        adapting=_capital(result.adapting) if result else "",
    )


def review_words(state: Path, recorded: str) -> str:
    """The site's review: the answers given in the app (the marks kept in its state's review
    folder, read with the engine's JSON-lines reader: the last record of an image wins, a null
    label clears it), or a reviews file the run applied (``recorded``, the run's words), else that
    it is not reviewed yet ("–": not run yet)."""
    answers = 0
    try:
        for path in sorted((state / REVIEW_DIR).glob("*.marks.jsonl")):
            records, _ = KeyedJsonLines(path, key="k").read()
            answers += sum(1 for r in records.values() if r.get("label") is not None)
    except (OSError, UnsafeFileError, ValueError):
        pass  # unreadable here: the site's own window says why when it is opened
    if answers:
        return f"Reviewed in the app: {answers} answer{'s' if answers != 1 else ''}"
    if not recorded:  # not run yet
        return "–"
    if recorded.startswith("no review marks given"):
        return "Not reviewed yet"
    return _capital(recorded)


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def recorded_run(cohort: Cohort) -> RecordedRun:
    """The model, method and options the cohort's sites were last run with, from the run record
    ``f2tta run`` writes beside each site's predictions (``predictions.config.json``). A model
    recorded as a relative path is looked for from the app's working folder, then from the
    cohort's folder and the folders above it."""
    if cohort.out is None:
        return RecordedRun(note="The cohort has not been run yet: choose the model to run it with.")
    for record in cohort.records:
        try:
            data = read_json_file(
                config_path(site_out(cohort.out, record.site)),
                what="a site's run record",
                max_bytes=_MAX_CONFIG_BYTES,
                max_depth=16,
            )
        except (FileNotFoundError, JsonFileError, OSError):
            continue
        run = data.get("run") if isinstance(data, dict) else None
        session = data.get("session") if isinstance(data, dict) else None
        config = session.get("method_config") if isinstance(session, dict) else None
        if isinstance(run, dict) and isinstance(run.get("model"), str):
            found = _from_record(cohort, run)
            return replace(found, method_config=config) if isinstance(config, dict) else found
    return RecordedRun(note="No site of the cohort records its model: choose the model to run it with.")


def _from_record(cohort: Cohort, run: dict[str, Any]) -> RecordedRun:
    given = Path(run["model"]).expanduser()
    places = [given] if given.is_absolute() else [Path.cwd() / given]
    if not given.is_absolute():
        places += [folder / given for folder in (cohort.directory, *cohort.directory.parents)]
    model = next((p.resolve() for p in places if p.is_file()), None)
    options: list[str] = []
    for key, flag in _FLAGS.items():
        value = run.get(key)
        if isinstance(value, int | float | str) and not isinstance(value, bool):
            options += [flag, str(value)]
    for item in run.get("set") or []:
        if isinstance(item, str):
            options += ["--set", item]
    if run.get("accept_warnings") is True:
        options.append("--accept-warnings")
    method = run.get("method")
    note = "" if model else f"The cohort's model {given} was not found: choose it."
    return RecordedRun(model, method if isinstance(method, str) else "", tuple(options), note=note)


def write_manifest(cohort: Cohort, path: Path) -> tuple[list[str], list[str]]:
    """A manifest naming the sites to run as the cohort recorded them (path, name, label, reviews
    file), so that a run over it continues each site in its own state: the unfinished sites, or
    every site when all are done (a run then takes only images added since). Sites whose slide or
    folder is gone are left out (they keep their rows). Returns the names written and those left out.

    Finished sites are not named while others are unfinished: a run opens every site it is given,
    and a finished site open in the main window would be reported in use instead of done."""
    unfinished = [r for r in cohort.records if r.result is None or r.result.status != "done"]
    written: list[str] = []
    missing: list[str] = []
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["path", "site", "label", "reviews"])
        for record in unfinished or cohort.records:
            if not os.path.exists(record.path):
                missing.append(record.site)
                continue
            writer.writerow([record.path, record.site, record.label, record.reviews])
            written.append(record.site)
    return written, missing


def run_arguments(
    cohort: Cohort, manifest: Path, run: RecordedRun, model: Path, workers: int = 0
) -> list[str]:
    """The ``f2tta run`` arguments (after the program) that start or resume ``cohort``.

    Raises:
        ValueError: the cohort has no output folder recorded (it was never started by ``f2tta run``).
    """
    if cohort.out is None:
        raise ValueError("the cohort records no output folder")
    argv = ["run", "--model", str(model), "--input", str(manifest), "--state", str(cohort.directory)]
    argv += ["--out", str(cohort.out), "--no-progress", *run.options]
    if run.method:
        argv += ["--method", run.method]
    if workers > 1:
        argv += ["--workers", str(workers)]
    return argv


def shown_output(line: str) -> str | None:
    """A line ``f2tta run`` printed, as the cohort window shows it: what went wrong or what the run
    is doing (a refusal, a warning, stopping), without the label; None for the lines of each site,
    which the list shows in its own words."""
    text = line.strip()
    for label in ("error: ", "warning: "):
        if text.startswith(label):
            return text[len(label) :]
    if text.startswith(("stopping", "aborted", "stopped")) and not line.startswith(" "):
        return text[:1].upper() + text[1:]
    return None


def finished_line(code: int, crashed: bool) -> str:
    """What a run of the cohort that ended with ``code`` means (``f2tta run``'s exit codes)."""
    if crashed:
        return "The run stopped unexpectedly. Each site keeps what it saved; Resume continues them."
    return {
        0: "The run finished: every site is done.",
        2: "The run ended; some sites could not be run (see each site's status, and the messages above).",
        3: "The run finished; some images could not be read (see each site's status).",
        4: "The run finished; the model may not apply to some sites (not run).",
        130: "Stopped. Each site keeps what it saved; Resume continues the unfinished ones.",
    }.get(code, f"The run ended with problems (code {code}); see the messages below.")
