"""Config dataclass fields as data: listing, help, bounds and text-to-value coercion in one place.

Every frozen config dataclass of the engine (the methods' configs, :class:`~engine.run.guard.GuardConfig`)
declares its fields with :func:`setting`, which keeps the field's help text (and optional bounds)
in ``dataclasses.Field.metadata``. The command line (``--set KEY=VALUE``, ``f2tta methods NAME``),
the benchmark's sweeps and the app's settings dialog all read fields through :func:`fields_of`
and turn text into values with :func:`coerce`, so they agree on names, types and limits, and the
help text is there in a frozen bundle that carries no source code.
"""

from __future__ import annotations

import dataclasses
import json
import math
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from engine.util.bounded_json import show_number

T = TypeVar("T")
SCALARS: tuple[type, ...] = (bool, int, float, str)
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def setting(default: T, help: str, *, low: float | None = None, high: float | None = None) -> T:
    """A config field with its help text and optional inclusive bounds kept in the field metadata.

    Args:
        default: the field's default value (immutable).
        help: meaning and unit, one sentence; shown by ``f2tta methods NAME`` and as a tooltip.
        low / high: smallest and largest accepted value of a numeric field (None: unbounded).
    """
    meta = {"help": help, "low": low, "high": high}
    field: T = dataclasses.field(default=default, metadata=meta)
    return field


@dataclass(frozen=True)
class FieldInfo:
    """One settable field of a config dataclass."""

    name: str
    kind: type  # bool, int, float or str
    default: Any
    help: str = ""
    choices: tuple[Any, ...] = ()  # the allowed values of a Literal field
    low: float | None = None
    high: float | None = None

    def check(self, value: Any) -> Any:
        """``value`` converted to :attr:`kind` and checked against choices and bounds.

        Raises:
            ValueError: the value has the wrong type or is out of range; the message names the field.
        """
        if self.kind is bool:
            if not isinstance(value, bool):
                raise ValueError(f"{self.name} expects true or false, got {value!r}")
        elif self.kind in (int, float):
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"{self.name} expects a number, got {value!r}")
            if self.kind is int:
                if isinstance(value, float) and not value.is_integer():
                    raise ValueError(f"{self.name} expects a whole number, got {value!r}")
                value = int(value)
            else:
                try:
                    value = float(value)
                except OverflowError:  # an integer beyond any float: a 400-digit number
                    value = math.inf
                if not math.isfinite(value):
                    raise ValueError(f"{self.name} expects a finite number, got {show_number(value)}")
            if self.low is not None and value < self.low:
                raise ValueError(f"{self.name} must be at least {self.low:g}, got {show_number(value)}")
            if self.high is not None and value > self.high:
                raise ValueError(f"{self.name} must be at most {self.high:g}, got {show_number(value)}")
        elif not isinstance(value, str):
            raise ValueError(f"{self.name} expects text, got {value!r}")
        if self.choices and value not in self.choices:
            raise ValueError(f"{self.name} must be one of {', '.join(map(str, self.choices))}, got {value!r}")
        return value

    def describe(self) -> str:
        """``name = default  help [choices] (bounds)`` for listings."""
        text = f"{self.name} = {self.default!r}"
        extra = [self.help] if self.help else []
        if self.choices:
            extra.append("one of " + ", ".join(map(str, self.choices)))
        if self.low is not None or self.high is not None:
            extra.append(
                f"range [{'' if self.low is None else f'{self.low:g}'}, "
                f"{'' if self.high is None else f'{self.high:g}'}]"
            )
        return text + ("  # " + "; ".join(extra) if extra else "")


def fields_of(cls: type | None) -> list[FieldInfo]:
    """The scalar fields (bool, int, float, Literal, str) of a config dataclass, in declaration order.

    Fields of other types (tuples, nested configs) are not settable from text and are left out.
    """
    if cls is None or not dataclasses.is_dataclass(cls):
        return []
    try:
        hints = typing.get_type_hints(cls)
    except (NameError, TypeError):  # unresolvable annotations: fall back to the default's type
        hints = {}
    infos = []
    for f in dataclasses.fields(cls):
        if f.default is dataclasses.MISSING:
            continue
        hint = hints.get(f.name, type(f.default))
        choices: tuple[Any, ...] = ()
        if typing.get_origin(hint) is typing.Literal:
            choices = typing.get_args(hint)
            kind: type = type(f.default)
        else:
            kind = hint if hint in SCALARS else type(f.default)
        if kind not in SCALARS:
            continue
        meta = f.metadata
        infos.append(
            FieldInfo(
                f.name, kind, f.default, str(meta.get("help", "")), choices, meta.get("low"), meta.get("high")
            )
        )
    return infos


def coerce(info: FieldInfo, text: str) -> Any:
    """Turn command-line text into a checked value of the field (``"1e-3"``, ``"true"``, ``"gated"``).

    Raises:
        ValueError: the text is not a valid value; the message names the field.
    """
    raw = text.strip()
    value: Any
    if info.kind is bool:
        if raw.lower() in _TRUE:
            value = True
        elif raw.lower() in _FALSE:
            value = False
        else:
            raise ValueError(f"{info.name} expects true or false, got {text!r}")
    elif info.kind in (int, float):
        try:
            value = int(raw) if info.kind is int else float(raw)
        except ValueError:
            try:
                value = float(raw)  # "1e3" for an int field
            except ValueError:
                kind = "a whole number" if info.kind is int else "a number"
                raise ValueError(f"{info.name} expects {kind}, got {text!r}") from None
    else:
        value = json.loads(raw) if raw[:1] == '"' else raw
    return info.check(value)


def parse_assignments(cls: type | None, items: Iterable[str], what: str = "--set") -> dict[str, Any]:
    """``["k=10", "lr=1e-3"]`` -> checked overrides of ``cls``'s fields.

    Raises:
        ValueError: an item is not ``KEY=VALUE``, names no field of ``cls``, or has a bad value.
    """
    items = list(items)
    infos = {i.name: i for i in fields_of(cls)}
    if items and cls is None:
        raise ValueError(f"{what}: this method has no settings")
    out: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or key not in infos:
            raise ValueError(f"{what} {item!r}: expected KEY=VALUE with KEY one of {', '.join(infos)}")
        out[key] = coerce(infos[key], text)
    return out


def build_config(cls: type[T], values: Mapping[str, Any]) -> T:
    """An instance of ``cls`` from JSON-like values: unknown names refused, every value checked.

    Raises:
        ValueError: an unknown field, a value of the wrong type or out of range, or a value the
            class itself rejects (its ``__post_init__``).
    """
    infos = {i.name: i for i in fields_of(cls)}
    known = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(f"unknown {cls.__name__} field(s): {', '.join(unknown)}")
    checked = {k: infos[k].check(v) if k in infos else v for k, v in values.items()}
    try:
        return cls(**checked)
    except TypeError as exc:
        raise ValueError(f"{cls.__name__}: {exc}") from exc


def differences(cls: type | None, saved: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """``name: saved -> current`` for each field whose value differs (for refusal messages)."""
    names = (
        [f.name for f in dataclasses.fields(cls)] if cls is not None and dataclasses.is_dataclass(cls) else []
    )
    names += sorted((set(saved) | set(current)) - set(names))
    return [
        f"{n}: {saved.get(n, '(unset)')!r} saved, {current.get(n, '(unset)')!r} now"
        for n in names
        if saved.get(n) != current.get(n)
    ]
