"""The benchmark's outputs: the printed tables, the results JSON and CSV, the running-accuracy figure.

``f2tta bench`` prints :func:`format_table`, :func:`format_paired`, :func:`format_paths` and
:func:`format_segments` and writes :func:`write_json` (with :func:`write_figure` beside it) and
:func:`write_csv`; all read a :class:`~lab.bench.report.BenchResult`, never the jobs.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engine.methods import get_method_class
from engine.util.atomic import atomic_write_bytes
from lab.bench.metrics import SEGMENTS, format_mean_std
from lab.bench.report import BenchResult


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
    units = []
    for name, m in result.methods.items():
        for path, c in m.get("paths", {}).items():
            rows.append([name, path, str(c["images"]), str(c["changed"]), str(c["fixed"]), str(c["broken"])])
        if "site_units_per_stream" in m:
            per_stream = ", ".join(str(k) for k in m["site_units_per_stream"])
            what = (
                "sites (named)"
                if result.plan.config.get("known_sites")
                else "site groups (found by appearance)"
            )
            why = ""
            if not any(m["site_units_per_stream"]) and len(result.plan.classes) > 2:
                why = " (none: the site operating point needs a two-class model)"
            units.append(f"{name}: {what} per stream: {per_stream}{why}")
    if not rows:
        return ""
    header = ["method", "decision path", "images", "changed", "fixed", "broken"]
    return (
        "Where the decisions came from (summed over streams)\n"
        + _render(header, rows)
        + "".join(f"\n{line}" for line in units)
    )


def format_reviews(result: BenchResult) -> str:
    """Per method and review budget K (reviews per site): the reviewed decisions against the source,
    retroactive (the report after the reviews) and online (what a reader saw when) apart."""
    header = [
        "method",
        "K",
        "decisions",
        "reviews/site",
        "target Δ",
        "worst site Δ",
        "fixed/broken",
        "promoted/verified/reverted/not better/open",
        "provisional",
    ]
    rows = []
    lines = []
    for name, budgets in result.reviews.items():
        for budget, r in budgets.items():
            v = r["verdicts"]
            k, _, variant = budget.partition(" ")
            if not variant and r.get("verdicts_by_candidate"):
                ended = "; ".join(
                    f"{c} " + ", ".join(f"{n} {verdict}" for verdict, n in sorted(counts.items()))
                    for c, counts in r["verdicts_by_candidate"].items()
                )
                lines.append(f"{name} K={k}, by candidate: {ended}")
            rows.append(
                [
                    name,
                    k,
                    variant or "retroactive",
                    f"{r['reviews_per_site']:.1f}",
                    f"{r['target_delta']:+.2f}",
                    f"{r['worst_domain_delta']:+.2f}",
                    f"{r['fixed']}/{r['broken']}",
                    "/".join(
                        str(v.get(x, 0)) for x in ("promoted", "verified", "reverted", "not better", "open")
                    ),
                    f"{r.get('provisional_per_site', 0.0):.1f}",
                ]
            )
    title = (
        "Review-certified decisions: a simulated reviewer answers up to K items of each site's ladder, drawn "
        "uniformly at random (points against the source model, mean over streams; comparisons summed over streams); "
        "beside them the plain uses of K random labels per site (best-of-K: the rule right most often on them; "
        "threshold-on-K: the margin threshold fitted on them), which certify nothing"
    )
    return f"{title}\n{_render(header, rows)}" + "".join(f"\n{line}" for line in lines)


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
    from lab.bench.plots import running_accuracy_figure  # matplotlib only when a figure is asked for

    means, stds = result.running_curves()
    running_accuracy_figure(means, path, spread=stds)
