"""``f2tta bench``: every method on the same F²TTA streams, printed as the paper's table."""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tqdm import tqdm

from engine._atomic import atomic_write_bytes
from engine.bench import BenchResult, BenchSettings, parse_seeds, plan_bench, run_plan
from engine.cli._common import add_card_override_arguments, add_device_arguments, add_model_argument
from engine.errors import F2TTAError
from engine.methods import get_method_class
from engine.metrics import SEGMENTS, format_mean_std
from engine.protocol import parse_prior


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
    parser.add_argument(
        "--ray",
        nargs="?",
        const="",
        default=None,
        metavar="ADDRESS",
        help="run the jobs on Ray: a cluster address, or a local Ray instance when none is given",
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
    parser.add_argument("--no-cache", action="store_true", help="neither read nor write a job cache")
    parser.add_argument(
        "--source-stats",
        type=int,
        default=0,
        metavar="N",
        help="give VPTTA and DPCore N source-domain training images as their statistics reference, "
        "as the original methods read it from source data (default 0: the first stream images)",
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
            prior=parse_prior(args.prior) if args.prior else (),
        )
        plan = plan_bench(settings)
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
    print(format_table(result))
    print()
    print(format_paired(result))
    paths = format_paths(result)
    if paths:
        print()
        print(paths)
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


# ------------------------------------------------------------------------------------ output
def _render(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(header[i]), *(len(r[i]) for r in rows)) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        first = cells[0].ljust(widths[0])
        return " | ".join([first, *(c.rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True))])

    rule = "-+-".join("-" * w for w in widths)
    return "\n".join([line(header), rule, *(line(r) for r in rows)])


def format_table(result: BenchResult) -> str:
    """The paper's table: per-domain accuracy, target mean, all-domain accuracy/precision/recall/AUC."""
    plan = result.plan
    targets = [d for d in plan.domains if d != plan.source_domain]
    header = [
        "method",
        f"{plan.source_domain} (source)",
        *targets,
        "target mean",
        "accuracy",
        "precision",
        "recall",
        "AUC",
    ]
    rows = []
    for name, m in result.methods.items():
        rows.append(
            [
                name,
                format_mean_std(m["per_domain_acc"][plan.source_domain]),
                *(format_mean_std(m["per_domain_acc"][d]) for d in targets),
                format_mean_std(m["target_acc"]),
                format_mean_std(m["all_acc"]),
                format_mean_std(m["precision"]),
                format_mean_std(m["recall"]),
                format_mean_std(m["auc"]),
            ]
        )
    seeds = len(plan.settings.seeds)
    title = (
        f"Accuracy per domain and over all domains (%), mean ± std over {seeds} stream(s); "
        f"positive class {plan.classes[plan.positive_class]!r}"
    )
    return title + "\n" + _render(header, rows)


def format_paired(result: BenchResult) -> str:
    """Per domain, each row against the source model on the same images: fixed/broken and the interval."""
    plan = result.plan
    header = [
        "method",
        "source data",
        *(f"{d} (source)" if d == plan.source_domain else d for d in plan.domains),
    ]
    rows = []
    for name, m in result.methods.items():
        cells = []
        for d in plan.domains:
            p = m["paired"].get(d)
            cells.append(
                "n/a"
                if p is None
                else f"{p['delta']:+.1f} ({p['fixed']}/{p['broken']}) [{p['low']:+.1f}, {p['high']:+.1f}]"
            )
        method = name.split("[", 1)[0]
        rows.append([name, get_method_class(method).source_access, *cells])
    return (
        "Paired difference from the source model on the same images (points, mean over streams), "
        "images fixed/broken summed over streams, and the exact 95 % interval of the worst stream\n"
        + _render(header, rows)
    )


def format_paths(result: BenchResult) -> str:
    """Per decision path (methods that record one): images, changed, fixed and broken, over all streams."""
    rows = []
    for name, m in result.methods.items():
        for path, c in m.get("paths", {}).items():
            rows.append([name, path, str(c["images"]), str(c["changed"]), str(c["fixed"]), str(c["broken"])])
    if not rows:
        return ""
    header = ["method", "decision path", "images", "changed", "fixed", "broken"]
    return "Where the decisions came from (summed over streams)\n" + _render(header, rows)


def format_segments(result: BenchResult) -> str:
    """Running performance: accuracy per stream segment, and seconds per image."""
    header = ["method", *(str(i + 1) for i in range(SEGMENTS)), "s/img"]
    rows = []
    for name, m in result.methods.items():
        spi = m["seconds_per_image"]["mean"]
        rows.append(
            [
                name,
                *(_mean(s) for s in m["segment_acc"]),
                f"{spi:.4f}" if math.isfinite(spi) else "n/a",
            ]
        )
    return f"Accuracy per stream segment (%, mean over seeds) and seconds per image\n{_render(header, rows)}"


def _mean(entry: dict[str, float]) -> str:
    return f"{entry['mean']:.2f}" if math.isfinite(entry["mean"]) else "n/a"


def _nan_to_null(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _nan_to_null(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_nan_to_null(v) for v in value]
    return value


def write_json(result: BenchResult, path: Path) -> None:
    """The results JSON; undefined figures (NaN) are written as ``null`` so strict parsers read it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = _nan_to_null(result.to_json())
    atomic_write_bytes(path, (json.dumps(data, indent=2, allow_nan=False) + "\n").encode("utf-8"))


def csv_header(domains: Sequence[str]) -> list[str]:
    cols = ["method"]
    for key in [*(f"acc_{d}" for d in domains), "target_acc", "all_acc", "precision", "recall", "auc"]:
        cols += [f"{key}_mean", f"{key}_std"]
    for i in range(SEGMENTS):
        cols += [f"segment{i + 1}_acc_mean", f"segment{i + 1}_acc_std"]
    return [*cols, "seconds_per_image_mean", "seconds_per_image_std"]


def write_csv(result: BenchResult, path: Path) -> None:
    """One row per method with the JSON's figures (columns from :func:`csv_header`)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(csv_header(result.plan.domains))
    for name, m in result.methods.items():
        entries: list[dict[str, float]] = [
            *(m["per_domain_acc"][d] for d in result.plan.domains),
            m["target_acc"],
            m["all_acc"],
            m["precision"],
            m["recall"],
            m["auc"],
            *m["segment_acc"],
            m["seconds_per_image"],
        ]
        values: list[Any] = [name]
        for e in entries:
            values += [repr(e["mean"]), repr(e["std"])]
        writer.writerow(values)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, buf.getvalue().encode("utf-8"))


def write_figure(result: BenchResult, path: Path) -> None:
    """Running accuracy per method (mean over seeds) against images seen."""
    from engine._plots import running_accuracy_figure  # matplotlib only when a figure is asked for

    means, stds = result.running_curves()
    running_accuracy_figure(means, path, spread=stds)
