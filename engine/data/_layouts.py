"""The three dataset layouts on disk (folders, manifest CSV, WILDS Camelyon17), kept inside their folder."""

from __future__ import annotations

import csv
import logging
import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from engine.data._dataset import Check, Dataset, DatasetError, Item, Layout, SkippedFile
from engine.errors import ImageReadError
from engine.io.images import IMAGE_EXTENSIONS, probe_image
from engine.io.listing import ListingProblem, iter_image_files
from engine.util.files import describe_kind

logger = logging.getLogger(__name__)

WILDS_COLUMNS = frozenset({"patient", "node", "x_coord", "y_coord", "tumor", "center"})
MANIFEST_COLUMNS = ("path", "label", "domain")
CAMELYON_CLASSES = ("normal", "tumor")


def csv_header(path: Path) -> list[str]:
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
    kind = describe_kind(st.st_mode)
    if kind is not None:
        return f"not a regular file: it is {kind}"
    if st.st_size == 0:
        return "file is empty (0 bytes)"
    if check == "header":
        try:
            probe_image(path)  # identifies the format and parses the header; decodes nothing
        except ImageReadError as exc:
            return exc.reason
    return None


def _finish(
    root: Path,
    layout: Layout,
    rows: Iterable[tuple[Path, str, str]],
    check: Check,
    expected_domains: Iterable[str] = (),
    class_names: Sequence[str] | None = None,
    left_out: Sequence[SkippedFile] = (),
) -> Dataset:
    """Build a dataset from (path, class name, domain) rows; checks files and empty domains.

    ``left_out`` are what listing could not reach (symlinks out, unreadable folders); they are
    recorded as skipped too.
    """
    skipped: list[SkippedFile] = list(left_out)
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


def _subfolders(parent: Path, fence: _Fence, left_out: list[SkippedFile]) -> list[Path]:
    """Visible sub-folders of ``parent`` inside the fence; the others recorded in ``left_out``."""
    try:
        entries = sorted(parent.iterdir())
    except OSError as exc:
        left_out.append(SkippedFile(parent, f"folder cannot be listed ({exc.strerror or exc})"))
        return []
    found = []
    for p in entries:
        if p.name.startswith(".") or not p.is_dir():
            continue
        if not fence.admits(p):
            left_out.append(
                SkippedFile(
                    p, f"symbolic link to {os.path.realpath(p)} leaves the dataset folder; not followed"
                )
            )
            continue
        found.append(p)
    return found


def open_folders(root: Path, check: Check, allow_outside: bool = False) -> Dataset:
    rows: list[tuple[Path, str, str]] = []
    domains: list[str] = []
    left_out: list[SkippedFile] = []
    fence = _Fence(root, allow_outside)
    for domain_dir in _subfolders(root, fence, left_out):
        domains.append(domain_dir.name)
        for class_dir in _subfolders(domain_dir, fence, left_out):
            problems: list[ListingProblem] = []
            for path in iter_image_files(class_dir, problems, boundary=root, follow_outside=allow_outside):
                rows.append((path, class_dir.name, domain_dir.name))
            left_out.extend(SkippedFile(p.path, p.reason) for p in problems)
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
    return _finish(root, "folders", rows, check, expected_domains=domains, left_out=left_out)


class _Fence:
    """Whether paths lie inside a folder once every symlink is resolved (folders resolved once each)."""

    def __init__(self, base: Path, open_: bool = False) -> None:
        self.base = os.path.realpath(base)
        self.open = open_  # admits everything (allow_outside)
        self._real_dirs: dict[str, str] = {}

    def admits(self, path: Path) -> bool:
        if self.open:
            return True
        parent = str(path.parent)
        real_parent = self._real_dirs.get(parent)
        if real_parent is None:
            real_parent = self._real_dirs[parent] = os.path.realpath(parent)
        real = os.path.normpath(os.path.join(real_parent, path.name))
        if os.path.islink(real):
            real = os.path.realpath(real)
        return real == self.base or real.startswith(self.base.rstrip(os.sep) + os.sep)


def _outside_error(table: Path, line: int, given: str, base: Path) -> DatasetError:
    return DatasetError(
        f"{table}, line {line}: {given} lies outside the folder of {table.name} ({base}); move the images "
        "under that folder, or allow paths outside it explicitly (open_dataset(..., allow_outside=True))"
    )


#: Turns a table row (line number, row) into (the path as given, its full path, label, domain);
#: raises DatasetError for a malformed row.
_RowEntry = Callable[[int, dict[str, str]], tuple[str, Path, str, str]]


def _table_rows(
    table: Path, entry: _RowEntry, allow_outside: bool, what: str, empty: str
) -> list[tuple[Path, str, str]]:
    """The (path, label, domain) rows of a CSV table, every path checked against the table's folder.

    Args:
        what: the table's kind in the error when it cannot be read.
        empty: the error when it lists nothing.
    """
    base = table.parent
    fence = _Fence(base, allow_outside)
    rows: list[tuple[Path, str, str]] = []
    try:
        with table.open(newline="", encoding="utf-8-sig") as fh:
            reader = csv.DictReader(fh)  # a leading unnamed index column simply becomes the "" key
            reader.fieldnames = [h.strip() for h in reader.fieldnames or []]
            for line, row in enumerate(reader, start=2):
                given, full, label, domain = entry(line, row)
                if not fence.admits(full):
                    raise _outside_error(table, line, given, base)
                rows.append((full, label, domain))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise DatasetError(f"{table}: cannot read {what} ({exc})") from exc
    if not rows:
        raise DatasetError(f"{table}: {empty}")
    return rows


def open_manifest(csv_path: Path, check: Check, allow_outside: bool = False) -> Dataset:
    def entry(line: int, row: dict[str, str]) -> tuple[str, Path, str, str]:
        rel, label, domain = (str(row.get(k) or "").strip() for k in MANIFEST_COLUMNS)
        if not rel or not label or not domain:
            raise DatasetError(f"{csv_path}, line {line}: path, label and domain must all be given")
        p = Path(rel)
        return rel, p if p.is_absolute() else csv_path.parent / p, label, domain

    rows = _table_rows(csv_path, entry, allow_outside, "manifest", "the manifest lists no images")
    return _finish(csv_path, "manifest", rows, check)


def find_camelyon_metadata(folder: Path) -> Path | None:
    for candidate in (folder / "metadata.csv", folder / "camelyon17_v1.0" / "metadata.csv"):
        if candidate.is_file() and WILDS_COLUMNS <= set(csv_header(candidate)):
            return candidate
    return None


def camelyon_patch_path(patient: str, node: str, x: str, y: str) -> str:
    """Relative path of a WILDS Camelyon17 patch: the patient number is zero-padded to 3 digits."""
    p = f"{int(patient):03d}" if patient.isdigit() else patient
    n = str(int(float(node)))
    xi, yi = str(int(float(x))), str(int(float(y)))
    return f"patches/patient_{p}_node_{n}/patch_patient_{p}_node_{n}_x_{xi}_y_{yi}.png"


def open_camelyon(meta: Path, check: Check, allow_outside: bool = False) -> Dataset:
    def entry(line: int, row: dict[str, str]) -> tuple[str, Path, str, str]:
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
        return rel, meta.parent / rel, CAMELYON_CLASSES[tumor], f"center_{center}"

    rows = _table_rows(meta, entry, allow_outside, "WILDS metadata", "the metadata lists no patches")
    return _finish(meta, "camelyon17", rows, check, class_names=CAMELYON_CLASSES)
