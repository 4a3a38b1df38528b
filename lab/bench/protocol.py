"""The F²TTA test streams: domain fragments of Dirichlet lengths, shuffled into one stream.

The protocol of the paper (Experiments, "Experimental Setting"), as fixed in ``docs/method.md`` (decision 1):

1. per domain, the seeded random 60/15/25 train/val/test split (:func:`engine.data.split_dataset`;
   the *split* seed is the one the source model was trained with, so no training image is streamed);
2. each domain's test set -- the source domain's included -- is shuffled and cut into ``F``
   consecutive fragments whose lengths are proportional to a draw of Dirichlet(δ·1_F), every
   fragment holding at least one image (a test set of fewer than ``F`` images gives as many
   one-image fragments as it has images);
3. all fragments of all domains are shuffled into one stream.

The paper tunes K and studies δ on streams of the *validation* sets; ``StreamParams.subset="val"``
cuts those instead of the test sets.

Small δ gives a few long fragments and many one-image ones; large δ gives fragments of about equal
length. The *stream* seed ``s`` gives stream ``s`` (the paper's 8 streams are seeds 0-7). A stream
is a pure function of (the set of test items, seed, δ, F): items are ordered by path before they
are shuffled, each domain draws from its own generator (seeded by the stream seed and the domain
name) and the fragment order from another, so the listing order and the other domains never matter.

**Label shift** (``StreamParams.prior``, ``f2tta bench --prior site2=0.2``): a named domain keeps a
seeded subset of its images whose share of the positive class is the given one
(:func:`apply_prior`), so methods can be tried on sites whose class priors differ. A method that
only pushes every site towards balanced classes fails such streams.

The number of fragments is the paper's 100 for histology and 10 for fundus images;
:func:`default_fragments` picks one of the two when no ``--fragments`` is given (see its docstring).
"""

from __future__ import annotations

import json
import math
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from engine.data.readers import Dataset, Item, split_dataset

HISTOLOGY_FRAGMENTS = 100  # F for Camelyon17-like patch sets (the paper's breast cancer task)
FUNDUS_FRAGMENTS = 10  # F for small fundus-like sets (the paper's glaucoma task)
LARGE_TEST_SET = 1000  # a median per-domain test set at least this large counts as histology-like
_ORDER_KEY = "fragment-order"  # names the generator that shuffles the fragments

Subset = Literal["test", "val"]


@dataclass(frozen=True)
class StreamParams:
    """How streams are cut; with a stream seed this fixes a stream exactly."""

    delta: float = 1.0  # δ: Dirichlet concentration of the fragment lengths (small = unequal)
    fragments: int = HISTOLOGY_FRAGMENTS  # F: fragments per domain (fewer when a test set is smaller)
    split_seed: int = 0  # seed of the per-domain 60/15/25 split (the source model's)
    limit: int | None = None  # keep only the first N images of each stream (quick runs); None = all
    subset: Subset = "test"  # which split is streamed: "test" (tables) or "val" (the paper's K and δ sweeps)
    prior: tuple[tuple[str, float], ...] = ()  # label shift: (domain, positive share) kept per domain

    def __post_init__(self) -> None:
        if self.subset not in ("test", "val"):
            raise ValueError(f"subset must be 'test' or 'val', got {self.subset!r}")
        if not (self.delta > 0 and np.isfinite(self.delta)):
            raise ValueError(f"delta must be a positive number, got {self.delta}")
        if self.fragments < 1:
            raise ValueError(f"fragments must be at least 1, got {self.fragments}")
        if self.limit is not None and self.limit < 1:
            raise ValueError(f"limit must be at least 1, got {self.limit}")
        for domain, share in self.prior:
            if not 0.0 < share < 1.0:
                raise ValueError(
                    f"the positive share of {domain} must be strictly between 0 and 1, got {share}"
                )


@dataclass(frozen=True)
class Fragment:
    """A run of consecutive stream positions from one domain."""

    domain: str
    start: int  # first stream position
    length: int  # images (>= 1)


