"""``f2tta run``: the headless version of the app's job (see :mod:`engine.run.runner` for the exit codes)."""

from __future__ import annotations

import argparse
import dataclasses
import signal
import sys
from collections.abc import Sized
from pathlib import Path
from types import FrameType
from typing import Any

from tqdm import tqdm

from engine.cli import cohort
from engine.cli._common import (
    add_device_arguments,
    add_method_arguments,
    job_options,
    session_from_args,
)
from engine.errors import F2TTAError
from engine.io.arrival import ORDERS
from engine.io.sources import DEFAULT_MIN_TISSUE, SlideSource, arrived_since
from engine.model.gate import NotApplicableError
from engine.run.accel import PRECISIONS
from engine.run.batch import MAX_BATCH
from engine.run.certify import (
    certify,
    check_reviews_file,
    marks_from_file,
    project_review_folder,
    write_certified,
)
from engine.run.outputs import config_path, geojson_path, skipped_path
from engine.run.review import SiteReview
from engine.run.review_outlook import FROM_THE_TERMINAL, outlook
from engine.run.runner import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_NOT_APPLICABLE,
    EXIT_USAGE,
    FolderJob,
    exit_code,
    open_job,
    project_model,
    write_geojson,
    write_run_config,
)
from engine.run.stream import MAPS, PROMPTED, Mapped, MapSkipped, Predicted, Prompted, Skipped
from engine.util.text import shown

#: Suffixes of images that are never slides (a TIFF may be either: OpenSlide decides).
PLAIN_IMAGES = frozenset({".png", ".jpg", ".jpeg", ".bmp", ".gif"})


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model",
        type=Path,
        default=None,
        help="source checkpoint (.safetensors) with its .json card (default, with --state PROJECT: the "
        "model the project records)",
    )
    parser.add_argument(
        "--input",
        required=True,
        type=Path,
        nargs="+",
        help="folder of images (searched recursively), or a whole-slide image (any format OpenSlide "
        "reads: SVS, NDPI, MRXS, pyramid TIFF, ...) whose tissue tiles are processed as the app cuts them; "
        "several of them, a folder of slides or a manifest CSV are a cohort, one site each (docs/cohort.md)",
    )
    parser.add_argument(
        "--state",
        required=True,
        type=Path,
        help="journal directory: adaptation state and rows (resumed if present; an app profile's "
        "state folder works too)",
    )
    parser.add_argument(
        "--out", required=True, type=Path, help="predictions CSV (appended as images are processed)"
    )
    parser.add_argument(
        "--order",
        choices=ORDERS,
        default=None,
        help="arrival order (manifest: manifest.csv/.txt in the folder or --manifest; interleaved: "
        "a seeded shuffle, --order-seed). Default: the order the state last ran this folder in (an "
        "app profile's too), else name",
    )
    parser.add_argument(
        "--order-seed",
        type=int,
        default=None,
        metavar="N",
        help="seed of the interleaved order (default: the recorded one, else 0)",
    )
    parser.add_argument("--manifest", type=Path, help="file listing the images in arrival order")
    parser.add_argument(
        "--min-tissue",
        type=float,
        default=DEFAULT_MIN_TISSUE,
        metavar="SHARE",
        help="a slide: smallest share of tissue for a tile to be processed (default %(default)s, as the app)",
    )
    parser.add_argument(
        "--batch",
        type=int,
        default=None,
        metavar="B",
        help="images per model step (default: chosen from the device, within the method's limit; 1 is "
        "the method's own per-image step; docs/method.md, 'Batches')",
    )
    parser.add_argument(
        "--maps",
        choices=MAPS,
        default="behind",
        help="behind (default): for methods that decide from the source pass (the default, source), "
        "every decision first and the uncertainty maps after them, in order; inline: each image's "
        "decision waits for its map (the CSV's map column says which rows have theirs)",
    )
    parser.add_argument(
        "--prompted",
        choices=PROMPTED,
        default=None,
        help="with the maps behind, when I-DiPT+'s own candidate (the adapted network's decisions, its "
        "prompt tuning: the dearest step) is made: on-demand (default without review marks): only once a "
        "review reaches it, by the app or a later run with marks; behind (default with --reviews or a "
        "project's marks): after the maps, in this run (docs/method.md, 'The prompted decision on demand')",
    )
    parser.add_argument(
        "--precision",
        choices=PRECISIONS,
        default="auto",
        help="auto: bf16 autocast on CUDA for the methods that allow it (source), else float32",
    )
    parser.add_argument(
        "--compile",
        action="store_true",
        help="run the model's forward compiled (methods that allow it: source)",
    )
    parser.add_argument(
        "--save-every", type=int, default=50, metavar="N", help="save the state every N images"
    )
    parser.add_argument(
        "--max-skipped",
        type=float,
        default=0.5,
        metavar="SHARE",
        help="exit with code 3 when more than this share of the images could not be processed "
        "(default 0.5; none processed always gives 3)",
    )
    parser.add_argument(
        "--reviews",
        type=Path,
        default=None,
        metavar="FILE",
        help="review marks (the app's reviews.csv: item, review, reviewed_at, site) applied after the run "
        "instead of the project's own: the folder's certificates decide which rule decides its images, "
        "written to OUT.certified.csv with OUT.certificates.json (docs/review-certificates.md); with "
        "--state PROJECT the project's own marks are used without it",
    )
    parser.add_argument(
        "--accept-warnings",
        action="store_true",
        help="process the folder even when the model may not apply (images of another kind than the "
        "model's, a class-sorted order); without it such a folder stops the run before any image, exit code 4",
    )
    parser.add_argument("--seed", type=int, default=0)
    add_device_arguments(parser)
    add_method_arguments(parser)
    cohort.add_arguments(parser)


