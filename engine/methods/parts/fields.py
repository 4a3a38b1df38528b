"""Config fields and checks several methods share, with one help text each (see :func:`engine.config.setting`).

Each helper returns a fresh field specifier, so a config dataclass writes
``beta1: float = adam_beta1()`` instead of repeating the default and its help; the configs of
methods that adapt with Adam derive from :class:`AdamConfig`, which :func:`adam_optimizer` turns
into the optimiser. :func:`check_positive` and its siblings are the common ``__post_init__`` checks.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn

from engine.config import setting

ParamScope = Literal["norm", "all"]


def adam_beta1() -> float:
    return setting(0.9, "Adam's first-moment decay", low=0.0, high=0.9999)  # torch refuses 1


def adam_beta2(default: float = 0.999) -> float:
    return setting(default, "Adam's second-moment decay", low=0.0, high=0.9999)


def restore_prob_setting() -> float:
    return setting(
        0.01, "probability that an adapted element is reset to its source value", low=0.0, high=1.0
    )


def mc_passes_setting() -> int:
    return setting(10, "D: Monte-Carlo dropout passes for the token uncertainty", low=2, high=100)


def mc_dropout_setting() -> float:
    return setting(0.1, "dropout probability in block 1's MLP during the MC passes", low=0.0, high=0.9)


def source_images_setting() -> int:
    return setting(20, "ours: first test images that estimate the source statistics", low=1, high=100_000)


def predict_after_update_setting() -> bool:
    return setting(True, "paper's protocol: update, then predict again (False: original pass)")


def param_scope_setting() -> ParamScope:
    return setting("norm", '"norm": LayerNorm affine parameters; "all": every weight (the paper)')


def check_param_scope(scope: str) -> None:
    """Raise ValueError unless ``scope`` is a :data:`ParamScope` (a config's ``params`` field)."""
    if scope not in ("norm", "all"):
        raise ValueError("params must be 'norm' or 'all'")


def _listed(names: tuple[str, ...]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def check_positive(config: object, *names: str) -> None:
    """Raise ValueError unless every named field of ``config`` is above 0 (the message names them all)."""
    if any(getattr(config, name) <= 0 for name in names):
        raise ValueError(f"{_listed(names)} must be positive")


def check_at_least_one(config: object, *names: str) -> None:
    """Raise ValueError unless every named field of ``config`` is at least 1."""
    if any(getattr(config, name) < 1 for name in names):
        raise ValueError(f"{_listed(names)} must be at least 1")


def check_unit_interval(config: object, *names: str) -> None:
    """Raise ValueError unless every named field of ``config`` lies in [0, 1]."""
    if any(not 0.0 <= getattr(config, name) <= 1.0 for name in names):
        raise ValueError(f"{_listed(names)} must be in [0, 1]")


@dataclass(frozen=True)
class AdamConfig:
    """Base of the configs of methods that adapt with Adam: ``lr``, ``beta1``, ``beta2`` come first.

    A subclass declares ``lr`` again with its default and help text (it keeps its place first), and
    may give ``beta2`` another default the same way.
    """

    lr: float
    beta1: float = adam_beta1()
    beta2: float = adam_beta2()


def adam_optimizer(params: Iterable[nn.Parameter], cfg: AdamConfig) -> torch.optim.Adam:
    """Adam over ``params`` with the config's learning rate and decays (no weight decay)."""
    return torch.optim.Adam(params, lr=cfg.lr, betas=(cfg.beta1, cfg.beta2))
