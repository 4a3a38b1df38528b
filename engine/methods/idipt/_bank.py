"""The prompt bank: a FIFO of (low-frequency key, image-specific prompt, image-invariant prompt)."""

from __future__ import annotations

import torch
import torch.nn.functional as F


class PromptBank:
    """First-in-first-out store of at most ``capacity`` entries, kept as stacked tensors.

    Args:
        capacity: N_B, the number of entries kept (paper: 20).
        temperature: softmax temperature of the similarity weights ω (``docs/method.md``: the paper's raw
            cosine sum is normalised; a softmax over cosine/τ is our choice).
    """

    def __init__(self, capacity: int, temperature: float) -> None:
        if capacity < 1:
            raise ValueError("bank capacity must be at least 1")
        if temperature <= 0:
            raise ValueError("bank temperature must be positive")
        self.capacity = capacity
        self.temperature = temperature
        self.keys: torch.Tensor | None = None  # (n, K)
        self.specific: torch.Tensor | None = None  # (n, depth, L_S, C)
        self.invariant: torch.Tensor | None = None  # (n, depth, L_I, C)

    def __len__(self) -> int:
        return 0 if self.keys is None else int(self.keys.shape[0])

    @property
    def full(self) -> bool:
        return len(self) >= self.capacity

    def clear(self) -> None:
        self.keys = self.specific = self.invariant = None

    def enqueue(self, key: torch.Tensor, specific: torch.Tensor, invariant: torch.Tensor) -> None:
        """Append one entry, dropping the oldest when the bank is full."""
        k, s, i = key.detach()[None], specific.detach()[None], invariant.detach()[None]
        if self.keys is None or self.specific is None or self.invariant is None:
            self.keys, self.specific, self.invariant = k.clone(), s.clone(), i.clone()
            return
        self.keys = torch.cat([self.keys, k])[-self.capacity :]
        self.specific = torch.cat([self.specific, s])[-self.capacity :]
        self.invariant = torch.cat([self.invariant, i])[-self.capacity :]

    def weights(self, key: torch.Tensor) -> torch.Tensor:
        """Normalised similarity weights ω ``(n,)`` of the stored keys to ``key`` (sum to one)."""
        if self.keys is None:
            raise RuntimeError("the prompt bank is empty")
        cos = F.cosine_similarity(self.keys, key[None], dim=1)
        return torch.softmax(cos / self.temperature, dim=0)

    def weights_each(self, keys: torch.Tensor) -> torch.Tensor:
        """:meth:`weights` of each key of ``keys`` ``(B, K)``: ``(B, n)``, each row summing to one."""
        if self.keys is None:
            raise RuntimeError("the prompt bank is empty")
        cos = F.cosine_similarity(self.keys[None], keys[:, None], dim=-1)
        return torch.softmax(cos / self.temperature, dim=1)

    def to(self, device: torch.device) -> None:
        if self.keys is not None and self.specific is not None and self.invariant is not None:
            self.keys = self.keys.to(device)
            self.specific = self.specific.to(device)
            self.invariant = self.invariant.to(device)

    def state_tensors(self) -> dict[str, torch.Tensor]:
        if self.keys is None or self.specific is None or self.invariant is None:
            return {}
        return {"bank.keys": self.keys, "bank.specific": self.specific, "bank.invariant": self.invariant}

    def load_state_tensors(self, tensors: dict[str, torch.Tensor]) -> None:
        if "bank.keys" not in tensors:
            self.clear()
            return
        keys, spec, inv = tensors["bank.keys"], tensors["bank.specific"], tensors["bank.invariant"]
        n = int(keys.shape[0])
        if n > self.capacity or spec.shape[0] != n or inv.shape[0] != n:
            raise ValueError(f"bank holds {n} keys but capacity is {self.capacity} (or entry counts differ)")
        self.keys, self.specific, self.invariant = keys.clone(), spec.clone(), inv.clone()
