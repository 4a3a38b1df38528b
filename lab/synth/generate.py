"""Generated multi-site data: the same labelled anatomy seen through several sites' appearance.

Four kinds exist (``histo``, ``fundus``, ``lesion``, ``oct``; see ``_histo.py``, ``_fundus.py``,
``_lesion.py`` and ``_oct.py``). In each, the class is decided by morphology only (nuclear density
and atypia, the cup-to-disc ratio, one small lesion, macular oedema) and the sites differ only in
how that morphology is imaged: stain or illumination, colour cast, blur, noise, JPEG quality,
scale, speckle, sensitivity. A model trained on one site therefore meets a pure appearance shift on
the others, like the paper's Camelyon17 centres.

Later site sets (``sites="v2"`` … ``"v5"``: every kind; ``"v6"``: histo, fundus and lesion;
see ``_site_sets.py``) keep the same site1 and add four target sites imaged through mechanisms no
earlier set of the kind used. The first set (``"v1"``, the default) is unchanged.

Every image is rendered from its own random generator, seeded by ``(seed, kind, site, index)``
(a later set's target sites by a key of their own, ``kind/v2`` … ``kind/v6``), so the
output is the same for a seed whatever the order or the number of worker processes.
"""

from __future__ import annotations

import dataclasses
import io
import json
import logging
import os
import time
import zlib
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from engine.util.atomic import atomic_write_bytes
from lab.synth._drawing import SynthSpec
from lab.synth._site_sets import KINDS as KINDS
from lab.synth._site_sets import SITE_SETS as SITE_SETS
from lab.synth._site_sets import get_spec as get_spec
from lab.synth._synth_marker import SynthError, check_ours, mark, marked_sites, remove_ours, remove_stale

logger = logging.getLogger(__name__)

GENERATOR_VERSION = 1
DEFAULT_SITES = "v1"
DEFAULT_PER_DOMAIN = 1000  # images per site
DEFAULT_SIZE = 96  # square side in pixels
SYNTH_JSON = "synth.json"
_LABEL_STREAM = 2**31 - 1  # the per-site label shuffle's stream, never an image index


def encode(img: np.ndarray, jpeg_quality: int | None) -> bytes:
    """PNG bytes, or JPEG bytes at ``jpeg_quality`` when the site's compression is part of its look."""
    buf = io.BytesIO()
    pil = Image.fromarray(img)
    if jpeg_quality is None:
        pil.save(buf, format="PNG", compress_level=1)
    else:
        pil.save(buf, format="JPEG", quality=int(jpeg_quality), subsampling=2)
    return buf.getvalue()


def image_rng(seed: int, kind: str, site_index: int, index: int) -> np.random.Generator:
    """The generator of one image, independent of every other image's."""
    key = zlib.crc32(kind.encode())
    return np.random.default_rng(np.random.SeedSequence([seed, key, site_index, index]))


def stream_key(spec: SynthSpec, site_index: int) -> str:
    """The name that seeds a site's images: the kind, or for a later set's target sites ``kind/SET``.

    Site1 of every set is the first set's site1, image for image; a later set's target sites draw
    other anatomy than any other set's sites of the same position.
    """
    return spec.kind if spec.site_set == "v1" or site_index == 0 else f"{spec.kind}/{spec.site_set}"


def site_labels(
    seed: int,
    key: str,
    site_index: int,
    n: int,
    num_classes: int,
    positive: int = 0,
    share: float | None = None,
) -> np.ndarray:
    """Labels for ``n`` images of a site (seeded by its :func:`stream_key` ``key``), shuffled.

    Balanced (counts differ by at most one) when ``share`` is None; otherwise ``round(share * n)``
    images are of class ``positive`` and the rest are shared out evenly among the other classes
    (label shift between sites, ``f2tta synth --prevalence``).
    """
    rng = image_rng(seed, key, site_index, _LABEL_STREAM)
    if share is None:
        return rng.permutation(np.arange(n) % num_classes)
    n_pos = round(share * n)
    others = [c for c in range(num_classes) if c != positive]
    rest = np.array([others[i % len(others)] for i in range(n - n_pos)], dtype=np.int64)
    return rng.permutation(np.concatenate([np.full(n_pos, positive, dtype=np.int64), rest]))


def parse_prevalence(text: str) -> dict[str, float]:
    """``"site2=0.2,site3=0.8"`` -> ``{"site2": 0.2, "site3": 0.8}`` (shares within [0, 1]).

    Raises:
        SynthError: malformed text or a share outside [0, 1].
    """
    out: dict[str, float] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        name, sep, value = part.partition("=")
        try:
            share = float(value)
        except ValueError:
            share = -1.0
        if not sep or not name.strip() or not 0.0 <= share <= 1.0:
            raise SynthError(f"bad prevalence {part!r}: expected SITE=P with 0 <= P <= 1, e.g. site2=0.2")
        out[name.strip()] = share
    if not out:
        raise SynthError(f"bad prevalence {text!r}: no SITE=P given")
    return out


