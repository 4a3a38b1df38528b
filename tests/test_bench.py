"""``f2tta bench``: planning, the JSON/CSV/PNG outputs, and identical results serial / processes / Ray."""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from bench_fixtures import DOMAINS, bench_settings
from support import TINY_CARD

from engine.cli import main as cli_main
from engine.data import open_dataset
from lab.bench import (
    BenchError,
    BenchResult,
    plan_bench,
    run_plan,
)
from lab.bench.protocol import domain_test_sets

STAT_KEYS = {"mean", "std"}
METHOD_KEYS = {
    "per_domain_acc",
    "target_acc",
    "all_acc",
    "precision",
    "recall",
    "auc",
    "segment_acc",
    "seconds_per_image",
    "paired",
}


@pytest.fixture(scope="module")
def serial_result(bench_data: Path, site_model: Path) -> BenchResult:
    return run_plan(plan_bench(bench_settings(bench_data, site_model)))


# ------------------------------------------------------------------------------------ planning
def test_plan_jobs_carry_sweep_delta(bench_data: Path, site_model: Path) -> None:
    plan = plan_bench(bench_settings(bench_data, site_model, methods=None, sweep="delta=0.1,10", fragments=3))
    assert [(j.row, j.seed, j.stream.delta, j.stream.fragments) for j in plan.jobs] == [
        ("idipt[delta=0.1]", 0, 0.1, 3),
        ("idipt[delta=0.1]", 1, 0.1, 3),
        ("idipt[delta=10]", 0, 10.0, 3),
        ("idipt[delta=10]", 1, 10.0, 3),
    ]
    assert plan.source_domain == "site1" and plan.images_per_job == 12


def test_plan_prior_shrinks_the_named_domain(bench_data: Path, site_model: Path) -> None:
    plan = plan_bench(bench_settings(bench_data, site_model, prior=(("site2", 0.25),), fragments=2))
    assert plan.config["prior"] == {"site2": 0.25}
    assert all(j.stream.prior == (("site2", 0.25),) for j in plan.jobs)
    # site2's test split (2 normal + 2 tumor of 8 + 8) keeps 1 tumor and 3 normal at most
    plain = plan_bench(bench_settings(bench_data, site_model, fragments=2))
    assert plan.images_per_job < plain.images_per_job
    with pytest.raises(BenchError, match="not a domain"):
        plan_bench(bench_settings(bench_data, site_model, prior=(("site9", 0.25),)))


