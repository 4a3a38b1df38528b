"""``f2tta bench-suite`` against hostile recipes and interrupted runs (issue 29, cases 5 and 11).

Case 11: ``train_per_site`` 10⁹ reached a 7.45 GiB allocation and a MemoryError traceback,
``deltas: [NaN]`` was accepted (5 cells computed), ``kinds: []`` exited 0 with no cell, and a
deeply nested recipe gave a traceback. Every field is now read through one table with bounds.

Case 5: killed after a model's checkpoint but before its card, every rerun failed ("….json cannot
be read"), once leaving a 7.4 MB ``.tmp``; killed after the card but before the source reference,
the rerun exited 0 and replayed ``idipt+`` without its reference. A model's files are now one unit,
sealed by a manifest written last and verified on resume.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from types import ModuleType

import pytest
from bench_fixtures import TINY_RECIPE

import engine.model.card as card_module
import engine.model.source_reference as reference_module
from engine.cli import main as cli
from engine.run.lock import LockedError
from lab.bench.recipe import RECIPE_FIELDS, REQUIRED
from lab.bench.suite import Recipe, SuiteError, prepare, run_stream, stream_jobs

MODEL = "histo-5-s1"


def _recipe(tmp_path: Path, text: str | None = None, **changes: object) -> Path:
    path = tmp_path / "recipe.json"
    path.write_text(text if text is not None else json.dumps(TINY_RECIPE | changes), encoding="utf-8")
    return path


HOSTILE = {
    "train_per_site-1e9": ({"train_per_site": 10**9}, "train_per_site = 1000000000 is out of range"),
    "delta-nan": ({"deltas": [float("nan")]}, "deltas[0] = nan is out of range"),
    "no-kinds": ({"kinds": []}, "kinds must hold at least 1 entry"),
    "nested": ("[" * 200_000 + "]" * 200_000, "nested 200000 levels deep"),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_a_hostile_recipe_is_refused_with_a_message_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    change, message = HOSTILE[case]
    recipe = _recipe(tmp_path, change) if isinstance(change, str) else _recipe(tmp_path, **change)
    with pytest.raises(SuiteError, match=re.escape(message)):
        Recipe.load(recipe)
    work = tmp_path / "work"
    assert cli(["bench-suite", str(recipe), "--work", str(work)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message.split(" = ")[0] in err and "Traceback" not in err
    assert not work.exists(), "nothing was made"


@pytest.mark.parametrize("field", [f.name for f in RECIPE_FIELDS])
def test_every_field_of_the_table_is_typed_and_named_when_wrong(tmp_path: Path, field: str) -> None:
    with pytest.raises(SuiteError, match=field):
        Recipe.load(_recipe(tmp_path, **{field: {"an": "object"}}))
    without = {k: v for k, v in TINY_RECIPE.items() if k != field}
    row = next(f for f in RECIPE_FIELDS if f.name == field)
    if row.default is REQUIRED:
        with pytest.raises(SuiteError, match=f"'{field}' is missing"):
            Recipe.load(_recipe(tmp_path, json.dumps(without)))
    else:
        assert getattr(Recipe.load(_recipe(tmp_path, json.dumps(without))), field) == row.default


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"typo_seeds": [1]}, "unknown field 'typo_seeds'"),
        ({"mixes": [0.5, 0.5]}, "repeats an earlier entry"),
        ({"mixes": [True]}, "bad class mix"),
        ({"deltas": [0]}, "deltas\\[0\\] = 0 is out of range"),
        ({"training_seeds": [10**400]}, "an integer of 401 digits"),
        ({"source": "site9"}, "'site9' is not a site of histo"),
        ({"mixes": [0.9], "images_per_site": 40}, "raise eval_per_site"),
        ({"kinds": [TINY_RECIPE["kinds"][0], {**TINY_RECIPE["kinds"][0], "train_seed": 7}]}, "named twice"),  # type: ignore[index]
        (
            {
                "train_per_site": 50_000,
                "eval_per_site": 50_000,
                "kinds": [
                    {"kind": k, "train_seed": 1, "eval_seed": 2, "fragments": 4}
                    for k in ("histo", "fundus", "lesion")
                ],
            },
            "more than the limit",
        ),
    ],
)
def test_recipes_out_of_bounds_across_fields_are_refused(
    tmp_path: Path, change: dict[str, object], message: str
) -> None:
    with pytest.raises(SuiteError, match=message):
        Recipe.load(_recipe(tmp_path, **change))


def test_a_recipe_that_is_not_a_regular_file_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "recipe.json"
    os.mkfifo(fifo)
    with pytest.raises(SuiteError, match="not a regular file"):
        Recipe.load(fifo)


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny recipe's data, generated once; each test copies it into a work folder of its own."""
    root = tmp_path_factory.mktemp("suite-data")
    prepare(Recipe.load(_recipe(root)), root / "work", log=lambda line: None, passes=False)
    return root / "work" / "data"


def _work(tmp_path: Path, generated: Path) -> tuple[Recipe, Path]:
    work = tmp_path / "work"
    shutil.copytree(generated, work / "data")
    return Recipe.load(_recipe(tmp_path)), work


