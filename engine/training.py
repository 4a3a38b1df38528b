"""Training a source model: a timm ViT on one domain's train split, early-stopped on its val split.

The recipe follows the paper's source training (Adam, cross-entropy) scaled down to a small ViT
trained from scratch on a CPU: a linear warm-up then cosine learning-rate decay, flips, rotations
by multiples of 90 degrees and colour jitter (without colour augmentation a from-scratch model is
at chance on every other site). The augmentation, the epochs, the seed and the accuracies reached
are recorded in the model card's ``training`` dict.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import logging
import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import timm
import torch
import torch.nn.functional as F

from engine._device import select_device
from engine.data.readers import Dataset, DatasetError, Item, SkippedFile, read_array, split_dataset
from engine.errors import F2TTAError, ImageReadError
from engine.model_card import LoadedModel, ModelCard, fingerprint_state_dict, save_model
from engine.prompted_vit import PromptedViT
from engine.source_reference import (
    ReferenceError,
    SourceReference,
    fit_reference,
    reference_path,
    save_reference,
)

logger = logging.getLogger(__name__)

DEFAULT_ARCH = "vit_tiny_patch16_224"
DEFAULT_IMG_SIZE = 96
# The demo model's shape: 8 x 8 tokens of 12 px, 4 blocks of width 192 (about 1.9 M parameters).
DEFAULT_MODEL_KWARGS: dict[str, Any] = {"patch_size": 12, "depth": 4}


class TrainingError(F2TTAError):
    """A source model cannot be trained as asked (no pretrained weights cached, bad arguments...)."""


@dataclass(frozen=True)
class Augmentation:
    """Random transforms applied to every training image (never at validation or test)."""

    hflip: bool = True  # mirror left-right with probability 0.5
    vflip: bool = True  # mirror top-bottom with probability 0.5
    rot90: bool = True  # rotate by a random multiple of 90 degrees
    brightness: float = 0.2  # multiply intensities by U(1 - b, 1 + b)
    contrast: float = 0.2  # scale deviations from the image's mean luminance by U(1 - c, 1 + c)
    saturation: float = 0.2  # scale chroma by U(1 - s, 1 + s)
    hue: float = 0.04  # rotate hue by U(-h, h) turns (1 turn = 360 degrees)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class TrainConfig:
    """Everything that decides a training run."""

    arch: str = DEFAULT_ARCH  # timm architecture name
    img_size: int = DEFAULT_IMG_SIZE  # square input side in pixels
    model_kwargs: dict[str, Any] = field(
        default_factory=lambda: dict(DEFAULT_MODEL_KWARGS)
    )  # extra timm kwargs
    epochs: int = 40  # maximum number of epochs
    batch_size: int = 64  # images per optimisation step
    lr: float = 1e-3  # peak Adam learning rate
    weight_decay: float = 0.0  # Adam L2 penalty
    warmup_epochs: float = 2.0  # linear warm-up (at most 20 % of the run), then cosine decay to zero
    patience: int = 10  # stop after this many epochs without a better validation accuracy
    seed: int = 0  # seeds the weights, the batch order and the augmentation
    split_seed: int = 0  # seeds the per-domain 60/15/25 split
    pretrained: bool = False  # start from timm's pretrained weights (only from the local cache)
    augmentation: Augmentation = field(default_factory=Augmentation)
    mean: tuple[float, float, float] = (0.5, 0.5, 0.5)  # input normalisation (0-1 scale)
    std: tuple[float, float, float] = (0.5, 0.5, 0.5)
    device: str | None = None  # None: CUDA, then MPS, then CPU


@dataclass(frozen=True)
class EpochStats:
    """One epoch of training."""

    epoch: int  # 1-based
    loss: float  # mean training loss
    train_acc: float  # accuracy on the augmented training batches
    val_acc: float
    val_loss: float
    lr: float  # learning rate at the end of the epoch
    seconds: float
    best: bool  # the best validation accuracy so far (these weights are kept)


@dataclass
class TrainResult:
    """A trained model with its card and how it got there."""

    model: torch.nn.Module
    card: ModelCard
    history: list[EpochStats]
    val_acc: float
    test_acc: float
    domain_test_acc: dict[str, float]  # test accuracy per domain (empty unless asked for)
    skipped: list[SkippedFile]


# ---------------------------------------------------------------------------------------------
# Images in memory


def load_items(
    items: Sequence[Item], size: int, skipped: list[SkippedFile] | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Decode items to a uint8 (N, 3, size, size) tensor and int64 labels; unreadable files are skipped.

    Each unreadable file is logged with its path and reason and appended to ``skipped``.
    """
    images: list[np.ndarray] = []
    labels: list[int] = []
    for it in items:
        try:
            images.append(read_array(it.path, size))
        except ImageReadError as exc:
            reason = str(exc).removeprefix(f"{it.path}: ")
            logger.warning("skipping %s: %s", it.path, reason)
            if skipped is not None:
                skipped.append(SkippedFile(it.path, reason))
            continue
        labels.append(it.label)
    if not images:
        return torch.empty((0, 3, size, size), dtype=torch.uint8), torch.empty(0, dtype=torch.int64)
    x = torch.from_numpy(np.stack(images)).permute(0, 3, 1, 2).contiguous()
    return x, torch.tensor(labels, dtype=torch.int64)


