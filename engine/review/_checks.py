"""Strict reading of certificate JSON: exact keys, exact types, finite numbers, ranges.

A profile's certificates decide which site groups fall back to the source model, so a file that
was edited by hand, truncated or written by something else must be refused with a message that
says where and what, never half-loaded and never a crash (``KeyError``, ``TypeError``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any


class CertificateError(ValueError):
    """Saved certificates that cannot be used; the message says where and what."""


def fields(data: object, keys: tuple[str, ...], where: str) -> Mapping[str, Any]:
    """``data`` as a mapping with exactly ``keys`` (no key missing, none extra)."""
    if not isinstance(data, Mapping):
        raise CertificateError(f"{where}: expected an object, found {type(data).__name__}")
    found = set(data)
    if not all(isinstance(k, str) for k in found):
        raise CertificateError(f"{where}: keys must be text")
    missing = [k for k in keys if k not in found]
    extra = sorted(found - set(keys))
    if missing or extra:
        parts = ([f"missing {', '.join(missing)}"] if missing else []) + (
            [f"unexpected {', '.join(extra)}"] if extra else []
        )
        raise CertificateError(f"{where}: {'; '.join(parts)}")
    return data


def integer(value: object, where: str, low: int = 0, high: int | None = None) -> int:
    """An int in ``[low, high]`` (``True``/``False`` and floats are refused)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise CertificateError(f"{where}: expected a whole number, found {value!r}")
    if value < low or (high is not None and value > high):
        upper = "" if high is None else f" and at most {high}"
        raise CertificateError(f"{where}: {value} is out of range (at least {low}{upper})")
    return value


def number(value: object, where: str, low: float, high: float, *, open_low: bool = False) -> float:
    """A finite float (or int) in ``[low, high]`` (``(low, high]`` with ``open_low``)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise CertificateError(f"{where}: expected a number, found {value!r}")
    result = float(value)
    if not math.isfinite(result):
        raise CertificateError(f"{where}: {value!r} is not a finite number")
    if result < low or result > high or (open_low and result == low):
        bracket = "(" if open_low else "["
        raise CertificateError(f"{where}: {result} is out of range {bracket}{low}, {high}]")
    return result


def text(value: object, where: str, choices: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in choices:
        raise CertificateError(f"{where}: expected one of {', '.join(choices)}, found {value!r}")
    return value


def listing(value: object, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise CertificateError(f"{where}: expected a list, found {type(value).__name__}")
    return value