@dataclass(frozen=True)
class Stream:
    """One test stream: the items in arrival order and the fragments they form."""

    seed: int
    items: tuple[Item, ...]  # arrival order
    fragments: tuple[Fragment, ...]  # in stream order; their lengths sum to len(items)

    def __len__(self) -> int:
        return len(self.items)

    def fragment_index(self) -> np.ndarray:
        """``(len,)`` the fragment number of every stream position."""
        return np.repeat(np.arange(len(self.fragments)), [f.length for f in self.fragments])

    def head(self, n: int | None) -> Stream:
        """The first ``n`` images (all if None); the last fragment may be cut short."""
        if n is None or n >= len(self.items):
            return self
        kept: list[Fragment] = []
        for frag in self.fragments:
            if frag.start >= n:
                break
            kept.append(Fragment(frag.domain, frag.start, min(frag.length, n - frag.start)))
        return Stream(self.seed, self.items[:n], tuple(kept))


def _generator(seed: int, key: str) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([seed, zlib.crc32(key.encode("utf-8"))]))


def fragment_lengths(n: int, fragments: int, delta: float, rng: np.random.Generator) -> list[int]:
    """Cut ``n`` images into fragments of Dirichlet(δ·1_F) proportions, each at least one image.

    Every fragment gets one image; the other ``n - F`` go out in proportion to the Dirichlet draw
    (largest remainders, ties to the lower index). With ``n < F`` there are ``n`` one-image
    fragments (the draw is still made, so the generator advances the same way).

    Args:
        n: images to cut (0 gives no fragment).
        fragments: F, the wanted number of fragments.
        delta: δ > 0.
        rng: the generator the proportions are drawn from.
    """
    if n <= 0:
        return []
    f = min(fragments, n)
    p = rng.dirichlet(np.full(f, float(delta)))
    if not np.all(np.isfinite(p)) or p.sum() <= 0:  # guard: underflow for extreme δ
        p = np.zeros(f)
        p[int(rng.integers(f))] = 1.0
    p = p / p.sum()
    spare = n - f
    share = p * spare
    base = np.floor(share).astype(np.int64)
    left = spare - int(base.sum())
    if left > 0:
        order = np.lexsort((np.arange(f), -(share - base)))  # largest remainder first, then index
        base[order[:left]] += 1
    return [int(v) + 1 for v in base]


def build_stream(
    test_sets: Mapping[str, Sequence[Item]],
    seed: int,
    delta: float = 1.0,
    fragments: int = HISTOLOGY_FRAGMENTS,
) -> Stream:
    """Cut every domain's test items into fragments and shuffle all fragments into one stream.

    Args:
        test_sets: domain -> its test items (order irrelevant; the source domain included).
        seed: the stream seed.
        delta: δ of the Dirichlet fragment lengths.
        fragments: F per domain.
    """
    pieces: list[tuple[str, tuple[Item, ...]]] = []
    for domain in sorted(test_sets):
        items = sorted(test_sets[domain], key=lambda it: str(it.path))
        rng = _generator(seed, f"domain:{domain}")
        shuffled = [items[i] for i in rng.permutation(len(items))]
        start = 0
        for length in fragment_lengths(len(shuffled), fragments, delta, rng):
            pieces.append((domain, tuple(shuffled[start : start + length])))
            start += length
    order = _generator(seed, _ORDER_KEY).permutation(len(pieces))
    stream_items: list[Item] = []
    frags: list[Fragment] = []
    for idx in order:
        domain, chunk = pieces[int(idx)]
        frags.append(Fragment(domain, len(stream_items), len(chunk)))
        stream_items.extend(chunk)
    return Stream(seed, tuple(stream_items), tuple(frags))


def domain_test_sets(
    ds: Dataset, split_seed: int = 0, subset: Subset = "test"
) -> dict[str, tuple[Item, ...]]:
    """Every domain's test split (the paper's seeded 60/15/25 split), or its validation split."""
    splits = split_dataset(ds, split_seed)
    return {d: (split.val if subset == "val" else split.test) for d, split in splits.items()}


def parse_prior(text: str) -> tuple[tuple[str, float], ...]:
    """``"site2=0.2,site3=0.8"`` -> ``(("site2", 0.2), ("site3", 0.8))``, sorted by domain.

    Raises:
        ValueError: malformed text, a share outside (0, 1) or a domain named twice.
    """
    pairs: dict[str, float] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        name, sep, value = part.partition("=")
        name = name.strip()
        try:
            share = float(value)
        except ValueError:
            share = math.nan
        if not sep or not name or not 0.0 < share < 1.0:
            raise ValueError(f"bad prior {part!r}: expected DOMAIN=P with 0 < P < 1, e.g. site2=0.2")
        if name in pairs:
            raise ValueError(f"bad prior {text!r}: {name} is named twice")
        pairs[name] = share
    if not pairs:
        raise ValueError(f"bad prior {text!r}: no DOMAIN=P given")
    return tuple(sorted(pairs.items()))


