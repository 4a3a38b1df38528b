"""The committed evaluation suite: a recipe fixed before it is run, replayed from cached source passes.

A recipe (JSON, e.g. ``benchmarks/suites/safe-adaptation-1.json``) names, per kind of generated
image, a generator seed for the training data and another for the evaluation data (so no
evaluation image was ever trained on, the source site's included), the source models' training
seeds, the class mixes (a positive share given to every site, or ``drift``: a share rising from
10 % to 90 % along each site's sequence), the stream δs, the images per site and the methods.
:func:`prepare` generates the data, trains the models and computes every evaluation image's
source pass, each once (cached under the work folder); :func:`run_suite` then replays every
method over every (kind, model, mix, δ) stream (``engine.bench.replay``) and returns one
:class:`SuiteCell` per site with each method's paired comparison against the source model.
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
import torch

from engine.bench.paired import Paired, paired
from engine.bench.recipe import KindSpec, Recipe, SuiteError
from engine.bench.replay import PassCache, SourcePasses, replay
from engine.bench.streams import DRIFT, interleave, resample_site
from engine.bench.suite_work import ModelUnit, WorkFolder
from engine.data.readers import Dataset, open_dataset
from engine.data.synth import GENERATOR_VERSION, SYNTH_JSON, default_workers, write_synth
from engine.model.card import load_model
from engine.model.prompted_vit import PromptedViT
from engine.model.source_reference import find_reference
from engine.review.reviewer import review_stream
from engine.training import TrainConfig, train_source
from engine.util.bounded_json import loads_bounded
from engine.util.files import UnsafeFileError, read_regular

__all__ = ["KindSpec", "Prepared", "Recipe", "SuiteCell", "SuiteError", "prepare", "run_suite", "summary"]

logger = logging.getLogger(__name__)


@dataclass
class Prepared:
    """Paths of what :func:`prepare` made, per kind."""

    train_data: dict[str, Path] = field(default_factory=dict)
    eval_data: dict[str, Path] = field(default_factory=dict)
    models: dict[tuple[str, int], Path] = field(default_factory=dict)


def _data_problem(folder: Path, kind: str, seed: int, per_site: int, size: int) -> str | None:
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
        "kind": kind,
        "seed": seed,
        "per_domain": per_site,
        "size": size,
    }
    have = {k: meta.get(k) for k in wanted} if isinstance(meta, dict) else {}
    changed = ", ".join(f"{k} {have.get(k)!r} -> {v!r}" for k, v in wanted.items() if have.get(k) != v)
    return f"generated with other parameters ({changed})" if changed else None


def prepare(
    recipe: Recipe, work: Path, device: str = "cpu", log: Callable[[str], None] = print, passes: bool = True
) -> Prepared:
    """Generate the data, train the models and (``passes``) compute the source passes not there yet.

    Holds the work folder's lock while it runs and removes what killed writers left. What an
    earlier, interrupted run left half made (a data folder without its ``synth.json``, a model
    unit without its manifest or with a file changed, :mod:`engine.bench.suite_work`) is made
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
            folder = work / "data" / f"{k.kind}-{role}-{seed}-{per_site}"
            problem = _data_problem(folder, k.kind, seed, per_site, recipe.size)
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
                )
            (out.train_data if role == "train" else out.eval_data)[k.kind] = folder
        for tseed in recipe.training_seeds:
            model = work / "models" / f"{k.kind}-{k.train_seed}-s{tseed}.safetensors"
            _train(ModelUnit(model), recipe, tseed, out.train_data[k.kind], device, log)
            out.models[(k.kind, tseed)] = model
            if not passes:
                continue
            ds = open_dataset(out.eval_data[k.kind])
            started = time.perf_counter()
            PassCache(work / "passes").passes(model, [it.path for it in ds.items], device)
            log(
                f"source passes of {model.name} on {len(ds.items)} images ready ({time.perf_counter() - started:.0f} s)"
            )
    return out