def _site_share(spec: SynthSpec, site_index: int, prevalence: Mapping[str, float] | None) -> float | None:
    if not prevalence:
        return None
    return prevalence.get(spec.sites[site_index].name)


def _positive_index(spec: SynthSpec) -> int:
    return spec.classes.index(spec.positive_class)


def _extension(site: Any) -> str:
    return ".png" if site.jpeg_quality is None else ".jpg"


def render_one(spec: SynthSpec, site_index: int, index: int, label: int, size: int, seed: int) -> bytes:
    """Encoded bytes of one image (what is written to disk)."""
    site = spec.sites[site_index]
    img = spec.render(image_rng(seed, stream_key(spec, site_index), site_index, index), label, site, size)
    return encode(img, site.jpeg_quality)


def generate_arrays(
    kind: str,
    site: str | int,
    n: int,
    size: int = DEFAULT_SIZE,
    seed: int = 0,
    share: float | None = None,
    sites: str = DEFAULT_SITES,
) -> tuple[np.ndarray, np.ndarray]:
    """Images of one site in memory, exactly as they would be read back from disk.

    Args:
        kind: ``histo``, ``fundus``, ``lesion`` or ``oct``.
        site: site name or index.
        n: number of images.
        size: square side in pixels.
        seed: the same seed as :func:`write_synth` gives the same images.
        share: the positive class's share of the labels (None: balanced), as ``--prevalence``.
        sites: the site set, ``v1`` … ``v6`` (as ``f2tta synth --sites``; not every kind has every set).

    Returns:
        ``(images, labels)``: uint8 (n, size, size, 3) and int64 (n,).
    """
    spec = get_spec(kind, sites)
    site_index = _site_index(spec, site)
    labels = _labels(spec, seed, site_index, n, share)
    images = np.empty((n, size, size, 3), dtype=np.uint8)
    for i in range(n):
        data = render_one(spec, site_index, i, int(labels[i]), size, seed)
        with Image.open(io.BytesIO(data)) as img:
            images[i] = np.asarray(img.convert("RGB"))
    return images, labels.astype(np.int64)


def _site_index(spec: SynthSpec, site: str | int) -> int:
    if isinstance(site, int):
        if not 0 <= site < len(spec.sites):
            raise SynthError(f"{spec.kind} has sites 0..{len(spec.sites) - 1}, not {site}")
        return site
    names = [s.name for s in spec.sites]
    if site not in names:
        raise SynthError(f"{spec.kind} has no site {site!r}; sites are {', '.join(names)}")
    return names.index(site)


@dataclass(frozen=True)
class SynthResult:
    """What :func:`write_synth` wrote."""

    out: Path  # the dataset root (domain-folder layout)
    counts: dict[str, dict[str, int]]  # site -> class -> number of images
    seconds: float  # wall time


def _labels(spec: SynthSpec, seed: int, site_index: int, n: int, share: float | None) -> np.ndarray:
    key = stream_key(spec, site_index)
    return site_labels(seed, key, site_index, n, len(spec.classes), _positive_index(spec), share)


def _write_chunk(args: tuple[str, str, Path, int, list[tuple[int, int]], int, int]) -> int:
    kind, sites, out, site_index, jobs, size, seed = args
    spec = get_spec(kind, sites)
    site = spec.sites[site_index]
    ext = _extension(site)
    for index, label in jobs:
        data = render_one(spec, site_index, index, label, size, seed)
        path = out / site.name / spec.classes[label] / f"{index:06d}{ext}"
        path.write_bytes(data)
    return len(jobs)


