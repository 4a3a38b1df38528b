"""From a source pass to what the operating point sees (:class:`Observation`), in float64 numpy.

The live method and the benchmark's replay (``lab.bench.replay``) both call
:meth:`ReferenceArrays.observe` on the same float32 numbers of the source pass (logits,
pre-logit features, block 1's per-channel token statistics), so they compute the same
observation bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from engine.methods.idipt_plus._operating_point import Observation
from engine.model.source_reference import SourceReference


@dataclass(frozen=True)
class ReferenceArrays:
    """The source reference's projections as float64 arrays.

    Attributes:
        appearance_mean, appearance_scale: ``(2C,)`` z-scoring of the appearance statistics.
        appearance_basis: ``(R, 2C)`` whitening with the class directions projected out.
        feature_mean: ``(D,)`` source mean of the pre-logit features.
        feature_basis: ``(K, D)`` the leading whitened feature directions used.
        source_margin: the source model's margin ``l_1 - l_0`` at the mean source feature (0 when
            the head was not given); the ``shift`` candidate measures a site's mean margin from it.
    """

    appearance_mean: np.ndarray
    appearance_scale: np.ndarray
    appearance_basis: np.ndarray
    feature_mean: np.ndarray
    feature_basis: np.ndarray
    source_margin: float = 0.0

    @classmethod
    def from_reference(
        cls, ref: SourceReference, feature_dims: int, head: torch.nn.Module | None = None
    ) -> ReferenceArrays:
        def arr(t: object) -> np.ndarray:
            return np.asarray(t.detach().cpu().double().numpy())  # type: ignore[attr-defined]

        dims = min(feature_dims, int(ref.feature_basis.shape[0]))
        margin = 0.0
        if head is not None:
            weight = head.weight.detach().cpu().double()  # type: ignore[operator]
            bias = head.bias.detach().cpu().double()  # type: ignore[operator]
            logits = weight @ ref.feature_mean.detach().cpu().double() + bias
            margin = float(logits[1] - logits[0]) if logits.shape[0] == 2 else 0.0
        return cls(
            arr(ref.appearance_mean),
            arr(ref.appearance_scale),
            arr(ref.appearance_basis),
            arr(ref.feature_mean),
            arr(ref.feature_basis[:dims]),
            margin,
        )

    def observe(self, logits: np.ndarray, features: np.ndarray, block1_stats: np.ndarray) -> Observation:
        """The observation of one image from its source logits ``(2,)``, features ``(D,)`` and stats ``(2C,)``."""
        lg = np.asarray(logits, dtype=np.float64)
        z = (np.asarray(block1_stats, dtype=np.float64) - self.appearance_mean) / self.appearance_scale
        coords = (np.asarray(features, dtype=np.float64) - self.feature_mean) @ self.feature_basis.T
        return Observation(float(lg[1] - lg[0]), coords, z @ self.appearance_basis.T)