def _train(
    unit: ModelUnit, recipe: Recipe, seed: int, data: Path, device: str, log: Callable[[str], None]
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
    cfg = TrainConfig(
        img_size=recipe.size, epochs=recipe.epochs, patience=recipe.patience, seed=seed, device=device
    )
    train_source(open_dataset(data), recipe.source, cfg, out=str(unit.checkpoint))
    unit.seal()


@dataclass(frozen=True)
class SuiteCell:
    """One site of one stream: each method against the source model."""

    kind: str
    model: str
    mix: str
    delta: float
    site: str
    source: bool  # the model's source site
    results: dict[str, Paired]  # method (or "method K=k": its decisions after k reviews per site) -> paired
    reviews: dict[str, int] = field(default_factory=dict)  # "method K=k" -> reviews answered at this site

    def harmful(self, method: str) -> bool:
        return self.results[method].harmful

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "model": self.model,
            "mix": self.mix,
            "delta": self.delta,
            "site": self.site,
            "source_site": self.source,
            "methods": {m: r.to_json() for m, r in self.results.items()},
            **({"reviews": self.reviews} if self.reviews else {}),
        }


@dataclass(frozen=True)
class StreamJob:
    kind: str
    model: str
    model_path: str
    eval_data: str
    passes_dir: str
    mix: float | str
    delta: float
    fragments: int
    images_per_site: int
    stream_seed: int
    source: str
    methods: tuple[str, ...]
    review_budgets: tuple[int, ...] = ()


def reviewed_name(method: str, budget: int) -> str:
    """The result key of ``method``'s decisions after ``budget`` simulated reviews per site."""
    return f"{method} K={budget}"


def stream_jobs(
    recipe: Recipe, prepared: Prepared, work: Path, review_budgets: tuple[int, ...] = ()
) -> list[StreamJob]:
    jobs = []
    for k in recipe.kinds:
        for tseed in recipe.training_seeds:
            for mix in recipe.mixes:
                for delta in recipe.deltas:
                    jobs.append(
                        StreamJob(
                            k.kind,
                            f"{k.kind}-s{tseed}",
                            str(prepared.models[(k.kind, tseed)]),
                            str(prepared.eval_data[k.kind]),
                            str(work / "passes"),
                            mix,
                            delta,
                            k.fragments,
                            recipe.images_per_site,
                            recipe.stream_seed,
                            recipe.source,
                            recipe.methods,
                            review_budgets,
                        )
                    )
    return jobs


def site_sequences(ds: Dataset, job: StreamJob) -> tuple[list[np.ndarray], np.ndarray]:
    """Each site's images in the job's class mix (indices into ``ds.items``) and every item's class index."""
    labels = np.array([it.label for it in ds.items], dtype=np.int64)  # class indices, as the models predict
    positive = labels == ds.positive_class
    domain_of = np.array([ds.domains.index(it.domain) for it in ds.items])
    seqs = []
    for d, name in enumerate(ds.domains):
        rng = np.random.default_rng(
            [job.stream_seed, d, 5]
        )  # a site's images: the same for every δ and model
        seqs.append(
            resample_site(np.flatnonzero(domain_of == d), positive, job.mix, job.images_per_site, rng)
        )
        del name
    return seqs, labels


