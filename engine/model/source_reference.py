"""The source reference: statistics of the source training images, kept beside the model.

I-DiPT+ (``docs/method.md``, "I-DiPT+") needs two things about the source domain that a test-time
method cannot see in the stream: how source images *look* (to tell sites apart by appearance
with the class removed) and how the source features are laid out (to estimate each site's two
classes in a space where the source classes are well separated). ``f2tta train-source`` computes
them from the source training split when it saves a model; ``f2tta reference`` computes them for
a model trained earlier. Nothing of the source data itself is stored, only these statistics:

* **appearance**: per image, the per-channel mean and standard deviation of block 1's output
  patch tokens (2·C numbers). They are z-scored with the source means and deviations, whitened
  with the source images' leading principal directions (at most :data:`APPEARANCE_DIMS`), and the
  directions along which the source *class* means differ are projected out (C − 1 of them), so
  that what remains describes how an image was stained and scanned more than what it shows.
  ``bandwidth`` is the median distance between two source images in that space, ``radius`` the
  99th percentile of the source images' distances from their mean: an image within it looks
  like the source domain.
* **features**: the mean and the leading whitened principal directions (at most
  :data:`FEATURE_DIMS`) of the pre-logit features the head classifies, and each source class's
  mean feature vector.

The file is ``MODEL.reference.safetensors`` (tensors + JSON metadata, never pickle). It names the
fingerprint of the model it was computed with; a reference for another model, or one that fails
any check, is refused with a warning and the methods that need it run without it.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save

from engine.errors import F2TTAError
from engine.model.prompted_vit import PromptedViT
from engine.util.atomic import atomic_write_bytes

logger = logging.getLogger(__name__)

SUFFIX = ".reference.safetensors"
FORMAT = 2
APPEARANCE_DIMS = 64  # whitened appearance directions kept (fewer when the source has fewer images)
FEATURE_DIMS = 8  # whitened feature directions kept; methods use the leading ones
MIN_IMAGES = 8  # fewer source images than this give no usable statistics
SOURCE_QUANTILE = 0.99  # the radius holds this share of the source images
_TENSORS = (
    "appearance_mean",
    "appearance_scale",
    "appearance_basis",
    "feature_mean",
    "feature_basis",
    "class_means",
)


class ReferenceError(F2TTAError):
    """A source reference cannot be computed, written or used (too few images, wrong model, damaged)."""


@dataclass(frozen=True)
class SourceReference:
    """Source statistics for appearance and features (see the module docstring).

    Attributes:
        appearance_mean: ``(2C,)`` source mean of the per-image token means and deviations.
        appearance_scale: ``(2C,)`` their source standard deviation (z-scoring).
        appearance_basis: ``(R, 2C)`` whitening directions with the class directions projected out.
        bandwidth: median pairwise distance of source images in the appearance space.
        radius: 99th percentile of the source images' distances from their mean in that space.
        feature_mean: ``(D,)`` source mean of the pre-logit features.
        feature_basis: ``(K, D)`` whitened leading principal directions of the features.
        class_means: ``(classes, D)`` each source class's mean features.
        images: source images the statistics were computed from.
        fingerprint: the model's weights fingerprint.
    """

    appearance_mean: torch.Tensor
    appearance_scale: torch.Tensor
    appearance_basis: torch.Tensor
    bandwidth: float
    radius: float
    feature_mean: torch.Tensor
    feature_basis: torch.Tensor
    class_means: torch.Tensor
    images: int
    fingerprint: str

    def to(self, device: torch.device | str) -> SourceReference:
        """A copy with every tensor on ``device``."""
        return dataclasses.replace(self, **{name: getattr(self, name).to(device) for name in _TENSORS})

    def appearance(self, block1_out: torch.Tensor, num_prefix: int) -> torch.Tensor:
        """Class-removed appearance coordinates ``(B, R)`` of images given block 1's output tokens."""
        raw = appearance_statistics(block1_out, num_prefix)
        z = (raw - self.appearance_mean) / self.appearance_scale
        coords: torch.Tensor = z @ self.appearance_basis.T
        return coords


def appearance_statistics(block1_out: torch.Tensor, num_prefix: int) -> torch.Tensor:
    """Per-channel mean and population std over the patch tokens: ``(B, T, C) -> (B, 2C)``."""
    std, mean = torch.std_mean(block1_out[:, num_prefix:], dim=1, correction=0)
    return torch.cat([mean, std], dim=-1)


