"""Cards, checkpoints and settings that passed validation and then failed (issue 21, cases 5, 12, 13).

A checkpoint with inf/NaN weights predicted every image "normal" with an empty confidence (exit
0); a string in ``training.domain_test_acc`` made every PDF fail; a 400-digit integer in ``mpp``,
``mean`` or a ``model_kwargs`` value gave an OverflowError traceback; ``--set graph_dim=1e8`` a
traceback from the allocator and ``--set beta=-1`` a run where every image failed; ``normal`` and
``NORMAL`` were accepted as two classes. Every card field and every setting is now typed and
bounded before anything is built.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from support import TINY_CARD, card_beside

from engine import ModelLoadError, load_model, save_model
from engine.cli import main as cli_main
from engine.config import fields_of, parse_assignments
from engine.methods.base import list_methods, method_config_class
from engine.run.guard import GuardConfig

HUGE = 10**400  # a 400-digit integer: valid JSON, beyond any float


@pytest.mark.parametrize("value", [float("inf"), float("nan")], ids=["inf", "nan"])
def test_checkpoint_with_non_finite_weights_is_refused(tmp_path: Path, value: float) -> None:
    torch.manual_seed(0)
    model = TINY_CARD.build()
    with torch.no_grad():
        model.head.weight[0, 0] = value
    checkpoint = tmp_path / "bad.safetensors"
    save_model(model, TINY_CARD, checkpoint)  # the card's checksum matches the file
    with pytest.raises(
        ModelLoadError, match=r"non-finite weights \(inf or NaN\) in 1 tensor\(s\), e.g. head.weight"
    ):
        load_model(checkpoint)


def test_run_with_a_non_finite_checkpoint_exits_2_without_a_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from PIL import Image
    from support import random_images

    from tests.cli_helpers import run_argv

    torch.manual_seed(0)
    model = TINY_CARD.build()
    with torch.no_grad():
        model.blocks[0].norm1.weight.fill_(float("nan"))
    save_model(model, TINY_CARD, tmp_path / "bad.safetensors")
    (tmp_path / "in").mkdir()
    for i, img in enumerate(random_images(3)):
        Image.fromarray(img).save(tmp_path / "in" / f"{i}.png")
    code = cli_main(
        run_argv(tmp_path / "bad.safetensors", tmp_path / "in", tmp_path / "p.csv", tmp_path / "st")
    )
    assert code == 2 and "non-finite weights" in capsys.readouterr().err
    assert not (tmp_path / "p.csv").exists()


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"mpp": HUGE}, r"mpp = <an integer of 401 digits> is out of range"),
        ({"mean": [0.5, HUGE, 0.5]}, r"mean\[1\] = <an integer of 401 digits> is out of range"),
        (
            {"model_kwargs": {"depth": 2, "patch_size": 8, "qk_norm": HUGE}},
            r"model_kwargs.qk_norm = <an integer",
        ),
        (
            {"model_kwargs": {"depth": HUGE, "patch_size": 8}},
            r"model_kwargs.depth = <an integer of 401 digits>",
        ),
        (
            {"training": {"domain_test_acc": {"site1": "high"}}},
            r"training.domain_test_acc.site1 must be a number",
        ),
        ({"training": {"val_acc": "0.9"}}, r"training.val_acc must be a number, not a string"),
        ({"training": {"epochs": HUGE}}, r"training.epochs = <an integer"),
        ({"training": {"notes": {"deep": [1, HUGE]}}}, r"training.notes.deep\[1\] = <an integer"),
        ({"training": {"augmentation": "all"}}, r"training.augmentation must be an object"),
        ({"classes": ["normal", "NORMAL"]}, r"'normal' and 'NORMAL' differ only in case"),
        (
            {"classes": ["normal", "tumor\u202e"]},
            r"classes\[1\] = .* holds a control or formatting character",
        ),
    ],
    ids=[
        "mpp-400-digits",
        "mean-400-digits",
        "kwarg-400-digits",
        "depth-400-digits",
        "domain-acc-string",
        "val-acc-string",
        "epochs-400-digits",
        "nested-400-digits",
        "augmentation-string",
        "classes-differ-in-case",
        "class-with-bidi-control",
    ],
)
def test_card_values_are_typed_and_bounded_before_use(
    tiny_model_path: Path, tmp_path: Path, changes: dict[str, object], message: str
) -> None:
    with pytest.raises(ModelLoadError, match=message):
        load_model(card_beside(tiny_model_path, tmp_path, **changes))


def test_the_shipped_demo_cards_still_load() -> None:
    root = Path(__file__).resolve().parents[1] / "resources"
    for folder in ("demo", "demo-fundus", "demo-tissue"):
        checkpoint = root / folder / "model.safetensors"
        assert load_model(checkpoint).card.training, checkpoint


def _numeric_fields() -> list[tuple[str, type, str]]:
    configs = [(name, method_config_class(name)) for name in list_methods()]
    configs.append(("guard", GuardConfig))
    return [
        (name, cls, info.name)
        for name, cls in configs
        if cls is not None
        for info in fields_of(cls)
        if info.kind in (int, float)
    ]


def test_every_numeric_setting_is_bounded_and_its_default_within() -> None:
    unbounded = []
    for name, cls, field in _numeric_fields():
        info = next(i for i in fields_of(cls) if i.name == field)
        if info.low is None or info.high is None:
            unbounded.append(f"{name}.{field}")
        else:
            assert info.low <= info.default <= info.high, f"{name}.{field}"
    assert not unbounded, f"settings without both bounds: {', '.join(unbounded)}"


@pytest.mark.parametrize(
    ("method", "item", "message"),
    [
        ("idipt", "graph_dim=1e8", "graph_dim must be at most 4096"),
        ("idipt+", "beta=-1", "beta must be at least 0"),
        ("idipt", "lr=" + "9" * 400, "lr expects a finite number|lr must be at most"),
        (
            "idipt",
            "bank_size=" + "9" * 400,
            "bank_size must be at most 10000, got <an integer of 400 digits>",
        ),
        ("tent", "lr=-0.1", "lr must be at least 0"),
        ("cotta", "aug_views=100000", "aug_views must be at most 256"),
    ],
)
def test_set_values_out_of_bounds_are_refused(method: str, item: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_assignments(method_config_class(method), [item])


def test_run_refuses_a_bad_set_before_anything_is_built(
    tiny_model_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import engine.run.session
    from tests.cli_helpers import run_argv

    def no_session(*args: object, **kwargs: object) -> None:
        raise AssertionError("a session was built")

    monkeypatch.setattr(engine.run.session.Session, "__init__", no_session)
    (tmp_path / "in").mkdir()
    argv = run_argv(tiny_model_path, tmp_path / "in", tmp_path / "p.csv", tmp_path / "st")
    for item, message in (
        ("graph_dim=1e8", "graph_dim must be at most"),
        ("beta=-1", "beta must be at least"),
    ):
        assert cli_main([*argv, "--method", "idipt", "--set", item]) == 2
        assert message in capsys.readouterr().err


def test_every_setting_at_its_bounds_is_refused_or_steps(tiny_model_path: Path) -> None:
    """What the bounds let through works: each numeric setting at its low and at its high end
    builds a session that steps on an image and gives finite probabilities, or is refused by the
    config itself with a ValueError (its ``__post_init__``), never a failure later."""
    import dataclasses

    import numpy as np

    from engine import Session, load_model
    from engine.config import build_config

    loaded = load_model(tiny_model_path)
    image = np.random.default_rng(0).integers(0, 256, (40, 40, 3), dtype=np.uint8)
    failures = []
    for name, cls, field in _numeric_fields():
        if name == "guard":
            continue
        info = next(i for i in fields_of(cls) if i.name == field)
        for value in (info.low, info.high):
            assert value is not None
            value = int(value) if info.kind is int else float(value)
            try:
                config = build_config(cls, {field: value})
            except ValueError:
                continue  # refused before anything is built, with a message
            try:
                session = Session(loaded, method=name, method_config=config)
                step = session.step(image)
                assert np.isfinite(step.probs).all(), "non-finite probabilities"
            except Exception as exc:
                failures.append(f"{name}.{field}={value}: {type(exc).__name__}: {exc}"[:300])
            assert dataclasses.is_dataclass(config)
    assert not failures, "\n".join(failures)
