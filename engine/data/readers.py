"""Multi-domain image datasets on disk: listing, per-domain splits and safe reading.

Three layouts are recognised by :func:`open_dataset`:

* **domain folders** ``ROOT/<domain>/<class>/*.png|jpg|jpeg|tif|tiff|bmp`` (what ``f2tta synth`` writes);
* **manifest CSV** with columns ``path,label,domain`` (paths relative to the CSV, label = class name);
* **WILDS Camelyon17** ``camelyon17_v1.0``: ``metadata.csv`` (with or without the leading unnamed
  index column) and ``patches/patient_XXX_node_N/patch_patient_XXX_node_N_x_X_y_Y.png``; domains
  are ``center_0`` ... ``center_4``, classes ``normal`` and ``tumor``.

Listing never decodes images: files are checked for existence and a non-zero size (optionally
their header). A file that fails to decode later, when it is read for training or streaming, is
logged with its path and the reason and appended to :attr:`Dataset.skipped`; it never stops a run.
"""

from __future__ import annotations

import csv
import json
import logging
import os
import zlib
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
from PIL import Image

from engine.errors import F2TTAError, ImageReadError
from engine.images import IMAGE_EXTENSIONS, read_image

logger = logging.getLogger(__name__)

Layout = Literal["folders", "manifest", "camelyon17"]
Check = Literal["none", "exists", "header"]

SPLIT_FRACTIONS = (0.60, 0.15, 0.25)  # train / val / test per domain, as in the paper
WILDS_COLUMNS = frozenset({"patient", "node", "x_coord", "y_coord", "tumor", "center"})
MANIFEST_COLUMNS = ("path", "label", "domain")
CAMELYON_CLASSES = ("normal", "tumor")
HINT_FILE = "synth.json"  # a dataset root may name its positive class here ("positive_class")


class DatasetError(F2TTAError):
    """A dataset cannot be used as asked (unknown layout, empty domain, single-class source...)."""


@dataclass(frozen=True)
class Item:
    """One labelled image of one domain."""

    path: Path  # absolute or as given, resolved against the dataset root
    label: int  # index into :attr:`Dataset.classes`
    domain: str  # domain (site) name


@dataclass(frozen=True)
class SkippedFile:
    """A file left out, and why."""

    path: Path
    reason: str


@dataclass
class Dataset:
    """The labelled images of every domain of a dataset.

    ``classes`` are sorted class names (their index is the label), ``domains`` sorted domain names.
    ``skipped`` grows when a file turns out unreadable, at listing or later when it is read.
    """

    root: Path  # the folder or manifest the dataset was opened from
    layout: Layout
    classes: tuple[str, ...]
    domains: tuple[str, ...]
    items: list[Item]
    positive_class: int = 1  # label treated as positive by precision/recall/AUC
    skipped: list[SkippedFile] = field(default_factory=list)

    def domain_items(self, domain: str) -> list[Item]:
        """The items of one domain (listing order); raises for an unknown domain."""
        if domain not in self.domains:
            raise DatasetError(f"{self.root}: no domain {domain!r}; domains are {', '.join(self.domains)}")
        return [it for it in self.items if it.domain == domain]

    def class_counts(self, domain: str | None = None) -> dict[str, int]:
        """Images per class, of one domain or of all."""
        items = self.items if domain is None else self.domain_items(domain)
        counts = Counter(it.label for it in items)
        return {c: counts.get(i, 0) for i, c in enumerate(self.classes)}

    def require_source(self, domain: str) -> list[Item]:
        """The items of a domain that is to train a model: it must hold at least two classes."""
        items = self.domain_items(domain)
        present = [c for c, n in self.class_counts(domain).items() if n > 0]
        if len(present) < 2:
            raise DatasetError(
                f"{self.root}: source domain {domain!r} holds a single class ({', '.join(present) or 'none'}); "
                f"a source model needs images of at least two of {', '.join(self.classes)}"
            )
        return items

    def skip(self, path: Path, reason: str) -> None:
        """Record and log a file left out."""
        logger.warning("skipping %s: %s", path, reason)
        self.skipped.append(SkippedFile(path, reason))

    def read(self, item: Item, size: int | None = None) -> np.ndarray | None:
        """The image of ``item`` as uint8 (H, W, 3), resized to ``size`` if given; ``None`` if unreadable.

        An unreadable file is logged and recorded in :attr:`skipped` with the reason.
        """
        try:
            return read_array(item.path, size)
        except ImageReadError as exc:
            self.skip(item.path, _reason(exc, item.path))
            return None

    def summary(self) -> str:
        """A few lines: layout, classes, images per domain and class."""
        lines = [f"{self.root} ({self.layout}): classes {', '.join(self.classes)}"]
        for d in self.domains:
            counts = self.class_counts(d)
            lines.append(f"  {d}: " + ", ".join(f"{c} {n}" for c, n in counts.items()))
        if self.skipped:
            lines.append(f"  {len(self.skipped)} file(s) skipped")
        return "\n".join(lines)