def normalise(x: torch.Tensor, mean: Sequence[float], std: Sequence[float]) -> torch.Tensor:
    """uint8 or 0-1 float (B, 3, H, W) -> normalised float32."""
    if x.dtype == torch.uint8:
        x = x.float() / 255.0
    m = torch.tensor(mean, dtype=x.dtype, device=x.device).view(1, 3, 1, 1)
    s = torch.tensor(std, dtype=x.dtype, device=x.device).view(1, 3, 1, 1)
    return (x - m) / s


_RGB_TO_YIQ = torch.tensor([[0.299, 0.587, 0.114], [0.596, -0.274, -0.322], [0.211, -0.523, 0.312]])
_YIQ_TO_RGB = torch.linalg.inv(_RGB_TO_YIQ)


def augment(x: torch.Tensor, aug: Augmentation, gen: torch.Generator) -> torch.Tensor:
    """Randomly flip, rotate and colour-jitter a float (B, 3, H, W) batch in 0-1 (square images)."""
    b = x.shape[0]

    def uniform(width: float) -> torch.Tensor:
        return 1.0 + (torch.rand(b, generator=gen) * 2.0 - 1.0) * width

    if aug.hflip:
        flip = torch.rand(b, generator=gen) < 0.5
        x = torch.where(flip.view(b, 1, 1, 1), x.flip(3), x)
    if aug.vflip:
        flip = torch.rand(b, generator=gen) < 0.5
        x = torch.where(flip.view(b, 1, 1, 1), x.flip(2), x)
    if aug.rot90:
        turns = torch.randint(0, 4, (b,), generator=gen)
        x = x.clone()
        for k in (1, 2, 3):
            sel = turns == k
            if bool(sel.any()):
                x[sel] = torch.rot90(x[sel], k, dims=(2, 3))
    if aug.brightness > 0:
        x = x * uniform(aug.brightness).view(b, 1, 1, 1)
    if aug.contrast > 0:
        lum = (x * torch.tensor([0.299, 0.587, 0.114]).view(1, 3, 1, 1)).sum(1, keepdim=True)
        mean = lum.mean(dim=(2, 3), keepdim=True)
        x = (x - mean) * uniform(aug.contrast).view(b, 1, 1, 1) + mean
    if aug.saturation > 0 or aug.hue > 0:
        sat = uniform(aug.saturation) if aug.saturation > 0 else torch.ones(b)
        angle = (torch.rand(b, generator=gen) * 2.0 - 1.0) * aug.hue * 2.0 * math.pi
        cos, sin = torch.cos(angle) * sat, torch.sin(angle) * sat
        rot = torch.zeros(b, 3, 3)
        rot[:, 0, 0] = 1.0
        rot[:, 1, 1], rot[:, 1, 2], rot[:, 2, 1], rot[:, 2, 2] = cos, -sin, sin, cos
        mix = _YIQ_TO_RGB @ rot @ _RGB_TO_YIQ  # (B, 3, 3)
        x = torch.einsum("bij,bjhw->bihw", mix, x)
    return x.clamp(0.0, 1.0)


