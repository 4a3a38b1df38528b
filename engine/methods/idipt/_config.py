"""I-DiPT's hyper-parameters (the paper's defaults; ``docs/method.md`` records what is ours)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from engine.config import setting
from engine.methods.parts.fields import mc_dropout_setting, mc_passes_setting

PromptMode = Literal["gated", "prefix"]


@dataclass(frozen=True)
class IDiPTConfig:
    """Hyper-parameters of I-DiPT; defaults are the paper's (Implementation Detail)."""

    prompt_len_specific: int = setting(
        8, "L_S: image-specific prompt tokens per layer (half K, half V)", low=2, high=256
    )
    prompt_len_invariant: int = setting(4, "L_I: image-invariant prompt tokens per layer", low=2, high=256)
    mc_passes: int = mc_passes_setting()
    mc_dropout: float = mc_dropout_setting()
    mask_percent: float = setting(
        30.0, "K: percent of patch tokens in T_U and in T_R (disjoint up to 50)", low=0.0, high=99.0
    )
    bank_size: int = setting(20, "N_B: prompt bank capacity (FIFO)", low=1, high=10_000)
    beta: float = setting(
        0.1, "low-frequency window half-size as a fraction of the image side", low=0.001, high=0.5
    )
    gamma: float = setting(0.9, "EMA decay for the image-invariant prompt in G_I", low=0.0, high=1.0)
    graph_dim: int = setting(512, "D_g: node width of both graphs", low=1, high=4096)
    lr: float = setting(1e-3, "Adam learning rate of the single step per image", low=0.0, high=1.0)
    bank_temperature: float = setting(
        0.05, "softmax temperature of the bank's cosine-similarity weights", low=0.001, high=100.0
    )
    prompt_mode: PromptMode = setting("gated", "gated zero-init prompt path, or the paper's prefix")
    prompt_init_std: float = setting(
        0.02, "std of the normal initialisation of both prompts", low=0.0, high=1.0
    )
    use_uom: bool = setting(True, "ablation switch: uncertainty-oriented masking (off: pseudo-label loss)")
    use_pgd: bool = setting(True, "ablation switch: prompt bank + parallel graph distillation")
    use_graphs: bool = setting(True, "ablation switch: graphs (off: bank pre-initialisation only)")
    consistency_target: Literal["soft", "hard"] = setting("soft", "ŷ_w as probabilities, or its argmax")
    evidence_check: bool = setting(True, "drop the loss of a masked view that no longer predicts ŷ_w's class")

    def __post_init__(self) -> None:
        if self.prompt_len_specific % 2 or self.prompt_len_invariant % 2:
            raise ValueError("prompt lengths must be even (half key, half value tokens)")
        if self.prompt_len_specific < 2 or self.prompt_len_invariant < 2:
            raise ValueError("prompt lengths must be at least 2")
        if not 0.0 <= self.mask_percent < 100.0:
            raise ValueError("mask_percent must be within [0, 100) (T_U and T_R are disjoint up to 50)")
        if self.mc_passes < 2:
            raise ValueError("mc_passes must be at least 2")
        if not 0.0 <= self.mc_dropout < 1.0:
            raise ValueError("mc_dropout must be in [0, 1)")
        if not 0.0 <= self.gamma <= 1.0:
            raise ValueError("gamma must be in [0, 1]")
        if self.bank_size < 1 or self.graph_dim < 1 or self.lr <= 0:
            raise ValueError("bank_size, graph_dim and lr must be positive")
        if self.prompt_mode not in ("gated", "prefix"):
            raise ValueError("prompt_mode must be 'gated' or 'prefix'")
        if self.consistency_target not in ("soft", "hard"):
            raise ValueError("consistency_target must be 'soft' or 'hard'")
