"""Config fields several methods share, with one help text each (see :func:`engine.config.setting`).

Each helper returns a fresh field specifier, so a config dataclass writes
``beta1: float = adam_beta1()`` instead of repeating the default and its help;
:func:`adam_optimizer` turns a config's Adam fields into the optimiser.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal, Protocol

import torch
from torch import nn

from engine.config import setting

ParamScope = Literal["norm", "all"]


def adam_beta1() -> float:
    return setting(0.9, "Adam's first-moment decay", low=0.0, high=1.0)


def adam_beta2(default: float = 0.999) -> float:
    return setting(default, "Adam's second-moment decay", low=0.0, high=1.0)


def restore_prob_setting() -> float:
    return setting(0.01, "probability that an adapted element is reset to its source value")


def mc_passes_setting() -> int:
    return setting(10, "D: Monte-Carlo dropout passes for the token uncertainty")


def mc_dropout_setting() -> float:
    return setting(0.1, "dropout probability in block 1's MLP during the MC passes")


def source_images_setting() -> int:
    return setting(20, "ours: first test images that estimate the source statistics")


def predict_after_update_setting() -> bool:
    return setting(True, "paper's protocol: update, then predict again (False: original pass)")


def param_scope_setting() -> ParamScope:
    return setting("norm", '"norm": LayerNorm affine parameters; "all": every weight (the paper)')


def check_param_scope(scope: str) -> None:
    """Raise ValueError unless ``scope`` is a :data:`ParamScope` (a config's ``params`` field)."""
    if scope not in ("norm", "all"):
        raise ValueError("params must be 'norm' or 'all'")


class AdamSettings(Protocol):
    """A config with Adam's learning rate and decays (``beta1``/``beta2`` from the helpers above)."""

    @property
    def lr(self) -> float: ...

    @property
    def beta1(self) -> float: ...

    @property
    def beta2(self) -> float: ...


def adam_optimizer(params: Iterable[nn.Parameter], cfg: AdamSettings) -> torch.optim.Adam:
    """Adam over ``params`` with the config's learning rate and decays (no weight decay)."""
    return torch.optim.Adam(params, lr=cfg.lr, betas=(cfg.beta1, cfg.beta2))
