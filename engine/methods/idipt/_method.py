"""I-DiPT: Image-level Disentangled Prompt Tuning for free-form test-time adaptation.

Implements the method of "Free-Form Test-Time Adaptation ... with Image-level Disentangled
Prompt Tuning" (Methodology and Algorithm 1); ``docs/method.md`` records every decision the
implementation had to make. Per image x_k (a step of one image; several images in one step are
a departure of their own, below and in ``docs/method.md``, "Batches"):

1. source pass (frozen ViT, no prompts) -> soft target ŷ_w;
2. UoM: MC dropout (D passes) in block 1's MLP -> token uncertainty, T_U / T_R (K % each);
3. prompts: image-specific φ_S (L_S tokens per layer, afresh per image) and image-invariant φ_I
   (L_I tokens per layer, persistent), prefix-tuned into every attention layer;
4. PGD once the bank holds N_B entries: φ̃_S = Σ ω_b φ_S^(b), φ̂_S = φ̃_S + G_S(...),
   φ̂_I = γ φ_I + (1-γ) G_I(...);
5. L = CE(f_{φ̂_S}(x without T_U), ŷ_w) + CE(f_{φ̂_I}(x without T_R), ŷ_w), both views in one
   batch; one Adam step on φ_S, φ_I, G_S, G_I (and the prompt gates);
6. predict with both enhanced prompts recomputed after the step; enqueue the prompts and let φ_I
   take its EMA (see the departures below).

Departures from the paper (each also in ``docs/method.md``):

* Gated prompts by default (``docs/method.md``, "Prompts"): the prompt attention path has its own softmax
  and a zero-initialised per-layer, per-head gate tanh(g), learned with the prompts. Fresh prompts
  leave the model exactly as it was. ``prompt_mode="prefix"`` is the paper's ungated form.
* Similarity weights ω are a softmax of cosine similarity / ``bank_temperature`` (the paper's raw
  cosine sum would scale the prompt by about N_B).
* The graphs are token-wise (W^e: C -> D_g per prompt token, ``docs/method.md``). G_I's decoded aggregate is
  added to the attention-weighted stored invariant prompts, Σ a_b φ_I^(b) + W^d(Σ a_b n_b), before
  the EMA: with the recommended zero-initialised W^d the paper's literal form would shrink φ_I by
  γ = 0.9 at every image, while this form makes the zero-initialised graph an EMA over the bank.
* The graph decoders' corrections enhance the prompts used for the current image (its loss and its
  prediction) but do not feed back: the bank stores φ_S after the step without G_S's correction,
  and φ_I takes γ φ_I + (1-γ) Σ a_b φ_I^(b) without G_I's. Storing the decoded prompts (Algorithm
  1, line 15) closes a loop φ -> W^d W^e φ -> bank -> φ whose gain Adam grows at every image: on
  the demo model φ_I's norm went from 1.1 to 2130 within 75 source-site images, then predictions
  collapsed (source accuracy 98.8 % -> 53 % over a 300-image stream).
* With UoM off (ablation) both prompts see the whole image and the loss is cross-entropy with the
  source model's hard pseudo-label.
* Evidence check (``evidence_check=True``, ``docs/method.md``: masking can remove the evidence):
  a masked view that no longer predicts the source class (its remaining tokens do not support
  ŷ_w, e.g. a small lesion was masked away) is left out of the loss; with neither view kept no
  step is taken. On the generated lesion set the unchecked loss taught a class bias (source
  site and one target site worse); measured in ``docs/method.md``.
* ``consistency_target="hard"`` reads the paper's CE(y, ŷ_w) with ŷ_w's argmax instead of its
  probabilities (default ``"soft"``); measured in ``docs/method.md``, it changes little.
* φ_S gets a fresh Adam state for every image (it is a new parameter each time); the persistent
  parts (φ_I, gates, graphs) keep theirs.

**A batch of B > 1 images** (:meth:`IDiPT.adapt_batch_with_source`; B = 1 takes the paper's step)
goes through one step, every image with its own prompts tuned side by side:

* every image gets its own image-specific prompt φ_S^(k), pre-initialised from the bank as it
  stands at the batch's start, and its two masked views (T_U and T_R dropped, from its own
  MC-dropout uncertainty, drawn as the images would draw one after another);
* the 2B views run as one batch and the per-image losses are summed, so each φ_S^(k) gets the
  gradient of its own image only (a fresh Adam on the stacked φ_S is B independent Adams); the
  persistent parts (φ_I, the gates, G_S, G_I) take one Adam step on the sum;
* each image is predicted with its tuned φ_S and the updated persistent parts;
* then, image by image in arrival order, the bank takes the image's key and prompts and φ_I its
  EMA, each with the bank and φ_I as the images before it in the batch left them.

The departure from the paper: an image is prompted and tuned without the updates of the images
before it in the same batch (the bank, φ_I, the graphs), and the persistent parts step once per
batch instead of once per image. A non-finite loss or gradient skips the batch's update (every
image of it reports ``update_skipped``); a non-finite prediction falls back to the source's for
that image, which then joins neither the bank nor φ_I's EMA. Host synchronisation: two per step
(whether the update may be taken; the flags and scalars of every image, in one transfer), none
per image or per layer.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from engine.methods.base import MethodOutput, TTAMethod, check_shapes, register_method
from engine.methods.idipt._bank import PromptBank
from engine.methods.idipt._config import IDiPTConfig, PromptMode
from engine.methods.idipt._graph import PromptGraph
from engine.methods.parts.fft import low_freq_amplitude, low_freq_amplitudes
from engine.methods.parts.losses import soft_cross_entropy
from engine.methods.parts.uom import complement, mc_dropout_uncertainty, select_tokens
from engine.model.prompted_vit import PrefixPrompts, PromptedViT, SourcePass

logger = logging.getLogger(__name__)

__all__ = ["IDiPT", "IDiPTConfig", "PromptMode"]


@dataclass(frozen=True)
class _Seen:
    """What a step sees of its images before any prompt (:meth:`IDiPT._see`)."""

    source: SourcePass
    target: torch.Tensor  # ŷ_w, the source's soft prediction (B, C)
    uncertainty: torch.Tensor  # per patch token (B, N)
    t_u: torch.Tensor  # T_U: the most uncertain tokens
    t_r: torch.Tensor  # T_R: the most reliable tokens
    tokens: torch.Tensor  # the embedded tokens (B, T, C)

    def masked_views(self, model: PromptedViT) -> torch.Tensor:
        """The UoM's two views of each image, T_U masked then T_R masked: ``(2B, ...)``."""
        n = model.num_patches
        return torch.cat(
            [
                model.keep_tokens(self.tokens, complement(self.t_u, n)),
                model.keep_tokens(self.tokens, complement(self.t_r, n)),
            ]
        )

    def output(self, adapted: torch.Tensor, **step: Any) -> MethodOutput:
        """The step's output: its adapted logits, what it saw, and what the ``step`` says of itself."""
        return MethodOutput(
            logits=adapted,
            source_logits=self.source.logits,
            uncertainty=self.uncertainty,
            uncertain_tokens=self.t_u,
            reliable_tokens=self.t_r,
            **step,
        )


