"""Benchmark figures with matplotlib's Agg canvas (no pyplot state, no display, thread-safe)."""

from __future__ import annotations

import io
from collections.abc import Mapping
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from engine.util.atomic import atomic_write_bytes


def running_accuracy_figure(
    curves: Mapping[str, np.ndarray],
    path: str | Path,
    *,
    spread: Mapping[str, np.ndarray] | None = None,
    title: str = "Running accuracy (mean over seeds)",
) -> Path:
    """Write a PNG of running accuracy per method: x = images seen, y = accuracy so far (%).

    Args:
        curves: row name -> ``(n,)`` running accuracy in percent, averaged over seeds.
        path: the PNG to write (replaced atomically).
        spread: row name -> ``(n,)`` std over seeds, drawn as a band when given.
        title: the figure title.
    """
    fig = Figure(figsize=(8.0, 4.8), dpi=110)
    FigureCanvasAgg(fig)  # attaches the Agg canvas that savefig renders with
    ax = fig.add_subplot(1, 1, 1)
    for name, curve in curves.items():
        y = np.asarray(curve, dtype=np.float64)
        x = np.arange(1, y.size + 1)
        (line,) = ax.plot(x, y, label=name, linewidth=1.4)
        if spread is not None and name in spread:
            s = np.asarray(spread[name], dtype=np.float64)
            ax.fill_between(x, y - s, y + s, color=line.get_color(), alpha=0.15, linewidth=0)
    ax.set_xlabel("images seen")
    ax.set_ylabel("accuracy so far (%)")
    ax.set_ylim(0, 100)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    if curves:
        ax.legend(loc="lower right", fontsize="small", ncol=2 if len(curves) > 5 else 1)
    fig.tight_layout()
    return _save(fig, path)


def review_budget_figure(
    budgets: list[int],
    series: Mapping[str, Mapping[str, list[float]]],
    path: str | Path,
    title: str = "Review-certified adaptation: figures against the review budget",
    units: Mapping[str, str] | None = None,
) -> Path:
    """Figures of each method against the reviews per site, one panel per figure.

    Args:
        budgets: the budgets K (x axis).
        series: method -> figure name -> one value per budget.
        path: the PNG.
        units: figure name -> its y-axis label (default: points against the source model, with
            lines at 0 and -1 point).
    """
    names = list(dict.fromkeys(k for per in series.values() for k in per))
    fig = Figure(figsize=(4.2 * max(len(names), 1), 3.8), dpi=110)
    FigureCanvasAgg(fig)
    for i, figure_name in enumerate(names, 1):
        ax = fig.add_subplot(1, max(len(names), 1), i)
        for method, per in series.items():
            if figure_name in per:
                ax.plot(budgets, per[figure_name], marker="o", label=method, linewidth=1.4)
        unit = (units or {}).get(figure_name)
        if unit is None:
            ax.axhline(0.0, color="grey", linewidth=0.8)
            ax.axhline(-1.0, color="grey", linewidth=0.8, linestyle="--")
        ax.set_xlabel("reviews per site (K)")
        ax.set_ylabel(unit or "points against the source model")
        ax.set_title(figure_name, fontsize="medium")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small")
    fig.suptitle(title, fontsize="medium")
    fig.tight_layout()
    return _save(fig, path)


def _save(fig: Figure, path: str | Path) -> Path:
    """``fig`` as a PNG at ``path``, written atomically."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    out = Path(path)
    atomic_write_bytes(out, buf.getvalue())
    return out
