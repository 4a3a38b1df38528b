"""``f2tta bench``: every method on the same F²TTA streams, printed as the paper's table."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tqdm import tqdm

from engine.cli._common import (
    add_card_override_arguments,
    add_device_arguments,
    add_model_argument,
    add_ray_argument,
)
from engine.errors import F2TTAError
from engine.util.files import check_outputs
from lab.bench import BenchSettings, parse_seeds, plan_bench, run_plan
from lab.bench.protocol import parse_prior
from lab.bench.reviews import parse_budgets, review_budgets
from lab.bench.writers import (
    format_paired,
    format_paths,
    format_reviews,
    format_segments,
    format_table,
    write_csv,
    write_figure,
    write_json,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data", required=True, type=Path, help="dataset root or CSV (domain folders, manifest, WILDS)"
    )
    add_model_argument(parser)
    parser.add_argument(
        "--methods",
        default=None,
        help="comma-separated methods (default: the paper's, those registered: "
        "source,tent,dltta,sar,cotta,vptta,cmae,dpcore,idipt)",
    )
    parser.add_argument("--seeds", default="0-7", help="stream seeds, e.g. 0-7, 0,3 or 0-3,7 (default 0-7)")
    parser.add_argument(
        "--delta", type=float, default=1.0, help="Dirichlet δ of the fragment lengths (default 1)"
    )
    parser.add_argument(
        "--fragments",
        type=int,
        default=None,
        metavar="N",
        help="fragments per domain (default: 100 for histology-like data, 10 for fundus-like; see docs)",
    )
    parser.add_argument(
        "--limit", type=int, default=None, metavar="N", help="only the first N images of each stream"
    )
    parser.add_argument(
        "--json", type=Path, default=None, metavar="OUT.json", help="write the results (+ OUT.png)"
    )
    parser.add_argument(
        "--subset",
        choices=("test", "val"),
        default="test",
        help="split to stream: test (the tables, default) or val (the paper's K and δ sweeps)",
    )
    parser.add_argument(
        "--prior",
        default=None,
        metavar="SITE=P[,SITE=P...]",
        help="label shift: keep a seeded subset of each named site's images whose positive-class share "
        "is P (e.g. site2=0.2,site3=0.8)",
    )
    parser.add_argument("--csv", type=Path, default=None, metavar="OUT.csv", help="write one row per method")
    parser.add_argument(
        "--workers", type=int, default=0, metavar="N", help="local worker processes (default: serial)"
    )
    add_ray_argument(
        parser, "run the jobs on Ray: a cluster address, or a local Ray instance when none is given"
    )
    parser.add_argument(
        "--threads", type=int, default=None, help="torch threads per job (default: cores/workers)"
    )
    parser.add_argument(
        "--ablation",
        action="store_true",
        help="add each listed method's ablation rows (one mechanism off each; I-DiPT: UoM, PGD, both, graphs)",
    )
    parser.add_argument(
        "--sweep",
        default=None,
        metavar="KEY=V1,V2",
        help="one row per value: delta=0.01,0.1,1,10 | k=10,20,30,40,50 | bank=5,10,20,40 (I-DiPT) "
        "| METHOD:FIELD=V1,V2 for any method's setting",
    )
    parser.add_argument("--positive-class", default=None, help="class name or index for precision/recall/AUC")
    add_card_override_arguments(parser)
    parser.add_argument(
        "--cache",
        type=Path,
        default=None,
        metavar="DIR",
        help="keep each finished job's records here and reuse them, so an interrupted run resumes "
        "(default: OUT.jobs beside --json; none without --json)",
    )
    parser.add_argument(
        "--review-budget",
        default=None,
        metavar="K[,K...]",
        help="also simulate a reviewer answering up to K disagreements per site with the dataset's labels "
        "and report each method's review-certified decisions (e.g. 0,5,10,20,50; docs/review-certificates.md)",
    )
    parser.add_argument(
        "--review-at",
        type=float,
        default=1.0,
        metavar="SHARE",
        help="the share of each site's images processed when the simulated reviewer comes (default 1: "
        "after the site's last image, as a clinician reviews a loaded folder; 0.5: half-way)",
    )
    parser.add_argument(
        "--known-sites",
        action="store_true",
        help="give each domain's images to the method as one site, still in the free-form arrival order "
        "(the app's case: a folder or slide is a site); without it the site is unknown (the paper's protocol)",
    )
    parser.add_argument("--no-cache", action="store_true", help="neither read nor write a job cache")
    parser.add_argument(
        "--source-stats",
        type=int,
        default=0,
        metavar="N",
        help="give VPTTA and DPCore N source-domain training images as their statistics reference, "
        "as the original methods read it from source data (default 0: the first stream images)",
    )
    parser.add_argument(
        "--batch",
        type=int,
        default=1,
        metavar="B",
        help="images per model step, within each method's limit (default 1: each method's own step, "
        "the F2TTA protocol; docs/method.md, 'Batches')",
    )
    add_device_arguments(parser)


def main(args: argparse.Namespace) -> int:
    try:
        settings = BenchSettings(
            data=args.data,
            model=args.model,
            methods=tuple(m.strip() for m in args.methods.split(",") if m.strip()) if args.methods else None,
            seeds=parse_seeds(args.seeds),
            delta=args.delta,
            fragments=args.fragments,
            limit=args.limit,
            subset=args.subset,
            ablation=args.ablation,
            sweep=args.sweep,
            positive_class=args.positive_class,
            split_seed=args.split_seed,
            source_domain=args.source_domain,
            device=args.device,
            workers=args.workers,
            ray=args.ray,
            threads=args.threads,
            cache=cache_dir(args),
            source_stats=args.source_stats,
            batch=args.batch,
            prior=parse_prior(args.prior) if args.prior else (),
            known_sites=args.known_sites,
        )
        if not 0.0 < args.review_at <= 1.0:
            raise F2TTAError(f"--review-at must lie in (0, 1], not {args.review_at}")
        budgets = parse_budgets(args.review_budget) if args.review_budget is not None else ()
        plan = plan_bench(settings)
        json_out = [args.json, args.json.with_suffix(".png")] if args.json is not None else []
        check_outputs([*json_out, *([args.csv] if args.csv is not None else [])])  # before the jobs run
    except (F2TTAError, ValueError, KeyError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(
        f"{len(plan.rows)} row(s) x {len(settings.seeds)} seed(s) = {len(plan.jobs)} jobs, "
        f"{plan.images_per_job} images per stream, F = {plan.config['fragments']} "
        f"({plan.config['fragments_rule']}), δ = {settings.delta}",
        file=sys.stderr,
    )
    bar = tqdm(
        total=plan.total_images, disable=args.no_progress, unit="img", file=sys.stderr, dynamic_ncols=True
    )
    try:
        result = run_plan(plan, progress=bar.update)
    except KeyboardInterrupt:
        bar.close()
        print("interrupted", file=sys.stderr)
        return 130
    except (F2TTAError, ValueError, OSError, RuntimeError) as exc:
        bar.close()
        print(f"error: {exc}", file=sys.stderr)
        return 1
    bar.close()
    if settings.cache is not None:
        print(
            f"job cache {settings.cache}: {plan.config.get('jobs_from_cache', 0)} of {len(plan.jobs)} jobs reused",
            file=sys.stderr,
        )
    for row, recs in result.records.items():
        if budgets and row != "source":
            result.reviews[row] = review_budgets(
                recs, plan.domains, plan.source_domain, budgets, args.review_at, bool(args.known_sites)
            )
    print(format_table(result))
    print()
    print(format_paired(result))
    paths = format_paths(result)
    if paths:
        print()
        print(paths)
    if result.reviews:
        print()
        print(format_reviews(result))
    print()
    print(format_segments(result))
    try:
        if args.json is not None:
            write_json(result, args.json)
            write_figure(result, args.json.with_suffix(".png"))
        if args.csv is not None:
            write_csv(result, args.csv)
    except OSError as exc:
        print(f"error: cannot write the results: {exc}", file=sys.stderr)
        return 1
    return 0


def cache_dir(args: argparse.Namespace) -> Path | None:
    """``--cache``, else ``OUT.jobs`` beside ``--json``; None with ``--no-cache`` or neither."""
    if args.no_cache:
        return None
    if args.cache is not None:
        return Path(args.cache)
    if args.json is not None:
        return Path(args.json).with_suffix(".jobs")
    return None