def _whitening(x: torch.Tensor, dims: int) -> torch.Tensor:
    """Rows: the leading principal directions of ``x`` ``(N, F)`` scaled to unit variance."""
    centred = x - x.mean(dim=0)
    _, s, vh = torch.linalg.svd(centred, full_matrices=False)
    sd = s / max(1.0, (x.shape[0] - 1) ** 0.5)
    keep = int(min(dims, int((sd > sd[0] * 1e-6).sum())))
    basis: torch.Tensor = vh[:keep] / sd[:keep, None]
    return basis


def fit_reference(
    model: PromptedViT,
    batches: Iterable[tuple[torch.Tensor, torch.Tensor]],
    num_classes: int,
    fingerprint: str,
) -> SourceReference:
    """Compute the source reference from preprocessed source images.

    Args:
        model: the frozen source model.
        batches: ``(x, labels)`` pairs, ``x`` ``(B, 3, S, S)`` normalised as the model expects.
        num_classes: classes of the model.
        fingerprint: the model's weights fingerprint (recorded, checked when loading).

    Raises:
        ReferenceError: fewer than :data:`MIN_IMAGES` images, or a class without images.
    """
    appearance: list[torch.Tensor] = []
    features: list[torch.Tensor] = []
    labels: list[torch.Tensor] = []
    with torch.no_grad():
        for x, y in batches:
            source = model.source_pass(x)
            appearance.append(
                appearance_statistics(source.block1_out, model.num_prefix_tokens).double().cpu()
            )
            features.append(source.features.double().cpu())
            labels.append(y.cpu())
    if not labels or sum(len(y) for y in labels) < MIN_IMAGES:
        raise ReferenceError(f"the source reference needs at least {MIN_IMAGES} readable source images")
    a, f, y = torch.cat(appearance), torch.cat(features), torch.cat(labels)
    missing = [c for c in range(num_classes) if not bool((y == c).any())]
    if missing:
        raise ReferenceError(f"the source images hold no example of class(es) {missing}")
    a_mean = a.mean(dim=0)
    a_scale = a.std(dim=0).clamp_min(1e-6)
    z = (a - a_mean) / a_scale
    white = _whitening(z, APPEARANCE_DIMS)
    coords = (z - z.mean(dim=0)) @ white.T
    centres = torch.stack([coords[y == c].mean(dim=0) for c in range(num_classes)])
    q, _ = torch.linalg.qr((centres - centres.mean(dim=0)).T)
    between = q[:, : num_classes - 1].T  # (classes - 1, R): the class directions
    basis = white - between.T @ (between @ white)  # project them out of every whitened direction
    # The whitening's own offset is dropped: a constant shift changes no distance.
    cls_free = z @ basis.T
    bandwidth = float(torch.pdist(cls_free[:2000]).median())
    radius = float(torch.quantile(cls_free.norm(dim=1), SOURCE_QUANTILE))
    f_mean = f.mean(dim=0)
    f_basis = _whitening(f, FEATURE_DIMS)
    class_means = torch.stack([f[y == c].mean(dim=0) for c in range(num_classes)])
    return SourceReference(
        appearance_mean=a_mean.float(),
        appearance_scale=a_scale.float(),
        appearance_basis=basis.float(),
        bandwidth=bandwidth,
        radius=radius,
        feature_mean=f_mean.float(),
        feature_basis=f_basis.float(),
        class_means=class_means.float(),
        images=int(y.numel()),
        fingerprint=fingerprint,
    )


def reference_path(checkpoint: str | Path) -> Path:
    """``MODEL.reference.safetensors`` beside ``MODEL.safetensors`` (or any other checkpoint name)."""
    path = Path(checkpoint)
    return path.with_name(path.stem + SUFFIX)


def save_reference(ref: SourceReference, path: str | Path, about: dict[str, Any] | None = None) -> Path:
    """Write ``ref`` atomically as safetensors with its metadata; returns the path."""
    meta = {
        "format": str(FORMAT),
        "fingerprint": ref.fingerprint,
        "bandwidth": repr(ref.bandwidth),
        "radius": repr(ref.radius),
        "images": str(ref.images),
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "about": json.dumps(about or {}, sort_keys=True),
    }
    tensors = {name: getattr(ref, name).detach().float().cpu().contiguous() for name in _TENSORS}
    out = Path(path)
    atomic_write_bytes(out, save(tensors, metadata=meta))
    return out


