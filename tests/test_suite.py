"""The committed-suite runner (``f2tta bench-suite``) and the settings choice on simulated shifts."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from bench_fixtures import TINY_RECIPE

from engine.cli import main as cli
from engine.data.readers import open_dataset
from lab.bench.shifts import FAMILIES, LEVELS, corrupt, draw_site
from lab.bench.streams import help_then_harm
from lab.bench.suite import Recipe, SuiteError
from lab.bench.suite_stream import StreamJob, noisy, site_sequences, told_sites
from lab.bench.tuning import choose, parse_grid
from lab.synth.generate import generate_arrays, write_synth

RECIPE = Path(__file__).resolve().parents[1] / "benchmarks" / "suites" / "safe-adaptation-1.json"


def _tiny(tmp_path: Path, **changes: object) -> Path:
    recipe = TINY_RECIPE | changes
    path = tmp_path / "recipe.json"
    path.write_text(json.dumps(recipe), encoding="utf-8")
    return path


def test_the_committed_recipe_is_valid() -> None:
    recipe = Recipe.load(RECIPE)
    assert {k.kind for k in recipe.kinds} == {"histo", "fundus", "lesion"}
    assert len(recipe.training_seeds) >= 3 and recipe.images_per_site >= 1000
    assert set(recipe.mixes) == {0.1, 0.2, 0.5, 0.8, 0.9, "drift"} and set(recipe.deltas) == {0.1, 1.0, 10.0}


def test_bench_suite_prints_every_cell_and_writes_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "suite.json"
    code = cli(["bench-suite", str(_tiny(tmp_path)), "--work", str(tmp_path / "work"), "--out", str(out)])
    assert code == 0
    printed = capsys.readouterr().out
    result = json.loads(out.read_text(encoding="utf-8"))
    assert len(result["cells"]) == 2 * 5  # two mixes, five sites
    cell = result["cells"][0]
    assert set(cell["methods"]) == {"idipt+", "idipt+ final", "idipt+ guarded", "foa-shift"}
    assert {"fixed", "broken", "low", "high", "delta"} <= set(cell["methods"]["idipt+"])
    assert cell["protocol"] == "free-form" and cell["best_threshold_errors"] >= 0
    for method in ("idipt+", "idipt+ final", "foa-shift"):
        assert f"  {method}: median error closed" in printed
    summary = result["summary"]["free-form"]
    assert {"median_error_closed", "harmed_units", "cells_below_source_by_1"} <= set(summary["idipt+"])
    assert "suite wall time" in printed and "sites or site groups per stream" in printed
    # a second run reuses the data, the model and the passes; with simulated reviews
    reviewed = tmp_path / "reviewed.json"
    args = ["--work", str(tmp_path / "work"), "--out", str(reviewed), "--review-budgets", "0,3"]
    assert cli(["bench-suite", str(_tiny(tmp_path)), *args]) == 0
    printed = capsys.readouterr().out
    assert "training" not in printed and "idipt+ K=3: " in printed and "of which false" in printed
    again = json.loads(reviewed.read_text(encoding="utf-8"))
    for before, after in zip(result["cells"], again["cells"], strict=True):
        assert after["methods"]["idipt+ final"] == before["methods"]["idipt+ final"]
        assert after["methods"]["foa-shift"] == before["methods"]["foa-shift"]
        assert 0 <= after["reviews"]["idipt+ K=3"] <= 3, "at most K reviews per site"
        assert "idipt+ K=3 online" in after["methods"]
    assert reviewed.with_suffix(".reviews.png").stat().st_size > 0


def test_the_second_suites_protocols_mixes_and_reviewer_noise(tmp_path: Path) -> None:
    """Known sites, two sites as one folder, a site read in scan order, a noisy reviewer, a second
    training recipe and the second site set: every variant of every cell is computed."""
    recipe = _tiny(
        tmp_path,
        kinds=[{"kind": "histo", "sites": "v2", "train_seed": 5, "eval_seed": 6, "fragments": 4}],
        mixes=["scan", "help-then-harm"],
        protocols=["known-sites", "mixed-folders"],
        mixed_pair=[4, 5],
        training_recipes=["adamw-p16"],
        review_budgets=[3],
        reviewer_noise=[0.0, 0.1],
        review_at=0.5,
        review_moments=[1.0],
        plain_uses=True,
    )
    loaded = Recipe.load(recipe)
    assert loaded.kinds[0].name == "histo-v2" and loaded.review_at == 0.5 and loaded.plain_uses
    out = tmp_path / "suite.json"
    assert cli(["bench-suite", str(recipe), "--work", str(tmp_path / "work"), "--out", str(out)]) == 0
    result = json.loads(out.read_text(encoding="utf-8"))
    assert set(result["summary"]) == {"known-sites", "mixed-folders"}
    cell = result["cells"][0]
    assert cell["kind"] == "histo-v2" and cell["model"] == "histo-v2-adamw-p16-s1" and cell["mix"] == "scan"
    assert {"idipt+ K=3", "idipt+ K=3 noise=0.1", "idipt+ K=3 online", "idipt+ K=3 noise=0.1 online"} <= set(
        cell["methods"]
    )
    # the reviewer at the end as well, and the plain uses of the same labels at both moments
    plain = {f"idipt+ K=3 {use}{at}" for use in ("best-of-K", "threshold-on-K") for at in ("", " at=1")}
    assert {"idipt+ K=3 at=1", "idipt+ K=3 at=1 online"} | plain <= set(cell["methods"]), sorted(
        cell["methods"]
    )
    units = {(s["protocol"], s["mix"]): s["site_units"] for s in result["streams"]}
    assert {units[("known-sites", m)] for m in ("scan", "help-then-harm")} == {5}
    assert units[("mixed-folders", "scan")] == 4  # two sites given as one folder
    assert {"errors_removed_pooled", "median_unit_gain"} <= set(
        result["summary"]["known-sites"]["idipt+ K=3"]
    )


def test_help_then_harm_puts_the_source_models_errors_first() -> None:
    """The adversarial order of the sixth suite: any rule that changes decisions near the boundary
    helps on a site's first images (the source model's errors) and harms on the rest."""
    right = np.array([True, False, True, False, True])
    assert list(help_then_harm(np.arange(5) * 10, right)) == [10, 30, 0, 20, 40]


def test_told_sites_and_a_noisy_reviewer() -> None:
    job = StreamJob("histo", "m", "", "", "", 0.5, 1.0, 4, 20, 0, "site1", ("source",))
    domains = ("site1", "site2", "site3")
    site_of = np.array([0, 1, 2, 2])
    assert told_sites(job, domains, site_of) is None
    known = told_sites(StreamJob(**{**job.__dict__, "protocol": "known-sites"}), domains, site_of)
    assert known is not None and list(known) == ["site1", "site2", "site3", "site3"]
    mixed = StreamJob(**{**job.__dict__, "protocol": "mixed-folders", "mixed_pair": (2, 3)})
    assert list(told_sites(mixed, domains, site_of)) == ["site1", "site2+site3", "site2+site3", "site2+site3"]
    labels = np.zeros(10_000, dtype=np.int64)
    wrong = noisy(labels, 0.1, 2, np.random.default_rng(0))
    assert 0.08 < float(np.mean(wrong != labels)) < 0.12 and set(np.unique(wrong)) == {0, 1}
    assert noisy(labels, 0.0, 2, np.random.default_rng(0)) is labels


def test_a_positive_class_of_index_zero_is_scored_against_class_indices(tmp_path: Path) -> None:
    """Generated lesion images' positive class is class 0: shares count it, accuracies use indices.

    (The first run of the committed suite scored against 1 = positive and so inverted every
    fundus and lesion accuracy.)
    """
    data = tmp_path / "lesion"
    write_synth("lesion", data, per_domain=40, size=32, seed=1)
    ds = open_dataset(data)
    assert ds.positive_class == 0
    job = StreamJob("lesion", "m", "", str(data), "", 0.2, 1.0, 4, 20, 0, "site1", ("source",))
    seqs, labels = site_sequences(ds, job)
    assert np.array_equal(labels, [it.label for it in ds.items])  # class indices, as models predict
    for seq in seqs:
        assert np.mean(labels[seq] == 0) == pytest.approx(0.2)  # the share is the positive class's


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"kinds": [{"kind": "histo", "train_seed": 5, "eval_seed": 5, "fragments": 4}]}, "another seed"),
        ({"mixes": [1.5]}, "bad class mix"),
        ({"methods": ["source", "tent"]}, "replayable"),
        ({"kinds": [{"kind": "xray", "train_seed": 1, "eval_seed": 2, "fragments": 4}]}, "unknown kind"),
        ({"protocols": ["mixed-folders"]}, "needs mixed_pair"),
        ({"protocols": ["known-sites"], "mixed_pair": [2, 3]}, "needs mixed_pair"),
        ({"protocols": ["mixed-folders"], "mixed_pair": [2, 9]}, "not a target site"),
        ({"training_recipes": ["sgd-9000"]}, "unknown training recipe"),
        ({"reviewer_noise": [0.7]}, "reviewer_noise"),
    ],
)
def test_bad_recipes_are_refused(tmp_path: Path, change: dict[str, object], message: str) -> None:
    with pytest.raises(SuiteError, match=message):
        Recipe.load(_tiny(tmp_path, **change))


def test_simulated_sites_are_consistent_and_jittered() -> None:
    images, _ = generate_arrays("histo", "site1", 2, size=32, seed=0)
    for family in FAMILIES:
        for level in LEVELS:
            site = draw_site(family, level, np.random.default_rng(1))
            draws = [corrupt(images[0], site, np.random.default_rng(k)) for k in range(6)]
            assert all(d.shape == images[0].shape and d.dtype == np.uint8 for d in draws)
            assert len({d.tobytes() for d in draws}) >= 2  # each image gets its own jitter and flip
            assert all(not np.array_equal(d, images[0]) for d in draws)
    with pytest.raises(ValueError, match="unknown shift family"):
        draw_site("fog", 1, np.random.default_rng(0))


def test_the_grid_and_the_choice_of_a_setting() -> None:
    grid = parse_grid(["join=1,2", "quantile=0.1"])
    assert grid == [{"join": 1.0, "quantile": 0.1}, {"join": 2.0, "quantile": 0.1}]
    with pytest.raises(ValueError, match="field of idipt"):
        parse_grid(["nonsense=1"])
    safe = ({"join": 1.0}, {"harmful": 0, "mean_gain": 1.0, "lowest_low": -1.0})
    better_but_harmful = ({"join": 2.0}, {"harmful": 1, "mean_gain": 5.0, "lowest_low": -4.0})
    assert choose([safe, better_but_harmful])[0] == {"join": 1.0}
