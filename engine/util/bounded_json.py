"""JSON from files that may be hostile: size and nesting bounded before parsing, types checked after.

``json.loads`` recurses once per level of nesting: ``[[[[...`` 100 000 deep raises
RecursionError (or, with a raised recursion limit, overflows the C stack). The depth is measured
first, without recursion, by :func:`nesting_depth`: one pass over the text in chunks of
:data:`CHUNK` bytes that tells brackets inside string literals from those outside, so its time
and memory do not depend on how long any one string is (a regular expression that removed the
strings took 31.8 s and 11.4 GB for a 90 MB string in a safetensors header).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

CHUNK = 1 << 18  # bytes scanned at a time by nesting_depth (about 25 bytes of arrays per byte)
_QUOTE, _BACKSLASH = ord('"'), ord("\\")
_OPEN, _CLOSE = (ord("["), ord("{")), (ord("]"), ord("}"))


class SchemaError(ValueError):
    """JSON that parses but is not what was expected; the message says where and what."""


def nesting_depth(text: bytes | bytearray | memoryview) -> int:
    """The deepest nesting of arrays and objects in ``text``, brackets inside strings ignored.

    A quote ends (or starts) a string unless an odd number of backslashes precedes it; the
    state (inside a string, the trailing run of backslashes, the depth) is carried from chunk to
    chunk, so memory is a few times :data:`CHUNK` whatever the text holds.
    """
    data = memoryview(text).cast("B")
    depth = deepest = 0
    in_string = 0  # 1 inside a string literal
    backslashes = 0  # parity of the run of backslashes ending the previous chunk
    for start in range(0, len(data), CHUNK):
        chunk = np.frombuffer(data[start : start + CHUNK], dtype=np.uint8)
        n = chunk.size
        positions = np.arange(n, dtype=np.int32)
        # Index of the last byte at or before each position that is not a backslash; the carried
        # run sits just before the chunk.
        last_other = np.maximum.accumulate(
            np.where(chunk != _BACKSLASH, positions, np.int32(-1 - backslashes))
        )
        run_before = np.empty(n, dtype=np.int32)  # backslashes right before each position
        run_before[0] = backslashes
        run_before[1:] = positions[:-1] - last_other[:-1]
        quotes = (chunk == _QUOTE) & (run_before % 2 == 0)
        toggles = np.cumsum(quotes, dtype=np.int32)
        outside = (in_string + toggles) % 2 == 0  # brackets are never quotes: toggles count before them
        step = np.zeros(n, dtype=np.int32)
        step[((chunk == _OPEN[0]) | (chunk == _OPEN[1])) & outside] = 1
        step[((chunk == _CLOSE[0]) | (chunk == _CLOSE[1])) & outside] = -1
        levels = depth + np.cumsum(step, dtype=np.int64)
        deepest = max(deepest, int(levels.max()))
        depth = int(levels[-1])
        in_string = int((in_string + toggles[-1]) % 2)
        backslashes = int(n - 1 - last_other[-1]) % 2  # only the parity of the run matters
    return deepest


def loads_bounded(data: bytes | str, *, max_bytes: int, max_depth: int) -> Any:
    """Parse JSON of at most ``max_bytes`` bytes nested at most ``max_depth`` levels.

    Raises:
        ValueError: too large, too deep, not UTF-8 or not JSON (the message says which).
    """
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if len(raw) > max_bytes:
        raise ValueError(f"JSON of {len(raw)} bytes exceeds the limit of {max_bytes} bytes")
    depth = nesting_depth(raw)
    if depth > max_depth:
        raise ValueError(f"JSON nested {depth} levels deep exceeds the limit of {max_depth}")
    try:
        return json.loads(raw.decode("utf-8"))
    except RecursionError as exc:  # cannot happen below the depth limit; kept as a second fence
        raise ValueError("JSON nested too deeply") from exc


class JsonFileError(ValueError):
    """A JSON file that cannot be used (too large, too deep, not JSON, not a regular file, or
    not of the expected shape); the message names the file and what is wrong."""


def read_json_file(path: str | Path, *, what: str, max_bytes: int, max_depth: int) -> Any:
    """The JSON document in ``path``, read as a regular file that never blocks, bounded in size
    and nesting before it is parsed (:func:`loads_bounded`).

    Args:
        path: the file.
        what: how the file is named in messages ("profile.json of project 'Site A'").
        max_bytes: the largest file read.
        max_depth: the deepest nesting of arrays and objects parsed.

    Raises:
        FileNotFoundError: there is no such file (the caller decides what a missing file means).
        JsonFileError: it cannot be used; the message starts with ``what`` and its path.
        OSError: it cannot be read.
    """
    from engine.util.files import UnsafeFileError, read_regular

    where = f"{what} ({path})"
    try:
        raw = read_regular(path, max_bytes, "the file")
        return loads_bounded(raw, max_bytes=max_bytes, max_depth=max_depth)
    except UnsafeFileError as exc:
        if isinstance(exc.__cause__, FileNotFoundError):
            raise FileNotFoundError(f"{where}: no such file") from exc
        raise JsonFileError(f"{where}: {exc}") from exc
    except ValueError as exc:  # too large, too deep, not UTF-8, not JSON
        raise JsonFileError(f"{where}: {exc}") from exc


def _type_name(value: object) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "true/false", type(None): "null"}
    if isinstance(value, int | float) and not isinstance(value, bool):
        return f"the number {show_number(value)}"
    return names.get(type(value), type(value).__name__)


def show_number(value: int | float) -> str:
    """A number for a message: a huge integer as its count of digits, not its 400 digits."""
    if isinstance(value, int) and abs(value) >= 10**18:
        digits = int(abs(value).bit_length() * 0.30102999566398) + 1
        if 10 ** (digits - 1) > abs(value):  # the estimate is one too many at most
            digits -= 1
        return f"<an integer of {digits} digits>"
    return repr(value)


def require_object(value: object, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise SchemaError(f"{where} must be an object, not {_type_name(value)}")
    return value


def require_list(value: object, where: str, max_len: int) -> list[Any]:
    if not isinstance(value, list):
        raise SchemaError(f"{where} must be a list, not {_type_name(value)}")
    if len(value) > max_len:
        raise SchemaError(f"{where} holds {len(value)} entries, more than the limit of {max_len}")
    return value


def require_str(value: object, where: str, max_len: int = 4096, empty: bool = True) -> str:
    if not isinstance(value, str):
        raise SchemaError(f"{where} must be a string, not {_type_name(value)}")
    if len(value) > max_len:
        raise SchemaError(f"{where} is {len(value)} characters long, more than the limit of {max_len}")
    if not empty and not value.strip():
        raise SchemaError(f"{where} must not be empty")
    return value


def require_int(value: object, where: str, lo: int, hi: int) -> int:
    """An integer in ``[lo, hi]``; a float with an integral value (``96.0``) is accepted."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise SchemaError(f"{where} must be an integer, not {_type_name(value)}")
    if not lo <= value <= hi:
        raise SchemaError(f"{where} = {show_number(value)} is out of range [{lo}, {hi}]")
    return value