def test_source_domain_must_exist(
    bench_data: Path, tiny_model_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = cli_main(
        ["bench", "--data", str(bench_data), "--model", str(tiny_model_path), "--methods", "source"]
    )
    assert code == 2 and "source domain 'test'" in capsys.readouterr().err


# ------------------------------------------------------------------------------------ running
def _stat(entry: object) -> None:
    assert isinstance(entry, dict) and set(entry) == STAT_KEYS
    # undefined figures (e.g. a domain absent from a short stream) are null, never a bare NaN
    assert all(v is None or isinstance(v, float) for v in entry.values())


def test_cli_end_to_end_json_csv_png(
    bench_data: Path, site_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "res" / "bench.json"
    args = ["bench", "--data", str(bench_data), "--model", str(site_model), "--methods", "source,idipt"]
    args += ["--seeds", "0-1", "--limit", "6", "--threads", "1", "--device", "cpu", "--no-progress"]
    args += ["--json", str(out), "--csv", str(tmp_path / "res" / "bench.csv")]
    assert cli_main(args) == 0
    printed = capsys.readouterr().out
    assert "site1 (source)" in printed and "target mean" in printed and "AUC" in printed

    def no_constants(name: str) -> None:
        raise AssertionError(f"non-standard JSON constant {name} in the results")  # strict parsers reject it

    data = json.loads(out.read_text(), parse_constant=no_constants)
    assert set(data) == {"config", "classes", "source_domain", "domains", "methods"}
    assert data["classes"] == ["normal", "tumor"]
    assert data["source_domain"] == "site1" and data["domains"] == list(DOMAINS)
    assert list(data["methods"]) == ["source", "idipt"]
    assert data["config"]["images_per_stream"] == 6 and data["config"]["seeds"] == [0, 1]
    for entry in data["methods"].values():
        assert set(entry) == METHOD_KEYS
        assert set(entry["per_domain_acc"]) == set(DOMAINS)
        for d in DOMAINS:
            _stat(entry["per_domain_acc"][d])
        for key in ("target_acc", "all_acc", "precision", "recall", "auc", "seconds_per_image"):
            _stat(entry[key])
        assert len(entry["segment_acc"]) == 8
        for seg in entry["segment_acc"]:
            _stat(seg)
        assert 0.0 <= entry["all_acc"]["mean"] <= 100.0
        for d, p in entry["paired"].items():  # against the source model on the same images
            assert d in DOMAINS and p["streams"] == 2 and p["low"] <= p["high"]
            assert p["fixed"] >= 0 and p["broken"] >= 0
    assert all(p["fixed"] == p["broken"] == 0 for p in data["methods"]["source"]["paired"].values())
    with (tmp_path / "res" / "bench.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["method"] for r in rows] == ["source", "idipt"]
    assert float(rows[0]["all_acc_mean"]) == pytest.approx(data["methods"]["source"]["all_acc"]["mean"])
    png = out.with_suffix(".png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_serial_result_is_consistent(serial_result: BenchResult) -> None:
    recs = serial_result.records["source"]
    assert [r.seed for r in recs] == [0, 1] and all(r.labels.size == 12 for r in recs)
    # The source model does not adapt: the same 12 images give the same predictions in any order.
    a, b = (
        sorted(zip(r.labels.tolist(), r.preds.tolist(), r.probs[:, 1].tolist(), strict=True)) for r in recs
    )
    assert a == b
    acc = serial_result.methods["source"]["all_acc"]
    assert acc["std"] == pytest.approx(0.0, abs=1e-9)
    for run in serial_result.runs["idipt"]:
        assert not math.isnan(run["all_acc"])


def _same_records(a: BenchResult, b: BenchResult) -> None:
    assert list(a.records) == list(b.records)
    for row in a.records:
        for ra, rb in zip(a.records[row], b.records[row], strict=True):
            assert (ra.row, ra.seed) == (rb.row, rb.seed)
            for name in ("labels", "preds", "source_preds", "probs", "domain", "fragment"):
                assert np.array_equal(getattr(ra, name), getattr(rb, name)), (row, ra.seed, name)

    def strip(res: BenchResult) -> dict[str, object]:
        return {k: {f: v for f, v in m.items() if f != "seconds_per_image"} for k, m in res.methods.items()}

    assert json.dumps(strip(a)) == json.dumps(strip(b))


def test_workers_match_serial(
    serial_result: BenchResult, bench_data: Path, site_model: Path, tmp_path: Path
) -> None:
    seen: list[int] = []
    plan = plan_bench(bench_settings(bench_data, site_model, workers=2, cache=tmp_path))
    parallel = run_plan(plan, progress=seen.append)
    _same_records(serial_result, parallel)
    assert sum(seen) == plan.total_images == 48  # every image reported once, from the workers
    assert len(list(tmp_path.glob("*.safetensors"))) == 4  # the parent caches what the workers return


@pytest.mark.slow
def test_ray_matches_serial(serial_result: BenchResult, bench_data: Path, site_model: Path) -> None:
    pytest.importorskip("ray")
    on_ray = run_plan(plan_bench(bench_settings(bench_data, site_model, workers=2, ray="")))
    _same_records(serial_result, on_ray)


def test_unreadable_image_is_skipped(bench_data: Path, site_model: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    shutil.copytree(bench_data, data)
    victim = domain_test_sets(open_dataset(data), 0)["site2"][0].path
    victim.write_bytes(b"not an image at all")
    result = run_plan(plan_bench(bench_settings(data, site_model, methods=("source",), seeds=(0,))))
    assert result.records["source"][0].labels.size == 11
    assert [s["path"] for s in result.plan.config["skipped_images"]] == [str(victim)]


# ------------------------------------------------------------------------------------ job cache
def _count_runs(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """Record (row, seed) of every job that is actually run (serial path)."""
    import lab.bench.run as bench_mod

    ran: list[tuple[str, int]] = []
    real = bench_mod.run_job

    def counting(job: bench_mod.BenchJob, on_image: object = None) -> bench_mod.JobRecords:
        ran.append((job.row, job.seed))
        return real(job, on_image)  # type: ignore[arg-type]

    monkeypatch.setattr(bench_mod, "run_job", counting)
    return ran


def test_cache_reuses_finished_jobs(
    serial_result: BenchResult,
    bench_data: Path,
    site_model: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    cache = tmp_path / "jobs"
    ran = _count_runs(monkeypatch)
    first = run_plan(plan_bench(bench_settings(bench_data, site_model, cache=cache)))
    assert len(ran) == 4 and len(list(cache.glob("*.safetensors"))) == 4
    _same_records(serial_result, first)

    from lab.bench.cache import JobCache

    stored = sorted((r.row, r.seed, r.labels.size) for r in JobCache(cache).entries())
    assert stored == [("idipt", 0, 12), ("idipt", 1, 12), ("source", 0, 12), ("source", 1, 12)]
    ran.clear()
    again = run_plan(plan_bench(bench_settings(bench_data, site_model, cache=cache)))
    assert ran == [] and again.plan.config["jobs_from_cache"] == 4
    _same_records(serial_result, again)

    # A wider grid runs only the jobs it does not have; a lost and a corrupt file are rerun.
    files = sorted(cache.glob("*.safetensors"))
    files[0].unlink()
    files[1].write_bytes(b"truncated")
    ran.clear()
    with caplog.at_level("WARNING", logger="lab.bench.cache"):
        wider = run_plan(
            plan_bench(
                bench_settings(bench_data, site_model, cache=cache, methods=("source", "tent", "idipt"))
            )
        )
    assert sorted(r for r in ran if r[0] == "tent") == [("tent", 0), ("tent", 1)]
    assert len(ran) == 4 and wider.plan.config["jobs_from_cache"] == 2
    assert any("unusable cache file" in r.getMessage() for r in caplog.records)
    for row in ("source", "idipt"):
        for ra, rb in zip(serial_result.records[row], wider.records[row], strict=True):
            assert np.array_equal(ra.probs, rb.probs) and np.array_equal(ra.fragment, rb.fragment)


def test_cache_key_follows_inputs(bench_data: Path, site_model: Path, tmp_path: Path) -> None:
    from engine.model.card import card_path_for
    from lab.bench.cache import dataset_digest, job_key, model_digest

    data = tmp_path / "data"
    shutil.copytree(bench_data, data)
    plan = plan_bench(bench_settings(data, site_model, seeds=(0,)))
    job = plan.jobs[0]
    model_id = model_digest(site_model, card_path_for(site_model))
    data_id = dataset_digest(open_dataset(data))
    key = job_key(job, model_id, data_id)
    assert key == job_key(dataclasses.replace(job, index=7, row="renamed", threads=3), model_id, data_id)
    assert key != job_key(dataclasses.replace(job, seed=1), model_id, data_id)
    assert key != job_key(dataclasses.replace(job, overrides=(("lr", 0.01),)), model_id, data_id)
    assert key != job_key(
        dataclasses.replace(job, stream=dataclasses.replace(job.stream, delta=0.1)), model_id, data_id
    )
    assert key != job_key(
        dataclasses.replace(job, stream=dataclasses.replace(job.stream, prior=(("site2", 0.25),))),
        model_id,
        data_id,
    )
    victim = next((data / "site2" / "tumor").glob("*.png"))
    victim.write_bytes(victim.read_bytes() + b"\0")
    assert dataset_digest(open_dataset(data)) != data_id
    other = tmp_path / "other.safetensors"
    shutil.copy(site_model, other)
    shutil.copy(card_path_for(site_model), card_path_for(other))
    assert model_digest(other, card_path_for(other)) == model_id
    card = json.loads(card_path_for(other).read_text())
    card["source_domain"] = "site2"
    card_path_for(other).write_text(json.dumps(card))
    assert model_digest(other, card_path_for(other)) != model_id


def test_cli_interrupted_run_resumes(
    bench_data: Path,
    site_model: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import lab.bench.run as bench_mod

    out = tmp_path / "bench.json"
    args = ["bench", "--data", str(bench_data), "--model", str(site_model), "--methods", "source,idipt"]
    args += ["--seeds", "0", "--limit", "6", "--threads", "1", "--device", "cpu", "--no-progress"]
    args += ["--json", str(out)]
    real = bench_mod.run_job
    calls: list[str] = []

    def interrupt_second(job: bench_mod.BenchJob, on_image: object = None) -> bench_mod.JobRecords:
        calls.append(job.row)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(job, on_image)  # type: ignore[arg-type]

    monkeypatch.setattr(bench_mod, "run_job", interrupt_second)
    assert cli_main(args) == 130
    assert not out.exists() and len(list(out.with_suffix(".jobs").glob("*.safetensors"))) == 1
    capsys.readouterr()
    monkeypatch.setattr(bench_mod, "run_job", real)
    ran = _count_runs(monkeypatch)
    assert cli_main(args) == 0
    assert ran == [("idipt", 0)]
    assert "1 of 2 jobs reused" in capsys.readouterr().err
    assert json.loads(out.read_text())["config"]["jobs_from_cache"] == 1
    ran.clear()
    assert cli_main([*args, "--no-cache"]) == 0 and ran == [("source", 0), ("idipt", 0)]


def test_source_stats_come_from_the_source_train_split(
    bench_data: Path, site_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from engine.data import split_dataset
    from engine.data.readers import read_array
    from engine.run.session import Session

    given: list[tuple[str, list[np.ndarray]]] = []
    real = Session.fit_source_statistics

    def spy(self: Session, images: list[np.ndarray]) -> None:
        given.append((self.method_name, list(images)))
        real(self, images)

    monkeypatch.setattr(Session, "fit_source_statistics", spy)
    settings = bench_settings(bench_data, site_model, methods=("source", "vptta"), seeds=(0,), limit=4)
    run_plan(plan_bench(settings))
    assert given == []
    fitted = run_plan(plan_bench(dataclasses.replace(settings, source_stats=3)))
    assert [name for name, _ in given] == ["vptta"]  # only the method that uses source statistics
    assert fitted.plan.config["source_stats"] == 3
    train = split_dataset(open_dataset(bench_data), 0)["site1"].train[:3]
    size = TINY_CARD.img_size
    assert len(given[0][1]) == 3
    for arr, item in zip(given[0][1], train, strict=True):
        assert np.array_equal(arr, read_array(item.path, size))


def test_source_stats_skip_unreadable_images(
    bench_data: Path, site_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from engine.data import split_dataset
    from engine.data.readers import read_array
    from engine.run.session import Session

    data = tmp_path / "data"
    shutil.copytree(bench_data, data)
    train = split_dataset(open_dataset(data), 0)["site1"].train
    train[0].path.write_bytes(b"not an image")
    given: list[list[np.ndarray]] = []
    monkeypatch.setattr(Session, "fit_source_statistics", lambda self, images: given.append(list(images)))
    settings = bench_settings(data, site_model, methods=("vptta",), seeds=(0,), limit=2, source_stats=2)
    run_plan(plan_bench(settings))
    assert len(given) == 1 and len(given[0]) == 2
    for arr, item in zip(given[0], train[1:3], strict=True):
        assert np.array_equal(arr, read_array(item.path, TINY_CARD.img_size))
