"""Streams for replayed benchmarks: sites resampled to a class mix, cut into fragments, interleaved.

The same construction serves the settings choice on simulated source shifts
(``scripts/choose_settings.py``) and the committed evaluation suite (``f2tta bench-suite``):

* :func:`resample_site` draws ``n`` images of one site whose positive share is ``share``
  (without replacement); with ``share="drift"``, a balanced draw whose positive share rises
  from 10 % to 90 % along the site's sequence; with ``share="scan"``, a slide read in scan order
  whose tumour region comes last: 30 % positives, all after the negatives;
* with ``share="help-then-harm"`` a balanced draw that the suite puts in an adversarial order once
  it knows the source model's decisions (:func:`help_then_harm`): the images the source model gets
  wrong first, those it gets right last, so a rule that changes decisions near the boundary helps
  on the first images and harms on the rest;
* :func:`interleave` cuts every site's sequence into Dirichlet(δ) fragments (the F²TTA protocol,
  ``lab.bench.protocol``) and shuffles them into one stream; a drifting site's fragments keep their
  order, so its drift survives the shuffle.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lab.bench.protocol import fragment_lengths

DRIFT = "drift"
DRIFT_RANGE = (0.1, 0.9)  # a drifting site's positive share at its start and its end
SCAN = "scan"
SCAN_SHARE = 0.3  # a site read in scan order: its positives (the tumour region) are this share, read last
HELP_THEN_HARM = "help-then-harm"  # balanced; the source model's errors first (help_then_harm)
ORDERED_MIXES = (DRIFT, SCAN, HELP_THEN_HARM)  # mixes whose sites keep their own order through the shuffle


def mix_share(share: float | str) -> float:
    """The positive share a class mix draws (a drift's is balanced over the whole site)."""
    return 0.5 if share in (DRIFT, HELP_THEN_HARM) else SCAN_SHARE if share == SCAN else float(share)


class StreamError(ValueError):
    """A site cannot be resampled as asked (too few images of a class)."""


def resample_site(
    candidates: np.ndarray, positive: np.ndarray, share: float | str, n: int, rng: np.random.Generator
) -> np.ndarray:
    """``n`` indices of ``candidates`` with a positive share of ``share`` (or a drift), in site order.

    Args:
        candidates: ``(m,)`` indices of the site's images.
        positive: booleans indexed by those indices: the image is of the positive class (which
            need not be class 1: the generated fundus and lesion sets' positive class is 0).
        share: the positive share in (0, 1), :data:`DRIFT` or :data:`SCAN`.
        n: images to draw.
        rng: the site's generator.

    Raises:
        StreamError: the site lacks the positives or negatives the share needs.
    """
    pos = candidates[positive[candidates]]
    neg = candidates[~positive[candidates]]
    target = mix_share(share)
    n_pos = round(target * n)
    if n_pos > len(pos) or n - n_pos > len(neg):
        raise StreamError(
            f"{n} images at a positive share of {share} need {n_pos} positives and {n - n_pos} negatives; "
            f"the site has {len(pos)} and {len(neg)}"
        )
    picked_pos = rng.permutation(pos)[:n_pos]
    picked_neg = rng.permutation(neg)[: n - n_pos]
    if share == SCAN:
        return np.concatenate([picked_neg, picked_pos])
    if share != DRIFT:  # a fixed share, or help-then-harm (put in order by help_then_harm)
        return rng.permutation(np.concatenate([picked_pos, picked_neg]))
    # Drift: position j takes a positive with probability rising linearly along the sequence,
    # as long as both piles last.
    start, end = DRIFT_RANGE
    out = np.empty(n, dtype=candidates.dtype)
    i_pos = i_neg = 0
    for j in range(n):
        p = start + (end - start) * j / max(n - 1, 1)
        take_pos = (rng.random() < p and i_pos < n_pos) or i_neg >= n - n_pos
        if take_pos:
            out[j] = picked_pos[i_pos]
            i_pos += 1
        else:
            out[j] = picked_neg[i_neg]
            i_neg += 1
    return out


def help_then_harm(sequence: np.ndarray, source_right: np.ndarray) -> np.ndarray:
    """A site's images with those the source model gets wrong first, then those it gets right,
    each group in the order it was drawn (``source_right``: per image of ``sequence``)."""
    right = np.asarray(source_right, dtype=bool)
    return np.concatenate([sequence[~right], sequence[right]])


def interleave(
    sites: Sequence[np.ndarray],
    delta: float,
    fragments: int,
    seed: int,
    keep_order: Sequence[bool] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """One stream from per-site sequences: Dirichlet(δ) fragments of each, shuffled together.

    Args:
        sites: each site's image indices, in the site's own order.
        delta: the Dirichlet concentration of fragment lengths.
        fragments: F, fragments per site.
        seed: the stream seed.
        keep_order: per site, whether its fragments keep their order (a drifting site).

    Returns:
        ``(order, site_of)``: the stream's image indices and each position's site number.
    """
    rng = np.random.default_rng([seed, 7])
    pieces: list[tuple[int, np.ndarray]] = []
    for s, seq in enumerate(sites):
        start = 0
        for length in fragment_lengths(len(seq), fragments, delta, rng):
            pieces.append((s, seq[start : start + length]))
            start += length
    order = rng.permutation(len(pieces))
    if keep_order is not None and any(keep_order):
        # Shuffle the slots, then hand each ordered site its own fragments back in sequence.
        slots_of: dict[int, list[int]] = {}
        for slot, k in enumerate(order):
            slots_of.setdefault(pieces[int(k)][0], []).append(slot)
        per_site = {s: [k for k in range(len(pieces)) if pieces[k][0] == s] for s in range(len(sites))}
        for s, keep in enumerate(keep_order):
            if keep:
                for slot, k in zip(slots_of.get(s, []), per_site[s], strict=True):
                    order[slot] = k
    stream = np.concatenate([pieces[int(k)][1] for k in order]) if pieces else np.zeros(0, dtype=np.int64)
    site_of = (
        np.concatenate([np.full(len(pieces[int(k)][1]), pieces[int(k)][0]) for k in order])
        if pieces
        else np.zeros(0, dtype=np.int64)
    )
    return stream, site_of