def apply_prior(
    sets: Mapping[str, Sequence[Item]],
    prior: Sequence[tuple[str, float]],
    positive: int,
    seed: int,
) -> dict[str, tuple[Item, ...]]:
    """Label shift: keep a seeded subset of each named domain whose positive share is ``P``.

    The largest subset with that share is kept: all images of the scarcer side (the positive
    class, or the others together) and as many of the other side as the share asks for, drawn
    without replacement; the other classes keep their relative proportions. The subset depends on
    ``seed`` (the split seed) and the domain only, not on the stream seed, so every stream of a
    benchmark sees the same images of a domain, in other orders.

    Raises:
        ValueError: a named domain is not in ``sets``, or it lacks positives or negatives.
    """
    out = {d: tuple(v) for d, v in sets.items()}
    for domain, share in prior:
        if domain not in out:
            raise ValueError(f"prior for {domain!r}, which is not a domain: {', '.join(sorted(out))}")
        items = sorted(out[domain], key=lambda it: str(it.path))
        pos = [it for it in items if it.label == positive]
        neg = [it for it in items if it.label != positive]
        if not pos or not neg:
            raise ValueError(
                f"{domain}: a prior needs positive and negative images, found {len(pos)} and {len(neg)}"
            )
        n_pos = max(1, min(len(pos), int(share / (1.0 - share) * len(neg))))
        n_neg = max(1, min(len(neg), round(n_pos * (1.0 - share) / share)))
        rng = _generator(seed, f"prior:{domain}")
        keep_pos = [pos[i] for i in sorted(rng.choice(len(pos), n_pos, replace=False))]
        keep_neg = [neg[i] for i in sorted(rng.choice(len(neg), n_neg, replace=False))]
        out[domain] = tuple(sorted(keep_pos + keep_neg, key=lambda it: str(it.path)))
    return out


def dataset_stream(ds: Dataset, seed: int, params: StreamParams) -> Stream:
    """The stream ``seed`` of a dataset under ``params`` (label shift and limit applied)."""
    sets = domain_test_sets(ds, params.split_seed, params.subset)
    if params.prior:
        sets = apply_prior(sets, params.prior, ds.positive_class, params.split_seed)
    return build_stream(sets, seed, params.delta, params.fragments).head(params.limit)


def default_fragments(ds: Dataset, sets: Mapping[str, Sequence[Item]] | None = None) -> tuple[int, str]:
    """The paper's F for a dataset that looks like histology (100) or like fundus images (10).

    The first rule that applies decides:

    1. generated data (``synth.json`` beside the domains): kind ``histo`` -> 100, other kinds -> 10;
    2. the WILDS Camelyon17 layout -> 100;
    3. otherwise by size: 100 when the median per-domain test set holds at least
       :data:`LARGE_TEST_SET` images (Camelyon17's hold 9,000-35,000), else 10 (the glaucoma
       sets hold 25-1,900).

    Returns:
        ``(F, reason)``, the reason being a short phrase for logs and the JSON config.
    """
    root = ds.root if ds.root.is_dir() else ds.root.parent
    kind = _synth_kind(root / "synth.json")
    if kind is not None:
        f = HISTOLOGY_FRAGMENTS if kind == "histo" else FUNDUS_FRAGMENTS
        return f, f"generated {kind} data"
    if ds.layout == "camelyon17":
        return HISTOLOGY_FRAGMENTS, "Camelyon17 layout"
    sizes = [len(v) for v in (sets if sets is not None else domain_test_sets(ds)).values()]
    median = float(np.median(sizes)) if sizes else 0.0
    if median >= LARGE_TEST_SET:
        return HISTOLOGY_FRAGMENTS, f"median test set of {median:.0f} images (>= {LARGE_TEST_SET})"
    return FUNDUS_FRAGMENTS, f"median test set of {median:.0f} images (< {LARGE_TEST_SET})"


def _synth_kind(path: Path) -> str | None:
    if not path.is_file():
        return None
    try:
        kind = json.loads(path.read_text(encoding="utf-8")).get("kind")
    except (OSError, ValueError, AttributeError):
        return None
    return kind if isinstance(kind, str) else None
