"""Datasets: readers of the supported layouts, the paper's per-domain split, generated data."""

from __future__ import annotations

from engine.data._synth_marker import SynthError
from engine.data.readers import (
    Dataset,
    DatasetError,
    Item,
    SkippedFile,
    Split,
    open_dataset,
    read_array,
    split_dataset,
    split_items,
)
from engine.data.synth import KINDS, SITE_SETS, SynthResult, generate_arrays, site_names, write_synth

__all__ = [
    "KINDS",
    "SITE_SETS",
    "Dataset",
    "DatasetError",
    "Item",
    "SkippedFile",
    "Split",
    "SynthError",
    "SynthResult",
    "generate_arrays",
    "open_dataset",
    "read_array",
    "site_names",
    "split_dataset",
    "split_items",
    "write_synth",
]
