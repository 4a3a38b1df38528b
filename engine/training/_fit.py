"""The training loop: Adam or AdamW with linear warm-up and cosine decay, early-stopped on validation accuracy."""

from __future__ import annotations

import copy
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from engine.training._augment import augment
from engine.training._data import normalise, predict_logits
from engine.training._model import OPTIMIZERS, TrainConfig, TrainingError
from engine.util.device import select_device

logger = logging.getLogger(__package__)  # one logger for the package: "engine.training"


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


def make_optimizer(model: torch.nn.Module, cfg: TrainConfig) -> torch.optim.Optimizer:
    """Adam over every parameter, or AdamW decaying only the weight matrices.

    AdamW leaves biases, norms, the class token and the position embedding undecayed (as DeiT).

    Raises:
        TrainingError: ``cfg.optimizer`` is not one of :data:`OPTIMIZERS`.
    """
    if cfg.optimizer == "adam":
        return torch.optim.Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    if cfg.optimizer == "adamw":
        decay: list[torch.nn.Parameter] = []
        keep: list[torch.nn.Parameter] = []
        for name, param in model.named_parameters():
            plain = param.ndim < 2 or name.split(".")[-1] in ("pos_embed", "cls_token", "reg_token")
            (keep if plain else decay).append(param)
        groups = [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": keep, "weight_decay": 0.0}]
        return torch.optim.AdamW(groups, lr=cfg.lr)
    raise TrainingError(f"unknown optimizer {cfg.optimizer!r}; choose one of {', '.join(OPTIMIZERS)}")


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
    optimizer = make_optimizer(model, cfg)

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
            loss = F.cross_entropy(logits, yb, label_smoothing=cfg.label_smoothing)
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