def write_synth(
    kind: str,
    out: str | Path,
    per_domain: int = DEFAULT_PER_DOMAIN,
    size: int = DEFAULT_SIZE,
    seed: int = 0,
    *,
    workers: int = 1,
    overwrite: bool = False,
    progress: Callable[[int, int], None] | None = None,
    prevalence: Mapping[str, float] | None = None,
    sites: str = DEFAULT_SITES,
) -> SynthResult:
    """Write a generated multi-site dataset in the domain-folder layout ``OUT/<site>/<class>/``.

    Args:
        kind: ``histo``, ``fundus``, ``lesion`` or ``oct``.
        out: dataset root; created if missing. ``OUT/synth.json`` records every generator parameter.
        per_domain: images per site, classes balanced.
        size: square side in pixels (16 to 1024).
        seed: the whole dataset is a function of ``(kind, sites, per_domain, size, seed)``.
        workers: processes rendering in parallel (the output does not depend on it).
        overwrite: replace the site folders an earlier run wrote (they hold its marker; only the
            files it wrote are removed); without it an existing site folder is an error, and a
            site folder without the marker is one with it too.
        progress: called with ``(done, total)`` after each chunk of images.
        prevalence: site -> share of the positive class (label shift); other sites are balanced.
        sites: the site set, ``v1`` (default) … ``v6`` (see ``_site_sets.py``).

    Returns:
        The folder and the per-site, per-class counts.
    """
    spec = get_spec(kind, sites)
    if not 16 <= size <= 1024:
        raise SynthError(f"image size must be between 16 and 1024 pixels, got {size}")
    if per_domain < len(spec.classes):
        raise SynthError(f"need at least {len(spec.classes)} images per site, got {per_domain}")
    unknown = sorted(set(prevalence or {}) - {site.name for site in spec.sites})
    if unknown:
        names = ", ".join(site.name for site in spec.sites)
        raise SynthError(f"--prevalence names unknown site(s) {', '.join(unknown)}; {kind} has {names}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for site in spec.sites:  # every site is checked before any is touched
        site_dir = out / site.name
        if site_dir.exists() or site_dir.is_symlink():
            if not overwrite:
                raise SynthError(f"{site_dir} already exists; choose another folder or overwrite it")
            check_ours(site_dir)
    # Site folders an earlier run wrote that this run does not (another kind or site set): left in
    # place they would be read as more domains of the new dataset.
    stale = [d for d in marked_sites(out) if d.name not in {site.name for site in spec.sites}]
    if stale and not overwrite:
        names = ", ".join(d.name for d in stale)
        raise SynthError(
            f"{out} holds site folders an earlier f2tta synth run wrote ({names}) that this run does not; "
            "choose another folder or overwrite them"
        )
    for site_dir in stale:
        remove_stale(site_dir)
    for site in spec.sites:
        site_dir = out / site.name
        if site_dir.exists():
            remove_ours(site_dir)
        for cls in spec.classes:
            (site_dir / cls).mkdir(parents=True, exist_ok=True)
        mark(site_dir, kind, site.name, spec.classes)
    start = time.perf_counter()
    tasks: list[tuple[str, str, Path, int, list[tuple[int, int]], int, int]] = []
    counts: dict[str, dict[str, int]] = {}
    chunk = 64
    for si, site in enumerate(spec.sites):
        labels = _labels(spec, seed, si, per_domain, _site_share(spec, si, prevalence))
        counts[site.name] = {c: int((labels == k).sum()) for k, c in enumerate(spec.classes)}
        jobs = [(i, int(labels[i])) for i in range(per_domain)]
        tasks += [
            (kind, sites, out, si, jobs[j : j + chunk], size, seed) for j in range(0, per_domain, chunk)
        ]
    total = per_domain * len(spec.sites)
    done = 0
    if workers > 1:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            for n in pool.map(_write_chunk, tasks):
                done += n
                if progress is not None:
                    progress(done, total)
    else:
        for task in tasks:
            done += _write_chunk(task)
            if progress is not None:
                progress(done, total)
    seconds = time.perf_counter() - start
    meta = describe(spec, per_domain=per_domain, size=size, seed=seed)
    meta["prevalence"] = dict(sorted((prevalence or {}).items()))
    meta["counts"] = counts
    atomic_write_bytes(out / SYNTH_JSON, (json.dumps(meta, indent=2) + "\n").encode())
    logger.info("wrote %d %s images to %s in %.1f s", total, kind, out, seconds)
    return SynthResult(out, counts, seconds)


def describe(spec: SynthSpec, *, per_domain: int, size: int, seed: int) -> dict[str, Any]:
    """The content of ``synth.json``: everything needed to regenerate the data."""
    return {
        "generator": "f2tta synth",
        "generator_version": GENERATOR_VERSION,
        "kind": spec.kind,
        "site_set": spec.site_set,
        "description": spec.description,
        "seed": seed,
        "size": size,
        "per_domain": per_domain,
        "classes": list(spec.classes),
        "positive_class": spec.positive_class,
        "sites": {
            s.name: {**dataclasses.asdict(s), "format": "png" if s.jpeg_quality is None else "jpeg"}
            for s in spec.sites
        },
    }


def default_workers() -> int:
    """Worker processes for the CLI: the available cores, at most 8."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(8, cores))


def site_names(kind: str, sites: str = DEFAULT_SITES) -> Sequence[str]:
    """Names of a kind's sites in order (of the site set ``sites``)."""
    return [s.name for s in get_spec(kind, sites).sites]
