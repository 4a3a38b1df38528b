"""Arguments shared by the sub-commands that build a method."""

from __future__ import annotations

import argparse
import dataclasses
import json
from typing import Any

from engine.methods import list_methods, method_config_class


def add_method_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--method", default="idipt", choices=list_methods(), help="adaptation method")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a method hyper-parameter, e.g. --set mask_percent=20 (repeatable)",
    )


def _coerce(field: dataclasses.Field[Any], text: str) -> Any:
    value = json.loads(text) if text[:1] in '[{"' or text in ("true", "false", "null") else text
    kind = str(field.type)
    if isinstance(value, str):
        if "bool" in kind:
            if value.lower() in ("1", "true", "yes", "on"):
                return True
            if value.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError(f"{field.name} expects true/false, got {text!r}")
        if kind.startswith("int"):
            return int(value)
        if kind.startswith("float"):
            return float(value)
    return value


def method_config_from_args(args: argparse.Namespace) -> Any:
    """The method's config dataclass with ``--set`` overrides applied (None if it has none)."""
    cls = method_config_class(args.method)
    if cls is None:
        if args.set:
            raise ValueError(f"method {args.method!r} has no hyper-parameters to set")
        return None
    fields = {f.name: f for f in dataclasses.fields(cls)}
    overrides: dict[str, Any] = {}
    for item in args.set:
        key, sep, text = item.partition("=")
        if not sep or key not in fields:
            raise ValueError(f"--set {item!r}: expected KEY=VALUE with KEY one of {', '.join(fields)}")
        overrides[key] = _coerce(fields[key], text)
    return cls(**overrides)
