"""The model card's schema: the type and the bounds of every field a card may hold (issue 13).

A card is untrusted: a wrong type gave tracebacks, ``std = [0, 0, 0]`` NaN confidences, and an
``img_size`` of 20 000 or a ``depth`` of 3 000 a multi-GB model. The schema works on a card's
values, by field name, wherever they come from: :func:`card_fields` turns parsed JSON into checked
constructor arguments of :class:`engine.model.card.ModelCard`, and :func:`check_card` checks the
values of a card however it was made (from JSON or in code).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import timm

from engine.util.bounded_json import (
    SchemaError,
    check_values,
    require_float,
    require_int,
    require_list,
    require_object,
    require_str,
)

MAX_CLASSES = 10_000
MAX_NAME = 256  # characters of a class name, architecture or domain
# Inclusive bounds of every numeric setting of a card: (low, high).
LIMITS: dict[str, tuple[float, float]] = {
    "img_size": (8, 2048),
    "mean": (0.0, 1.0),
    "std": (1e-3, 10.0),  # std > 0: a zero std divides by zero (NaN confidences)
    "mpp": (1e-3, 1000.0),
    "depth": (1, 64),
    "embed_dim": (8, 8192),
    "num_heads": (1, 128),
    "patch_size": (1, 2048),
    "mlp_ratio": (0.25, 16.0),
    "reg_tokens": (0, 64),
    "in_chans": (3, 3),  # the engine feeds RGB
    "init_values": (0.0, 10.0),
    # Dropout probabilities, all within [0, 1].
    **dict.fromkeys(
        (
            "drop_rate",
            "pos_drop_rate",
            "patch_drop_rate",
            "proj_drop_rate",
            "attn_drop_rate",
            "drop_path_rate",
        ),
        (0.0, 1.0),
    ),
}
_INT_SETTINGS = frozenset(
    {"img_size", "depth", "embed_dim", "num_heads", "patch_size", "reg_tokens", "in_chans"}
)
# Any other numeric model_kwargs value must lie within +-this.
OTHER_NUMBER_LIMIT = 1e6
# Any number of the training record must lie within +-this, any string be at most this long.
TRAINING_NUMBER_LIMIT = 1e15
TRAINING_TEXT_LIMIT = 4096
# The training record's fields that are read (reports, `f2tta reference`, the app's advice), with
# their type: "text", "int" (>= 0), "number" (>= 0), "share" (0-1), "flag", "object", or an
# object of shares ("shares"). Others are kept as they are, their values bounded.
TRAINING_FIELDS: dict[str, str] = {
    "optimizer": "text",
    "schedule": "text",
    "split": "text",
    "torch": "text",
    "timm": "text",
    "lr": "number",
    "weight_decay": "number",
    "seconds": "number",
    "batch_size": "int",
    "epochs": "int",
    "max_epochs": "int",
    "patience": "int",
    "best_epoch": "int",
    "seed": "int",
    "split_seed": "int",
    "n_train": "int",
    "n_val": "int",
    "n_test": "int",
    "val_acc": "share",
    "test_acc": "share",
    "pretrained": "flag",
    "augmentation": "object",
    "dataset": "object",
    "source_reference": "object",
    "domain_test_acc": "shares",
}
# timm.create_model arguments that load files, download, or clash with the card's own fields.
FORBIDDEN_KWARGS = frozenset(
    {
        "pretrained",
        "pretrained_cfg",
        "pretrained_cfg_overlay",
        "pretrained_strict",
        "checkpoint_path",
        "cache_dir",
        "num_classes",
        "img_size",
        "features_only",
        "scriptable",
        "exportable",
        "no_jit",
    }
)


def card_fields(data: object) -> dict[str, Any]:
    """The :class:`~engine.model.card.ModelCard` arguments in ``data`` (parsed JSON), each type-checked.

    Raises:
        SchemaError: naming the field of the wrong type.
    """
    data = require_object(data, "the card")
    for key in ("arch", "classes", "img_size"):
        if key not in data:
            raise SchemaError(f"missing field {key}")
    names = require_list(data["classes"], "classes", MAX_CLASSES)
    fields: dict[str, Any] = {
        "arch": require_str(data["arch"], "arch", MAX_NAME, empty=False),
        "classes": tuple(_class_name(c, f"classes[{i}]") for i, c in enumerate(names)),
        "img_size": require_int(data["img_size"], "img_size", 0, 2**31),
    }
    for key in ("mean", "std"):
        if key in data:
            values = require_list(data[key], key, 3)
            if len(values) != 3:
                raise SchemaError(f"{key} needs three values (one per RGB channel), got {len(values)}")
            fields[key] = tuple(
                require_float(v, f"{key}[{i}]", -math.inf, math.inf) for i, v in enumerate(values)
            )
    if "source_domain" in data:
        fields["source_domain"] = require_str(data["source_domain"], "source_domain", MAX_NAME)
    if "model_kwargs" in data:
        fields["model_kwargs"] = dict(require_object(data["model_kwargs"], "model_kwargs"))
    if data.get("mpp") is not None:
        fields["mpp"] = require_float(data["mpp"], "mpp", -math.inf, math.inf)
    if "training" in data:
        fields["training"] = dict(require_object(data["training"], "training"))
        check_training(fields["training"])
    if "positive_class" in data:
        fields["positive_class"] = require_int(data["positive_class"], "positive_class", -(2**31), 2**31)
    return fields


def check_card(card: Mapping[str, Any]) -> None:
    """Raise :class:`SchemaError` naming the first of a card's values (each field by its name, as
    ``vars(card)`` gives them) that is of the wrong type or out of bounds."""
    arch, classes = require_str(card["arch"], "arch", MAX_NAME, empty=False), card["classes"]
    if not timm.is_model(arch):
        raise SchemaError(f"arch {arch!r} is not a timm architecture")
    if not 2 <= len(classes) <= MAX_CLASSES:
        raise SchemaError(f"classes: needs 2 to {MAX_CLASSES} class names, got {len(classes)}")
    for i, name in enumerate(classes):
        require_str(name, f"classes[{i}]", MAX_NAME, empty=False)
        if not name.isprintable():  # a newline or bidi control forges console lines and report cells
            raise SchemaError(f"classes[{i}] = {name!r} holds a control or formatting character")
    if len(set(classes)) != len(classes):
        raise SchemaError(f"classes: names must be distinct, got {list(classes)}")
    # Labels and class folders are matched ignoring case: 'normal' and 'NORMAL' would be one class.
    seen: dict[str, str] = {}
    for name in classes:
        other = seen.setdefault(name.casefold(), name)
        if other != name:
            raise SchemaError(
                f"classes: {other!r} and {name!r} differ only in case; labels are matched ignoring case, "
                "so class names must differ in more than case"
            )
    _bounded("img_size", card["img_size"])
    for key in ("mean", "std"):
        values = card[key]
        if len(values) != 3:
            raise SchemaError(f"{key} needs three values (one per RGB channel), got {len(values)}")
        for i, v in enumerate(values):
            _bounded(key, v, f"{key}[{i}]")
    require_str(card["source_domain"], "source_domain", MAX_NAME)
    if card["mpp"] is not None:
        _bounded("mpp", card["mpp"])
    require_int(card["positive_class"], "positive_class", 0, len(classes) - 1)
    check_training(require_object(card["training"], "training"))
    for key, value in require_object(card["model_kwargs"], "model_kwargs").items():
        _check_kwarg(key, value)


def check_training(training: dict[str, Any]) -> None:
    """The training record: known fields of their type, every number and string bounded.

    Raises:
        SchemaError: naming the field (a string in ``domain_test_acc`` failed every PDF report).
    """
    check_values(training, "training", TRAINING_NUMBER_LIMIT, TRAINING_TEXT_LIMIT)
    for key, kind in TRAINING_FIELDS.items():
        if training.get(key) is None:
            continue
        value, where = training[key], f"training.{key}"
        if kind == "text":
            require_str(value, where, TRAINING_TEXT_LIMIT)
        elif kind == "int":
            require_int(value, where, 0 if key != "seed" else -(2**63), 2**63)
        elif kind == "number":
            require_float(value, where, 0.0, TRAINING_NUMBER_LIMIT)
        elif kind == "share":
            require_float(value, where, 0.0, 1.0)
        elif kind == "flag" and not isinstance(value, bool):
            raise SchemaError(f"{where} must be true or false")
        elif kind in ("object", "shares"):
            entries = require_object(value, where)
            if kind == "shares":
                for name, share in entries.items():
                    require_float(share, f"{where}.{name}", 0.0, 1.0)


def _class_name(value: object, where: str) -> str:
    """A class name: a string, or an integer written as one (older cards)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return require_str(value, where, MAX_NAME, empty=False)


def _bounded(key: str, value: object, where: str | None = None) -> None:
    lo, hi = LIMITS[key]
    if key in _INT_SETTINGS:
        require_int(value, where or key, int(lo), int(hi))
    else:
        require_float(value, where or key, lo, hi)


def _check_kwarg(key: str, value: object) -> None:
    where = f"model_kwargs.{key}"
    if key in FORBIDDEN_KWARGS:
        raise SchemaError(
            f"{where} is not allowed in a card (the card sets it, or it would load or download files)"
        )
    if key in LIMITS and value is not None:
        _bounded(key, value, where)
        return
    values = value if isinstance(value, list | tuple) else [value]
    if len(values) > 16:
        raise SchemaError(f"{where} holds {len(values)} values, more than the limit of 16")
    for v in values:
        if isinstance(v, bool) or v is None:
            continue
        if isinstance(v, str):
            require_str(v, where, MAX_NAME)
        elif isinstance(v, int | float):
            require_float(v, where, -OTHER_NUMBER_LIMIT, OTHER_NUMBER_LIMIT)
        else:
            raise SchemaError(
                f"{where} must be a number, string, true/false or null (or a short list of them)"
            )