# ---------------------------------------------------------------------------------------------
# Models


def pretrained_weights_file(arch: str) -> Path:
    """The locally cached file of timm's pretrained weights for ``arch``; nothing is downloaded.

    Raises:
        TrainingError: timm knows no pretrained weights for ``arch`` or they are not cached here.
    """
    os.environ["HF_HUB_OFFLINE"] = "1"
    cfg = timm.models.get_pretrained_cfg(arch)
    if cfg is None:
        raise TrainingError(f"--pretrained: timm knows no pretrained weights for {arch!r}")
    looked: list[str] = []
    if cfg.file:
        looked.append(str(cfg.file))
        if Path(cfg.file).is_file():
            return Path(cfg.file)
    if cfg.hf_hub_id:
        from huggingface_hub import try_to_load_from_cache
        from huggingface_hub.constants import HF_HUB_CACHE

        repo = str(cfg.hf_hub_id).split("@")[0]
        for name in (cfg.hf_hub_filename or "model.safetensors", "model.safetensors", "pytorch_model.bin"):
            found = try_to_load_from_cache(repo, name, cache_dir=HF_HUB_CACHE)
            if isinstance(found, str) and Path(found).is_file():
                return Path(found)
        looked.append(f"Hugging Face cache {HF_HUB_CACHE} ({repo})")
    if cfg.url:
        cached = Path(torch.hub.get_dir()) / "checkpoints" / os.path.basename(str(cfg.url).split("?")[0])
        looked.append(str(cached))
        if cached.is_file():
            return cached
    raise TrainingError(
        f"--pretrained: timm's weights for {arch!r} are not in the local cache (looked in {'; '.join(looked)}). "
        "F²TTA Studio never downloads weights: copy them there first, or train without --pretrained."
    )


def build_model(cfg: TrainConfig, num_classes: int) -> torch.nn.Module:
    """A fresh timm model for ``cfg`` (pretrained weights only from the local cache)."""
    kwargs: dict[str, Any] = {"num_classes": num_classes, "img_size": cfg.img_size, **cfg.model_kwargs}
    try:
        if cfg.pretrained:
            weights = pretrained_weights_file(cfg.arch)
            return timm.create_model(
                cfg.arch, pretrained=True, pretrained_cfg_overlay={"file": str(weights)}, **kwargs
            )
        return timm.create_model(cfg.arch, pretrained=False, **kwargs)
    except TrainingError:
        raise
    except Exception as exc:  # timm raises RuntimeError/TypeError/KeyError for unknown archs/kwargs
        what = "pretrained " if cfg.pretrained else ""
        raise TrainingError(f"cannot build {what}timm model {cfg.arch!r} with {kwargs}: {exc}") from exc


def _unwrap(
    model_or_loaded: torch.nn.Module | LoadedModel,
    img_size: int | None,
    mean: Sequence[float] | None,
    std: Sequence[float] | None,
) -> tuple[torch.nn.Module, int | None, Sequence[float], Sequence[float]]:
    if isinstance(model_or_loaded, LoadedModel):
        card = model_or_loaded.card
        return model_or_loaded.model, img_size or card.img_size, mean or card.mean, std or card.std
    return model_or_loaded, img_size, mean or (0.5, 0.5, 0.5), std or (0.5, 0.5, 0.5)


@torch.no_grad()
def predict_logits(
    model: torch.nn.Module,
    images: torch.Tensor | np.ndarray,
    mean: Sequence[float] = (0.5, 0.5, 0.5),
    std: Sequence[float] = (0.5, 0.5, 0.5),
    batch_size: int = 128,
) -> torch.Tensor:
    """Logits (N, classes) of uint8 images, given as (N, 3, H, W) tensor or (N, H, W, 3) array."""
    x = (
        torch.from_numpy(np.ascontiguousarray(images)).permute(0, 3, 1, 2)
        if isinstance(images, np.ndarray)
        else images
    )
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    out = [
        model(normalise(x[i : i + batch_size].to(device), mean, std)).float().cpu()
        for i in range(0, x.shape[0], batch_size)
    ]
    model.train(was_training)
    return torch.cat(out) if out else torch.empty(0)


