"""A per-job result cache for the benchmark, so an interrupted benchmark resumes.

Each finished job's records are written to ``DIR/<key>.safetensors`` as soon as the job ends
(atomic write; arrays as tensors, names and skipped files as JSON in the header metadata; no
pickle). The key is a SHA-256 over everything the records depend on:

* the job: method, config overrides, seed, stream parameters, positive class, device, source
  statistics images, batch;
* the checkpoint and its model card (their bytes);
* the dataset listing (every item's path, label and domain, and its file's size and mtime);
* the code: every ``engine/**/*.py`` and ``lab/**/*.py`` (the lab's job, protocol and streams
  decide what a job records as much as the engine does), so any code change starts afresh.

The row name and the job's position in the grid are not part of the key: a job cached by one
run is reused by a later run that lists the same method and seed among others. Timings are the
cached run's. A cache file that cannot be read or disagrees with its key is logged, ignored and
rewritten by the rerun job.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import logging
from pathlib import Path
from typing import Any

import numpy as np
from safetensors import SafetensorError, safe_open
from safetensors.numpy import save

from engine._version import __version__
from engine.data.readers import Dataset
from engine.model.card import _sha256_file
from engine.util.atomic import atomic_write_bytes
from lab.bench.job import JobRecords
from lab.bench.plan import BenchJob

logger = logging.getLogger(__name__)

_FORMAT = 3  # 3: margins, candidate thresholds and prompted classes kept (the site ladder's inputs)
_ARRAYS = (
    "labels",
    "preds",
    "source_preds",
    "probs",
    "domain",
    "fragment",
    "seconds",
    "path",
    "group",
    "threshold",
    "margin",
    "candidates",
    "prompted",
)
_UNUSABLE = (OSError, ValueError, KeyError, TypeError, SafetensorError)  # what read_records raises


#: The packages whose code a job's records depend on.
CODE_PACKAGES = ("engine", "lab")


def code_sources() -> tuple[Path, tuple[Path, ...]]:
    """The folder holding both packages, and their Python sources sorted (what :func:`code_digest` hashes)."""
    root = Path(__file__).resolve().parents[2]
    return root, tuple(sorted(path for name in CODE_PACKAGES for path in (root / name).rglob("*.py")))


@functools.cache
def code_digest() -> str:
    """SHA-256 over the engine's and the lab's Python sources (path and bytes, in sorted order)."""
    root, sources = code_sources()
    h = hashlib.sha256(__version__.encode())
    for path in sources:
        h.update(path.relative_to(root).as_posix().encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def model_digest(model: Path, card: Path) -> str:
    """SHA-256 of the checkpoint's and its card's bytes."""
    return hashlib.sha256((_sha256_file(model) + _sha256_file(card)).encode()).hexdigest()


def dataset_digest(ds: Dataset) -> str:
    """SHA-256 of the listing: classes, domains, and each item's path, label, domain, size, mtime."""
    h = hashlib.sha256(json.dumps([list(ds.classes), list(ds.domains)]).encode())
    for item in ds.items:
        try:
            st = item.path.stat()
            size, mtime = st.st_size, st.st_mtime_ns
        except OSError:
            size, mtime = -1, -1
        h.update(f"{item.path}\0{item.label}\0{item.domain}\0{size}\0{mtime}\n".encode())
    return h.hexdigest()


def job_key(job: BenchJob, model: str, data: str) -> str:
    """The cache key of ``job`` given the model and dataset digests."""
    spec = {
        "format": _FORMAT,
        "engine": code_digest(),
        "model": model,
        "data": data,
        "method": job.method,
        "overrides": [[k, repr(v)] for k, v in job.overrides],
        "seed": job.seed,
        "stream": {k: repr(v) for k, v in dataclasses.asdict(job.stream).items()},
        "positive_class": job.positive_class,
        "device": job.device,
        "source_stats": [job.source_stats, job.source_domain] if job.source_stats else None,
        "known_sites": job.known_sites,
        "batch": job.batch,
    }
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()


def read_records(path: Path, expect_key: str | None = None) -> JobRecords:
    """One cache file's records (``index`` -1; row and seed as stored). No pickle is involved.

    Raises:
        OSError, ValueError, KeyError, TypeError, SafetensorError: the file is unusable.
    """

    with safe_open(str(path), framework="np") as fh:
        meta: dict[str, str] = fh.metadata() or {}
        arrays = {name: fh.get_tensor(name) for name in _ARRAYS}
    if expect_key is not None and meta.get("key") != expect_key:
        raise ValueError("the file's key differs from its name")
    n = arrays["labels"].shape[0]
    if any(arrays[name].shape[0] != n for name in _ARRAYS):
        raise ValueError("arrays of different lengths")
    return JobRecords(
        index=-1,
        row=str(meta["row"]),
        seed=int(meta["seed"]),
        domains=tuple(json.loads(meta["domains"])),
        skipped=[(str(p), str(r)) for p, r in json.loads(meta["skipped"])],
        **{name: np.array(arrays[name]) for name in _ARRAYS},
    )


class JobCache:
    """Finished jobs' records under ``directory``, one file per cache key."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)

    def path(self, key: str) -> Path:
        return self.directory / f"{key}.safetensors"

    def load(self, key: str, job: BenchJob) -> JobRecords | None:
        """The cached records of ``job`` (its current row and index), or None when absent or unusable."""
        path = self.path(key)
        if not path.is_file():
            return None
        try:
            rec = read_records(path, expect_key=key)
        except _UNUSABLE as exc:
            logger.warning("ignoring the unusable cache file %s: %s", path, exc)
            return None
        rec.index, rec.row, rec.seed = job.index, job.row, job.seed
        return rec

    def entries(self) -> list[JobRecords]:
        """Every readable cached job, with the row name and seed it was computed for (unusable files skipped)."""
        out: list[JobRecords] = []
        for path in sorted(self.directory.glob("*.safetensors")):
            try:
                out.append(read_records(path, expect_key=path.stem))
            except _UNUSABLE as exc:
                logger.warning("ignoring the unusable cache file %s: %s", path, exc)
        return out

    def store(self, key: str, rec: JobRecords) -> None:
        """Write ``rec`` atomically; a failure is logged (the benchmark goes on without caching)."""
        meta: dict[str, Any] = {
            "key": key,
            "format": str(_FORMAT),
            "row": rec.row,
            "seed": str(rec.seed),
            "domains": json.dumps(list(rec.domains)),
            "skipped": json.dumps([list(s) for s in rec.skipped]),
        }
        tensors = {name: np.ascontiguousarray(getattr(rec, name)) for name in _ARRAYS}
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(self.path(key), save(tensors, metadata=meta))
        except OSError as exc:
            logger.warning("cannot write the job cache %s: %s", self.directory, exc)