def require_float(value: object, where: str, lo: float, hi: float, lo_open: bool = False) -> float:
    """A finite number in ``[lo, hi]`` (``(lo, hi]`` with ``lo_open``)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SchemaError(f"{where} must be a number, not {_type_name(value)}")
    try:
        number = float(value)
    except OverflowError:  # an integer beyond any float (400 digits): out of every range
        number = math.inf
    below = number <= lo if lo_open else number < lo
    if not math.isfinite(number) or below or number > hi:
        bracket = "(" if lo_open else "["
        raise SchemaError(f"{where} = {show_number(value)} is out of range {bracket}{lo:g}, {hi:g}]")
    return number


def check_values(value: object, where: str, max_abs: float, max_len: int) -> None:
    """Every number under ``value`` finite and within ``±max_abs``, every string at most ``max_len``.

    The fence for the parts of a document no field check reads (a card's ``training`` record):
    a 400-digit integer or an ``Infinity`` there reaches ``float()`` or a format later.

    Raises:
        SchemaError: naming the first value out of bounds, with its path.
    """
    pending: list[tuple[object, str]] = [(value, where)]
    while pending:
        item, path = pending.pop()
        if isinstance(item, dict):
            pending.extend((v, f"{path}.{k}") for k, v in item.items())
        elif isinstance(item, list):
            pending.extend((v, f"{path}[{i}]") for i, v in enumerate(item))
        elif isinstance(item, str):
            require_str(item, path, max_len)
        elif isinstance(item, int | float) and not isinstance(item, bool):
            require_float(item, path, -max_abs, max_abs)
