"""The committed evaluation suite: a recipe fixed before it is run, replayed from cached source passes.

A recipe (JSON, e.g. ``benchmarks/suites/safe-adaptation-1.json``) names, per kind of generated
image, a generator seed for the training data and another for the evaluation data (so no
evaluation image was ever trained on, the source site's included), the source models' training
seeds and recipes, the class mixes (a positive share given to every site, ``drift``: a share
rising from 10 % to 90 % along each site's sequence, or ``scan``: a slide read in scan order, its
tumour region last), the stream δs, the protocols (what the method is told of each image's site),
the images per site, the methods and the simulated reviews (budgets, reviewer noise).
:func:`prepare` generates the data, trains the models and computes every evaluation image's
source pass, each once (cached under the work folder); :func:`run_suite` then replays every
method over every (kind, model, mix, δ, protocol) stream (:mod:`lab.bench.suite_stream`) and
:func:`summary` gives the endpoints on (model, site) units (:mod:`lab.bench.endpoints`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from engine.data.readers import open_dataset
from engine.training import recipe_config, train_source
from engine.util.bounded_json import loads_bounded
from engine.util.files import UnsafeFileError, read_regular
from lab.bench.endpoints import UnitCell, unit_endpoints
from lab.bench.recipe import KindSpec, Recipe, SuiteError
from lab.bench.replay import PassCache
from lab.bench.suite_stream import StreamJob, StreamResult, SuiteCell, reviewed_name, run_stream
from lab.bench.suite_work import ModelUnit, WorkFolder
from lab.synth.generate import GENERATOR_VERSION, SYNTH_JSON, default_workers, write_synth

__all__ = [
    "KindSpec",
    "Prepared",
    "Recipe",
    "StreamResult",
    "SuiteCell",
    "SuiteError",
    "prepare",
    "reviewed_name",
    "run_suite",
    "summary",
]

logger = logging.getLogger(__name__)


@dataclass
class Prepared:
    """Paths of what :func:`prepare` made, per kind (its cell name) and model."""

    train_data: dict[str, Path] = field(default_factory=dict)
    eval_data: dict[str, Path] = field(default_factory=dict)
    models: dict[tuple[str, int, str], Path] = field(default_factory=dict)  # (kind, seed, recipe)


def data_folder(work: Path, k: KindSpec, role: str, seed: int, per_site: int) -> Path:
    """Where a kind's training or evaluation data lives (the first site set keeps the earlier names)."""
    sites = "" if k.sites == "v1" else f"-{k.sites}"
    return work / "data" / f"{k.kind}{sites}-{role}-{seed}-{per_site}"


def model_name(k: KindSpec, seed: int, recipe: str) -> str:
    """A model's name in the cells (``histo-s21``; ``histo-v2-adamw-p16-s41``)."""
    return f"{k.name}{'' if recipe == 'default' else '-' + recipe}-s{seed}"


def _data_problem(folder: Path, k: KindSpec, seed: int, per_site: int, size: int) -> str | None:
    """Why a generated data folder cannot be used (None: ``synth.json``, written last, says it was
    generated whole with these parameters)."""
    marker = folder / SYNTH_JSON
    if not marker.exists():
        return "not generated yet" if not folder.exists() else "half generated"
    try:
        meta = loads_bounded(read_regular(marker, 1 << 20, SYNTH_JSON), max_bytes=1 << 20, max_depth=8)
    except (UnsafeFileError, ValueError) as exc:
        return f"{SYNTH_JSON} cannot be read ({exc})"
    wanted = {
        "generator_version": GENERATOR_VERSION,
        "kind": k.kind,
        "seed": seed,
        "per_domain": per_site,
        "size": size,
        "site_set": k.sites,
    }
    have = {key: meta.get(key) for key in wanted} if isinstance(meta, dict) else {}
    if isinstance(meta, dict) and "site_set" not in meta:
        have["site_set"] = "v1"  # written before the second site set existed
    changed = ", ".join(
        f"{key} {have.get(key)!r} -> {v!r}" for key, v in wanted.items() if have.get(key) != v
    )
    return f"generated with other parameters ({changed})" if changed else None


