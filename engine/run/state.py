"""Saving and loading adaptation state: one safetensors file, JSON metadata, no pickle.

A state directory holds ``state.safetensors`` (the tensors, with the JSON metadata and a SHA-256
checksum in the safetensors header), ``state.safetensors.backup`` (the previous good copy) and
``state.json`` (a human-readable copy of the metadata; never read back). Writes are atomic: a
reader sees the old or the new state, never a mix, and a crash never leaves no state behind.

Reading trusts nothing: the state file must be a regular file (no FIFO, device, or symlink out
of the directory) of at most :data:`MAX_STATE_BYTES`; its JSON header and metadata are bounded
in size and nesting and their types checked (:func:`check_meta`) before anyone uses them; every
refusal names the ``.backup`` copy and the command that restores it (:func:`restore_hint`).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shlex
import shutil
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save

from engine.errors import StateError
from engine.util.atomic import atomic_write_bytes, backup_path
from engine.util.bounded_json import (
    SchemaError,
    loads_bounded,
    require_int,
    require_list,
    require_object,
    require_str,
)
from engine.util.files import UnsafeFileError, inside, read_regular

STATE_FILE = "state.safetensors"
STATE_JSON = "state.json"
FORMAT_VERSION = 1
_META_KEY = "f2tta_meta"
_SUM_KEY = "f2tta_sha256"

# Largest state file read (a ViT-L method with teacher, anchor and optimiser moments is ~2 GB).
MAX_STATE_BYTES = 8 * 2**30
# Largest JSON header; safetensors itself refuses headers above 100 MB.
MAX_HEADER_BYTES = 100_000_000
# Deepest nesting of the JSON header and metadata (the metadata written today is 4 deep).
MAX_JSON_DEPTH = 64
# Room kept free beyond the state itself when it is saved (the rows and CSVs grow too).
SAVE_MARGIN_BYTES = 1 << 20
# Longest lists the metadata may hold.
MAX_CLASSES = 100_000
MAX_EVENTS = 100_000


def _digest(meta_json: str, tensors: dict[str, torch.Tensor]) -> str:
    h = hashlib.sha256(meta_json.encode())
    for name in sorted(tensors):
        t = tensors[name]
        h.update(name.encode())
        h.update(f"{t.dtype}{tuple(t.shape)}".encode())
        if t.numel():
            h.update(t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def encode_state(tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> bytes:
    """Serialise ``tensors`` and ``meta`` (JSON-able) into safetensors bytes with a checksum."""
    cpu = {k: v.detach().to("cpu").contiguous().clone() for k, v in tensors.items()}
    meta = {**meta, "format_version": FORMAT_VERSION}
    meta_json = json.dumps(meta, sort_keys=True, allow_nan=True)
    out: bytes = st_save(cpu, metadata={_META_KEY: meta_json, _SUM_KEY: _digest(meta_json, cpu)})
    return out


def decode_state(data: bytes, origin: str) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Inverse of :func:`encode_state`; raises :class:`StateError` naming ``origin`` and the fault."""
    if len(data) < 8:
        raise StateError(f"{origin}: file is truncated ({len(data)} bytes)")
    (header_len,) = struct.unpack("<Q", data[:8])
    if header_len > len(data) - 8:
        raise StateError(
            f"{origin}: file is truncated (header says {header_len} bytes, file has {len(data)})"
        )
    try:
        header = require_object(
            loads_bounded(data[8 : 8 + header_len], max_bytes=MAX_HEADER_BYTES, max_depth=MAX_JSON_DEPTH),
            "the header",
        )
        metadata = require_object(header.get("__metadata__", {}), "the header's __metadata__")
        meta_json = require_str(metadata[_META_KEY], _META_KEY, MAX_HEADER_BYTES)
        checksum = require_str(metadata[_SUM_KEY], _SUM_KEY, 64)
        meta = loads_bounded(meta_json, max_bytes=MAX_HEADER_BYTES, max_depth=MAX_JSON_DEPTH)
    except (ValueError, KeyError) as exc:
        raise StateError(f"{origin}: not an F²TTA state file (unreadable header: {exc})") from exc
    try:
        tensors = st_load(data)
    except Exception as exc:  # safetensors raises its own error types
        raise StateError(f"{origin}: tensor data is corrupt or truncated ({exc})") from exc
    if _digest(meta_json, tensors) != checksum:
        raise StateError(f"{origin}: checksum mismatch, the file is damaged")
    version = meta.get("format_version") if isinstance(meta, dict) else None
    if version != FORMAT_VERSION:
        raise StateError(
            f"{origin}: state format version {version!r} is not supported (expected {FORMAT_VERSION})"
        )
    try:
        return tensors, check_meta(meta)
    except SchemaError as exc:
        raise StateError(f"{origin}: the state's metadata is invalid: {exc}") from exc


def check_meta(meta: object) -> dict[str, Any]:
    """The metadata of a state, its known fields type-checked (unknown fields are kept as they are).

    Raises:
        SchemaError: a field of the wrong type or out of range; the message names it.
    """
    meta = require_object(meta, "the metadata")
    checks: dict[str, Callable[[Any, str], object]] = {
        "software_version": lambda v, w: require_str(v, w, 100),
        "method": lambda v, w: require_str(v, w, 200, empty=False),
        "model_fingerprint": lambda v, w: require_str(v, w, 200),
        "model_arch": lambda v, w: require_str(v, w, 200),
        "model_card": require_object,
        "seed": lambda v, w: require_int(v, w, -(2**63), 2**64 - 1),
        "images_seen": lambda v, w: require_int(v, w, 0, 2**62),
        "method_config": require_object,
        "method_state": require_object,
        "guard": _check_guard,
        "extra": require_object,
        "hist_adapted": _check_counts,
        "hist_source": _check_counts,
        "events": _check_events,
        "updated_at": lambda v, w: None if v is None else require_str(v, w, 100),
    }
    for key, check in checks.items():
        if key in meta:
            check(meta[key], key)
    return meta


