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
import torch
from PIL import Image

from engine import save_model
from engine.bench import (
    BenchError,
    BenchResult,
    BenchSettings,
    parse_seeds,
    parse_sweep,
    plan_bench,
    plan_rows,
    run_plan,
)
from engine.cli import main as cli_main
from engine.data import open_dataset
from engine.protocol import domain_test_sets
from tests.conftest import TINY_CARD

DOMAINS = ("site1", "site2", "site3")
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
}


def _write_dataset(root: Path, per_class: int = 8) -> Path:
    rng = np.random.default_rng(5)
    for d, domain in enumerate(DOMAINS):
        for c, cls in enumerate(("normal", "tumor")):
            folder = root / domain / cls
            folder.mkdir(parents=True)
            for i in range(per_class):
                scale = rng.uniform(0.3, 1.0)
                img = rng.integers(0, 256, (32, 32, 3)) * scale + 10 * d + 5 * c
                Image.fromarray(img.clip(0, 255).astype(np.uint8)).save(folder / f"img{i}.png")
    return root


@pytest.fixture(scope="module")
def bench_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _write_dataset(tmp_path_factory.mktemp("bench") / "data")


@pytest.fixture(scope="module")
def site_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny random ViT, trained (so to speak) on site1."""
    torch.manual_seed(1)
    card = dataclasses.replace(TINY_CARD, source_domain="site1")
    path = tmp_path_factory.mktemp("bench-model") / "tiny.safetensors"
    save_model(card.build(), card, path)
    return path


def _settings(data: Path, model: Path, **kw: object) -> BenchSettings:
    base: dict[str, object] = {"methods": ("source", "idipt"), "seeds": (0, 1), "threads": 1, "device": "cpu"}
    base.update(kw)
    return BenchSettings(data=data, model=model, **base)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def serial_result(bench_data: Path, site_model: Path) -> BenchResult:
    return run_plan(plan_bench(_settings(bench_data, site_model)))


# ------------------------------------------------------------------------------------ planning
def test_parse_seeds() -> None:
    assert parse_seeds("0-7") == tuple(range(8))
    assert parse_seeds("3, 0-1,3") == (0, 1, 3)
    for bad in ("", "a", "3-1", "1-x"):
        with pytest.raises(BenchError):
            parse_seeds(bad)


def test_parse_sweep() -> None:
    assert parse_sweep("k=10,20") == ("mask_percent", [("10", 10.0), ("20", 20.0)])
    assert parse_sweep("bank=5, 40") == ("bank_size", [("5", 5), ("40", 40)])
    assert parse_sweep("delta=0.01,10") == ("delta", [("0.01", 0.01), ("10", 10.0)])
    for bad in ("k", "k=", "nope=1", "bank=1.5", "delta=0"):
        with pytest.raises(BenchError):
            parse_sweep(bad)


def test_plan_rows_ablation_and_sweeps() -> None:
    rows = plan_rows(["source", "idipt"], True, ablation=True, sweep=None)
    assert [r.name for r in rows] == [
        "source",
        "idipt",
        "idipt[use_uom=False]",
        "idipt[use_pgd=False]",
        "idipt[use_uom=False,use_pgd=False]",
        "idipt[use_graphs=False]",
    ]
    assert rows[4].overrides == (("use_uom", False), ("use_pgd", False))
    k = plan_rows(["source"], False, ablation=False, sweep="k=10,20")
    assert [(r.name, r.overrides) for r in k] == [
        ("idipt[k=10]", (("mask_percent", 10.0),)),
        ("idipt[k=20]", (("mask_percent", 20.0),)),
    ]
    delta = plan_rows(["source", "idipt"], True, ablation=False, sweep="delta=0.1,1")
    assert [(r.name, r.delta) for r in delta] == [
        ("source[delta=0.1]", 0.1),
        ("source[delta=1]", 1.0),
        ("idipt[delta=0.1]", 0.1),
        ("idipt[delta=1]", 1.0),
    ]
    with pytest.raises(BenchError, match="unknown method"):
        plan_rows(["nope"], True, ablation=False, sweep=None)
    with pytest.raises(BenchError, match="mask_percent"):
        plan_rows(["idipt"], False, ablation=False, sweep="k=100")


def test_plan_jobs_carry_sweep_delta(bench_data: Path, site_model: Path) -> None:
    plan = plan_bench(_settings(bench_data, site_model, methods=None, sweep="delta=0.1,10", fragments=3))
    assert [(j.row, j.seed, j.stream.delta, j.stream.fragments) for j in plan.jobs] == [
        ("idipt[delta=0.1]", 0, 0.1, 3),
        ("idipt[delta=0.1]", 1, 0.1, 3),
        ("idipt[delta=10]", 0, 10.0, 3),
        ("idipt[delta=10]", 1, 10.0, 3),
    ]
    assert plan.source_domain == "site1" and plan.images_per_job == 12


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


def test_workers_match_serial(serial_result: BenchResult, bench_data: Path, site_model: Path) -> None:
    parallel = run_plan(plan_bench(_settings(bench_data, site_model, workers=2)))
    _same_records(serial_result, parallel)


@pytest.mark.slow
def test_ray_matches_serial(serial_result: BenchResult, bench_data: Path, site_model: Path) -> None:
    pytest.importorskip("ray")
    on_ray = run_plan(plan_bench(_settings(bench_data, site_model, workers=2, ray="")))
    _same_records(serial_result, on_ray)


def test_unreadable_image_is_skipped(bench_data: Path, site_model: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    shutil.copytree(bench_data, data)
    victim = domain_test_sets(open_dataset(data), 0)["site2"][0].path
    victim.write_bytes(b"not an image at all")
    result = run_plan(plan_bench(_settings(data, site_model, methods=("source",), seeds=(0,))))
    assert result.records["source"][0].labels.size == 11
    assert [s["path"] for s in result.plan.config["skipped_images"]] == [str(victim)]