def _reason(exc: ImageReadError, path: Path) -> str:
    text = str(exc)
    prefix = f"{path}: "
    return text[len(prefix) :] if text.startswith(prefix) else text


def read_array(path: Path, size: int | None = None) -> np.ndarray:
    """Decode an image file to uint8 (H, W, 3), bilinearly resized to ``size`` x ``size`` if given.

    Raises:
        ImageReadError: the file is missing, empty, corrupt or not an image.
    """
    img = read_image(path)
    if size is not None and img.size != (size, size):
        img = img.resize((size, size), Image.Resampling.BILINEAR)
    return np.asarray(img, dtype=np.uint8)


@dataclass(frozen=True)
class Split:
    """One domain's train / validation / test items."""

    train: tuple[Item, ...]
    val: tuple[Item, ...]
    test: tuple[Item, ...]


def split_items(items: Sequence[Item], seed: int, key: str = "") -> Split:
    """Seeded random 60/15/25 split of a list of items (independent of the listing order)."""
    ordered = sorted(items, key=lambda it: str(it.path))
    rng = np.random.default_rng(np.random.SeedSequence([seed, zlib.crc32(key.encode())]))
    perm = rng.permutation(len(ordered))
    n = len(ordered)
    n_train = round(n * SPLIT_FRACTIONS[0])
    n_val = round(n * SPLIT_FRACTIONS[1])
    picked = [ordered[i] for i in perm]
    return Split(
        tuple(picked[:n_train]), tuple(picked[n_train : n_train + n_val]), tuple(picked[n_train + n_val :])
    )


def split_dataset(ds: Dataset, seed: int = 0) -> dict[str, Split]:
    """Every domain's seeded random 60/15/25 train/val/test split (the paper's protocol).

    Deterministic for a seed; each domain's split depends only on the seed, the domain name and
    the set of its files, not on other domains or the listing order. Not stratified.
    """
    by_domain: dict[str, list[Item]] = {d: [] for d in ds.domains}
    for it in ds.items:
        by_domain[it.domain].append(it)
    return {d: split_items(items, seed, d) for d, items in by_domain.items()}


# ---------------------------------------------------------------------------------------------
# Opening a dataset