def evaluate(
    model_or_loaded: torch.nn.Module | LoadedModel,
    items: Sequence[Item] | tuple[np.ndarray, np.ndarray],
    *,
    img_size: int | None = None,
    mean: Sequence[float] | None = None,
    std: Sequence[float] | None = None,
    batch_size: int = 128,
    skipped: list[SkippedFile] | None = None,
) -> float:
    """Accuracy (0-1) of a model on dataset items or on ``(images uint8 (N, H, W, 3), labels)``.

    With a :class:`LoadedModel` the card supplies the input size and normalisation. Unreadable
    files are left out (and appended to ``skipped``); an empty set gives NaN.
    """
    model, size, m, s = _unwrap(model_or_loaded, img_size, mean, std)
    if isinstance(items, tuple) and len(items) == 2 and isinstance(items[0], np.ndarray):
        images, labels = items
        logits = predict_logits(model, images, m, s, batch_size)
        y = torch.as_tensor(labels)
    else:
        if size is None:
            raise ValueError("evaluate() needs img_size for a bare model")
        listed: Sequence[Item] = items
        correct, total = 0, 0
        for i in range(0, len(listed), 1024):  # bounded memory on large test sets
            x, y = load_items(listed[i : i + 1024], size, skipped)
            if len(y):
                correct += int((predict_logits(model, x, m, s, batch_size).argmax(1) == y).sum())
                total += len(y)
        return correct / total if total else float("nan")
    return float((logits.argmax(1) == y).float().mean()) if len(y) else float("nan")


# ---------------------------------------------------------------------------------------------
# The source reference (engine.source_reference)


def compute_reference(
    model: torch.nn.Module,
    arch: str,
    mean: Sequence[float],
    std: Sequence[float],
    images: tuple[torch.Tensor, torch.Tensor],
    num_classes: int,
    batch_size: int = 128,
) -> SourceReference:
    """The source reference of a trained model from its source images (uint8 ``(N, 3, S, S)``, labels).

    The model is left frozen in eval mode (it is wrapped, not copied).
    """
    x, y = images
    fingerprint = fingerprint_state_dict(arch, {k: v.detach().cpu() for k, v in model.state_dict().items()})
    device = next(model.parameters()).device
    wrapped = PromptedViT(model)
    batches = (
        (normalise(x[i : i + batch_size].to(device), mean, std), y[i : i + batch_size])
        for i in range(0, x.shape[0], batch_size)
    )
    return fit_reference(wrapped, batches, num_classes, fingerprint)


def describe_reference(ref: SourceReference, path: Path, source: str, split_seed: int) -> dict[str, Any]:
    """What the model card records of its source reference."""
    return {
        "file": path.name,
        "images": ref.images,
        "source_domain": source,
        "split": f"train split of {source}, split seed {split_seed}",
        "appearance_dims": int(ref.appearance_basis.shape[0]),
        "feature_dims": int(ref.feature_basis.shape[0]),
        "bandwidth": round(ref.bandwidth, 4),
        "radius": round(ref.radius, 4),
    }


# ---------------------------------------------------------------------------------------------
# Training


