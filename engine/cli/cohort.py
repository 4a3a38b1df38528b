"""``f2tta run`` over a cohort: several inputs, a folder of slides or a manifest, one site each.

:func:`dispatch` is called first by ``f2tta run``: one ordinary input goes on as it always did;
a cohort (:mod:`engine.io.cohort`) is run here, each site as ``f2tta run`` runs one input
(:mod:`engine.run.cohort_site`), serially, in ``--workers N`` local processes or on ``--ray``
(:mod:`engine.run.cohort_pool`), into one cohort state folder with a sub-state per site and a
summary (:mod:`engine.run.cohort_state`). Everything that concerns the whole cohort is checked
before any site starts (nothing is written when it fails, exit 2); a site that cannot be used
(an unreadable slide) is reported in its row and the others run. The exit code is the largest of
the sites' (each what ``f2tta run`` on that site alone gives), 130 when the run was stopped.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any

from tqdm import tqdm

from engine._omp import usable_cpus
from engine.cli._common import add_ray_argument, job_options, session_from_args, session_options
from engine.errors import F2TTAError
from engine.io.cohort import CohortError, CohortInput, cohort_inputs
from engine.run.batch import MAX_BATCH
from engine.run.cohort_pool import Stopper, run_processes, run_ray, run_serial
from engine.run.cohort_site import SiteResult, SiteSettings, SiteTask
from engine.run.cohort_state import (
    ERROR_CONTROL,
    CohortState,
    check_summary,
    is_cohort_state,
    site_out,
    write_summary,
)
from engine.run.runner import EXIT_INTERRUPTED, EXIT_USAGE, journal_dir
from engine.util.text import shown

#: Seconds between two writes of the cohort's record and summary while sites finish.
SAVE_EVERY_SECONDS = 2.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--workers``, ``--ray`` and ``--threads``: how the sites of a cohort are run."""
    parser.add_argument(
        "--workers",
        type=int,
        default=0,
        metavar="N",
        help="a cohort: run N sites at once in local processes (default: one after another here)",
    )
    add_ray_argument(
        parser,
        "a cohort: one Ray task per site, on the cluster at ADDRESS, or on a local Ray instance "
        "(with --workers N CPUs) when none is given (docs/cohort.md)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        metavar="T",
        help="a cohort: torch threads per site (default: all here; cores/N with --workers N; 1 on Ray); "
        "rows are the same bit for bit at the same T",
    )


def _error(message: str) -> int:
    print(f"error: {shown(message)}", file=sys.stderr)
    return EXIT_USAGE


def dispatch(args: argparse.Namespace) -> int | None:
    """Run the cohort ``--input`` names and return the exit code; None when it names one
    ordinary input (``args.input`` is then that path, and ``f2tta run`` goes on as before)."""
    try:
        inputs = cohort_inputs(args.input)
    except CohortError as exc:
        return _error(f"{exc} (nothing was started)")
    if inputs is None:
        if args.workers or args.ray is not None or args.threads is not None:
            return _error(
                "--workers, --ray and --threads run the sites of a cohort (several inputs, a folder of "
                "slides or a manifest); one input is one site: leave them out"
            )
        if is_cohort_state(journal_dir(args.state)):
            return _error(
                f"{args.state} is a cohort's state: run the cohort with its inputs, or one of its sites alone "
                f"with --state {Path(args.state) / 'sites' / 'SITE'}"
            )
        args.input = args.input[0]
        return None
    return run_cohort(args, inputs)


def _check(args: argparse.Namespace) -> str | None:
    """Why the arguments cannot run a cohort, or None."""
    if args.reviews is not None:
        return "--reviews applies to one site: give each site's reviews file in a manifest's reviews column"
    if args.manifest is not None:
        return "--manifest orders one folder's images: a cohort's manifest is given as --input"
    if args.out.suffix.lower() in (".csv", ".tsv") or args.out.is_file():
        return f"--out of a cohort is a folder (each site's CSV goes in OUT/SITE/), not {args.out}"
    if args.workers < 0 or (args.threads is not None and args.threads < 1):
        return "--workers must be 0 or more and --threads 1 or more"
    if args.batch is not None and not 1 <= args.batch <= MAX_BATCH:
        return f"--batch must be between 1 and {MAX_BATCH}"
    if not 0.0 <= args.min_tissue <= 1.0 or not 0.0 <= args.max_skipped <= 1.0:
        return "--min-tissue and --max-skipped must be between 0 and 1"
    return None