def open_dataset(
    root_or_csv: str | Path, positive_class: int | str | None = None, check: Check = "exists"
) -> Dataset:
    """Open a dataset in any of the supported layouts (detected automatically).

    Args:
        root_or_csv: a folder (domain folders, or a WILDS ``camelyon17_v1.0`` folder or its parent),
            a manifest CSV, or a WILDS ``metadata.csv``.
        positive_class: index or name of the positive class; by default the one named in the
            root's ``synth.json`` if any, else index 1.
        check: what listing verifies per file: ``"exists"`` (a stat: present and non-empty),
            ``"header"`` (also opens the file and parses its image header), or ``"none"``.

    Raises:
        DatasetError: unknown layout, malformed CSV, no images, or a domain without images.
    """
    path = Path(root_or_csv)
    if not path.exists():
        raise DatasetError(f"dataset not found: {path}")
    if path.is_file():
        if path.suffix.lower() != ".csv":
            raise DatasetError(f"{path}: expected a folder or a .csv file")
        header = _csv_header(path)
        if WILDS_COLUMNS <= set(header):
            ds = _open_camelyon(path, check)
        elif set(MANIFEST_COLUMNS) <= set(header):
            ds = _open_manifest(path, check)
        else:
            raise DatasetError(
                f"{path}: unknown CSV; a manifest needs columns {', '.join(MANIFEST_COLUMNS)}, "
                f"WILDS metadata needs {', '.join(sorted(WILDS_COLUMNS))} (found {', '.join(header)})"
            )
    else:
        meta = _find_camelyon_metadata(path)
        ds = _open_camelyon(meta, check) if meta is not None else _open_folders(path, check)
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
        if hint.is_file():
            try:
                named = json.loads(hint.read_text(encoding="utf-8")).get("positive_class")
            except (OSError, ValueError, AttributeError):
                named = None
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


def _csv_header(path: Path) -> list[str]:
    try:
        with path.open(newline="", encoding="utf-8-sig") as fh:
            return [h.strip() for h in next(csv.reader(fh), [])]
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise DatasetError(f"{path}: cannot read CSV header ({exc})") from exc


def _usable(path: Path, check: Check) -> str | None:
    """Why a listed file cannot be used, or None. Never decodes pixels."""
    if check == "none":
        return None
    try:
        st = path.stat()
    except OSError as exc:
        return f"cannot access file ({exc.strerror or exc})"
    if st.st_size == 0:
        return "file is empty (0 bytes)"
    if check == "header":
        try:
            with Image.open(path) as img:
                img.size  # noqa: B018 - parsing the header is the point
        except (OSError, ValueError, SyntaxError) as exc:
            return f"not a readable image ({exc})"
    return None


def _finish(
    root: Path,
    layout: Layout,
    rows: Iterable[tuple[Path, str, str]],
    check: Check,
    expected_domains: Iterable[str] = (),
    class_names: Sequence[str] | None = None,
) -> Dataset:
    """Build a dataset from (path, class name, domain) rows; checks files and empty domains."""
    skipped: list[SkippedFile] = []
    kept: list[tuple[Path, str, str]] = []
    all_domains = set(expected_domains)
    for p, cls, dom in rows:
        all_domains.add(dom)
        reason = _usable(p, check)
        if reason is None:
            kept.append((p, cls, dom))
        else:
            logger.warning("skipping %s: %s", p, reason)
            skipped.append(SkippedFile(p, reason))
    classes = tuple(class_names) if class_names is not None else tuple(sorted({c for _, c, _ in kept}))
    domains = tuple(sorted(all_domains))
    if not domains:
        raise DatasetError(f"{root}: no images found")
    present = {d for _, _, d in kept}
    empty = [d for d in domains if d not in present]
    if empty:
        raise DatasetError(
            f"{root}: domain(s) {', '.join(empty)} hold no usable images"
            + (
                f" ({len(skipped)} file(s) skipped, e.g. {skipped[0].path}: {skipped[0].reason})"
                if skipped
                else ""
            )
        )
    if len(classes) < 2:
        raise DatasetError(f"{root}: needs at least two classes, found {', '.join(classes) or 'none'}")
    index = {c: i for i, c in enumerate(classes)}
    items = [Item(p, index[c], d) for p, c, d in kept]
    return Dataset(root, layout, classes, domains, items, skipped=skipped)