def fit(
    model: torch.nn.Module,
    train: tuple[torch.Tensor, torch.Tensor],
    val: tuple[torch.Tensor, torch.Tensor],
    cfg: TrainConfig,
    on_epoch: Callable[[EpochStats], None] | None = None,
) -> list[EpochStats]:
    """Train ``model`` in place on uint8 images; keeps the weights of the best validation epoch.

    Args:
        model: a timm classifier.
        train: uint8 images (N, 3, H, W) and int64 labels (N,).
        val: the same for early stopping and model selection.
        cfg: optimisation settings (epochs, batch size, learning rate, augmentation, seed...).
        on_epoch: called after every epoch.

    Returns:
        The per-epoch history.
    """
    device = select_device(cfg.device)
    model.to(device)
    gen = torch.Generator().manual_seed(cfg.seed)
    x_train, y_train = train
    n = x_train.shape[0]
    steps_per_epoch = max(1, math.ceil(n / cfg.batch_size))
    total_steps = steps_per_epoch * cfg.epochs
    warmup = max(1, min(int(cfg.warmup_epochs * steps_per_epoch), total_steps // 5))  # short runs: 20 %
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)

    def lr_factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        progress = (step - warmup) / max(1, total_steps - warmup)
        return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_factor)
    history: list[EpochStats] = []
    best_acc, best_loss, best_state, since_best = -1.0, math.inf, None, 0
    for epoch in range(1, cfg.epochs + 1):
        start = time.perf_counter()
        model.train()
        order = torch.randperm(n, generator=gen)
        loss_sum, correct = 0.0, 0
        for i in range(0, n, cfg.batch_size):
            idx = order[i : i + cfg.batch_size]
            xb = augment(x_train[idx].float() / 255.0, cfg.augmentation, gen)
            yb = y_train[idx].to(device)
            logits = model(normalise(xb, cfg.mean, cfg.std).to(device))
            loss = F.cross_entropy(logits, yb)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()  # type: ignore[no-untyped-call]
            optimizer.step()
            scheduler.step()
            loss_sum += float(loss.detach()) * len(idx)
            correct += int((logits.argmax(1) == yb).sum())
        val_logits = predict_logits(model, val[0], cfg.mean, cfg.std)
        val_loss = float(F.cross_entropy(val_logits, val[1])) if len(val[1]) else math.nan
        val_acc = float((val_logits.argmax(1) == val[1]).float().mean()) if len(val[1]) else math.nan
        better = val_acc > best_acc or (val_acc == best_acc and val_loss < best_loss)
        if better:
            best_acc, best_loss, since_best = val_acc, val_loss, 0
            best_state = copy.deepcopy(model.state_dict())
        else:
            since_best += 1
        stats = EpochStats(
            epoch=epoch,
            loss=loss_sum / n,
            train_acc=correct / n,
            val_acc=val_acc,
            val_loss=val_loss,
            lr=optimizer.param_groups[0]["lr"],
            seconds=time.perf_counter() - start,
            best=better,
        )
        history.append(stats)
        logger.debug("epoch %s", stats)
        if on_epoch is not None:
            on_epoch(stats)
        if since_best >= cfg.patience:
            logger.info("early stop after epoch %d (best val acc %.4f)", epoch, best_acc)
            break
    if best_state is not None:
        model.load_state_dict(best_state)
    model.eval()
    return history


def _dataset_record(ds: Dataset) -> dict[str, Any]:
    record: dict[str, Any] = {"root": str(ds.root), "layout": ds.layout, "domains": list(ds.domains)}
    hint = (ds.root if ds.root.is_dir() else ds.root.parent) / "synth.json"
    if hint.is_file():
        try:
            meta = json.loads(hint.read_text(encoding="utf-8"))
            record["synth"] = {
                k: meta[k] for k in ("kind", "seed", "size", "per_domain", "generator_version")
            }
        except (OSError, ValueError, KeyError, TypeError):
            pass
    return record


