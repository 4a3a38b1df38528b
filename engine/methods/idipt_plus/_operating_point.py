"""The per-appearance operating point of I-DiPT+: a neighbourhood of the stream and its classes.

The source model still ranks a new site's images well; what moves is where the site's classes
fall relative to the decision threshold (``docs/method.md``, "Measured: why I-DiPT stays at
SourceOnly"). For every image this module

1. finds the images of the recent stream that *look* alike once the class is taken out of the
   appearance (:meth:`engine.source_reference.SourceReference.appearance`), weighted by a Gaussian
   kernel whose width is a multiple of the source images' median pairwise distance: a soft
   neighbourhood wide enough to hold both classes of a site and narrow enough to leave other
   sites out;
2. fits a mixture of one Gaussian per class (tied diagonal covariance, weighted EM started from the
   source model's decisions) to the neighbourhood's whitened pre-logit features, and names each
   component by the source model's mean probabilities within it;
3. keeps the source decision unless the evidence is strong: enough neighbourhood weight, every
   component holding a minimum share, and components separated by at least ``min_separation``
   tied standard deviations. A single Gaussian split in two gives a separation of about 2.7, so
   a threshold above that asks for real class structure.

Everything here runs on small tensors (``memory × R`` distances, ``neighbours × K`` EM), in float64.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import torch

_VAR_FLOOR = 1e-4  # smallest variance per feature direction (whitened units: the source's is 1)
#: EM's first E-steps with equal component shares (chosen on validation streams, docs/method.md)
EQUAL_SHARE_ITERATIONS = 3


@dataclass(frozen=True)
class OperatingPointSettings:
    """What the estimator needs of I-DiPT+'s config."""

    neighbours: int  # nearest remembered images considered
    bandwidth: float  # kernel width, in source median pairwise appearance distances
    min_weight: float  # smallest summed kernel weight of a neighbourhood that may decide
    min_separation: float  # smallest separation of any two components, in tied std
    min_share: float  # smallest weighted share of any component
    iterations: int  # EM iterations at most


@dataclass(frozen=True)
class Decision:
    """The outcome for one image.

    Attributes:
        posterior: ``(C,)`` the mixture's class posterior of the image (the source model's
            probabilities when not accepted).
        accepted: whether the neighbourhood's mixture decides this image.
        weight: summed kernel weight of the neighbourhood (the current image not counted).
        separation: smallest component separation in tied std (0 when no mixture was fitted).
        share: smallest component share (0 when no mixture was fitted).
        shift: ``(D,)`` class-conditional feature shift toward the source (``realign``), or None.
        threshold: two classes: the neighbourhood's threshold on the source logit margin
            ``l_1 - l_0`` that agrees best with the mixture (None otherwise).
        source_like: the image looks like the source domain and kept the source decision.
    """

    posterior: torch.Tensor
    accepted: bool
    weight: float
    separation: float
    share: float
    shift: torch.Tensor | None = None
    threshold: float | None = None
    source_like: bool = False


class NeighbourhoodMemory:
    """A ring buffer of the last ``capacity`` stream images' coordinates (float32 on ``device``).

    Args:
        capacity: images remembered.
        appearance_dim: R, the class-removed appearance coordinates.
        feature_dim: K, the whitened feature coordinates the mixture is fitted to.
        classes: C.
        full_dim: D to also keep the pre-logit features (class-conditional realignment), else None.
    """

    def __init__(
        self,
        capacity: int,
        appearance_dim: int,
        feature_dim: int,
        classes: int,
        full_dim: int | None,
        device: torch.device,
    ) -> None:
        self.capacity = capacity
        self.appearance = torch.zeros(capacity, appearance_dim, device=device)
        self.features = torch.zeros(capacity, feature_dim, device=device)
        self.logits = torch.zeros(capacity, classes, device=device)  # the source model's
        self.full = torch.zeros(capacity, full_dim, device=device) if full_dim else None
        self.count = 0  # images ever added
        self.size = 0  # images held (<= capacity)

    def add(
        self,
        appearance: torch.Tensor,
        features: torch.Tensor,
        logits: torch.Tensor,
        full: torch.Tensor | None,
    ) -> None:
        slot = self.count % self.capacity
        self.appearance[slot] = appearance
        self.features[slot] = features
        self.logits[slot] = logits
        if self.full is not None and full is not None:
            self.full[slot] = full
        self.count += 1
        self.size = min(self.size + 1, self.capacity)

    def clear(self) -> None:
        self.count = 0
        self.size = 0

    def state_tensors(self, prefix: str) -> dict[str, torch.Tensor]:
        out = {
            f"{prefix}.appearance": self.appearance[: self.size],
            f"{prefix}.features": self.features[: self.size],
            f"{prefix}.logits": self.logits[: self.size],
        }
        if self.full is not None:
            out[f"{prefix}.full"] = self.full[: self.size]
        return out

    def load_state(self, prefix: str, tensors: dict[str, torch.Tensor], count: int) -> None:
        """Restore what :meth:`state_tensors` saved; raises ValueError/KeyError on a mismatch."""
        size = int(tensors[f"{prefix}.appearance"].shape[0])
        if size > self.capacity or not 0 <= size <= count or size != min(count, self.capacity):
            raise ValueError(
                f"memory of {size} images does not fit capacity {self.capacity} and count {count}"
            )
        targets = [("appearance", self.appearance), ("features", self.features), ("logits", self.logits)]
        if self.full is not None:
            targets.append(("full", self.full))
        elif f"{prefix}.full" in tensors:
            raise ValueError("the state keeps pre-logit features this configuration does not use")
        for name, dest in targets:
            src = tensors[f"{prefix}.{name}"]
            if tuple(src.shape) != (size, dest.shape[1]):
                raise ValueError(
                    f"{prefix}.{name} has shape {tuple(src.shape)}, expected {(size, dest.shape[1])}"
                )
            dest[:size] = src.to(dest.device, dest.dtype)
        self.count, self.size = count, size


