"""Readers of untrusted text bounded in time and memory by streaming (issue 21, cases 9 and 12).

A 90 MB string in a safetensors header (under the 100 MB limit) cost 31.8 s and 11.4 GB in the
regular expression that removed JSON strings before the depth was measured (the same code reads
state headers); a 189 MB ``labels.csv`` was read whole (4.1 GB). A bare name in ``labels.csv`` that
matched two files was applied to both.
"""

from __future__ import annotations

import json
import os
import struct
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

import engine.util.bounded_json as bounded
from engine import open_folder
from engine.io.sources import SourceError
from engine.util.bounded_json import loads_bounded, nesting_depth

CLASSES = ("normal", "tumor")
LONG = 4_000_000  # characters of the long string (the regex took ~560 MB for it)


def _peak_mib(fn: Callable[[], object]) -> float:
    """Peak of Python's traced allocations while ``fn`` runs, in MiB."""
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def _depth(value: object) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


TRICKY = st.text(alphabet=st.sampled_from(list('ab"\\[]{}/\n')), max_size=12)
VALUES = st.recursive(
    st.none() | st.integers() | TRICKY,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TRICKY, inner, max_size=4),
    max_leaves=30,
)


@settings(max_examples=150, deadline=None)
@given(value=VALUES, chunk=st.sampled_from([1, 2, 3, 7, 64]))
def test_depth_is_the_parsers_across_chunk_boundaries(value: object, chunk: int) -> None:
    """Escaped quotes, runs of backslashes and brackets inside strings, cut anywhere between chunks."""
    text = json.dumps(value).encode()
    old = bounded.__dict__.get("CHUNK")
    bounded.CHUNK = chunk
    try:
        assert nesting_depth(text) == _depth(value)
    finally:
        if old is not None:
            bounded.CHUNK = old


def test_a_long_string_is_scanned_in_bounded_memory() -> None:
    doc = b'{"__metadata__": {"note": "' + b"x\\\\" * (LONG // 3) + b'"}, "w": [[1]]}'
    depth: list[int] = []
    peak = _peak_mib(lambda: depth.append(nesting_depth(doc)))
    assert depth == [3]
    assert peak < 40, f"{peak:.0f} MiB traced to scan a {len(doc) / 1e6:.0f} MB document"


def test_a_checkpoint_header_with_a_long_string_is_read_in_bounded_memory(tmp_path: Path) -> None:
    header = {
        "__metadata__": {"note": "y" * LONG},
        "w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
    }
    raw = json.dumps(header).encode()
    path = tmp_path / "m.safetensors"
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0\0\0\0")
    from engine.model.card import _safetensors_shapes

    shapes: list[object] = []
    peak = _peak_mib(lambda: shapes.append(_safetensors_shapes(path)))
    assert shapes == [{"w": (1,)}]
    assert peak < 64, f"{peak:.0f} MiB traced for a {len(raw) / 1e6:.0f} MB header"
    assert loads_bounded(raw, max_bytes=len(raw), max_depth=3)["w"]["shape"] == [1]


def _folder(root: Path, names: list[str]) -> Path:
    rng = np.random.default_rng(0)
    for name in names:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(rng.integers(0, 256, (16, 16, 3), dtype=np.uint8)).save(path)
    return root


def test_a_large_labels_file_is_streamed(tmp_path: Path) -> None:
    root = _folder(tmp_path / "in", ["a.png", "b.png"])
    with open(root / "labels.csv", "w") as fh:
        fh.write("file,label\na.png,tumor\n")
        for i in range(200_000):  # 5.6 MB of rows for files that are not there
            fh.write(f"other/img{i:07d}.png,normal\n")
        fh.write("b.png,normal\n")
    source: list[object] = []
    peak = _peak_mib(lambda: source.append(open_folder(root, CLASSES)))
    (opened,) = source
    assert [i.ground_truth for i in opened.items] == [1, 0]  # type: ignore[attr-defined]
    assert peak < 16, (
        f"{peak:.0f} MiB traced for an {os.path.getsize(root / 'labels.csv') / 1e6:.0f} MB labels.csv"
    )


def test_a_labels_file_of_one_endless_line_is_refused(tmp_path: Path) -> None:
    root = _folder(tmp_path / "in", ["a.png"])
    (root / "labels.csv").write_bytes(b"file,label\n" + b"a" * 20_000_000)
    errors: list[Exception] = []

    def read() -> None:
        try:
            open_folder(root, CLASSES)
        except SourceError as exc:
            errors.append(exc)

    peak = _peak_mib(read)
    assert errors and "line 2 is longer than 65536 characters" in str(errors[0])
    assert peak < 16, f"{peak:.0f} MiB traced"


def test_an_ambiguous_bare_name_is_refused_with_its_candidates(tmp_path: Path) -> None:
    root = _folder(tmp_path / "in", ["x/a.png", "y/a.png", "b.png"])
    (root / "labels.csv").write_text("file,label\na.png,tumor\nb.png,normal\n")
    with pytest.raises(SourceError, match=r"line 2: 'a.png' names 2 files \(x/a.png, y/a.png\)"):
        open_folder(root, CLASSES)
    (root / "labels.csv").write_text("file,label\nx/a.png,tumor\ny/a.png,normal\nb.png,normal\n")
    assert [i.ground_truth for i in open_folder(root, CLASSES).items] == [0, 1, 0]
    (root / "labels.csv").write_text("file,label\nb.png,tumor\nb.png,normal\n")
    with pytest.raises(SourceError, match=r"lines 2 and 3 give b\.png two different classes"):
        open_folder(root, CLASSES)


def test_an_ambiguous_bare_name_in_a_manifest_is_refused(tmp_path: Path) -> None:
    root = _folder(tmp_path / "in", ["x/a.png", "y/a.png"])
    (root / "manifest.txt").write_text("y/a.png\na.png\n")
    with pytest.raises(SourceError, match=r"manifest.txt line 2: 'a.png' names 2 files"):
        open_folder(root, CLASSES, order="manifest")


def test_labels_match_names_that_are_not_utf8(tmp_path: Path) -> None:
    root = _folder(tmp_path / "in", ["plain.png"])
    latin1 = os.fsdecode(b"caf\xe9.png")
    Image.new("RGB", (16, 16)).save(root / latin1)
    (root / "labels.csv").write_bytes(b"file,label\ncaf\xe9.png,tumor\nplain.png,normal\n")
    source = open_folder(root, CLASSES)
    assert {i.key: i.ground_truth for i in source.items} == {latin1: 1, "plain.png": 0}