def load_reference(
    path: str | Path, fingerprint: str, num_classes: int, width: int, feature_dim: int
) -> SourceReference:
    """Read and check a reference file for a model.

    Args:
        path: the ``.reference.safetensors`` file.
        fingerprint: the model's weights fingerprint; the file must name the same.
        num_classes: the model's classes.
        width: the model's token width C (appearance statistics have 2C entries).
        feature_dim: the width D of the model's pre-logit features.

    Raises:
        ReferenceError: the file is missing, damaged, for another model, or its shapes disagree.
    """
    origin = str(path)
    try:
        with safe_open(origin, framework="pt") as fh:
            meta: dict[str, str] = fh.metadata() or {}
            names = set(fh.keys())
            missing = [n for n in _TENSORS if n not in names]
            if missing:
                raise ReferenceError(f"{origin}: missing tensor(s) {', '.join(missing)}")
            tensors = {n: fh.get_tensor(n) for n in _TENSORS}
    except (OSError, SafetensorError, ValueError) as exc:
        raise ReferenceError(f"{origin}: not a readable source reference ({exc})") from exc
    if meta.get("format") != str(FORMAT):
        raise ReferenceError(f"{origin}: unknown format {meta.get('format')!r} (expected {FORMAT})")
    if meta.get("fingerprint") != fingerprint:
        raise ReferenceError(
            f"{origin}: computed for another model (fingerprint {meta.get('fingerprint')!r}, "
            f"this model has {fingerprint!r}); recompute it with `f2tta reference`"
        )
    try:
        bandwidth = float(meta["bandwidth"])
        radius = float(meta["radius"])
        images = int(meta["images"])
    except (KeyError, ValueError) as exc:
        raise ReferenceError(f"{origin}: damaged metadata ({exc})") from exc
    r = int(tensors["appearance_basis"].shape[0]) if tensors["appearance_basis"].dim() == 2 else -1
    k = int(tensors["feature_basis"].shape[0]) if tensors["feature_basis"].dim() == 2 else -1
    expected = {
        "appearance_mean": (2 * width,),
        "appearance_scale": (2 * width,),
        "appearance_basis": (r, 2 * width),
        "feature_mean": (feature_dim,),
        "feature_basis": (k, feature_dim),
        "class_means": (num_classes, feature_dim),
    }
    for name, shape in expected.items():
        t = tensors[name]
        if tuple(t.shape) != shape or r < 1 or k < 1:
            raise ReferenceError(f"{origin}: {name} has shape {tuple(t.shape)}, expected {shape}")
        if not t.is_floating_point() or not bool(torch.isfinite(t).all()):
            raise ReferenceError(f"{origin}: {name} is not finite floating-point data")
    if not (0 < bandwidth < float("inf") and 0 < radius < float("inf")) or images < MIN_IMAGES:
        raise ReferenceError(
            f"{origin}: implausible bandwidth {bandwidth}, radius {radius} or image count {images}"
        )
    if not bool((tensors["appearance_scale"] > 0).all()):
        raise ReferenceError(f"{origin}: appearance_scale must be positive")
    return SourceReference(
        **{n: tensors[n].float() for n in _TENSORS},
        bandwidth=bandwidth,
        radius=radius,
        images=images,
        fingerprint=fingerprint,
    )


def find_reference(
    checkpoint: str | Path | None, fingerprint: str, num_classes: int, model: PromptedViT
) -> SourceReference | None:
    """The checkpoint's source reference, or None (logged) when there is none or it is unusable."""
    if checkpoint is None:
        return None
    path = reference_path(checkpoint)
    if not path.exists():
        logger.info("%s has no source reference (%s)", checkpoint, path.name)
        return None
    feature_dim = (
        int(model.vit.head.in_features) if hasattr(model.vit.head, "in_features") else model.embed_dim
    )
    try:
        return load_reference(path, fingerprint, num_classes, model.embed_dim, feature_dim)
    except ReferenceError as exc:
        logger.warning("source reference ignored: %s", exc)
        return None