def fit_mixture(
    x: torch.Tensor,
    weights: torch.Tensor,
    resp: torch.Tensor,
    iterations: int,
    equal_share_iterations: int = EQUAL_SHARE_ITERATIONS,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Weighted EM for a mixture of one Gaussian per column of ``resp`` with a tied diagonal covariance.

    The first ``equal_share_iterations`` E-steps weigh the components equally. Started from the
    source model's decisions on a site whose threshold cuts deep into one class, the first M-step
    sees a small component and a wide one (holding most of the other class); with the estimated
    shares in the E-step that start shrinks the small component further at every step until it
    holds nothing. Equal shares first let the components move to the clusters, then the shares
    are estimated freely (label shift is kept).

    Args:
        x: ``(N, K)`` points.
        weights: ``(N,)`` non-negative point weights.
        resp: ``(N, C)`` initial responsibilities (rows sum to one).
        iterations: EM iterations at most (stops early once responsibilities settle).
        equal_share_iterations: E-steps with equal component shares at the start.

    Returns:
        ``(resp, means (C, K), var (K,), shares (C,))`` at the end.
    """
    equal = torch.full((resp.shape[1],), 1.0 / resp.shape[1], dtype=x.dtype, device=x.device)
    for it in range(iterations):
        rw = resp * weights[:, None]
        mass = rw.sum(dim=0)
        shares = mass / mass.sum().clamp_min(1e-12)
        means = (rw.T @ x) / mass.clamp_min(1e-12)[:, None]
        sq = (x[:, None, :] - means[None]) ** 2  # (N, C, K)
        var = ((rw[:, :, None] * sq).sum(dim=(0, 1)) / mass.sum().clamp_min(1e-12)).clamp_min(_VAR_FLOOR)
        prior = equal if it < equal_share_iterations else shares
        log_lik = torch.log(prior.clamp_min(1e-12))[None] - 0.5 * (sq / var).sum(dim=-1)
        new = torch.softmax(log_lik, dim=1)
        settled = it >= equal_share_iterations and bool((new - resp).abs().max() < 1e-4)
        resp = new
        if settled:
            break
    rw = resp * weights[:, None]
    mass = rw.sum(dim=0)
    shares = mass / mass.sum().clamp_min(1e-12)
    means = (rw.T @ x) / mass.clamp_min(1e-12)[:, None]
    sq = (x[:, None, :] - means[None]) ** 2
    var = ((rw[:, :, None] * sq).sum(dim=(0, 1)) / mass.sum().clamp_min(1e-12)).clamp_min(_VAR_FLOOR)
    return resp, means, var, shares


def name_components(resp: torch.Tensor, weights: torch.Tensor, probs: torch.Tensor) -> list[int]:
    """Class of each component: the assignment that maximises the source's mean probabilities.

    ``score[j, c]`` is the weighted mean source probability of class ``c`` over component ``j``;
    the permutation with the highest total score names the components (greedy beyond 6 classes).
    Ranking, not voting: a site whose positives the source model calls positive only 40 % of the
    time still has its positive component scoring higher for the positive class than the other.
    """
    rw = resp * weights[:, None]
    score = (rw.T @ probs) / rw.sum(dim=0).clamp_min(1e-12)[:, None]  # (C components, C classes)
    n = score.shape[0]
    if n <= 6:
        best = max(
            itertools.permutations(range(n)), key=lambda p: float(sum(score[j, p[j]] for j in range(n)))
        )
        return list(best)
    names: list[int] = [-1] * n
    free = set(range(n))
    for j in torch.argsort(score.max(dim=1).values, descending=True).tolist():
        c = max(free, key=lambda k: float(score[j, k]))
        names[j] = c
        free.discard(c)
    return names


def margin_threshold(margins: torch.Tensor, positive: torch.Tensor, weights: torch.Tensor) -> float:
    """The threshold on ``margins`` whose split disagrees least (weighted) with the labels ``positive``.

    Returned between two neighbouring margins (or one unit beyond the extremes when every point is
    on one side), so that ``margin - threshold`` ranks the images as the margins do.
    """
    order = torch.argsort(margins)
    m, pos, w = margins[order], positive[order].to(weights.dtype), weights[order]
    # errors when the first j points (lowest margins) are called negative: positives among them
    # plus negatives among the rest
    below = torch.cat([w.new_zeros(1), torch.cumsum(w * pos, dim=0)])
    above = torch.cat([torch.flip(torch.cumsum(torch.flip(w * (1 - pos), [0]), dim=0), [0]), w.new_zeros(1)])
    j = int(torch.argmin(below + above))
    if j == 0:
        return float(m[0]) - 1.0
    if j == len(m):
        return float(m[-1]) + 1.0
    return 0.5 * float(m[j - 1] + m[j])


def decide(
    memory: NeighbourhoodMemory,
    appearance: torch.Tensor,
    features: torch.Tensor,
    logits: torch.Tensor,
    bandwidth: float,
    settings: OperatingPointSettings,
    full: torch.Tensor | None = None,
    source_class_means: torch.Tensor | None = None,
) -> Decision:
    """The operating-point decision for one image (see the module docstring).

    Args:
        memory: the recent stream (the current image not yet added).
        appearance: ``(R,)`` the image's class-removed appearance coordinates.
        features: ``(K,)`` its whitened feature coordinates.
        logits: ``(C,)`` the source model's logits.
        bandwidth: the source images' median pairwise appearance distance.
        settings: the estimator's settings.
        full: ``(D,)`` pre-logit features, to compute the realignment shift (with the next argument).
        source_class_means: ``(C, D)`` the source classes' mean features.
    """
    probs = logits.softmax(dim=-1)
    if memory.size == 0:
        return Decision(probs, False, 0.0, 0.0, 0.0)
    size = memory.size
    dist2 = ((memory.appearance[:size] - appearance) ** 2).sum(dim=1).double()
    k = min(settings.neighbours, size)
    d2, idx = torch.topk(dist2, k, largest=False)
    h = settings.bandwidth * bandwidth
    w = torch.exp(-0.5 * d2 / (h * h))
    weight = float(w.sum())
    if weight < settings.min_weight:
        return Decision(probs, False, weight, 0.0, 0.0)
    x = torch.cat([memory.features[idx], features[None]]).double()
    lg = torch.cat([memory.logits[idx], logits[None]]).double()
    p = lg.softmax(dim=1)
    wt = torch.cat([w, w.new_ones(1)])
    classes = p.shape[1]
    init = torch.nn.functional.one_hot(p.argmax(dim=1), classes).double()
    if bool(((init * wt[:, None]).sum(dim=0) < 1e-6).any()):
        return Decision(probs, False, weight, 0.0, 0.0)  # the source calls only some classes here
    resp, means, var, shares = fit_mixture(x, wt, init, settings.iterations)
    sd = var.sqrt()
    separation = min(
        float((((means[i] - means[j]) / sd) ** 2).sum().sqrt())
        for i, j in itertools.combinations(range(classes), 2)
    )
    share = float(shares.min())
    if share < settings.min_share or separation < settings.min_separation or not math.isfinite(separation):
        return Decision(probs, False, weight, separation, share)
    names = name_components(resp, wt, p)
    by_class = resp[:, torch.tensor([names.index(c) for c in range(classes)])]  # columns: classes
    threshold = None
    if classes == 2:
        threshold = margin_threshold(lg[:, 1] - lg[:, 0], by_class[:, 1] > 0.5, wt)
    shift = None
    if full is not None and source_class_means is not None and memory.full is not None:
        group_full = torch.cat([memory.full[idx], full[None]]).double()
        rw = by_class * wt[:, None]
        group_means = (rw.T @ group_full) / rw.sum(dim=0).clamp_min(1e-12)[:, None]  # per class
        offsets = source_class_means.double() - group_means
        shift = (by_class[-1][:, None] * offsets).sum(dim=0).to(full.dtype)
    return Decision(by_class[-1].to(probs.dtype), True, weight, separation, share, shift, threshold)
