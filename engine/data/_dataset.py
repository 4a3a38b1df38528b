"""A multi-domain dataset: its items, the files left out, safe reading, the per-domain split."""

from __future__ import annotations

import logging
import zlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
from PIL import Image

from engine.errors import F2TTAError, ImageReadError
from engine.io.images import read_image

logger = logging.getLogger(__name__)

Layout = Literal["folders", "manifest", "camelyon17"]
Check = Literal["none", "exists", "header"]

SPLIT_FRACTIONS = (0.60, 0.15, 0.25)  # train / val / test per domain, as in the paper


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