def prepare(
    recipe: Recipe, work: Path, device: str = "cpu", log: Callable[[str], None] = print, passes: bool = True
) -> Prepared:
    """Generate the data, train the models and (``passes``) compute the source passes not there yet.

    Holds the work folder's lock while it runs and removes what killed writers left. What an
    earlier, interrupted run left half made (a data folder without its ``synth.json``, a model
    unit without its manifest or with a file changed, :mod:`lab.bench.suite_work`) is made
    again, never used.

    Raises:
        engine.run.lock.LockedError: another process uses ``work``.
        F2TTAError, OSError: data or a model cannot be made.
    """
    with WorkFolder(work):
        return _prepare(recipe, work, device, log, passes)


def _prepare(recipe: Recipe, work: Path, device: str, log: Callable[[str], None], passes: bool) -> Prepared:
    out = Prepared()
    for k in recipe.kinds:
        for role, seed, per_site in (
            ("train", k.train_seed, recipe.train_per_site),
            ("eval", k.eval_seed, recipe.eval_per_site),
        ):
            folder = data_folder(work, k, role, seed, per_site)
            problem = _data_problem(folder, k, seed, per_site, recipe.size)
            if problem is not None:
                log(f"generating {folder.name}" + ("" if problem == "not generated yet" else f" ({problem})"))
                (folder / SYNTH_JSON).unlink(missing_ok=True)  # the folder is whole only once it is back
                write_synth(
                    k.kind,
                    folder,
                    per_domain=per_site,
                    size=recipe.size,
                    seed=seed,
                    overwrite=True,
                    workers=default_workers(),
                    sites=k.sites,
                )
            (out.train_data if role == "train" else out.eval_data)[k.name] = folder
        for tseed in recipe.training_seeds:
            for training in recipe.training_recipes:
                legacy = "" if training == "default" else f"-{training}"
                name = f"{k.name}{legacy}-{k.train_seed}-s{tseed}.safetensors"
                model = work / "models" / name
                _train(ModelUnit(model), recipe, tseed, training, out.train_data[k.name], device, log)
                out.models[(k.name, tseed, training)] = model
                if not passes:
                    continue
                ds = open_dataset(out.eval_data[k.name])
                started = time.perf_counter()
                PassCache(work / "passes").passes(model, [it.path for it in ds.items], device)
                log(
                    f"source passes of {model.name} on {len(ds.items)} images ready "
                    f"({time.perf_counter() - started:.0f} s)"
                )
    return out


def _train(
    unit: ModelUnit,
    recipe: Recipe,
    seed: int,
    training: str,
    data: Path,
    device: str,
    log: Callable[[str], None],
) -> None:
    """Train the unit's model unless it is whole and trained as the recipe asks; then seal it."""
    expected = {
        "size": recipe.size,
        "epochs": recipe.epochs,
        "patience": recipe.patience,
        "seed": seed,
        "source": recipe.source,
        "train_data": data.name,
    }
    problem = unit.problem(expected)
    if problem is None:
        return
    name = unit.checkpoint.name
    log(f"training {name}" + ("" if problem == "not trained yet" else f" again ({problem})"))
    unit.clear()
    unit.checkpoint.parent.mkdir(parents=True, exist_ok=True)
    cfg = recipe_config(
        training,
        img_size=recipe.size,
        epochs=recipe.epochs,
        patience=recipe.patience,
        seed=seed,
        device=device,
    )
    train_source(open_dataset(data), recipe.source, cfg, out=str(unit.checkpoint))
    unit.seal()