def train_source(
    ds: Dataset,
    source: str,
    cfg: TrainConfig,
    *,
    out: str | Path | None = None,
    on_epoch: Callable[[EpochStats], None] | None = None,
    eval_domains: bool = False,
) -> TrainResult:
    """Train a source model on ``source``'s train split and write checkpoint + card to ``out``.

    Args:
        ds: an opened dataset.
        source: the domain to train on; it must hold at least two classes.
        cfg: the training recipe.
        out: ``MODEL.safetensors`` to write (with ``MODEL.json``); nothing is written if None.
        on_epoch: progress callback.
        eval_domains: also measure the test accuracy of every other domain (recorded in the card).

    Raises:
        DatasetError: unknown or single-class source domain, or too few readable images.
        TrainingError: the model cannot be built (unknown arch, pretrained weights not cached).
    """
    ds.require_source(source)
    torch.manual_seed(cfg.seed)
    splits = split_dataset(ds, cfg.split_seed)
    split = splits[source]
    skipped: list[SkippedFile] = []
    train = load_items(split.train, cfg.img_size, skipped)
    val = load_items(split.val, cfg.img_size, skipped)
    if len(set(train[1].tolist())) < 2:
        raise DatasetError(f"the train split of {source!r} holds fewer than two classes after skipping files")
    if len(val[1]) == 0:
        raise DatasetError(f"the validation split of {source!r} is empty; the domain needs more images")
    logger.info("training on %s: %d train, %d val images", source, len(train[1]), len(val[1]))
    model = build_model(cfg, len(ds.classes))
    mean, std = cfg.mean, cfg.std
    if cfg.pretrained:
        pcfg = getattr(model, "pretrained_cfg", {}) or {}
        pm, ps = pcfg.get("mean", mean), pcfg.get("std", std)
        mean = (float(pm[0]), float(pm[1]), float(pm[2]))
        std = (float(ps[0]), float(ps[1]), float(ps[2]))
        cfg = dataclasses.replace(cfg, mean=mean, std=std)
    start = time.perf_counter()
    history = fit(model, train, val, cfg, on_epoch)
    seconds = time.perf_counter() - start
    model.cpu()
    best = max(history, key=lambda h: (h.val_acc, -h.val_loss))
    test_acc = evaluate(model, split.test, img_size=cfg.img_size, mean=mean, std=std, skipped=skipped)
    domain_acc: dict[str, float] = {}
    if eval_domains:
        for d in ds.domains:
            items = split.test if d == source else splits[d].test
            domain_acc[d] = (
                test_acc
                if d == source
                else evaluate(model, items, img_size=cfg.img_size, mean=mean, std=std, skipped=skipped)
            )
    training: dict[str, Any] = {
        "optimizer": "Adam",
        "lr": cfg.lr,
        "weight_decay": cfg.weight_decay,
        "schedule": f"linear warm-up {cfg.warmup_epochs} epochs, cosine to 0 at epoch {cfg.epochs}",
        "batch_size": cfg.batch_size,
        "epochs": len(history),
        "max_epochs": cfg.epochs,
        "patience": cfg.patience,
        "best_epoch": best.epoch,
        "seed": cfg.seed,
        "split_seed": cfg.split_seed,
        "split": "per-domain random 60/15/25 (train/val/test)",
        "pretrained": cfg.pretrained,
        "augmentation": cfg.augmentation.to_json(),
        "n_train": len(train[1]),
        "n_val": len(val[1]),
        "n_test": len(split.test),
        "val_acc": best.val_acc,
        "test_acc": test_acc,
        "seconds": round(seconds, 1),
        "torch": torch.__version__,
        "timm": timm.__version__,
        "dataset": _dataset_record(ds),
    }
    if domain_acc:
        training["domain_test_acc"] = domain_acc
    try:
        reference: SourceReference | None = compute_reference(
            model, cfg.arch, mean, std, train, len(ds.classes)
        )
    except ReferenceError as exc:  # too few train images: the model still works, idipt+ runs as idipt
        logger.warning("no source reference written: %s", exc)
        reference = None
    if out is not None and reference is not None:
        training["source_reference"] = describe_reference(
            reference, reference_path(out), source, cfg.split_seed
        )
    card = ModelCard(
        arch=cfg.arch,
        classes=ds.classes,
        img_size=cfg.img_size,
        mean=(float(mean[0]), float(mean[1]), float(mean[2])),
        std=(float(std[0]), float(std[1]), float(std[2])),
        source_domain=source,
        model_kwargs=dict(cfg.model_kwargs),
        training=training,
        positive_class=ds.positive_class,
    )
    if out is not None:
        save_model(model, card, out)
        if reference is not None:
            save_reference(reference, reference_path(out), training["source_reference"])
        logger.info("wrote %s%s", out, " and its source reference" if reference is not None else "")
    for p in model.parameters():
        p.requires_grad_(False)
    return TrainResult(model, card, history, best.val_acc, test_acc, domain_acc, skipped)
