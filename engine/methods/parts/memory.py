"""A first-in-first-out key/value memory with nearest-neighbour look-up (DLTTA, VPTTA)."""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F

Similarity = Literal["cosine", "dot"]


class KeyValueMemory:
    """At most ``capacity`` (key, value) pairs, oldest dropped first, kept as stacked tensors.

    Args:
        capacity: number of entries kept.
        prefix: name prefix of the saved tensors (``<prefix>.keys``, ``<prefix>.values``).
    """

    def __init__(self, capacity: int, prefix: str = "memory") -> None:
        if capacity < 1:
            raise ValueError("memory capacity must be at least 1")
        self.capacity = capacity
        self.prefix = prefix
        self.keys: torch.Tensor | None = None  # (n, K)
        self.values: torch.Tensor | None = None  # (n, *value_shape)

    def __len__(self) -> int:
        return 0 if self.keys is None else int(self.keys.shape[0])

    @property
    def full(self) -> bool:
        return len(self) >= self.capacity

    def push(self, key: torch.Tensor, value: torch.Tensor) -> None:
        """Append one entry (``key`` flattened), dropping the oldest when full."""
        k, v = key.detach().reshape(1, -1), value.detach()[None]
        if self.keys is None or self.values is None:
            self.keys, self.values = k.clone(), v.clone()
            return
        self.keys = torch.cat([self.keys, k])[-self.capacity :]
        self.values = torch.cat([self.values, v])[-self.capacity :]

    def nearest(self, key: torch.Tensor, k: int, similarity: Similarity) -> tuple[torch.Tensor, torch.Tensor]:
        """The ``k`` stored entries most similar to ``key``.

        Returns:
            ``(values (k, *value_shape), similarities (k,))``, most similar first.
        """
        if self.keys is None or self.values is None:
            raise RuntimeError("the memory is empty")
        query = key.reshape(1, -1).to(self.keys.dtype)
        if similarity == "cosine":
            sims = F.cosine_similarity(self.keys, query, dim=1)
        elif similarity == "dot":
            sims = (self.keys * query).sum(dim=1)
        else:
            raise ValueError(f"unknown similarity {similarity!r}")
        top, idx = torch.topk(sims, min(k, len(self)))
        return self.values[idx], top

    def state_tensors(self) -> dict[str, torch.Tensor]:
        if self.keys is None or self.values is None:
            return {}
        return {f"{self.prefix}.keys": self.keys, f"{self.prefix}.values": self.values}

    def load_state_tensors(self, tensors: dict[str, torch.Tensor], device: torch.device) -> None:
        name_k, name_v = f"{self.prefix}.keys", f"{self.prefix}.values"
        if name_k not in tensors:
            self.keys = self.values = None
            return
        keys, values = tensors[name_k], tensors[name_v]
        n = int(keys.shape[0])
        if n > self.capacity or int(values.shape[0]) != n:
            raise ValueError(
                f"{self.prefix} holds {n} keys but capacity is {self.capacity} (or counts differ)"
            )
        self.keys, self.values = keys.to(device).clone(), values.to(device).clone()