def stream_jobs(
    recipe: Recipe, prepared: Prepared, work: Path, review_budgets: tuple[int, ...] = ()
) -> list[StreamJob]:
    """Every stream of the recipe (``review_budgets``: the CLI's, used when the recipe names none)."""
    budgets = recipe.review_budgets or review_budgets
    jobs = []
    for k in recipe.kinds:
        for tseed in recipe.training_seeds:
            for training in recipe.training_recipes:
                for protocol in recipe.protocols:
                    for mix in recipe.mixes:
                        for delta in recipe.deltas:
                            jobs.append(
                                StreamJob(
                                    k.name,
                                    model_name(k, tseed, training),
                                    str(prepared.models[(k.name, tseed, training)]),
                                    str(prepared.eval_data[k.name]),
                                    str(work / "passes"),
                                    mix,
                                    delta,
                                    k.fragments,
                                    recipe.images_per_site,
                                    recipe.stream_seed,
                                    recipe.source,
                                    recipe.methods,
                                    tuple(budgets),
                                    protocol,
                                    recipe.mixed_pair,
                                    recipe.reviewer_noise,
                                    recipe.review_at,
                                    recipe.review_moments,
                                    recipe.plain_uses,
                                )
                            )
    return jobs


def run_suite(
    recipe: Recipe,
    prepared: Prepared,
    work: Path,
    workers: int = 1,
    log: Callable[[str], None] = print,
    review_budgets: tuple[int, ...] = (),
) -> list[StreamResult]:
    """Every stream of the recipe, in parallel processes when ``workers`` > 1.

    ``review_budgets``: simulated reviews per site when the recipe names none (result keys from
    :func:`reviewed_name`).
    """
    jobs = stream_jobs(recipe, prepared, work, review_budgets)
    results: list[StreamResult] = []
    started = time.perf_counter()
    if workers > 1:
        with ProcessPoolExecutor(workers) as pool:
            for i, out in enumerate(pool.map(run_stream, jobs), 1):
                results.append(out)
                log(f"stream {i}/{len(jobs)} done ({time.perf_counter() - started:.0f} s)")
    else:
        for i, job in enumerate(jobs, 1):
            results.append(run_stream(job))
            log(f"stream {i}/{len(jobs)} done ({time.perf_counter() - started:.0f} s)")
    return results


def summary(results: Sequence[StreamResult], methods: Sequence[str]) -> dict[str, Any]:
    """Per protocol, per method and variant: the endpoints on (model, site) units
    (:func:`lab.bench.endpoints.unit_endpoints`), the worst cell and, for the review variants,
    the reviews answered per site and how many promoted or verified comparisons were false; per
    protocol also the site units per stream."""
    out: dict[str, Any] = {}
    for protocol in dict.fromkeys(r.job.protocol for r in results):
        mine = [r for r in results if r.job.protocol == protocol]
        cells = [c for r in mine for c in r.cells]
        keys = [
            k for k in (cells[0].results if cells else {}) if k.split(" ")[0] in methods and k != "source"
        ]
        entry: dict[str, Any] = {
            "streams": len(mine),
            "site_units_per_stream": {
                "median": float(np.median([r.units for r in mine])) if mine else 0.0,
                "max": max((r.units for r in mine), default=0),
            },
        }
        for key in keys:
            units = unit_endpoints(
                [UnitCell(c.model, c.site, c.source, c.results[key], c.best_errors) for c in cells]
            )
            worst = min(cells, key=lambda c: c.results[key].delta)
            units["worst_cell"] = {**worst.to_json(), "difference": worst.results[key].delta}
            del units["worst_cell"]["methods"]
            units["harmful_cells"] = sum(c.harmful(key) for c in cells)
            if any(key in c.reviews for c in cells):
                units["reviews_per_site"] = float(np.mean([c.reviews.get(key, 0) for c in cells]))
                made = sum(r.verdicts.get(key, (0, 0))[0] for r in mine)
                false = sum(r.verdicts.get(key, (0, 0))[1] for r in mine)
                units["promoted_or_verified"] = made
                units["false_verifications"] = false
            entry[key] = units
        out[protocol] = entry
    return out
