"""Config fields several methods share, with one help text each (see :func:`engine.config.setting`).

Each helper returns a fresh field specifier, so a config dataclass writes
``beta1: float = adam_beta1()`` instead of repeating the default and its help.
"""

from __future__ import annotations

from typing import Literal

from engine.config import setting

ParamScope = Literal["norm", "all"]


def adam_beta1() -> float:
    return setting(0.9, "Adam's first-moment decay", low=0.0, high=1.0)


def adam_beta2(default: float = 0.999) -> float:
    return setting(default, "Adam's second-moment decay", low=0.0, high=1.0)


def predict_after_update_setting() -> bool:
    return setting(True, "paper's protocol: update, then predict again (False: original pass)")


def param_scope_setting() -> ParamScope:
    return setting("norm", '"norm": LayerNorm affine parameters; "all": every weight (the paper)')