def _settings(args: argparse.Namespace) -> SiteSettings:
    """The settings every site runs with; the model and method are loaded once here first, so a
    model or a ``--set`` that cannot be used is refused before any site starts.

    Raises:
        F2TTAError, ValueError, KeyError, OSError: the model, the method or a setting cannot be used.
    """
    _, config, batch = session_from_args(args)
    threads = args.threads
    if threads is None and args.ray is not None:
        threads = 1
    elif threads is None and args.workers > 0:
        threads = max(1, usable_cpus() // args.workers)
    record: dict[str, Any] = {
        k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items() if k != "input"
    }
    record["cohort_inputs"] = [str(p) for p in args.input]
    return SiteSettings(
        model=args.model,
        method_config=config,
        **session_options(args),
        job=job_options(args, batch),
        max_skipped=args.max_skipped,
        threads=threads,
        record=record,
    )


def run_cohort(args: argparse.Namespace, inputs: list[CohortInput]) -> int:
    """Run the sites of a cohort (see the module)."""
    why = _check(args)
    if why is not None:
        return _error(why)
    try:
        settings = _settings(args)
    except (F2TTAError, ValueError, KeyError, OSError) as exc:
        return _error(str(exc))
    try:
        state = CohortState(args.state, f"f2tta run (a cohort of {len(inputs)} inputs)")
    except F2TTAError as exc:
        return _error(f"{exc} (nothing was started)")
    with state:
        try:
            notes = state.take(inputs)
            check_summary(args.out, state)
            state.save(args.out)
        except (F2TTAError, OSError) as exc:
            return _error(f"{exc} (nothing was started)")
        for note in notes:
            print(f"warning: {shown(note)}", file=sys.stderr)
        return _run(args, state, settings, inputs)


def _run(
    args: argparse.Namespace, state: CohortState, settings: SiteSettings, inputs: list[CohortInput]
) -> int:
    tasks = [
        SiteTask(
            item.site,
            item.path,
            item.kind,
            state.site_state(item.site),
            site_out(args.out, item.site),
            item.label,
            item.reviews,
        )
        for item in inputs
    ]
    how = (
        f"on Ray ({args.ray or 'a local instance'})"
        if args.ray is not None
        else f"in {args.workers} worker processes"
        if args.workers > 0
        else "one after another"
    )
    threads = f", {settings.threads} torch thread(s) each" if settings.threads else ""
    print(
        f"cohort: {len(tasks)} site(s) of {len(state.sites)}, {how}{threads}; state: {shown(args.state)}; "
        f"outputs: {shown(args.out)}",
        file=sys.stderr,
    )
    bar = tqdm(total=len(tasks), disable=args.no_progress, unit="site", file=sys.stderr, dynamic_ncols=True)
    codes: list[int] = []
    last_save = [time.monotonic()]

    def save() -> None:
        try:
            state.save(args.out)
            write_summary(args.out, state)
        except OSError as exc:
            tqdm.write(f"error: the cohort's summary cannot be written: {shown(exc)}", file=sys.stderr)
            codes.append(1)

    def done(task: SiteTask, result: SiteResult) -> None:
        state.sites[task.site.casefold()].result = result
        codes.append(result.code)
        bar.update(1)
        for line in result.messages:
            tqdm.write(f"  {shown(task.site)}: {shown(line)}", file=sys.stderr)
        tqdm.write(_line(result), file=sys.stderr)
        if time.monotonic() - last_save[0] >= SAVE_EVERY_SECONDS:
            save()
            last_save[0] = time.monotonic()

    def note(line: str) -> None:
        tqdm.write(f"warning: {shown(line)}", file=sys.stderr)

    stopper = Stopper()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        if stopper.requested:
            raise KeyboardInterrupt
        stopper.request_stop()
        tqdm.write(
            "stopping: no new site; the running ones stop after their current images (Ctrl-C again to abort)",
            file=sys.stderr,
        )

    old = signal.signal(signal.SIGINT, on_signal), signal.signal(signal.SIGTERM, on_signal)
    try:
        if args.ray is not None:
            run_ray(settings, tasks, args.ray, args.workers, done, stopper)
        elif args.workers > 0:
            run_processes(settings, tasks, args.workers, done, stopper, note)
        else:
            run_serial(settings, tasks, done, stopper)
    except KeyboardInterrupt:
        print(
            "\naborted: each site keeps the state it saved last; the next run continues them", file=sys.stderr
        )
        stopper.requested = True
    finally:
        signal.signal(signal.SIGINT, old[0])
        signal.signal(signal.SIGTERM, old[1])
        bar.close()
        save()
    return _end(args, state, codes, stopper.requested, any(t.reviews for t in tasks))


def _line(result: SiteResult) -> str:
    """One line for a site that ended."""
    head = f"{shown(result.site)}: {result.status}"
    if result.images:
        head += (
            f", {result.processed} of {result.images} images processed ({result.processed_now} now), "
            f"{result.skipped} skipped, {result.to_retry} to retry"
        )
    if result.decided_by:
        counts = ", ".join(f"{k} {v}" for k, v in result.decisions.items())
        head += f"; {result.decided_by} decides ({counts}); {result.adapting}"
    return head + (f"; {shown(result.message)}" if result.message else "")


def _end(
    args: argparse.Namespace, state: CohortState, codes: list[int], stopped: bool, reviewed: bool
) -> int:
    results = [r.result for r in state.sites.values() if r.result is not None]
    counts: dict[str, int] = {}
    for result in results:
        counts[result.status] = counts.get(result.status, 0) + 1
    statuses = ", ".join(f"{n} {status}" for status, n in counts.items())
    print(
        f"cohort of {len(state.sites)} site(s): {statuses or 'none run'}; summary: "
        f"{shown(args.out / 'cohort-summary.csv')} (and .json); state: {shown(args.state)}",
        file=sys.stderr,
    )
    if reviewed:
        print(f"note: {ERROR_CONTROL}", file=sys.stderr)
    if stopped:
        print("stopped: run the same command again to continue every unfinished site", file=sys.stderr)
        return EXIT_INTERRUPTED
    return max(codes, default=0)