@register_method("idipt", "I-DiPT (paper)", bench_order=8, in_paper=True)
class IDiPT(TTAMethod):
    """I-DiPT on a frozen :class:`~engine.model.prompted_vit.PromptedViT` (the paper's step per image;
    a batch of several is tuned side by side, :meth:`adapt_batch_with_source`)."""

    test_settings: ClassVar[Mapping[str, Any]] = {"bank_size": 2, "graph_dim": 16, "mc_passes": 3}

    config_class = IDiPTConfig
    # B > 1: every image its own prompts, tuned side by side (adapt_batch_with_source).
    max_batch: ClassVar[int | None] = None
    ablations: ClassVar[tuple[tuple[tuple[str, Any], ...], ...]] = (
        (("use_uom", False),),
        (("use_pgd", False),),
        (("use_uom", False), ("use_pgd", False)),
        (("use_graphs", False),),
    )
    config: IDiPTConfig

    def configure_model(self) -> None:
        cfg = self.config
        model = self.model
        self.model.mode = cfg.prompt_mode
        shape_s = (model.depth, cfg.prompt_len_specific, model.attn_dim)
        shape_i = (model.depth, cfg.prompt_len_invariant, model.attn_dim)
        gen = self.generator
        self.phi_s_init = (torch.randn(shape_s, generator=gen) * cfg.prompt_init_std).to(self.device)
        self.phi_i = nn.Parameter((torch.randn(shape_i, generator=gen) * cfg.prompt_init_std).to(self.device))
        self.gate = nn.Parameter(torch.zeros(model.depth, model.num_heads, device=self.device))
        self.graph_s = PromptGraph(model.attn_dim, cfg.graph_dim, generator=gen).to(self.device)
        self.graph_i = PromptGraph(model.attn_dim, cfg.graph_dim, generator=gen).to(self.device)
        self.bank = PromptBank(cfg.bank_size, cfg.bank_temperature)
        self.optimizer = torch.optim.Adam(self.collect_params(), lr=cfg.lr)

    def saved_optimizer(self) -> torch.optim.Optimizer:
        return self.optimizer

    def collect_params(self) -> list[nn.Parameter]:
        """The persistent parameters: φ_I, the gates, G_S and G_I (φ_S is new for every image)."""
        params = [self.phi_i]
        if self.config.prompt_mode == "gated":
            params.append(self.gate)
        if self.config.use_pgd and self.config.use_graphs:
            params += list(self.graph_s.parameters()) + list(self.graph_i.parameters())
        return params

    # ------------------------------------------------------------------ PGD
    def _enhance(
        self, phi_s: torch.Tensor, weights: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Prompts for the current image from the current parameters (differentiable).

        Args:
            phi_s: the image-specific prompt (pre-initialised from the bank when it is full).
            weights: the bank's similarity weights ω, or None while PGD is not active.

        Returns:
            ``(φ̂_S, φ̂_I, carry_I)``: the enhanced prompts used for the loss and the prediction, and
            the image-invariant prompt without the graph decoder's correction, which is what φ_I
            takes and the bank stores (the decoder must not feed back into its own input).
        """
        cfg = self.config
        bank = self.bank
        if weights is None or bank.specific is None or bank.invariant is None:
            return phi_s, self.phi_i, self.phi_i
        if cfg.use_graphs:
            dec_s, _ = self.graph_s(phi_s, bank.specific)
            dec_i, att_i = self.graph_i(self.phi_i, bank.invariant)
            carry = cfg.gamma * self.phi_i + (1.0 - cfg.gamma) * (att_i.unsqueeze(-1) * bank.invariant).sum(
                dim=0
            )
            return phi_s + dec_s, carry + (1.0 - cfg.gamma) * dec_i, carry
        carry = cfg.gamma * self.phi_i + (1.0 - cfg.gamma) * torch.einsum(
            "b,bdlc->dlc", weights, bank.invariant
        )
        return phi_s, carry, carry

    def _enhance_each(
        self, phi_s: torch.Tensor, weights: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(φ̂_S, φ̂_I)`` of every image of a batch ``(B, depth, L, C)`` each, from the current
        parameters: :meth:`_enhance` for a batch (``weights`` ``(B, n)``, None while PGD is not active)."""
        cfg, bank = self.config, self.bank
        batch = phi_s.shape[0]
        if weights is None or bank.specific is None or bank.invariant is None:
            return phi_s, self.phi_i.expand(batch, -1, -1, -1)
        gamma = cfg.gamma
        if cfg.use_graphs:
            dec_s = self.graph_s.forward_each(phi_s, bank.specific)
            dec_i, att_i = self.graph_i(self.phi_i, bank.invariant)
            carry = gamma * self.phi_i + (1.0 - gamma) * (att_i.unsqueeze(-1) * bank.invariant).sum(dim=0)
            hat_i = carry + (1.0 - gamma) * dec_i
            return phi_s + dec_s, hat_i.expand(batch, -1, -1, -1)
        hat_i = gamma * self.phi_i + (1.0 - gamma) * torch.einsum("kb,bdlc->kdlc", weights, bank.invariant)
        return phi_s, hat_i

    def _carry(self, key: torch.Tensor) -> torch.Tensor:
        """What φ_I takes after one image of a batch, from the bank and φ_I as they are now (its EMA)."""
        cfg, bank = self.config, self.bank
        if not (cfg.use_pgd and bank.full) or bank.invariant is None:
            return self.phi_i.detach()
        if cfg.use_graphs:
            _, att_i = self.graph_i(self.phi_i, bank.invariant)
            mixed = (att_i.unsqueeze(-1) * bank.invariant).sum(dim=0)
        else:
            mixed = torch.einsum("b,bdlc->dlc", bank.weights(key), bank.invariant)
        carry: torch.Tensor = cfg.gamma * self.phi_i + (1.0 - cfg.gamma) * mixed
        return carry.detach()

    # ------------------------------------------------------------------ one step
    def _see(self, x: torch.Tensor) -> _Seen:
        """Steps 1 and 2 for the images ``x``: the source pass, ŷ_w, the token uncertainty, T_U and
        T_R, and the patch tokens the prompted passes start from, the source pass's own (call under
        ``torch.no_grad``)."""
        cfg, model = self.config, self.model
        source = model.source_pass(x)
        target = source.logits.softmax(dim=-1)  # ŷ_w
        uncertainty = mc_dropout_uncertainty(model, source, cfg.mc_passes, cfg.mc_dropout, self.generator)
        t_u, t_r = select_tokens(uncertainty, cfg.mask_percent)
        return _Seen(source, target, uncertainty, t_u, t_r, source.tokens)

    @torch.enable_grad()
    def forward_and_adapt(self, x: torch.Tensor) -> MethodOutput:
        """The paper's step for one image; several go through :meth:`adapt_batch_with_source`."""
        output, _ = self.adapt_with_source(x) if x.shape[0] == 1 else self.adapt_batch_with_source(x)
        return output

    @torch.enable_grad()
    def adapt_with_source(self, x: torch.Tensor) -> tuple[MethodOutput, SourcePass]:
        """One I-DiPT step; returns its output and the source pass it started from (I-DiPT+ reads it)."""
        if x.shape[0] != 1:
            raise ValueError("I-DiPT adapts image by image: batch size must be 1")
        cfg = self.config
        model = self.model
        gate = self.gate if cfg.prompt_mode == "gated" else None

        with torch.no_grad():
            seen = self._see(x)
            source, target, tokens = seen.source, seen.target, seen.tokens
            key = low_freq_amplitude(x[0], cfg.beta)
            bank_size = len(self.bank)
            use_bank = cfg.use_pgd and self.bank.full
            weights = self.bank.weights(key) if use_bank else None
            if weights is not None and self.bank.specific is not None:
                pre_s = torch.einsum("b,bdlc->dlc", weights, self.bank.specific)
            else:
                pre_s = self.phi_s_init

        phi_s = nn.Parameter(pre_s.clone())
        hat_s, hat_i, _ = self._enhance(phi_s, weights)
        prompts = PrefixPrompts.from_prompts([[hat_s], [hat_i]])
        kept = torch.ones(2, device=x.device)
        if cfg.use_uom:
            views = seen.masked_views(model)
            logits = model.forward_tokens(views, prompts, gate)
            if cfg.consistency_target == "hard":
                target = F.one_hot(target.argmax(dim=-1), target.shape[-1]).to(target.dtype)
            losses = soft_cross_entropy(logits, target.expand(2, -1))
            if cfg.evidence_check:
                # A view whose remaining tokens no longer support the source class has lost the
                # evidence (a small lesion masked away): fitting it to ŷ_w would teach a class bias.
                source_class = source.logits.argmax(dim=-1)
                kept = (logits.detach().argmax(dim=-1) == source_class).to(losses.dtype)
                losses = losses * kept
        else:
            logits = model.forward_tokens(tokens.expand(2, -1, -1), prompts, gate)
            losses = F.cross_entropy(logits, target.argmax(dim=-1).expand(2), reduction="none")
        loss = losses.sum()

        # Two host synchronisations per step: whether the update may be taken, then the step's
        # flags and scalars together (none per parameter or per figure).
        specific_opt = torch.optim.Adam([phi_s], lr=cfg.lr)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()  # type: ignore[no-untyped-call]  # a non-finite loss gives non-finite gradients
        grads = [p.grad for p in [phi_s, *self.collect_params()] if p.grad is not None]
        finite = torch.stack([torch.isfinite(loss), *(torch.isfinite(g).all() for g in grads)]).all()
        flags = torch.stack([finite.to(kept.dtype), kept.sum()]).tolist()
        grads_ok, views_kept = bool(flags[0]), round(flags[1])
        update_skipped = not grads_ok
        if grads_ok:
            if views_kept > 0:  # with no view kept there is nothing to learn: Adam's momentum must not move
                self.optimizer.step()
                specific_opt.step()
        else:
            # A NaN/inf loss or gradient would poison the persistent prompts: keep the last good ones.
            # The caller hears of it through MethodOutput.update_skipped (StepResult.update_skipped).
            logger.debug("I-DiPT step %d: non-finite loss or gradient, update skipped", self.steps)
        self.optimizer.zero_grad(set_to_none=True)

        with torch.no_grad():
            hat_s, hat_i, carry_i = self._enhance(phi_s.detach(), weights)
            both = PrefixPrompts.from_prompts([[hat_s, hat_i]])
            adapted = model.forward_tokens(tokens, both, gate, first=source.heads)
            gates = torch.tanh(self.gate.detach()).abs()
            scalars = torch.stack(
                [
                    torch.isfinite(adapted).all().to(loss.dtype),
                    loss.detach(),
                    losses[0].detach(),
                    losses[1].detach(),
                    hat_s.detach().norm(),
                    hat_i.detach().norm(),
                    gates.mean(),
                    gates.max(),
                ]
            ).tolist()
            if not scalars[0]:
                adapted = source.logits
                update_skipped = True
            elif grads_ok:
                if cfg.use_pgd:
                    self.bank.enqueue(key, phi_s.detach(), carry_i)
                self.phi_i.copy_(carry_i)

        self.steps += 1
        diagnostics: dict[str, float] = {
            "loss": scalars[1],
            "loss_specific": scalars[2],
            "loss_invariant": scalars[3],
            "bank_size": float(bank_size),
            "phi_specific_norm": scalars[4],
            "phi_invariant_norm": scalars[5],
            "gate_mean_abs": scalars[6] if gate is not None else 0.0,
            "gate_max_abs": scalars[7] if gate is not None else 0.0,
        }
        output = seen.output(
            adapted,
            diagnostics=diagnostics,
            update_skipped=update_skipped,
            views_kept=views_kept,
        )
        return output, source

    @torch.enable_grad()
    def adapt_batch_with_source(self, x: torch.Tensor) -> tuple[MethodOutput, SourcePass]:
        """One step of the batch ``x`` ``(B, 3, H, W)``, every image its own prompts (see the module
        notes); returns its output and the source pass it started from (I-DiPT+ decides from it)."""
        cfg, model, bank = self.config, self.model, self.bank
        batch = x.shape[0]
        gate = self.gate if cfg.prompt_mode == "gated" else None

        with torch.no_grad():
            seen = self._see(x)
            source, target, tokens = seen.source, seen.target, seen.tokens  # target ŷ_w: (B, C)
            keys = low_freq_amplitudes(x, cfg.beta)
            bank_size = len(bank)
            weights = bank.weights_each(keys) if cfg.use_pgd and bank.full else None
            if weights is not None and bank.specific is not None:
                pre_s = torch.einsum("kb,bdlc->kdlc", weights, bank.specific)
            else:
                pre_s = self.phi_s_init.expand(batch, -1, -1, -1)

        phi_s = nn.Parameter(pre_s.clone())
        hat_s, hat_i = self._enhance_each(phi_s, weights)
        source_class = source.logits.argmax(dim=-1)
        if cfg.use_uom:
            views = seen.masked_views(model)
            logits = model.forward_tokens(views, view_prompts(hat_s, hat_i), gate)
            if cfg.consistency_target == "hard":
                target = F.one_hot(source_class, target.shape[-1]).to(target.dtype)
            losses = soft_cross_entropy(logits, target.repeat(2, 1))
            kept = torch.ones_like(losses)
            if cfg.evidence_check:
                kept = (logits.detach().argmax(dim=-1) == source_class.repeat(2)).to(losses.dtype)
                losses = losses * kept
        else:
            logits = model.forward_tokens(torch.cat([tokens, tokens]), view_prompts(hat_s, hat_i), gate)
            losses = F.cross_entropy(logits, source_class.repeat(2), reduction="none")
            kept = torch.ones_like(losses)
        loss = losses.sum()

        specific_opt = torch.optim.Adam([phi_s], lr=cfg.lr)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()  # type: ignore[no-untyped-call]
        grads = [p.grad for p in [phi_s, *self.collect_params()] if p.grad is not None]
        finite = torch.stack([torch.isfinite(loss), *(torch.isfinite(g).all() for g in grads)]).all()
        grads_ok, any_kept = (bool(v) for v in torch.stack([finite, kept.sum() > 0]).tolist())  # sync 1
        # With no view kept there is nothing to learn: Adam's momentum must not move.
        if grads_ok and any_kept:
            self.optimizer.step()
            specific_opt.step()
        self.optimizer.zero_grad(set_to_none=True)

        with torch.no_grad():
            hat_s, hat_i = self._enhance_each(phi_s.detach(), weights)
            adapted = model.forward_tokens(tokens, both_prompts(hat_s, hat_i), gate, first=source.heads)
            good = torch.isfinite(adapted).all(dim=-1)
            adapted = torch.where(good[:, None], adapted, source.logits)
            per_image = torch.stack(
                [
                    good.to(losses.dtype),
                    kept[:batch] + kept[batch:],
                    losses[:batch] + losses[batch:],
                    losses[:batch],
                    losses[batch:],
                    hat_s.flatten(1).norm(dim=1),
                    hat_i.flatten(1).norm(dim=1),
                ]
            ).tolist()  # sync 2
            if grads_ok:
                for k in range(batch):
                    if per_image[0][k]:
                        carry = self._carry(keys[k])
                        if cfg.use_pgd:
                            bank.enqueue(keys[k], phi_s[k].detach(), carry)
                        self.phi_i.copy_(carry)
            gates = torch.tanh(self.gate.detach()).abs()
            gate_stats = torch.stack([gates.mean(), gates.max()]).tolist() if gate is not None else [0.0, 0.0]

        self.steps += batch
        output = seen.output(
            adapted,
            diagnostics={
                "bank_size": float(bank_size),
                "gate_mean_abs": gate_stats[0],
                "gate_max_abs": gate_stats[1],
            },
            image_diagnostics={
                "loss": per_image[2],
                "loss_specific": per_image[3],
                "loss_invariant": per_image[4],
                "phi_specific_norm": per_image[5],
                "phi_invariant_norm": per_image[6],
            },
            updates_skipped=[not (grads_ok and bool(ok)) for ok in per_image[0]],
            views_kept_each=[round(v) for v in per_image[1]],
        )
        return output, source

    def recover(self) -> str:
        """Forget the image-specific history: the bank (whose prompts pre-initialise φ_S) is cleared."""
        self.bank.clear()
        return "prompt bank cleared (image-specific prompts restart from their initial value)"

    # ------------------------------------------------------------------ state
    def _named_modules_state(self) -> dict[str, torch.Tensor]:
        out = {"phi_i": self.phi_i.detach(), "gate": self.gate.detach(), "phi_s_init": self.phi_s_init}
        for prefix, graph in (("graph_s", self.graph_s), ("graph_i", self.graph_i)):
            for name, value in graph.state_dict().items():
                out[f"{prefix}.{name}"] = value
        return out

    def state_tensors(self) -> dict[str, torch.Tensor]:
        tensors = super().state_tensors()
        tensors.update(self._named_modules_state())
        tensors.update(self.bank.state_tensors())
        return tensors

    def load_state(self, tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> None:
        check_shapes(tensors, self._named_modules_state())
        super().load_state(tensors, meta)
        dev = self.device
        with torch.no_grad():
            self.phi_i.copy_(tensors["phi_i"].to(dev))
            self.gate.copy_(tensors["gate"].to(dev))
            self.phi_s_init = tensors["phi_s_init"].to(dev).clone()
            for prefix, graph in (("graph_s", self.graph_s), ("graph_i", self.graph_i)):
                graph.load_state_dict({k: tensors[f"{prefix}.{k}"].to(dev) for k in graph.state_dict()})
        self.bank.load_state_tensors({k: v.to(dev) for k, v in tensors.items() if k.startswith("bank.")})


def _halves(prompt: torch.Tensor, length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Key and value tokens ``(B, depth, P, C)`` each of prompts ``(B, depth, L, C)``, padded to P."""
    half = prompt.shape[2] // 2
    pad = (0, 0, 0, length - half)
    return F.pad(prompt[:, :, :half], pad), F.pad(prompt[:, :, half:], pad)


def view_prompts(first: torch.Tensor, second: torch.Tensor) -> PrefixPrompts:
    """Prefixes of 2B samples: ``first[k]`` for sample k, ``second[k]`` for sample B + k.

    As :meth:`PrefixPrompts.from_prompts` ``([[first[0]], ..., [second[0]], ...])``: the shorter
    prompts are padded and masked.
    """
    h1, h2 = first.shape[2] // 2, second.shape[2] // 2
    length = max(h1, h2)
    k1, v1 = _halves(first, length)
    k2, v2 = _halves(second, length)
    mask = None
    if h1 != h2:
        real = torch.arange(length, device=first.device)
        rows = torch.cat([(real < h1).expand(first.shape[0], -1), (real < h2).expand(second.shape[0], -1)])
        mask = rows
    return PrefixPrompts(torch.cat([k1, k2]), torch.cat([v1, v2]), mask)


def both_prompts(hat_s: torch.Tensor, hat_i: torch.Tensor) -> PrefixPrompts:
    """Prefixes ``[φ̂_S; φ̂_I]`` of each image (as ``from_prompts([[hat_s[k], hat_i[k]], ...])``)."""
    hs, hi = hat_s.shape[2] // 2, hat_i.shape[2] // 2
    keys = torch.cat([hat_s[:, :, :hs], hat_i[:, :, :hi]], dim=2)
    values = torch.cat([hat_s[:, :, hs:], hat_i[:, :, hi:]], dim=2)
    return PrefixPrompts(keys, values)
