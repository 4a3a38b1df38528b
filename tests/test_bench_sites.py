"""``f2tta bench`` with sites and reviews: ``--known-sites`` gives each domain one site unit,
``--review-budget`` simulates a reviewer per site as the site's ladder asks."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from bench_fixtures import bench_settings

from engine.cli import main as cli_main
from engine.methods.idipt_plus import THRESHOLD_CANDIDATES
from lab.bench import plan_bench, run_plan


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
    assert list(reviews) == ["0", "0 online", "4", "4 online", "4 best-of-K", "4 threshold-on-K"]
    assert "source" not in data["review_budgets"]
    assert reviews["4 best-of-K"]["reviews_per_site"] == 4.0, "a plain use labels K images per site"
    for d, p in data["methods"]["idipt"]["paired"].items():
        assert reviews["0"]["per_domain"][d]["delta"] == pytest.approx(p["delta"])
    assert reviews["0"]["reviews_per_site"] == 0.0 and 0.0 <= reviews["4"]["reviews_per_site"] <= 4.0
    assert reviews["4"]["verdicts"] == {}, "idipt has no sites to review: no comparison"
    assert cli_main([*args[:-2], "--review-budget", "5,x"]) == 2


def test_known_sites_give_each_domain_one_site_and_its_ladder_reviews(
    bench_data: Path, site_model: Path, tmp_path: Path
) -> None:
    """``--known-sites``: every domain's images are one unit of I-DiPT+ (the app's folder), in the
    free-form arrival order; without it no image founds a group alone."""
    from support import referenced_copy

    from lab.bench.reviews import review_budgets

    model = referenced_copy(site_model, tmp_path / "ref.safetensors")
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


def _records(group: np.ndarray, domain: np.ndarray, labels: np.ndarray, **kw: np.ndarray) -> object:
    from lab.bench.job import JobRecords

    n = labels.shape[0]
    classes = int(kw.pop("classes", np.array(2)))
    source = kw.pop("source", np.zeros(n, dtype=np.int64))
    return JobRecords(
        index=0,
        row="idipt+",
        seed=0,
        domains=tuple(f"site{k}" for k in range(int(domain.max()) + 1)),
        labels=labels,
        preds=source.copy(),
        source_preds=source,
        probs=np.full((n, classes), 1.0 / classes, dtype=np.float32),
        domain=domain.astype(np.int32),
        fragment=np.zeros(n, dtype=np.int32),
        seconds=np.zeros(n),
        path=np.zeros(n, dtype=np.int8),
        group=group.astype(np.int32),
        threshold=np.zeros(n, dtype=np.float32),
        margin=kw.pop("margin", np.full(n, np.nan, dtype=np.float32)),
        candidates=kw.pop("candidates", np.full((n, len(THRESHOLD_CANDIDATES)), np.nan, dtype=np.float32)),
        prompted=kw.pop("prompted", np.full(n, -1, dtype=np.int64)),
    )


def test_a_known_site_without_site_units_is_reviewed_as_one_folder() -> None:
    """A model with more than two classes forms no site unit; with the sites told, each folder is
    still one unit whose ladder tests I-DiPT's prompted decision, as the app reviews the folder."""
    from lab.bench.reviews import review_units, simulate

    n = 120
    domain = np.repeat([0, 1], n // 2)
    labels = np.tile([0, 1, 2], n // 3).astype(np.int64)
    prompted = labels.copy()  # right wherever it disagrees with the source (which calls class 0)
    rec = _records(np.full(n, -1), domain, labels, prompted=prompted, classes=np.array(3))
    unit, site = review_units(rec, known_sites=True)  # type: ignore[arg-type]
    assert site is not None and (site == domain).all()
    assert len(set(unit[domain == 0])) == 1 and len(set(unit[domain == 1])) == 1 and unit[0] != unit[-1]
    assert (unit >= 0).all()
    free = simulate(rec, 20, known_sites=False)  # type: ignore[arg-type]
    assert free.reviews_used == 0 and (free.decisions == 0).all()
    told = simulate(rec, 20, known_sites=True)  # type: ignore[arg-type]
    assert 0 < told.reviews_used <= 40
    assert (told.decisions == labels).all(), "the prompted decision, certified better, decides both folders"
    from lab.bench.reviews import review_budgets

    by = review_budgets([rec], rec.domains, "site0", (20,), 1.0, known_sites=True)["20"]  # type: ignore[list-item]
    assert by["verdicts_by_candidate"] == {"prompted": {"promoted": 2}}


def test_a_known_site_split_in_two_units_shares_its_budget() -> None:
    """A folder decided in two units (split) gets K answers in all, shared over them; free-form,
    every unit is a site and gets K."""
    from lab.bench.reviews import review_units, simulate

    n = 200
    rng = np.random.default_rng(0)
    domain = np.zeros(n, dtype=np.int64)
    group = np.where(np.arange(n) < n // 2, 0, 1)
    group[:5] = -1  # decided before the site had a unit: the folder's first unit
    margin = rng.normal(0.0, 1.0, n).astype(np.float32)
    labels = rng.integers(0, 2, n)  # the candidate is right as often as the source: never promoted
    source = (margin > 0).astype(np.int64)
    candidates = np.full((n, len(THRESHOLD_CANDIDATES)), np.nan, dtype=np.float32)
    candidates[:, 0] = 10.0  # calls every image class 0
    rec = _records(group, domain, labels, margin=margin, candidates=candidates, source=source)
    unit, _ = review_units(rec, known_sites=True)  # type: ignore[arg-type]
    assert (unit[:5] == 0).all() and (unit[5:] == group[5:]).all()
    free = simulate(rec, 6, known_sites=False)  # type: ignore[arg-type]
    told = simulate(rec, 6, known_sites=True)  # type: ignore[arg-type]
    assert free.reviews_used > 6 and 0 < told.reviews_used <= 6
