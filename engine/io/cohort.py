"""The inputs of a cohort: several slides or folders, a folder of slides, or a manifest; one site each.

``f2tta run --input`` takes one folder of images or one slide as before; it takes a *cohort*
when it is given several paths, a folder that holds slides (and no other images), or a manifest
(a ``.csv``/``.tsv`` table with a path column, and optionally ``site``, a label and ``reviews``,
the app's reviews file of that site). Each slide or folder of images is one site.

A folder counts as a folder of slides when every image the folder listing would take from it
(:func:`engine.io.listing.iter_image_files`) is a pyramid TIFF directly in it (more than one
level, as OpenSlide reads it) and it holds at least one slide, a pyramid TIFF or a file of a slide
format OpenSlide detects (SVS, NDPI, MRXS, ...). A folder with any other image is a folder of
images, as it always was.

Everything here is checked before any work: each path exists, no path is named twice, no two
inputs are one site (names compared without case, as macOS and Windows file systems do), site
names can be folder names, and a manifest is read line by line (:func:`engine.io.tables.table_rows`),
bounded in size and in rows (:data:`MAX_SITES`) before it is read whole.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from engine.errors import F2TTAError
from engine.io.listing import IMAGE_EXTENSIONS, iter_image_files, natural_key
from engine.io.tables import LABEL_COLUMNS, PATH_COLUMNS, find_column, table_rows

#: Suffixes of a manifest (a table is never a slide).
MANIFEST_SUFFIXES = frozenset({".csv", ".tsv"})
#: Most sites one cohort may hold (each gets a state folder and a row of the summary, rewritten
#: as sites finish); a larger cohort is split into several, each with its own ``--state``.
MAX_SITES = 100_000
#: Largest manifest read (100 000 rows of a path, a site and a label are about 20 MB).
MAX_MANIFEST_BYTES = 64 << 20
#: Longest site name (a folder name on every file system) and label kept.
MAX_NAME = 100
MAX_LABEL = 200
SITE_COLUMNS = ("site", "site_name")
REVIEWS_COLUMNS = ("reviews", "reviews_file")
#: Names a site may not take: the cohort's own files beside the sites' folders.
RESERVED = frozenset({"cohort-summary.csv", "cohort-summary.json"})
_NAME = re.compile(r"^\w[\w .+-]*$")
_UNSAFE = re.compile(r"[^\w.+-]+")


class CohortError(F2TTAError):
    """The inputs of a cohort cannot be used; the message says which and why. Nothing was started."""


@dataclass(frozen=True)
class CohortInput:
    """One site of a cohort.

    Attributes:
        site: its name: the folder of its state and of its outputs.
        path: the slide or folder, absolute.
        kind: ``"slide"`` or ``"folder"``.
        origin: where it was named (``--input 2``, ``cohort.csv line 14``), for messages.
        label: the manifest's label of the site, kept in the summary (the run does not use it).
        reviews: the app's reviews file of the site (its marks certify the site's decisions).
    """

    site: str
    path: Path
    kind: str
    origin: str
    label: str = ""
    reviews: Path | None = None


def is_manifest(path: Path) -> bool:
    """Whether ``path`` is a file named as a manifest table."""
    return path.suffix.lower() in MANIFEST_SUFFIXES and path.is_file()


def _slide_levels(path: Path) -> int:
    """Levels OpenSlide reads in ``path``; 0 when it reads none (not a slide, or unreadable)."""
    import openslide  # lazily: the engine works where OpenSlide is not installed

    try:
        if openslide.OpenSlide.detect_format(str(path)) is None:
            return 0
        with openslide.OpenSlide(str(path)) as slide:
            return int(slide.level_count)
    except Exception:  # OpenSlide raises its own errors and OSError on what it cannot read
        return 0


def slides_in(folder: Path) -> list[Path]:
    """The slides directly in ``folder`` when it is a folder of slides (see the module), else [].

    Stops at the first image that is not a pyramid directly in the folder, so a folder of
    images costs one listing of its first level.
    """
    folder = Path(folder)
    slides: list[Path] = []
    for path in iter_image_files(folder):
        if path.parent != folder or _slide_levels(path) < 2:
            return []
        slides.append(path)
    try:
        with os.scandir(folder) as it:
            entries = [e for e in it if not e.name.startswith(".")]
    except OSError:
        return []
    for entry in entries:
        path = folder / entry.name
        if Path(entry.name).suffix.lower() in IMAGE_EXTENSIONS | MANIFEST_SUFFIXES:
            continue
        try:
            regular = entry.is_file()
        except OSError:
            continue
        if regular and _slide_levels(path) > 0:
            slides.append(path)
    return sorted(slides, key=lambda p: natural_key(p.name))


def site_name(path: Path) -> str:
    """The site name a slide or folder gets when none is given: its name, without a slide's
    suffix, with what a folder name cannot hold replaced by ``_``."""
    stem = path.stem if path.is_file() else path.name
    name = _UNSAFE.sub("_", stem).strip("._ +-")[:MAX_NAME].rstrip("._ +-")
    return name or "site"


def check_site_name(name: str, origin: str) -> str:
    """``name`` when it can be a site's folder name on every system.

    Raises:
        CohortError: it cannot (the message says what a name may hold).
    """
    if (
        not name
        or len(name) > MAX_NAME
        or not _NAME.match(name)
        or name.endswith((" ", "."))
        or name.casefold() in RESERVED
    ):
        raise CohortError(
            f"{origin}: {name!r} cannot be a site name: use up to {MAX_NAME} letters, digits, spaces and "
            "'.', '_', '+', '-', beginning with a letter or digit (it names the site's folders)"
        )
    return name


def _manifest_rows(path: Path) -> Iterator[tuple[int, list[str]]]:
    """The rows of a manifest, refused whole when it is too large or has too many rows."""
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise CohortError(f"{path}: cannot be read ({exc.strerror or exc})") from exc
    if size > MAX_MANIFEST_BYTES:
        raise CohortError(
            f"{path}: the manifest is {size / 2**20:.0f} MiB, more than the {MAX_MANIFEST_BYTES >> 20} MiB "
            f"a cohort's manifest may be (at most {MAX_SITES:,} sites); split it into several cohorts, "
            "each with its own --state"
        )
    try:
        yield from table_rows(path)
    except F2TTAError as exc:
        raise CohortError(str(exc)) from exc


def read_manifest(path: Path, limit: int = MAX_SITES) -> list[CohortInput]:
    """The sites a manifest lists, in its order (relative paths are relative to its folder).

    Raises:
        CohortError: no path column, a path that does not exist, a bad site name, or more than
            ``limit`` rows (refused at the first row over it, the rest unread, no path looked at).
    """
    rows = _manifest_rows(path)
    header = next(rows, None)
    if header is None:
        raise CohortError(f"{path}: the manifest is empty")
    names = header[1]
    at_path = find_column(names, PATH_COLUMNS)
    if at_path is None:
        raise CohortError(
            f"{path}: no path column in the manifest's first row (one of {', '.join(PATH_COLUMNS)}; "
            f"optional: {SITE_COLUMNS[0]}, {LABEL_COLUMNS[0]}, {REVIEWS_COLUMNS[0]})"
        )
    at_site, at_label = find_column(names, SITE_COLUMNS), find_column(names, LABEL_COLUMNS)
    at_reviews = find_column(names, REVIEWS_COLUMNS)
    entries: list[tuple[int, list[str]]] = []
    for line, cells in rows:  # counted before any path is looked at: a huge manifest costs no stat
        if len(entries) >= limit:
            raise CohortError(
                f"{path}: the manifest lists more than {limit:,} sites (refused at line {line}), the most one "
                "cohort holds; split it into several manifests, each run with its own --state"
            )
        entries.append(
            (
                line,
                [c.strip() for c in cells[: max(at_path, at_site or 0, at_label or 0, at_reviews or 0) + 1]],
            )
        )
    return [
        _manifest_input(path, line, cells, at_path, at_site, at_label, at_reviews) for line, cells in entries
    ]


def _manifest_input(
    path: Path,
    line: int,
    cells: list[str],
    at_path: int,
    at_site: int | None,
    at_label: int | None,
    at_reviews: int | None,
) -> CohortInput:
    """The site one row of a manifest names."""
    origin = f"{path.name} line {line}"

    def cell(at: int | None) -> str:
        return cells[at] if at is not None and at < len(cells) else ""

    given = cell(at_path)
    if not given:
        raise CohortError(f"{origin}: no path")
    target = Path(os.path.expanduser(given))
    target = target if target.is_absolute() else path.parent / target
    reviews = cell(at_reviews)
    review_file = None
    if reviews:
        review_file = Path(reviews) if Path(reviews).is_absolute() else path.parent / reviews
        if not review_file.is_file():
            raise CohortError(f"{origin}: reviews file not found: {review_file}")
    return _input(target, origin, cell(at_site) or None, cell(at_label), review_file)


def _input(
    path: Path, origin: str, site: str | None = None, label: str = "", reviews: Path | None = None
) -> CohortInput:
    if not path.exists():
        raise CohortError(f"{origin}: input not found (a slide or a folder of images): {path}")
    if path.is_file() and path.suffix.lower() in IMAGE_EXTENSIONS - {".tif", ".tiff"}:
        raise CohortError(f"{origin}: {path} is an image, not a slide: name the folder that holds the images")
    kind = "folder" if path.is_dir() else "slide"
    name = check_site_name(site if site is not None else site_name(path), origin)
    return CohortInput(name, Path(os.path.abspath(path)), kind, origin, label[:MAX_LABEL], reviews)


def cohort_inputs(paths: Sequence[Path], limit: int = MAX_SITES) -> list[CohortInput] | None:
    """The sites ``--input`` names, or None when it names one ordinary input (one slide or one
    folder of images, or a path that does not exist: the run says so as it always did).

    Raises:
        CohortError: an input is missing, a path is named twice, two inputs would be one site,
            a manifest cannot be used, or there are more than ``limit`` sites.
    """
    paths = [Path(p) for p in paths]
    if len(paths) == 1:
        only = paths[0]
        if not (is_manifest(only) or (only.is_dir() and slides_in(only))):
            return None
    found: list[CohortInput] = []
    for number, path in enumerate(paths, 1):
        origin = f"--input {number} ({path})" if len(paths) > 1 else f"--input {path}"
        if is_manifest(path):
            found += read_manifest(path, limit - len(found))
        elif path.is_dir() and (slides := slides_in(path)):
            found += [_input(s, f"{origin}: {s.name}") for s in slides]
        else:
            found.append(_input(path, origin))
        if len(found) > limit:
            raise CohortError(f"{origin}: more than {limit:,} sites, the most one cohort holds; split it")
    check_distinct(found)
    return found


def check_distinct(inputs: Sequence[CohortInput]) -> None:
    """Refuse a path named twice and two inputs that would be one site.

    Raises:
        CohortError: the message names both places.
    """
    by_path: dict[str, CohortInput] = {}
    by_site: dict[str, CohortInput] = {}
    for item in inputs:
        real = os.path.realpath(item.path)
        if real in by_path:
            raise CohortError(
                f"{item.path} is named twice ({by_path[real].origin}; {item.origin}): each input is one site, "
                "name it once"
            )
        by_path[real] = item
        key = item.site.casefold()
        if key in by_site:
            other = by_site[key]
            raise CohortError(
                f"two inputs would be site {item.site!r}: {other.path} ({other.origin}) and {item.path} "
                f"({item.origin}); give them different site names (the manifest's {SITE_COLUMNS[0]} column)"
            )
        by_site[key] = item
