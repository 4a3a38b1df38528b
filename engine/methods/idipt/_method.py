"""I-DiPT: Image-level Disentangled Prompt Tuning for free-form test-time adaptation.

Implements the method of "Free-Form Test-Time Adaptation ... with Image-level Disentangled
Prompt Tuning" (Methodology and Algorithm 1); ``docs/method.md`` records every decision the
implementation had to make. Per image x_k (a step of one image; several images in one step are
the departure of :mod:`._batched`, ``docs/method.md``, "Batches"):

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
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from engine.methods.base import MethodOutput, TTAMethod, check_shapes, register_method
from engine.methods.idipt._bank import PromptBank
from engine.methods.idipt._batched import batched_step
from engine.methods.idipt._config import IDiPTConfig, PromptMode
from engine.methods.idipt._graph import PromptGraph
from engine.methods.parts.fft import low_freq_amplitude
from engine.methods.parts.losses import soft_cross_entropy
from engine.methods.parts.uom import complement, mc_dropout_uncertainty, select_tokens
from engine.model.prompted_vit import PrefixPrompts, SourcePass

logger = logging.getLogger(__name__)

__all__ = ["IDiPT", "IDiPTConfig", "PromptMode"]


@register_method("idipt", "I-DiPT (paper)", bench_order=8, in_paper=True)
class IDiPT(TTAMethod):
    """I-DiPT on a frozen :class:`~engine.model.prompted_vit.PromptedViT` (the paper's step per image;
    a batch of several is tuned side by side, :mod:`._batched`)."""

    test_settings: ClassVar[Mapping[str, Any]] = {"bank_size": 2, "graph_dim": 16, "mc_passes": 3}

    config_class = IDiPTConfig
    # B > 1: every image its own prompts, tuned side by side (_batched).
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

    # ------------------------------------------------------------------ one step
    @torch.enable_grad()
    def forward_and_adapt(self, x: torch.Tensor) -> MethodOutput:
        """The paper's step for one image; several go through :func:`._batched.batched_step`."""
        if x.shape[0] > 1:
            return batched_step(self, x)
        output, _ = self.adapt_with_source(x)
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
            source = model.source_pass(x)
            target = source.logits.softmax(dim=-1)  # ŷ_w
            uncertainty = mc_dropout_uncertainty(model, source, cfg.mc_passes, cfg.mc_dropout, self.generator)
            t_u, t_r = select_tokens(uncertainty, cfg.mask_percent)
            key = low_freq_amplitude(x[0], cfg.beta)
            tokens = model.embed(x)
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
            n = model.num_patches
            views = torch.cat(
                [model.keep_tokens(tokens, complement(t_u, n)), model.keep_tokens(tokens, complement(t_r, n))]
            )
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
            adapted = model.forward_tokens(tokens, both, gate)
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
        output = MethodOutput(
            logits=adapted,
            source_logits=source.logits,
            uncertainty=uncertainty,
            uncertain_tokens=t_u,
            reliable_tokens=t_r,
            diagnostics=diagnostics,
            update_skipped=update_skipped,
            views_kept=views_kept,
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
