"""Datasets: readers of the supported layouts and the paper's per-domain split.

Generated data (``f2tta synth``) is the lab's (:mod:`lab.synth`): the engine reads datasets, it
does not make them.
"""

from __future__ import annotations

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

__all__ = [
    "Dataset",
    "DatasetError",
    "Item",
    "SkippedFile",
    "Split",
    "open_dataset",
    "read_array",
    "split_dataset",
    "split_items",
]