def _open_folders(root: Path, check: Check) -> Dataset:
    rows: list[tuple[Path, str, str]] = []
    domains: list[str] = []
    for domain_dir in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        domains.append(domain_dir.name)
        for class_dir in sorted(p for p in domain_dir.iterdir() if p.is_dir() and not p.name.startswith(".")):
            for dirpath, dirnames, filenames in os.walk(class_dir, followlinks=False):
                dirnames.sort()
                for name in sorted(filenames):
                    if not name.startswith(".") and Path(name).suffix.lower() in IMAGE_EXTENSIONS:
                        rows.append((Path(dirpath) / name, class_dir.name, domain_dir.name))
        loose = [p for p in domain_dir.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_EXTENSIONS]
        if loose:
            logger.warning(
                "%s: %d image(s) directly in the domain folder are ignored (no class folder), e.g. %s",
                domain_dir,
                len(loose),
                loose[0].name,
            )
    if not domains:
        raise DatasetError(
            f"{root}: no domain folders; expected ROOT/<domain>/<class>/<image>, a manifest CSV "
            "(path,label,domain) or a WILDS camelyon17 folder"
        )
    return _finish(root, "folders", rows, check, expected_domains=domains)


def _open_manifest(csv_path: Path, check: Check) -> Dataset:
    base = csv_path.parent
    rows: list[tuple[Path, str, str]] = []
    try:
        with csv_path.open(newline="", encoding="utf-8-sig") as fh:
            reader = csv.DictReader(fh)
            reader.fieldnames = [h.strip() for h in reader.fieldnames or []]
            for line, row in enumerate(reader, start=2):
                rel, label, domain = (str(row.get(k) or "").strip() for k in MANIFEST_COLUMNS)
                if not rel or not label or not domain:
                    raise DatasetError(f"{csv_path}, line {line}: path, label and domain must all be given")
                p = Path(rel)
                rows.append((p if p.is_absolute() else base / p, label, domain))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise DatasetError(f"{csv_path}: cannot read manifest ({exc})") from exc
    if not rows:
        raise DatasetError(f"{csv_path}: the manifest lists no images")
    return _finish(csv_path, "manifest", rows, check)


def _find_camelyon_metadata(folder: Path) -> Path | None:
    for candidate in (folder / "metadata.csv", folder / "camelyon17_v1.0" / "metadata.csv"):
        if candidate.is_file() and WILDS_COLUMNS <= set(_csv_header(candidate)):
            return candidate
    return None


def camelyon_patch_path(patient: str, node: str, x: str, y: str) -> str:
    """Relative path of a WILDS Camelyon17 patch: the patient number is zero-padded to 3 digits."""
    p = f"{int(patient):03d}" if patient.isdigit() else patient
    n = str(int(float(node)))
    xi, yi = str(int(float(x))), str(int(float(y)))
    return f"patches/patient_{p}_node_{n}/patch_patient_{p}_node_{n}_x_{xi}_y_{yi}.png"


def _open_camelyon(meta: Path, check: Check) -> Dataset:
    base = meta.parent
    rows: list[tuple[Path, str, str]] = []
    try:
        with meta.open(newline="", encoding="utf-8-sig") as fh:
            reader = csv.DictReader(fh)  # a leading unnamed index column simply becomes the "" key
            reader.fieldnames = [h.strip() for h in reader.fieldnames or []]
            for line, row in enumerate(reader, start=2):
                try:
                    rel = camelyon_patch_path(
                        row["patient"].strip(),
                        row["node"].strip(),
                        row["x_coord"].strip(),
                        row["y_coord"].strip(),
                    )
                    tumor = int(float(row["tumor"]))
                    center = int(float(row["center"]))
                except (KeyError, ValueError, AttributeError) as exc:
                    raise DatasetError(f"{meta}, line {line}: malformed row ({exc})") from exc
                if tumor not in (0, 1):
                    raise DatasetError(f"{meta}, line {line}: tumor must be 0 or 1, got {tumor}")
                rows.append((base / rel, CAMELYON_CLASSES[tumor], f"center_{center}"))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise DatasetError(f"{meta}: cannot read WILDS metadata ({exc})") from exc
    if not rows:
        raise DatasetError(f"{meta}: the metadata lists no patches")
    return _finish(meta, "camelyon17", rows, check, class_names=CAMELYON_CLASSES)