def _open(args: argparse.Namespace) -> FolderJob:
    session, _, batch = session_from_args(args)
    if args.reviews is not None:  # a file that cannot be used is refused before any work
        check_reviews_file(args.reviews)
    reviews = args.reviews is not None or project_review_folder(args.state) is not None
    options = dataclasses.replace(
        job_options(args, batch),
        manifest=args.manifest,
        command="f2tta run --input " + str(args.input),
        reviews=reviews,
        # marks to apply here: I-DiPT's prompted decisions made in the run (a comparison may need them)
        prompted=args.prompted or ("behind" if reviews else "on-demand"),
    )
    return open_job(session, args.input, args.state, args.out, options)


def main(args: argparse.Namespace) -> int:
    if args.model is None:  # an app project records its model: --state PROJECT needs no --model
        try:
            args.model = project_model(args.state)
        except F2TTAError as exc:
            print(f"error: {shown(exc)}", file=sys.stderr)
            return EXIT_USAGE
        if args.model is None:
            print(
                "error: --model is needed (only an app project's folder records its model)", file=sys.stderr
            )
            return EXIT_USAGE
    code = cohort.dispatch(args)  # several inputs, a folder of slides, a manifest: engine/cli/cohort.py
    if code is not None:
        return code
    if not args.input.exists():
        print(f"error: input not found (a folder of images or a slide): {shown(args.input)}", file=sys.stderr)
        return EXIT_USAGE
    if not args.input.is_dir() and args.input.suffix.lower() in PLAIN_IMAGES:
        print(
            f"error: {shown(args.input)} is an image, not a slide: pass the folder that holds the images",
            file=sys.stderr,
        )
        return EXIT_USAGE
    if args.batch is not None and not 1 <= args.batch <= MAX_BATCH:
        print(f"error: --batch must be between 1 and {MAX_BATCH}", file=sys.stderr)
        return EXIT_USAGE
    if not 0.0 <= args.min_tissue <= 1.0:
        print("error: --min-tissue must be between 0 and 1", file=sys.stderr)
        return EXIT_USAGE
    if args.reviews is not None and not args.reviews.is_file():
        print(f"error: reviews file not found: {shown(args.reviews)}", file=sys.stderr)
        return EXIT_USAGE
    if not 0.0 <= args.max_skipped <= 1.0:
        print("error: --max-skipped must be between 0 and 1", file=sys.stderr)
        return EXIT_USAGE
    try:
        job = _open(args)
    except NotApplicableError as exc:
        for warning in exc.warnings:
            print(f"warning: {shown(warning.message)}", file=sys.stderr)
        print(
            "error: the model may not apply to these images; nothing was processed. Run again with "
            "--accept-warnings to process them anyway (the warnings are then printed and kept in the run's config)",
            file=sys.stderr,
        )
        return EXIT_NOT_APPLICABLE
    except (F2TTAError, ValueError, KeyError, OSError) as exc:
        print(f"error: {shown(exc)}", file=sys.stderr)
        return EXIT_USAGE
    try:
        return _run(job, args)
    except KeyboardInterrupt:  # a second Ctrl-C: stop at once; the last saved state is intact
        print(
            "\naborted: the state saved last is intact; rows made after it are dropped and their images "
            "processed again by the next run",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    finally:
        job.close()


def _run(job: FolderJob, args: argparse.Namespace) -> int:
    record: dict[str, Any] = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}
    record["applicability_warnings"] = [{"check": w.check, "message": w.message} for w in job.warnings]
    record["batch"] = job.run.batch
    for warning in job.warnings:
        print(f"warning (accepted): {shown(warning.message)}", file=sys.stderr)
    for note in job.notes:
        print(f"warning: {shown(note)}", file=sys.stderr)
    write_run_config(config_path(args.out), job.session, record)
    run = job.run
    bar = tqdm(
        total=run.summary.total, disable=args.no_progress, unit="img", file=sys.stderr, dynamic_ncols=True
    )
    bar.update(run.summary.done_before)

    def on_signal(signum: int, frame: FrameType | None) -> None:
        if run.stop_requested:
            raise KeyboardInterrupt
        run.request_stop()
        tqdm.write("stopping after the current images (Ctrl-C again to abort)...", file=sys.stderr)

    # the steps behind the decisions, each with a bar of its own: its line, the queue it works through, its unit
    behind: dict[type, tuple[str, Sized, str]] = {
        Mapped: ("now the uncertainty maps of the decided images, in order", run.map_queue, "map"),
        Prompted: (
            "now the adapted network's decisions (I-DiPT's prompt tuning), in order",
            run.prompt_queue,
            "image",
        ),
    }
    stage: type = Predicted
    old_int = signal.signal(signal.SIGINT, on_signal)
    old_term = signal.signal(signal.SIGTERM, on_signal)
    try:
        for outcome in run.outcomes():
            if isinstance(outcome, Predicted):
                bar.update(1)
                if outcome.step.guard_event is not None:
                    tqdm.write(
                        f"{shown(outcome.item.name)}: {shown(outcome.step.guard_event.message)}",
                        file=sys.stderr,
                    )
            now = Mapped if isinstance(outcome, MapSkipped) else type(outcome)
            if now in behind and now is not stage:  # the first outcome of a step behind the decisions
                stage, (line, queue, unit) = now, behind[now]
                bar.close()
                tqdm.write(line, file=sys.stderr)
                bar = tqdm(total=len(queue) + 1, disable=args.no_progress, unit=unit, file=sys.stderr)
            if isinstance(outcome, Mapped | Prompted):
                bar.update(1)
            elif isinstance(outcome, MapSkipped):
                bar.update(1)
                tqdm.write(
                    f"no uncertainty map for {shown(outcome.item.name)}: {shown(outcome.reason)} "
                    "(its decision is kept)",
                    file=sys.stderr,
                )
            elif isinstance(outcome, Skipped):
                bar.update(0 if outcome.transient else 1)
                when = " (tried again next run)" if outcome.transient else ""
                tqdm.write(
                    f"skipped {shown(outcome.item.name)}: {shown(outcome.reason)}{when}", file=sys.stderr
                )
    finally:
        signal.signal(signal.SIGINT, old_int)
        signal.signal(signal.SIGTERM, old_term)
        bar.close()
    summary = run.summary
    if (summary.mapped or summary.maps_skipped or summary.prompted) and summary.saved:
        job.outputs.rewrite(job.journal.rows(job.source.source_id))  # the maps reach the CSV
    skipped = sum(not s.transient for s in summary.skipped)
    deferred = len(summary.skipped) - skipped
    done = job.resumed_rows + summary.processed
    print(
        f"{done} of {summary.total} images processed ({summary.processed} now, {job.resumed_rows} before), "
        f"{skipped} skipped, {deferred} to retry; predictions: {shown(args.out)}; "
        f"skipped: {shown(skipped_path(args.out))}; state: {shown(args.state)}",
        file=sys.stderr,
    )
    if summary.mapped or summary.maps_skipped or summary.maps_pending:
        print(
            f"uncertainty maps: {summary.mapped} made behind the decisions, {summary.maps_skipped} could not "
            f"be made (image unreadable again, or changed since its decision), {summary.maps_pending} pending "
            "(made by the next run)",
            file=sys.stderr,
        )
    if summary.prompted or summary.prompts_pending:
        print(
            f"the adapted network's decisions (I-DiPT): {summary.prompted} made, {summary.prompts_pending} "
            "left to make (made once a review reaches them: in the app, or by a run with --reviews)",
            file=sys.stderr,
        )
    arrived = (
        0
        if isinstance(job.source, SlideSource)
        else arrived_since(job.source, job.session.card.classes, args.manifest)
    )
    if arrived:
        print(
            f"{arrived} new image{'s' if arrived > 1 else ''} arrived in the folder during the run; "
            "the next run will take them",
            file=sys.stderr,
        )
    review = None if summary.failure is not None else _certify(job, args, summary.decided_all and not arrived)
    code, why = exit_code(summary, job.resumed_rows, args.max_skipped)
    if isinstance(job.source, SlideSource):
        code = max(code, _write_geojson(job, args.out))
    if code:
        print(f"{'stopped' if code == EXIT_INTERRUPTED else 'error'}: {shown(why)}", file=sys.stderr)
    elif review is not None:  # one last line: who decides the folder now and what reviewing could change
        print(outlook(review).sentence(job.session.card.classes, where=FROM_THE_TERMINAL), file=sys.stderr)
    return code if code or summary.failure is not None or review is not None else EXIT_FAILED


