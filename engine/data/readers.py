"""Multi-domain image datasets on disk: listing, per-domain splits and safe reading.

Three layouts are recognised by :func:`open_dataset`:

* **domain folders** ``ROOT/<domain>/<class>/*.png|jpg|jpeg|tif|tiff|bmp`` (what ``f2tta synth`` writes);
* **manifest CSV** with columns ``path,label,domain`` (paths relative to the CSV, label = class name;
  a path that leads outside the CSV's folder, by ``..``, an absolute path or a symlink, is refused
  unless ``allow_outside=True``);
* **WILDS Camelyon17** ``camelyon17_v1.0``: ``metadata.csv`` (with or without the leading unnamed
  index column) and ``patches/patient_XXX_node_N/patch_patient_XXX_node_N_x_X_y_Y.png``; domains
  are ``center_0`` ... ``center_4``, classes ``normal`` and ``tumor``.

Listing never decodes images: files are checked for existence and a non-zero size (optionally
their header). A file that fails to decode later, when it is read for training or streaming, is
logged with its path and the reason and appended to :attr:`Dataset.skipped`; it never stops a run.
Listing never leaves the dataset's folder: symlinks that do are not followed, and they and
sub-folders that cannot be read are recorded in :attr:`Dataset.skipped` with the reason.
"""

from __future__ import annotations

import logging
from pathlib import Path

from engine.data._dataset import (
    SPLIT_FRACTIONS,
    Check,
    Dataset,
    DatasetError,
    Item,
    Layout,
    SkippedFile,
    Split,
    read_array,
    split_dataset,
    split_items,
)
from engine.data._layouts import (
    CAMELYON_CLASSES,
    MANIFEST_COLUMNS,
    WILDS_COLUMNS,
    camelyon_patch_path,
    csv_header,
    find_camelyon_metadata,
    open_camelyon,
    open_folders,
    open_manifest,
)
from engine.util.bounded_json import loads_bounded
from engine.util.files import UnsafeFileError, describe_kind, read_regular

__all__ = [
    "CAMELYON_CLASSES",
    "HINT_FILE",
    "MANIFEST_COLUMNS",
    "SPLIT_FRACTIONS",
    "WILDS_COLUMNS",
    "Check",
    "Dataset",
    "DatasetError",
    "Item",
    "Layout",
    "SkippedFile",
    "Split",
    "camelyon_patch_path",
    "open_dataset",
    "read_array",
    "split_dataset",
    "split_items",
]

logger = logging.getLogger(__name__)

HINT_FILE = "synth.json"  # a dataset root may name its positive class here ("positive_class")


def open_dataset(
    root_or_csv: str | Path,
    positive_class: int | str | None = None,
    check: Check = "exists",
    allow_outside: bool = False,
) -> Dataset:
    """Open a dataset in any of the supported layouts (detected automatically).

    Args:
        root_or_csv: a folder (domain folders, or a WILDS ``camelyon17_v1.0`` folder or its parent),
            a manifest CSV, or a WILDS ``metadata.csv``.
        positive_class: index or name of the positive class; by default the one named in the
            root's ``synth.json`` if any, else index 1.
        check: what listing verifies per file: ``"exists"`` (a stat: present and non-empty),
            ``"header"`` (also opens the file and parses its image header), or ``"none"``.
        allow_outside: let a manifest or WILDS metadata name images outside its own folder
            (``..``, absolute paths, symlinks), and follow symlinks out of a dataset folder;
            refused by default (the paths are recorded in ``skipped`` or the manifest refused).

    Raises:
        DatasetError: unknown layout, malformed CSV, no images, a domain without images, or a
            manifest path outside the manifest's folder.
    """
    path = Path(root_or_csv)
    if not path.exists():
        raise DatasetError(f"dataset not found: {path}")
    kind = describe_kind(path.stat().st_mode)
    if kind is not None and kind != "a folder":
        raise DatasetError(f"{path}: expected a folder or a .csv file, found {kind}")
    if path.is_file():
        if path.suffix.lower() != ".csv":
            raise DatasetError(f"{path}: expected a folder or a .csv file")
        header = csv_header(path)
        if WILDS_COLUMNS <= set(header):
            ds = open_camelyon(path, check, allow_outside)
        elif set(MANIFEST_COLUMNS) <= set(header):
            ds = open_manifest(path, check, allow_outside)
        else:
            raise DatasetError(
                f"{path}: unknown CSV; a manifest needs columns {', '.join(MANIFEST_COLUMNS)}, "
                f"WILDS metadata needs {', '.join(sorted(WILDS_COLUMNS))} (found {', '.join(header)})"
            )
    else:
        meta = find_camelyon_metadata(path)
        if meta is not None:
            ds = open_camelyon(meta, check, allow_outside)
        else:
            ds = open_folders(path, check, allow_outside)
    ds.positive_class = _resolve_positive(ds, positive_class, path)
    logger.info(
        "opened %s (%s): %d images, %d domains, %d skipped",
        ds.root,
        ds.layout,
        len(ds.items),
        len(ds.domains),
        len(ds.skipped),
    )
    logger.debug("%s", ds.summary())
    return ds


def _resolve_positive(ds: Dataset, positive: int | str | None, path: Path) -> int:
    if positive is None:
        hint = (path if path.is_dir() else path.parent) / HINT_FILE
        if hint.exists():
            try:
                data = loads_bounded(read_regular(hint, 1 << 20, HINT_FILE), max_bytes=1 << 20, max_depth=32)
            except (UnsafeFileError, ValueError) as exc:
                logger.warning("%s ignored: %s", hint, getattr(exc, "reason", exc))
                data = None
            named = data.get("positive_class") if isinstance(data, dict) else None
            if isinstance(named, str) and named in ds.classes:
                return ds.classes.index(named)
        return 1 if len(ds.classes) > 1 else 0
    if isinstance(positive, str):
        if positive in ds.classes:
            return ds.classes.index(positive)
        if not positive.isdigit():
            raise DatasetError(f"positive class {positive!r} is not one of {', '.join(ds.classes)}")
        positive = int(positive)
    if not 0 <= positive < len(ds.classes):
        raise DatasetError(f"positive class index {positive} is out of range for classes {list(ds.classes)}")
    return positive
