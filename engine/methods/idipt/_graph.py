"""The graphs of Parallel Graph Distillation (I-DiPT §PGD): GAT-style attention over stored prompts."""

from __future__ import annotations

import torch
from torch import nn


class PromptGraph(nn.Module):
    """One distillation graph (G_S or G_I).

    Every prompt token is encoded by a token-wise linear map ``W^e: C -> D_g`` into a node; a
    fully connected scorer ``V`` rates each (current node, stored node) pair; the softmax over the
    bank gives attention coefficients ``a_b``; the aggregated node ``sum_b a_b n_b`` is decoded by
    ``W^d: D_g -> C``. ``W^d`` starts at zero so the graph's contribution starts at zero.

    Args:
        dim: C, the prompt token width.
        node_dim: D_g, the node width (paper: 512).
    """

    def __init__(self, dim: int, node_dim: int, generator: torch.Generator | None = None) -> None:
        super().__init__()
        self.encoder = nn.Linear(dim, node_dim)
        self.scorer = nn.Linear(2 * node_dim, 1)
        self.decoder = nn.Linear(node_dim, dim)
        with torch.no_grad():
            for lin in (self.encoder, self.scorer):
                bound = 1.0 / lin.in_features**0.5
                lin.weight.copy_(torch.empty_like(lin.weight).uniform_(-bound, bound, generator=generator))
                lin.bias.zero_()
            self.decoder.weight.zero_()
            self.decoder.bias.zero_()

    def forward(self, current: torch.Tensor, stored: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Distil the stored prompts with respect to the current one.

        Args:
            current: ``(depth, L, C)`` the current (pre-initialised) prompt.
            stored: ``(n, depth, L, C)`` prompts from the bank.

        Returns:
            ``(decoded, attention)``: the decoded aggregate ``(depth, L, C)`` and the attention
            coefficients ``(n, depth, L)`` (softmax over the bank, per prompt token).
        """
        n_cur = self.encoder(current)  # (depth, L, Dg)
        n_sto = self.encoder(stored)  # (n, depth, L, Dg)
        pair = torch.cat([n_cur.expand_as(n_sto), n_sto], dim=-1)
        scores = self.scorer(pair).squeeze(-1)  # (n, depth, L)
        attention = torch.softmax(scores, dim=0)
        aggregate = (attention.unsqueeze(-1) * n_sto).sum(dim=0)
        decoded: torch.Tensor = self.decoder(aggregate)
        return decoded, attention

    def forward_each(self, current: torch.Tensor, stored: torch.Tensor) -> torch.Tensor:
        """:meth:`forward`'s decoded aggregate for each of ``current`` ``(B, depth, L, C)``: ``(B, depth, L, C)``.

        The scorer of a (current, stored) pair is linear in their concatenation, so it is scored
        as the sum of its two halves: the same numbers without the ``(B, n, depth, L, 2 D_g)`` pairs.
        """
        n_cur = self.encoder(current)  # (B, depth, L, Dg)
        n_sto = self.encoder(stored)  # (n, depth, L, Dg)
        node_dim = n_cur.shape[-1]
        weight = self.scorer.weight[0]
        scores = (
            (n_cur @ weight[:node_dim]).unsqueeze(1)
            + (n_sto @ weight[node_dim:]).unsqueeze(0)
            + self.scorer.bias
        )  # (B, n, depth, L)
        attention = torch.softmax(scores, dim=1)
        aggregate = torch.einsum("bndl,ndlg->bdlg", attention, n_sto)
        decoded: torch.Tensor = self.decoder(aggregate)
        return decoded
