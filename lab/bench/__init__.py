"""The F²TTA benchmark: every method on the same seeded streams, mean ± std over seeds.

Split by job: :mod:`.plan` (settings, rows, the grid of jobs), :mod:`.job` (one job through the
engine's stream loop), :mod:`.cache` (finished jobs kept on disk), :mod:`.run` (serial, process
and Ray execution) and :mod:`.report` (metrics per seed and their aggregate per row).
"""

from __future__ import annotations

from lab.bench.job import JobRecords, run_job
from lab.bench.plan import (
    PAPER_METHODS,
    SWEEP_ALIASES,
    BenchError,
    BenchJob,
    BenchPlan,
    BenchSettings,
    RowSpec,
    make_config,
    parse_seeds,
    parse_sweep,
    plan_bench,
    plan_rows,
    split_sweep,
)
from lab.bench.report import BenchResult, summarize
from lab.bench.run import run_plan

__all__ = [
    "PAPER_METHODS",
    "SWEEP_ALIASES",
    "BenchError",
    "BenchJob",
    "BenchPlan",
    "BenchResult",
    "BenchSettings",
    "JobRecords",
    "RowSpec",
    "make_config",
    "parse_seeds",
    "parse_sweep",
    "plan_bench",
    "plan_rows",
    "run_job",
    "run_plan",
    "split_sweep",
    "summarize",
]
