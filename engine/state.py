"""Saving and loading adaptation state: one safetensors file, JSON metadata, no pickle.

A state directory holds ``state.safetensors`` (the tensors, with the JSON metadata and a SHA-256
checksum in the safetensors header), ``state.safetensors.backup`` (the previous good copy) and
``state.json`` (a human-readable copy of the metadata; never read back). Writes are atomic: a
reader sees the old or the new state, never a mix, and a crash never leaves no state behind.
"""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save

from engine._atomic import atomic_write_bytes, backup_path
from engine.errors import StateError

STATE_FILE = "state.safetensors"
STATE_JSON = "state.json"
FORMAT_VERSION = 1
_META_KEY = "f2tta_meta"
_SUM_KEY = "f2tta_sha256"


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
        header = json.loads(data[8 : 8 + header_len])
        metadata = header.get("__metadata__", {})
        meta_json = metadata[_META_KEY]
        checksum = metadata[_SUM_KEY]
        meta = json.loads(meta_json)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise StateError(f"{origin}: not an F²TTA state file (unreadable header: {exc})") from exc
    try:
        tensors = st_load(data)
    except Exception as exc:  # safetensors raises its own error types
        raise StateError(f"{origin}: tensor data is corrupt or truncated ({exc})") from exc
    if _digest(meta_json, tensors) != checksum:
        raise StateError(f"{origin}: checksum mismatch, the file is damaged")
    version = meta.get("format_version")
    if version != FORMAT_VERSION:
        raise StateError(
            f"{origin}: state format version {version!r} is not supported (expected {FORMAT_VERSION})"
        )
    return tensors, meta


def write_state(directory: str | Path, tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> Path:
    """Atomically write a state into ``directory`` (created if needed), keeping a backup.

    Raises:
        OSError: the location is not writable or full; the previous state is untouched.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    data = encode_state(tensors, meta)
    path = directory / STATE_FILE
    atomic_write_bytes(path, data, keep_backup=True)
    readable = json.dumps(meta, indent=2, sort_keys=True, allow_nan=True) + "\n"
    atomic_write_bytes(directory / STATE_JSON, readable.encode())
    return path


def read_state(
    directory: str | Path, use_backup: bool = False
) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Read and verify the state in ``directory`` (or its backup copy)."""
    directory = Path(directory)
    path = directory / STATE_FILE
    if use_backup:
        path = backup_path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError as exc:
        raise StateError(f"no saved state at {path}") from exc
    except OSError as exc:
        raise StateError(f"{path}: cannot be read ({exc})") from exc
    return decode_state(data, str(path))


def has_state(directory: str | Path) -> bool:
    return (Path(directory) / STATE_FILE).exists()
