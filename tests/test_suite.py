"""The committed-suite runner (``f2tta bench-suite``) and the settings choice on simulated shifts."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from engine.bench.shifts import FAMILIES, LEVELS, corrupt, draw_site
from engine.bench.suite import Recipe, StreamJob, SuiteError, site_sequences
from engine.bench.tuning import choose, parse_grid
from engine.cli import main as cli
from engine.data.readers import open_dataset
from engine.data.synth import generate_arrays, write_synth

RECIPE = Path(__file__).resolve().parents[1] / "benchmarks" / "suites" / "safe-adaptation-1.json"


def _tiny(tmp_path: Path, **changes: object) -> Path:
    recipe = {
        "name": "tiny",
        "kinds": [{"kind": "histo", "train_seed": 5, "eval_seed": 6, "fragments": 4}],
        "training_seeds": [1],
        "train_per_site": 60,
        "eval_per_site": 60,
        "size": 32,
        "source": "site1",
        "epochs": 2,
        "patience": 2,
        "mixes": [0.5, "drift"],
        "deltas": [1.0],
        "images_per_site": 20,
        "stream_seed": 0,
        "methods": ["source", "idipt+", "foa-shift"],
    } | changes
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
    assert set(cell["methods"]) == {"idipt+", "foa-shift"}
    assert {"fixed", "broken", "low", "high", "delta"} <= set(cell["methods"]["idipt+"])
    for method in ("idipt+", "foa-shift"):
        assert f"{method}: " in printed and "harmful of 10 cells" in printed
    assert "suite wall time" in printed
    # a second run reuses the data, the model and the passes; with simulated reviews
    reviewed = tmp_path / "reviewed.json"
    args = ["--work", str(tmp_path / "work"), "--out", str(reviewed), "--review-budgets", "0,3"]
    assert cli(["bench-suite", str(_tiny(tmp_path)), *args]) == 0
    printed = capsys.readouterr().out
    assert "training" not in printed and "idipt+ K=3: " in printed
    again = json.loads(reviewed.read_text(encoding="utf-8"))
    for before, after in zip(result["cells"], again["cells"], strict=True):
        assert after["methods"]["idipt+ K=0"] == before["methods"]["idipt+"], "no review changes nothing"
        assert after["methods"]["foa-shift"] == before["methods"]["foa-shift"]
        assert 0 <= after["reviews"]["foa-shift K=3"] <= 3, "at most K reviews per site"
    assert reviewed.with_suffix(".reviews.png").stat().st_size > 0


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