class Killed(BaseException):
    """The process dies here: nothing after this point runs (not an error anything catches)."""


def _kill_when_writing(monkeypatch: pytest.MonkeyPatch, module: ModuleType, ending: str) -> None:
    real = module.atomic_write_bytes

    def write(path: str | Path, data: bytes, keep_backup: bool = False) -> None:
        if str(path).endswith(ending):
            raise Killed
        real(path, data, keep_backup)

    monkeypatch.setattr(module, "atomic_write_bytes", write)


KILLS = {
    "in-the-checkpoint": (card_module, f"{MODEL}.safetensors"),  # save_model's 7.4 MB temp file stays
    "between-checkpoint-and-card": (card_module, f"{MODEL}.json"),
    "between-card-and-reference": (reference_module, f"{MODEL}.reference.safetensors"),
}


@pytest.mark.parametrize("kill", list(KILLS))
def test_a_model_unit_killed_half_written_is_trained_again_never_used(
    tmp_path: Path, generated: Path, monkeypatch: pytest.MonkeyPatch, kill: str
) -> None:
    recipe, work = _work(tmp_path, generated)
    with monkeypatch.context() as patch:
        _kill_when_writing(patch, *KILLS[kill])
        with pytest.raises(Killed):
            prepare(recipe, work, log=lambda line: None)
    models = work / "models"
    # What a SIGKILL inside engine.util.atomic leaves: a temp file beside the reference.
    (models / f".{MODEL}.reference.safetensors.k3j4x9.tmp").write_bytes(b"\0" * 4096)
    lines: list[str] = []
    prepare(recipe, work, log=lines.append)  # with the source passes, which read the card
    assert any(line.startswith(f"training {MODEL}.safetensors") for line in lines), lines
    names = sorted(p.name for p in models.iterdir())
    assert names == [
        f"{MODEL}.json",
        f"{MODEL}.reference.safetensors",
        f"{MODEL}.safetensors",
        f"{MODEL}.unit.json",
    ]
    job = stream_jobs(recipe, prepare(recipe, work, log=lines.append), work)[0]
    assert run_stream(job), "the suite replays with the model's source reference"


def test_a_sealed_unit_is_used_and_a_changed_one_is_trained_again(tmp_path: Path, generated: Path) -> None:
    recipe, work = _work(tmp_path, generated)
    prepare(recipe, work, log=lambda line: None, passes=False)
    lines: list[str] = []
    prepare(recipe, work, log=lines.append, passes=False)
    assert lines == [], "a whole unit is used as it is"
    card = work / "models" / f"{MODEL}.json"
    card.write_text(card.read_text(encoding="utf-8").replace('"site1"', '"site1" '), encoding="utf-8")
    prepare(recipe, work, log=lines.append, passes=False)
    assert lines == [f"training {MODEL}.safetensors again ({MODEL}.json differs from what was written)"]
    lines.clear()
    prepare(Recipe.load(_recipe(tmp_path, epochs=3)), work, log=lines.append, passes=False)
    assert lines == [f"training {MODEL}.safetensors again (trained with other settings (epochs 2 -> 3))"]


def test_a_whole_unit_from_before_manifests_is_adopted_without_training(
    tmp_path: Path, generated: Path
) -> None:
    recipe, work = _work(tmp_path, generated)
    prepare(recipe, work, log=lambda line: None, passes=False)
    manifest = work / "models" / f"{MODEL}.unit.json"
    manifest.unlink()
    lines: list[str] = []
    prepare(recipe, work, log=lines.append, passes=False)
    assert lines == [] and manifest.is_file()


def test_data_cut_short_or_of_another_size_is_generated_again(tmp_path: Path, generated: Path) -> None:
    """The data folder's name holds kind, seed and images per site, not the size: a recipe whose
    size changed used the data (and the models) of the old size."""
    recipe, work = _work(tmp_path, generated)
    prepare(recipe, work, log=lambda line: None, passes=False)
    (work / "data" / "histo-eval-6-60" / "synth.json").unlink()  # killed before the data was whole
    lines: list[str] = []
    prepare(recipe, work, log=lines.append, passes=False)
    assert lines == ["generating histo-eval-6-60 (half generated)"]
    lines.clear()
    prepare(Recipe.load(_recipe(tmp_path, size=40)), work, log=lines.append, passes=False)
    assert lines == [
        "generating histo-train-5-60 (generated with other parameters (size 32 -> 40))",
        "generating histo-eval-6-60 (generated with other parameters (size 32 -> 40))",
        f"training {MODEL}.safetensors again (trained with other settings (size 32 -> 40))",
    ]


def test_one_suite_at_a_time_per_work_folder(tmp_path: Path, generated: Path) -> None:
    from lab.bench.suite_work import WorkFolder

    recipe, work = _work(tmp_path, generated)
    with WorkFolder(work, "f2tta bench-suite other"), pytest.raises(LockedError, match="in use by process"):
        prepare(recipe, work, log=lambda line: None)