def _write_geojson(job: FolderJob, out: Path) -> int:
    """The slide's tiles for QuPath beside the CSV; 0, or :data:`EXIT_FAILED` when it cannot be written."""
    try:
        path = write_geojson(job, geojson_path(out))
    except (OSError, F2TTAError) as exc:
        print(f"error: the slide's GeoJSON cannot be written: {shown(exc)}", file=sys.stderr)
        return EXIT_FAILED
    print(f"tiles for QuPath: {shown(path)}", file=sys.stderr)
    return 0


def _certify(job: FolderJob, args: argparse.Namespace, complete: bool) -> SiteReview | None:
    """The site's review of the run's rows, with ``--reviews`` (or the project's own marks, with
    ``--state PROJECT``) applied and its certified decisions written beside ``--out``; None (said
    why) when that failed after the run. ``complete``: every image of the folder is decided."""
    folder = project_review_folder(args.state)
    classes = job.session.card.classes
    review = SiteReview(folder if args.reviews is None else None, job.source.source_id, len(classes))
    review.complete = complete
    try:
        review.open(job.journal.rows(job.source.source_id))
        for note in review.take_notes():
            print(f"warning: {shown(note)}", file=sys.stderr)
        if args.reviews is not None:
            used, unknown_items, unknown_classes = marks_from_file(args.reviews, review, classes)
            certify(review)
            print(
                f"reviews: {used} mark(s) of {shown(args.reviews)} used"
                + (f", {unknown_items} naming no image of this run" if unknown_items else "")
                + (f", {unknown_classes} with a class the model does not have" if unknown_classes else ""),
                file=sys.stderr,
            )
        elif not review.marks:
            return review  # nothing to certify: the original model's decisions (or adapting's) stand
        else:
            mine = sum(key in review.index for key in review.marks)
            elsewhere = len(review.marks) - mine
            print(
                f"reviews: the project's {mine} mark(s) of this folder"
                + (f"; {elsewhere} naming no image of this run, not used" if elsewhere else ""),
                file=sys.stderr,
            )
        certified, certificates = write_certified(args.out, review, classes)
    except (F2TTAError, OSError) as exc:
        print(
            f"error: the run finished (its predictions and state are saved), but the review marks "
            f"could not be applied: {shown(exc)}",
            file=sys.stderr,
        )
        return None
    finally:
        review.close()
    for comparison in review.comparisons():
        print(f"  {review.describe(comparison)}", file=sys.stderr)
    if not review.comparisons():
        print(f"  {review.why_empty()}", file=sys.stderr)
    print(f"certified decisions: {shown(certified)}; certificates: {shown(certificates)}", file=sys.stderr)
    return review
