"""A frozen timm Vision Transformer with per-sample prefix prompts and token dropping.

Prefix tuning (Li & Liang 2021; the prefix-K/V convention of DualPrompt) prepends learnable key and
value tokens to every attention layer, leaving the query length unchanged. ``PromptedViT`` wraps an
existing :class:`timm.models.vision_transformer.VisionTransformer`: it reuses the model's own
modules (patch embedding, blocks, norms, head) and only replaces the attention computation of each
block while prompts are attached. Without prompts it calls timm's blocks unchanged.

Two prompt modes:

* ``"gated"`` (default): the prompt keys get their own softmax and the result is added with a
  per-layer, per-head weight ``tanh(g)``. With ``g = 0`` the model is exactly the source model
  whatever the prompts hold (zero-init attention, as in LLaMA-Adapter); see ``docs/method.md``, "Prompts".
* ``"prefix"``: the paper's form, prompt keys concatenated in front of the image keys in a single
  softmax. Even zero prompts change the outputs; kept for ablation.

Each sample of a batch may carry prompts of its own length; shorter ones are padded and masked.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import nn

from engine.errors import ModelLoadError

PromptMode = Literal["gated", "prefix"]


@dataclass
class PrefixPrompts:
    """Key/value prefixes for every layer, one set per sample.

    Attributes:
        keys: ``(B, depth, P, C)`` key prefixes.
        values: ``(B, depth, P, C)`` value prefixes.
        mask: ``(B, P)`` bool, True where a prefix token is real (None: all real).
    """

    keys: torch.Tensor
    values: torch.Tensor
    mask: torch.Tensor | None = None

    @property
    def length(self) -> int:
        return int(self.keys.shape[2])

    @staticmethod
    def from_prompts(per_sample: list[list[torch.Tensor]]) -> PrefixPrompts:
        """Build prefixes from prompt tensors in the paper's layout.

        Args:
            per_sample: for each sample, a list of prompts of shape ``(depth, L, C)`` (L even);
                each prompt's first L/2 tokens are keys and the last L/2 values (the paper's
                φ^K, φ^V split). Several prompts of a sample are concatenated ([φ_S; φ_I]).

        Returns:
            Padded prefixes with a mask when samples differ in length.
        """
        keys: list[torch.Tensor] = []
        values: list[torch.Tensor] = []
        for prompts in per_sample:
            ks, vs = [], []
            for p in prompts:
                if p.dim() != 3 or p.shape[1] % 2:
                    raise ValueError(f"prompt must be (depth, L, C) with even L, got {tuple(p.shape)}")
                half = p.shape[1] // 2
                ks.append(p[:, :half])
                vs.append(p[:, half:])
            keys.append(torch.cat(ks, dim=1))
            values.append(torch.cat(vs, dim=1))
        lengths = [int(k.shape[1]) for k in keys]
        longest = max(lengths)
        if all(n == longest for n in lengths):
            return PrefixPrompts(torch.stack(keys), torch.stack(values))
        ref = keys[0]
        mask = torch.zeros(len(keys), longest, dtype=torch.bool, device=ref.device)
        padded_k, padded_v = [], []
        for i, (k, v) in enumerate(zip(keys, values, strict=True)):
            pad = longest - k.shape[1]
            padded_k.append(F.pad(k, (0, 0, 0, pad)))
            padded_v.append(F.pad(v, (0, 0, 0, pad)))
            mask[i, : k.shape[1]] = True
        return PrefixPrompts(torch.stack(padded_k), torch.stack(padded_v), mask)


@dataclass(frozen=True)
class Heads:
    """Block 1's attention of a source pass, which a prompted pass of the same tokens starts from.

    Attributes:
        q: ``(B, heads, T, head_dim)`` queries (after ``q_norm``).
        k: ``(B, heads, T, head_dim)`` keys (after ``k_norm``).
        v: ``(B, heads, T, head_dim)`` values.
        image: ``(B, heads, T, head_dim)`` the attention of the queries over the image's own keys
            (None where it was not needed: the ``"prefix"`` mode attends over prompts and image at once).
    """

    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    image: torch.Tensor | None


@dataclass
class SourcePass:
    """What the plain forward pass leaves behind for the uncertainty estimate and the prompted passes.

    Attributes:
        logits: ``(B, classes)`` source-model logits.
        block1_mid: ``(B, T, C)`` tokens after block 1's attention residual (T includes prefix tokens).
        block1_hidden: ``(B, T, H)`` block 1's MLP activation before dropout.
        block1_out: ``(B, T, C)`` block 1's output tokens (appearance statistics of I-DiPT+).
        features: ``(B, D)`` the pre-logit features the head classifies.
        tokens: ``(B, T, C)`` the embedded tokens the pass started from (:meth:`PromptedViT.embed`).
        heads: block 1's attention heads (:class:`Heads`): a prompted pass of ``tokens`` takes them
            instead of computing them again (:meth:`PromptedViT.forward_tokens`, ``first``).
    """

    logits: torch.Tensor
    block1_mid: torch.Tensor
    block1_hidden: torch.Tensor
    block1_out: torch.Tensor
    features: torch.Tensor
    tokens: torch.Tensor
    heads: Heads


class PromptedViT(nn.Module):
    """A frozen timm ViT that accepts per-sample prefix prompts and drops patch tokens.

    Args:
        vit: a timm ``VisionTransformer`` (any size); it is frozen and put in eval mode.
        mode: ``"gated"`` or ``"prefix"`` (see module docstring).
    """

    def __init__(self, vit: nn.Module, mode: PromptMode = "gated") -> None:
        super().__init__()
        _check_supported(vit)
        # timm modules are dynamic: typed as Any so their sub-modules can be called.
        backbone: Any = vit.eval()
        self.vit: Any = backbone
        for p in backbone.parameters():
            p.requires_grad_(False)
        self.mode: PromptMode = mode
        attn0 = backbone.blocks[0].attn
        self.depth = len(backbone.blocks)
        self.num_heads = int(attn0.num_heads)
        self.head_dim = int(attn0.head_dim)
        self.attn_dim = self.num_heads * self.head_dim
        self.embed_dim = int(backbone.embed_dim)
        self.num_prefix_tokens = int(backbone.num_prefix_tokens)
        grid = backbone.patch_embed.grid_size
        self.grid: tuple[int, int] = (int(grid[0]), int(grid[1]))
        self.num_patches = self.grid[0] * self.grid[1]

    def train(self, mode: bool = True) -> PromptedViT:
        # The backbone never leaves eval mode: dropout and drop-path stay off during adaptation.
        super().train(False)
        return self

    def set_fused_attn(self, fused: bool) -> None:
        """Switch every block between ``scaled_dot_product_attention`` and the explicit softmax."""
        for blk in self.vit.blocks:
            blk.attn.fused_attn = fused

    # ------------------------------------------------------------------ embedding and tokens
    def embed(self, x: torch.Tensor) -> torch.Tensor:
        """Patch embedding, positional embedding and prefix tokens: ``(B, T, C)``."""
        vit = self.vit
        x = vit.patch_embed(x)
        x = vit._pos_embed(x)
        x = vit.patch_drop(x)
        x = vit.norm_pre(x)
        out: torch.Tensor = x
        return out

    def keep_tokens(self, tokens: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        """Keep the prefix (CLS) tokens and the patch tokens listed in ``keep``.

        Args:
            tokens: ``(B, T, C)`` embedded tokens.
            keep: ``(B, K)`` indices into the patch tokens (0 .. num_patches-1).
        """
        npt = self.num_prefix_tokens
        idx = keep + npt
        patches = torch.gather(tokens, 1, idx.unsqueeze(-1).expand(-1, -1, tokens.shape[-1]))
        return torch.cat([tokens[:, :npt], patches], dim=1)

    # ------------------------------------------------------------------ forward passes
    def forward(
        self,
        x: torch.Tensor,
        prompts: PrefixPrompts | None = None,
        gate: torch.Tensor | None = None,
        keep: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Logits for images ``x`` ``(B, 3, H, W)``.

        Args:
            prompts: per-sample prefixes, or None for the source model.
            gate: ``(depth, heads)`` gate logits for the ``"gated"`` mode (zeros when None).
            keep: ``(B, K)`` patch indices to keep, or None to keep all.
        """
        tokens = self.embed(x)
        if keep is not None:
            tokens = self.keep_tokens(tokens, keep)
        return self.forward_tokens(tokens, prompts, gate)

    def forward_tokens(
        self,
        tokens: torch.Tensor,
        prompts: PrefixPrompts | None = None,
        gate: torch.Tensor | None = None,
        start_block: int = 0,
        pre_logits: bool = False,
        first: Heads | None = None,
    ) -> torch.Tensor:
        """Run blocks ``start_block..`` on embedded tokens, then the norm and the head.

        With ``pre_logits`` (as timm's ``forward_head``) the head's input is returned instead: the
        pre-logit features ``(B, D)``. ``first``: block 1's heads of these very ``tokens`` from their
        source pass (:attr:`SourcePass.heads`); a prompted pass from block 1 takes them instead of
        computing them again (the same numbers: they come from the same operations on the same tokens).
        """
        x = tokens
        for i in range(start_block, self.depth):
            blk = self.vit.blocks[i]
            if prompts is None:
                x = blk(x)
            else:
                g = gate[i] if gate is not None else None
                heads = first if i == 0 else None
                attn = self._prompted_attention(blk.attn, blk.norm1(x), prompts, i, g, heads)
                x = x + blk.drop_path1(blk.ls1(attn))
                x = x + blk.drop_path2(blk.ls2(blk.mlp(blk.norm2(x))))
        x = self.vit.norm(x)
        features: torch.Tensor = self.vit.forward_head(x, pre_logits=True)
        if pre_logits:
            return features
        head: torch.Tensor = self.vit.head(features)
        return head

    def source_pass(self, x: torch.Tensor) -> SourcePass:
        """The plain source-model forward, keeping block 1's attention heads and MLP input.

        Block 1 is evaluated step by step with the same operations as timm's ``Block.forward`` and
        ``Attention.forward``, so the logits equal ``vit(x)`` exactly.
        """
        tokens = self.embed(x)
        blk = self.vit.blocks[0]
        normed = blk.norm1(tokens)
        heads = self._heads(blk.attn, normed)
        assert heads.image is not None
        attended = self._attention_out(blk.attn, normed, heads.image)
        mid = tokens + blk.drop_path1(blk.ls1(attended))
        mlp = blk.mlp
        hidden = mlp.act(mlp.fc1(blk.norm2(mid)))
        out = mid + blk.drop_path2(blk.ls2(mlp.drop2(mlp.fc2(mlp.norm(mlp.drop1(hidden))))))
        features = self.forward_tokens(out, start_block=1, pre_logits=True)
        logits = self.vit.head(features)
        return SourcePass(logits, mid, hidden, out, features, tokens, heads)

    def block1_mlp_tail(self, mid: torch.Tensor, hidden: torch.Tensor) -> torch.Tensor:
        """Block 1's output given its MLP activation (possibly dropped out): ``(..., T, C)``."""
        blk = self.vit.blocks[0]
        mlp = blk.mlp
        out: torch.Tensor = mid + blk.ls2(mlp.fc2(mlp.norm(hidden)))
        return out

    def pooled_tail_projection(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        """``(w, b)`` with ``mean_c(block1_tail(h)) = mean_c(mid) + h @ w + b`` when that is linear.

        Block 1's MLP tail (``norm`` -> ``fc2`` -> layer scale) followed by a channel mean is a
        linear map of the hidden activation when the MLP has no norm after the activation; then
        D dropout passes cost D dot products instead of D ``fc2`` products. None otherwise.
        """
        blk = self.vit.blocks[0]
        mlp = blk.mlp
        if not isinstance(mlp.norm, nn.Identity) or not isinstance(mlp.fc2, nn.Linear):
            return None
        weight = mlp.fc2.weight  # (C, H)
        bias = mlp.fc2.bias if mlp.fc2.bias is not None else torch.zeros_like(weight[:, 0])
        ls2 = blk.ls2
        if isinstance(ls2, nn.Identity):
            scale = torch.ones_like(bias)
        elif hasattr(ls2, "gamma") and isinstance(ls2.gamma, torch.Tensor):
            scale = ls2.gamma
        else:
            return None
        w = (scale @ weight) / weight.shape[0]
        b = (scale * bias).mean()
        return w, b

    # ------------------------------------------------------------------ attention with prompts
    def _heads(self, attn: Any, x: torch.Tensor, image: bool = True) -> Heads:
        """Queries, keys and values of one block for ``x`` ``(B, N, C)`` (as timm's ``Attention``) and,
        with ``image``, their attention over the image's own keys."""
        B, N, _ = x.shape
        qkv = attn.qkv(x).reshape(B, N, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        q, k = attn.q_norm(q), attn.k_norm(k)
        own = _attend(q, k, v, None, attn.scale, bool(attn.fused_attn)) if image else None
        return Heads(q, k, v, own)

    def _attention_out(self, attn: Any, x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        """The attention block's output from its heads' output ``out`` ``(B, heads, N, head_dim)``."""
        B, N, _ = x.shape
        out = out.transpose(1, 2).reshape(B, N, self.attn_dim)
        out = attn.norm(out)
        if getattr(attn, "gate", None) is not None:
            out = out * attn.gate(x).sigmoid()
        result: torch.Tensor = attn.proj_drop(attn.proj(out))
        return result

    def _prompted_attention(
        self,
        attn: Any,
        x: torch.Tensor,
        prompts: PrefixPrompts,
        layer: int,
        gate: torch.Tensor | None,
        heads: Heads | None = None,
    ) -> torch.Tensor:
        """Attention of one block with key/value prefixes; ``x`` is ``(B, N, C)``; ``heads``: this
        block's :meth:`_heads` of ``x`` when they are known already."""
        B, N, _ = x.shape
        H, Dh = self.num_heads, self.head_dim
        if heads is None:
            heads = self._heads(attn, x, image=self.mode == "gated")
        q, k, v = heads.q, heads.k, heads.v
        P = prompts.length
        pk = prompts.keys[:, layer].reshape(B, P, H, Dh).transpose(1, 2)  # (B, H, P, Dh)
        pv = prompts.values[:, layer].reshape(B, P, H, Dh).transpose(1, 2)
        pmask = prompts.mask
        fused = bool(attn.fused_attn)
        if self.mode == "prefix":
            keys = torch.cat([pk, k], dim=2)
            vals = torch.cat([pv, v], dim=2)
            mask = None
            if pmask is not None:
                full = torch.ones(B, P + N, dtype=torch.bool, device=x.device)
                full[:, :P] = pmask
                mask = full[:, None, None, :]
            out = _attend(q, keys, vals, mask, attn.scale, fused)
        else:
            out = heads.image if heads.image is not None else _attend(q, k, v, None, attn.scale, fused)
            if P > 0:
                mask = None
                has_prompt = None
                if pmask is not None:
                    has_prompt = pmask.any(dim=1)
                    # A sample without prompt tokens attends to its padding and is zeroed below,
                    # which keeps the softmax free of NaN (all keys masked).
                    safe = pmask | ~has_prompt[:, None]
                    mask = safe[:, None, None, :]
                p_out = _attend(q, pk, pv, mask, attn.scale, fused)
                if has_prompt is not None:
                    p_out = p_out * has_prompt[:, None, None, None].to(p_out.dtype)
                weight = torch.tanh(gate) if gate is not None else torch.zeros(H, device=x.device)
                out = out + weight.to(out.dtype)[None, :, None, None] * p_out
        return self._attention_out(attn, x, out)


def _attend(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None,
    scale: float,
    fused: bool,
) -> torch.Tensor:
    """Softmax attention, fused or explicit; ``mask`` is bool, True = attend."""
    if fused:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    attn = (q * scale) @ k.transpose(-2, -1)
    if mask is not None:
        attn = attn.masked_fill(~mask, float("-inf"))
    return attn.softmax(dim=-1) @ v


_REQUIRED_ATTN = ("qkv", "q_norm", "k_norm", "norm", "proj", "proj_drop", "num_heads", "head_dim", "scale")


def _check_supported(vit: Any) -> None:
    """Refuse models whose blocks we cannot prompt, naming what is missing."""
    missing_model = [
        name
        for name in ("patch_embed", "_pos_embed", "blocks", "norm", "forward_head", "num_prefix_tokens")
        if not hasattr(vit, name)
    ]
    if missing_model:
        raise ModelLoadError(
            f"{type(vit).__name__} is not a timm VisionTransformer (missing {', '.join(missing_model)})"
        )
    for i, blk in enumerate(vit.blocks):
        attn = getattr(blk, "attn", None)
        missing = [n for n in _REQUIRED_ATTN if not hasattr(attn, n)]
        for n in ("norm1", "norm2", "ls1", "ls2", "drop_path1", "drop_path2", "mlp"):
            if not hasattr(blk, n):
                missing.append(n)
        if missing:
            raise ModelLoadError(
                f"block {i} of {type(vit).__name__} has an unsupported layout (missing {', '.join(missing)}); "
                "only timm ViT blocks with standard multi-head attention can take prefix prompts"
            )
