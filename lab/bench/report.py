"""The benchmark's figures: per-seed metrics of every job and their mean ± std per row."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from engine.methods.idipt_plus import PATHS
from lab.bench.job import JobRecords
from lab.bench.metrics import aggregate, run_metrics, running_accuracy, undefined_notes
from lab.bench.paired import paired
from lab.bench.plan import BenchPlan

logger = logging.getLogger(__name__)


@dataclass
class BenchResult:
    plan: BenchPlan
    records: dict[str, list[JobRecords]]  # row -> one per seed, in seed order
    runs: dict[str, list[dict[str, Any]]]  # row -> run_metrics per seed
    methods: dict[str, dict[str, Any]]  # row -> aggregate
    #: row -> budget -> the reviewed decisions' figures (``--review-budget``; lab.bench.reviews)
    reviews: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The benchmark JSON: config, classes, source_domain, domains, methods (and review_budgets)."""
        out = {
            "config": self.plan.config,
            "classes": list(self.plan.classes),
            "source_domain": self.plan.source_domain,
            "domains": list(self.plan.domains),
            "methods": self.methods,
        }
        if self.reviews:
            out["review_budgets"] = self.reviews
        return out

    def running_curves(self) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """Row -> running accuracy (%) averaged over seeds, and its std (streams cut to the shortest)."""
        means: dict[str, np.ndarray] = {}
        stds: dict[str, np.ndarray] = {}
        for row, recs in self.records.items():
            curves = [running_accuracy(r.labels == r.preds) for r in recs if r.labels.size]
            if not curves:
                continue
            n = min(c.size for c in curves)
            stacked = np.stack([c[:n] for c in curves])
            means[row], stds[row] = stacked.mean(axis=0), stacked.std(axis=0)
        return means, stds


def summarize(plan: BenchPlan, records: Sequence[JobRecords]) -> BenchResult:
    """Per-seed metrics and their mean ± std per row, in the plan's row and seed order."""
    ordered = sorted(records, key=lambda r: r.index)
    by_row: dict[str, list[JobRecords]] = {r.name: [] for r in plan.rows}
    for rec in ordered:
        by_row[rec.row].append(rec)
    runs: dict[str, list[dict[str, Any]]] = {}
    methods: dict[str, dict[str, Any]] = {}
    notes: dict[str, list[str]] = {}
    skipped: dict[str, str] = {}
    pos = plan.positive_class
    for row, recs in by_row.items():
        runs[row] = []
        for rec in recs:
            domain_names = np.asarray(rec.domains, dtype=object)[rec.domain]
            metrics = run_metrics(
                labels=rec.labels,
                preds=rec.preds,
                pos_scores=rec.probs[:, pos],
                domain_of=domain_names,
                domains=plan.domains,
                source_domain=plan.source_domain,
                positive=pos,
                seconds=rec.seconds,
            )
            runs[row].append(metrics)
            for note in undefined_notes(rec.labels, rec.preds, pos):
                notes.setdefault(row, []).append(f"seed {rec.seed}: {note}")
            skipped.update(rec.skipped)
        methods[row] = aggregate(runs[row])
        methods[row]["paired"] = paired_by_domain(recs, plan.domains)
        paths = decision_paths(recs)
        if paths:
            methods[row]["paths"] = paths
            # Sites (named) or site groups (found by appearance) each stream was decided in.
            methods[row]["site_units_per_stream"] = [int(np.unique(r.group[r.group >= 0]).size) for r in recs]
    for row, lines in notes.items():
        for line in lines:
            logger.warning("%s, %s", row, line)
    plan.config["notes"] = notes
    plan.config["skipped_images"] = [{"path": p, "reason": r} for p, r in sorted(skipped.items())]
    return BenchResult(plan, by_row, runs, methods)


def paired_by_domain(recs: Sequence[JobRecords], domains: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Per domain: the adapted model against the source model on the same images, per stream.

    ``fixed``/``broken`` are summed over the streams (the same images in other orders, so not
    independent: no interval is pooled); ``delta`` is the mean paired difference over streams;
    ``low``/``high`` are the exact 95 % interval of the stream whose lower end is lowest.
    """
    out: dict[str, dict[str, Any]] = {}
    for d in domains:
        per_stream = []
        for rec in recs:
            mask = np.asarray(rec.domains, dtype=object)[rec.domain] == d
            if mask.any():
                per_stream.append(paired(rec.labels[mask], rec.source_preds[mask], rec.preds[mask]))
        if not per_stream:
            continue
        worst = min(per_stream, key=lambda p: p.low)
        out[d] = {
            "streams": len(per_stream),
            "images_per_stream": per_stream[0].images,
            "delta": float(np.mean([p.delta for p in per_stream])),
            "fixed": sum(p.fixed for p in per_stream),
            "broken": sum(p.broken for p in per_stream),
            "low": worst.low,
            "high": worst.high,
        }
    return out


def decision_paths(recs: Sequence[JobRecords]) -> dict[str, dict[str, int]]:
    """Per decision path (I-DiPT+): images, changed decisions, fixed and broken, summed over streams."""
    out: dict[str, dict[str, int]] = {}
    for rec in recs:
        for k, name in enumerate(PATHS):
            mask = rec.path == k
            if not mask.any():
                continue
            entry = out.setdefault(name, {"images": 0, "changed": 0, "fixed": 0, "broken": 0})
            y, src, pred = rec.labels[mask], rec.source_preds[mask], rec.preds[mask]
            entry["images"] += int(mask.sum())
            entry["changed"] += int(np.sum(src != pred))
            entry["fixed"] += int(np.sum((pred == y) & (src != y)))
            entry["broken"] += int(np.sum((pred != y) & (src == y)))
    return out
