"""``f2tta bench`` with sites and reviews: ``--known-sites`` gives each domain one site unit,
``--review-budget`` simulates a reviewer per site as the site's ladder asks."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from bench_fixtures import bench_settings

from engine import load_model
from engine.bench import plan_bench, run_plan
from engine.cli import main as cli_main
from engine.methods.idipt_plus import THRESHOLD_CANDIDATES


def test_cli_review_budgets_simulate_a_reviewer_per_site(
    bench_data: Path, site_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--review-budget``: K = 0 leaves every decision as it was; no site gets more than K reviews."""
    out = tmp_path / "bench.json"
    args = ["bench", "--data", str(bench_data), "--model", str(site_model), "--methods", "source,idipt"]
    args += ["--seeds", "0-1", "--limit", "6", "--threads", "1", "--device", "cpu", "--no-progress"]
    args += ["--json", str(out), "--review-budget", "0,4"]
    assert cli_main(args) == 0
    assert "Review-certified decisions" in capsys.readouterr().out
    data = json.loads(out.read_text())
    reviews = data["review_budgets"]["idipt"]
    assert list(reviews) == ["0", "0 online", "4", "4 online"] and "source" not in data["review_budgets"]
    for d, p in data["methods"]["idipt"]["paired"].items():
        assert reviews["0"]["per_domain"][d]["delta"] == pytest.approx(p["delta"])
    assert reviews["0"]["reviews_per_site"] == 0.0 and 0.0 <= reviews["4"]["reviews_per_site"] <= 4.0
    assert reviews["4"]["verdicts"] == {"verified (e-BH)": 0}, "idipt has no sites to review: no comparison"
    assert cli_main([*args[:-2], "--review-budget", "5,x"]) == 2


def test_known_sites_give_each_domain_one_site_and_its_ladder_reviews(
    bench_data: Path, site_model: Path, tmp_path: Path
) -> None:
    """``--known-sites``: every domain's images are one unit of I-DiPT+ (the app's folder), in the
    free-form arrival order; without it no image founds a group alone."""
    from support import random_images

    from engine.bench.reviews import review_budgets
    from engine.model.source_reference import fit_reference, reference_path, save_reference
    from engine.run.session import Session

    model = tmp_path / "ref.safetensors"
    shutil.copy(site_model, model)
    shutil.copy(site_model.with_suffix(".json"), model.with_suffix(".json"))
    loaded = load_model(model)
    session = Session(loaded, method="source")
    x = torch.cat([session.preprocess(img) for img in random_images(40, size=32, seed=9)])
    y = torch.arange(40) % 2
    ref = fit_reference(session.model, [(x[:20], y[:20]), (x[20:], y[20:])], 2, loaded.fingerprint)
    save_reference(ref, reference_path(model), {"test": True})
    known = run_plan(
        plan_bench(bench_settings(bench_data, model, methods=("idipt+",), seeds=(0,), known_sites=True))
    )
    rec = known.records["idipt+"][0]
    units = {d: set(rec.group[rec.domain == k].tolist()) for k, d in enumerate(rec.domains)}
    assert all(len(u) == 1 and min(u) >= 0 for u in units.values())
    assert len({min(u) for u in units.values()}) == len(units)  # one unit per domain
    assert np.isfinite(rec.margin).all() and rec.candidates.shape == (
        rec.labels.shape[0],
        len(THRESHOLD_CANDIDATES),
    )
    assert ((rec.prompted == 0) | (rec.prompted == 1)).all()
    assert known.plan.config["known_sites"] is True
    free = run_plan(plan_bench(bench_settings(bench_data, model, methods=("idipt+",), seeds=(0,))))
    assert free.records["idipt+"][0].group[0] == -1  # the first image waits: no one-image group
    reviews = review_budgets(
        known.records["idipt+"], known.plan.domains, known.plan.source_domain, (0, 10), 1.0
    )
    assert reviews["0"]["reviews_per_site"] == 0.0 and reviews["10"]["reviews_per_site"] <= 10.0
