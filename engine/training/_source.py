"""``train_source``: a source model with its card and its source reference (:mod:`engine.model.source_reference`)."""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import timm
import torch

from engine.data.readers import Dataset, DatasetError, SkippedFile, split_dataset
from engine.model.card import ModelCard, fingerprint_state_dict, save_model
from engine.model.prompted_vit import PromptedViT
from engine.model.source_reference import (
    ReferenceError,
    SourceReference,
    fit_reference,
    reference_path,
    save_reference,
)
from engine.training._data import evaluate, load_items, normalise
from engine.training._fit import EpochStats, fit
from engine.training._model import OPTIMIZERS, TrainConfig, build_model, check_config

logger = logging.getLogger(__package__)  # one logger for the package: "engine.training"


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


def _dataset_record(ds: Dataset) -> dict[str, Any]:
    record: dict[str, Any] = {"root": str(ds.root), "layout": ds.layout, "domains": list(ds.domains)}
    hint = (ds.root if ds.root.is_dir() else ds.root.parent) / "synth.json"
    if hint.is_file():
        try:
            meta = json.loads(hint.read_text(encoding="utf-8"))
            record["synth"] = {
                k: meta[k] for k in ("kind", "seed", "size", "per_domain", "generator_version")
            }
            if isinstance(meta.get("site_set"), str):  # written since the second site set exists
                record["synth"]["site_set"] = meta["site_set"]
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
        TrainingError: a setting no run can use, or the model cannot be built (unknown arch,
            pretrained weights not cached).
    """
    check_config(cfg)
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
        "recipe": cfg.recipe,
        "optimizer": OPTIMIZERS.get(cfg.optimizer, cfg.optimizer),
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
        "label_smoothing": cfg.label_smoothing,
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