def run_stream(job: StreamJob) -> list[SuiteCell]:
    """Replay every method of ``job`` over its stream; one cell per site."""
    torch.set_num_threads(1)
    ds = open_dataset(job.eval_data)
    loaded = load_model(job.model_path)
    ref = find_reference(loaded.path, loaded.fingerprint, loaded.card.num_classes, PromptedViT(loaded.model))
    if ref is None and "source_reference" in loaded.card.training:
        # Replayed without it, idipt+ would be scored as another method (every decision the source's).
        raise SuiteError(f"{Path(job.model_path).name}: its source reference is missing or unusable")
    all_passes: SourcePasses = PassCache(Path(job.passes_dir)).passes(
        Path(job.model_path), [it.path for it in ds.items]
    )
    seqs, labels = site_sequences(ds, job)
    order, site_of = interleave(
        seqs, job.delta, job.fragments, job.stream_seed, [job.mix == DRIFT] * len(seqs)
    )
    passes = all_passes.take(order)
    y = labels[order]
    replayed = {m: replay(m, passes, ref, loaded, None, seed=job.stream_seed) for m in job.methods}
    source_preds = replayed["source"].preds
    decisions = {m: r.preds for m, r in replayed.items() if m != "source"}
    reviewed: dict[str, np.ndarray] = {}
    for m, r in replayed.items():
        for budget in job.review_budgets if m != "source" else ():
            two_class = bool(np.isfinite(r.margin).all()) and bool(r.candidates)
            sim = review_stream(
                r.preds,
                source_preds,
                r.margin,
                r.threshold.astype(np.float64) if two_class else None,
                r.candidates if two_class else {},
                r.group.astype(np.int64),
                y,
                budget,
                seed=job.stream_seed,
            )
            decisions[reviewed_name(m, budget)] = sim.decisions
            reviewed[reviewed_name(m, budget)] = sim.reviewed
    cells = []
    for s, name in enumerate(ds.domains):
        mask = site_of == s
        results = {m: paired(y[mask], source_preds[mask], d[mask]) for m, d in decisions.items()}
        reviews = {m: int(r[mask].sum()) for m, r in reviewed.items()}
        mix = job.mix if isinstance(job.mix, str) else f"{job.mix:g}"
        cells.append(
            SuiteCell(job.kind, job.model, mix, job.delta, name, name == job.source, results, reviews)
        )
    return cells


def run_suite(
    recipe: Recipe,
    prepared: Prepared,
    work: Path,
    workers: int = 1,
    log: Callable[[str], None] = print,
    review_budgets: tuple[int, ...] = (),
) -> list[SuiteCell]:
    """Every stream of the recipe, in parallel processes when ``workers`` > 1.

    ``review_budgets``: also each method's decisions after that many simulated reviews per site
    (result keys from :func:`reviewed_name`; ``engine.bench.reviews``).
    """
    jobs = stream_jobs(recipe, prepared, work, review_budgets)
    cells: list[SuiteCell] = []
    started = time.perf_counter()
    if workers > 1:
        with ProcessPoolExecutor(workers) as pool:
            for i, out in enumerate(pool.map(run_stream, jobs), 1):
                cells += out
                log(f"stream {i}/{len(jobs)} done ({time.perf_counter() - started:.0f} s)")
    else:
        for i, job in enumerate(jobs, 1):
            cells += run_stream(job)
            log(f"stream {i}/{len(jobs)} done ({time.perf_counter() - started:.0f} s)")
    return cells


def summary(cells: Sequence[SuiteCell], methods: Sequence[str]) -> dict[str, Any]:
    """Per method (and reviewed variant): harmful cells, the worst cell, the source site's worst,
    target error closed; the reviewed variants also the reviews answered per site."""
    out: dict[str, Any] = {}
    keys = [k for k in (cells[0].results if cells else {}) if k.split(" K=")[0] in methods]
    for m in keys:
        if m == "source":
            continue
        targets = [c for c in cells if not c.source]
        worst = min(cells, key=lambda c: c.results[m].delta)
        lowest = min(cells, key=lambda c: c.results[m].low)
        errors = sum(100.0 - c.results[m].source_acc for c in targets)
        gains = sum(c.results[m].delta for c in targets)
        out[m] = {
            "cells": len(cells),
            "harmful_cells": sum(c.harmful(m) for c in cells),
            "worst_cell": {**worst.to_json(), "difference": worst.results[m].delta},
            "lowest_interval": {**lowest.to_json(), "low": lowest.results[m].low},
            "source_site_worst": min((c.results[m].delta for c in cells if c.source), default=0.0),
            "target_mean_gain": gains / len(targets) if targets else 0.0,
            "target_error_closed": gains / errors if errors > 0 else 0.0,
            "fixed": sum(c.results[m].fixed for c in cells),
            "broken": sum(c.results[m].broken for c in cells),
            "cells_below_source_by_1": sum(c.results[m].delta < -1.0 for c in cells),
        }
        if any(m in c.reviews for c in cells):
            out[m]["reviews_per_site"] = float(np.mean([c.reviews.get(m, 0) for c in cells]))
    return out