def _check_counts(value: object, where: str) -> None:
    for i, count in enumerate(require_list(value, where, MAX_CLASSES)):
        require_int(count, f"{where}[{i}]", 0, 2**62)


def _check_guard(value: object, where: str) -> None:
    guard = require_object(value, where)
    for i, pair in enumerate(require_list(guard.get("window", []), f"{where}.window", MAX_EVENTS)):
        if len(require_list(pair, f"{where}.window[{i}]", 2)) != 2:
            raise SchemaError(f"{where}.window[{i}] must hold two class indices")
        for j, label in enumerate(pair):
            require_int(label, f"{where}.window[{i}][{j}]", 0, MAX_CLASSES)
    last = guard.get("last_action_index")
    if last is not None:
        require_int(last, f"{where}.last_action_index", 0, 2**62)


def _check_events(value: object, where: str) -> None:
    for i, event in enumerate(require_list(value, where, MAX_EVENTS)):
        event = require_object(event, f"{where}[{i}]")
        require_int(event.get("index"), f"{where}[{i}].index", 0, 2**62)
        require_str(event.get("action"), f"{where}[{i}].action", 100)
        require_str(event.get("message"), f"{where}[{i}].message", 10_000)


def readable_json(meta: dict[str, Any]) -> str:
    """``state.json``: the metadata indented, its ``extra`` (the journal's record, which lists every
    processed item) on one line, as Python's C encoder writes it: indenting 20 000 item keys with
    the pure-Python encoder took 50 ms of each save of a slide's state."""
    rest = {k: v for k, v in meta.items() if k != "extra"}
    text = json.dumps(rest, indent=2, sort_keys=True, allow_nan=True)
    if "extra" not in meta:
        return text + "\n"
    extra = json.dumps(meta["extra"], sort_keys=True, allow_nan=True)
    head = text[:-2] + "," if rest else "{"
    return f'{head}\n  "extra": {extra}\n}}\n'


def write_state(directory: str | Path, tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> Path:
    """Atomically write a state into ``directory`` (created if needed), keeping a backup.

    Raises:
        OSError: the location is not writable or full; the previous state is untouched.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    data = encode_state(tensors, meta)
    readable = readable_json(meta).encode()
    # The state's size is known exactly now: a disk without room for it is said so before a byte
    # is written (a state grows as a method fills its banks and memories; 2.0 -> 5.7 MB in 35 images).
    need = len(data) + len(readable) + SAVE_MARGIN_BYTES
    free = shutil.disk_usage(directory).free
    if free < need:
        raise OSError(
            errno.ENOSPC,
            f"{directory}: {free / 2**20:.1f} MiB free, saving the state needs {need / 2**20:.1f} MiB; the "
            "previous state is kept. Free some space, then continue",
        )
    path = directory / STATE_FILE
    atomic_write_bytes(path, data, keep_backup=True)
    atomic_write_bytes(directory / STATE_JSON, readable)
    return path


def read_state(
    directory: str | Path, use_backup: bool = False
) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Read and verify the state in ``directory`` (or its backup copy).

    Raises:
        StateError: missing, not a regular file inside ``directory``, too large, damaged or of
            another format version. Unless ``use_backup`` is set, the message also says whether
            the backup copy is usable and how to restore it.
    """
    directory = Path(directory)
    path = directory / STATE_FILE
    if use_backup:
        return _read_file(backup_path(path), directory)
    try:
        return _read_file(path, directory)
    except StateError as exc:
        raise StateError(f"{exc}{restore_hint(directory)}") from exc


def _read_file(path: Path, directory: Path) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    if not os.path.lexists(path):
        raise StateError(f"no saved state at {path}")
    if os.path.islink(path) and not inside(path, directory):
        raise StateError(f"{path}: a symbolic link to {os.path.realpath(path)}, outside the state folder")
    try:
        data = read_regular(path, MAX_STATE_BYTES, "state file")
    except UnsafeFileError as exc:
        raise StateError(f"{path}: cannot be read ({exc.reason})") from exc
    return decode_state(data, str(path))


def restore_hint(directory: str | Path) -> str:
    """A sentence to append to a refusal of the state in ``directory``: is the backup usable, how to restore it.

    Reads and verifies the backup copy, so it belongs on the error path only.
    """
    path = Path(directory) / STATE_FILE
    backup = backup_path(path)
    try:
        _read_file(backup, Path(directory))
    except StateError as exc:
        if not os.path.lexists(backup):
            return (
                f". There is no backup copy ({backup} does not exist): move {path} away and run again "
                "to start afresh."
            )
        return (
            f". The backup copy is not usable either ({exc}): move both away and run again to start afresh."
        )
    damaged = path.with_name(path.name + ".damaged")
    return (
        f". The previous good state is kept in {backup}; to restore it, run: "
        f"mv {shlex.quote(str(path))} {shlex.quote(str(damaged))} && "
        f"cp {shlex.quote(str(backup))} {shlex.quote(str(path))}"
    )


def has_state(directory: str | Path) -> bool:
    return (Path(directory) / STATE_FILE).exists()
