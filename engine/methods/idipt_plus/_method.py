"""I-DiPT+: I-DiPT with a safe per-site operating point learned from the stream, without labels.

I-DiPT (``engine.methods.idipt``, the paper's method) fits two masked views of every image to the
source model's prediction ŷ_w. On a new site whose images the source model still ranks well but
whose classes have moved across its decision threshold, that target repeats the site's bias by
construction (``docs/method.md``, "Measured: why I-DiPT stays at SourceOnly"). I-DiPT+ runs
I-DiPT unchanged for its prompts and uncertainty masks, and reports for every image a decision
taken from the *source* pass: the source model's own, or, where the image's site group has an
operating point that passed every guard, the source margin against that group's threshold
(:mod:`._operating_point`). Every decision says where it came from
(:class:`engine.run.step.DecisionRecord`).

Departures from ``idipt`` (each also in ``docs/method.md``, "I-DiPT+"):

* **The reported prediction is the source model's** (by default, until a review certifies a
  candidate: the accepted operating point is the ladder's ``guarded`` candidate), **or its margin
  against an accepted operating point** (``report_operating_point``), never the prompted model's: I-DiPT alone lowered sites by up to 13 points on
  lesion-like data and the source site by 5.5 on an outside set (``docs/benchmark.md``). The
  prompts are still trained (the reproduction of the paper runs inside) and the uncertainty map
  is I-DiPT's.
* **Operating point** (``operating_point``): site groups by class-removed appearance, per group a
  two-Gaussian mixture in whitened pre-logit features translated into a threshold on the source
  margin, accepted only when its share, separation, ranking, edge and bootstrap-stability guards pass,
  and moved pessimistically (the bootstrap interval's edge nearest the source threshold, two fits
  in a row agreeing). Two classes only: with more, every image keeps the source decision.
  Needs the model's source reference (``engine.model.source_reference``); without one the operating
  point is off, with a warning, and every decision is the source model's.
* **Source gate** (``source_gate``, off by default): an image within the appearance radius that
  holds 99 % of the source training images keeps the source decision and joins no group. Chosen
  off on simulated shifts of the source validation split: it kept contrast- and zoom-shifted
  images on the source decision although the source model was wrong on them, and the guards
  alone kept every simulated site unharmed (``docs/benchmark.md``).
* **No collapse guard** (:attr:`collapse_check` False): the reported decisions cannot drift
  (they are the source margin against guarded thresholds), and the guard would wipe the evidence
  of a site that truly is 95 % one class.

Every decision depends only on the image's source pass and the earlier images' source passes, so
``lab.bench.replay`` can replay it for any stream order and setting from cached source passes.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch

from engine.config import setting
from engine.methods.base import MethodOutput, register_method
from engine.methods.decision import DecisionRecord
from engine.methods.idipt import IDiPT, IDiPTConfig
from engine.methods.idipt_plus._fit import OperatingPointSettings
from engine.methods.idipt_plus._observe import ReferenceArrays
from engine.methods.idipt_plus._operating_point import NOT_ACCEPTED, Decision, OperatingPoint
from engine.methods.idipt_plus._state import load_operating_point, operating_point_state
from engine.methods.parts.uom import mc_dropout_uncertainty, select_tokens
from engine.model.prompted_vit import SourcePass
from engine.model.source_reference import SourceReference, appearance_statistics
from engine.vocabulary import NoSiteRule

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class IDiPTPlusConfig(IDiPTConfig):
    """I-DiPT's hyper-parameters plus the operating point's (chosen on simulated source shifts)."""

    operating_point: bool = setting(True, "ablation switch: per-site operating points from the stream")
    report_operating_point: bool = setting(
        False,
        "report a site's guarded operating point as soon as its guards accept it, before any review "
        "(off: the source model decides until reviews certify a candidate, the operating point among them)",
    )
    prompted_candidate: bool = setting(
        True,
        "run I-DiPT's prompt tuning for its prompted decision, a candidate of each site's review ladder "
        "(off: only the source pass and the uncertainty map, about a fifth of the cost)",
    )
    source_gate: bool = setting(
        False,
        "images that look like the source domain keep the source decision (off: chosen on simulated shifts)",
    )
    join: float = setting(
        1.0,
        "largest appearance distance to a site group's centre, in source radii (sites not named only)",
        low=0.01,
        high=100,
    )
    merge: float = setting(
        0.5, "site groups whose centres are closer than this, in source radii, become one", low=0.0, high=100
    )
    seed_images: int = setting(
        20, "unassigned images near one another that found a site group", low=2, high=10000
    )
    group_capacity: int = setting(
        1000, "images per site (a uniform sample) its operating point is fitted to", low=20, high=100000
    )
    max_groups: int = setting(
        64, "site groups kept at most (the least recently seen gives way)", low=1, high=10000
    )
    min_images: int = setting(
        40, "images a site group needs before its operating point is fitted", low=10, high=100000
    )
    refit: float = setting(
        0.1, "refit a group's operating point when it has grown by this share", low=0.0, high=10.0
    )
    feature_dims: int = setting(
        4, "whitened pre-logit feature directions the mixture is fitted in", low=1, high=8
    )
    min_share: float = setting(0.05, "smallest share of either mixture component", low=0.0, high=0.5)
    min_separation: float = setting(
        4.0, "smallest distance of the two components, in tied std", low=0.0, high=100.0
    )
    max_disagreement: float = setting(
        0.05,
        "largest share of a group the margin threshold may split differently from the mixture",
        low=0.0,
        high=0.5,
    )
    min_edge: float = setting(
        2.5,
        "the new threshold's distance from the bulk on one side of it, in that side's std",
        low=0.0,
        high=100.0,
    )
    bootstrap: int = setting(30, "bootstrap refits behind each accepted operating point", low=0, high=1000)
    quantile: float = setting(
        0.05,
        "the bootstrap interval's lower quantile (and the share of refits allowed to fail)",
        low=0.0,
        high=0.5,
    )
    em_iterations: int = setting(30, "EM iterations at most per fit", low=1, high=1000)
    split_share: float = setting(
        0.2,
        "a named site (folder or slide) splits in two only if 2-means on its appearance leaves each "
        "part this share of its sample (and min_images)",
        low=0.0,
        high=0.5,
    )
    split_separation: float = setting(
        2.5,
        "a named site splits in two only if the parts' appearance centres lie farther apart than this, "
        "in source radii (above 2: no image within joining distance of both)",
        low=0.0,
        high=100.0,
    )
    split_stability: float = setting(
        0.995,
        "a named site splits in two only if 2-means on each of two random halves of its sample "
        "assigns at least this share of it as the whole sample's 2-means does",
        low=0.5,
        high=1.0,
    )

    def operating_point_settings(self) -> OperatingPointSettings:
        """The settings the operating point reads."""
        return OperatingPointSettings(
            join=self.join,
            merge=self.merge,
            seed_images=self.seed_images,
            capacity=self.group_capacity,
            max_groups=self.max_groups,
            min_images=self.min_images,
            refit=self.refit,
            feature_dims=self.feature_dims,
            min_share=self.min_share,
            min_separation=self.min_separation,
            max_disagreement=self.max_disagreement,
            min_edge=self.min_edge,
            bootstrap=self.bootstrap,
            quantile=self.quantile,
            iterations=self.em_iterations,
            split_share=self.split_share,
            split_separation=self.split_separation,
            split_stability=self.split_stability,
        )


def decision_record(decision: Decision, margin: float = float("nan"), prompted: int = -1) -> DecisionRecord:
    """The typed record of a decision that crosses to the stream loop, the app and the benchmark."""
    fit = decision.fit
    record = DecisionRecord(
        decision.path,
        decision.group,
        decision.threshold,
        decision.reason,
        site=decision.site,
        margin=margin,
        candidates=tuple(sorted(decision.candidates.items())),
        prompted=prompted,
    )
    if fit is None:
        return record
    return dataclasses.replace(
        record,
        group_images=fit.images,
        separation=fit.separation,
        share=fit.share,
        disagreement=fit.disagreement,
        low=fit.low,
        high=fit.high,
    )


@dataclass(frozen=True)
class HostPass:
    """A batch's source pass as :meth:`IDiPTPlus.decide_from_pass` reads it, on the host.

    Attributes:
        logits: ``(B, classes)`` the source model's logits.
        observed: the logits, features and appearance statistics as float32 arrays (None: the
            operating point is off).
    """

    logits: torch.Tensor
    observed: list[np.ndarray] | None


@register_method(
    "idipt+",
    "I-DiPT+ (the source model until reviews certify one of a site's candidates; I-DiPT among them)",
    bench_order=9,
)
class IDiPTPlus(IDiPT):
    """I-DiPT+; see the module docstring."""

    config_class = IDiPTPlusConfig
    max_batch = None  # I-DiPT batches; the operating point then takes the batch's images in order
    uses_reference: ClassVar[bool] = True
    source_access: ClassVar[str] = "source reference: labelled train split statistics"
    collapse_check: ClassVar[bool] = False
    decides_from_source_pass: ClassVar[bool] = True
    has_map_step: ClassVar[bool] = True
    ablations: ClassVar[tuple[tuple[tuple[str, Any], ...], ...]] = (
        (("operating_point", False),),
        (("source_gate", True),),
        (("bootstrap", 0),),
    )
    config: IDiPTPlusConfig

    def configure_model(self) -> None:
        super().configure_model()
        self._build_operating_point()
        # I-DiPT's prompt tuning (the prompt step) draws its MC-dropout masks from a generator of
        # its own, started where the maps' starts: both draw the same masks image after image, so
        # the prompt step sees the uncertainty maps the map step made, whenever it runs.
        self.prompt_generator = torch.Generator(device="cpu")
        self.prompt_generator.set_state(self.generator.get_state())

    def _build_operating_point(self) -> None:
        ref = getattr(self, "reference", None)
        cfg = self.config
        self.operating_point: OperatingPoint | None = None
        self.arrays: ReferenceArrays | None = None
        if ref is None or not cfg.operating_point or int(ref.class_means.shape[0]) != 2:
            return
        self.arrays = ReferenceArrays.from_reference(ref, cfg.feature_dims, self.model.vit.head)
        self.operating_point = OperatingPoint(
            cfg.operating_point_settings(), ref.radius, self.seed, self.arrays.source_margin
        )

    def use_reference(self, reference: SourceReference | None) -> None:
        """Take the model's source reference (kept across resets); None turns the operating point off."""
        if reference is None and self.config.operating_point:
            logger.warning(
                "idipt+: the model has no usable source reference (run `f2tta reference`); "
                "the per-site operating point is off and every decision is the source model's"
            )
        self.reference = reference.to(self.device) if reference is not None else None
        self._build_operating_point()

    @torch.enable_grad()
    def forward_and_adapt(self, x: torch.Tensor) -> MethodOutput:
        """Decide each image of the batch ``x`` from its source pass, in arrival order.

        I-DiPT runs on the batch for its prompted decision (a candidate of the site's ladder) and
        its uncertainty map (:meth:`map_step`); the operating point then takes the images one by
        one in arrival order from the source passes the map step started from, so a batch decides
        as its images would one at a time, and as :meth:`decide` decides them.
        """
        out, source = self._map(x)
        if self.config.prompted_candidate:  # the maps' and the prompts' generators stay in step
            self.prompt_generator.set_state(self.generator.get_state())
        prompted = out.logits.argmax(dim=-1).tolist() if self.config.prompted_candidate else None
        decided = self._decide_from(source, prompted)
        out.logits, out.decisions, out.decision = decided.logits, decided.decisions, decided.decision
        out.diagnostics.update(decided.diagnostics)
        return out

    @torch.no_grad()
    def decision_pass(self, x: torch.Tensor) -> HostPass:
        """The source pass of ``x`` as the operating point reads it, on the host (it reads only the
        frozen model and the reference: it may run ahead of the batches before it)."""
        source = self.model.source_pass(x)
        return HostPass(source.logits.detach().cpu(), self._observed(source))

    @torch.no_grad()
    def decide_from_pass(self, passed: HostPass) -> MethodOutput:
        """The decisions of :meth:`forward_and_adapt` from :meth:`decision_pass` (the prompted
        decision pending: ``prompted`` -1); only the operating point advances."""
        return self._decide_host(passed.logits, passed.observed, None)

    def map_step(self, x: torch.Tensor) -> MethodOutput:
        """The uncertainty map of a decided batch (MC dropout on its source pass, as I-DiPT's step
        makes it); only the maps' generator advances. I-DiPT's prompted decision is the prompt
        step's (:meth:`prompt_step`)."""
        return self._source_step(x, count=not self.config.prompted_candidate)[0]

    def has_prompt_step(self) -> bool:
        return self.config.prompted_candidate

    @torch.enable_grad()
    def prompt_step(self, x: torch.Tensor) -> MethodOutput:
        """I-DiPT's step on a mapped batch (in ``logits``, its prompted decision): the prompts, the
        bank, φ_I and the prompts' generator advance, as :meth:`forward_and_adapt` advances them."""
        if not self.config.prompted_candidate:
            raise TypeError("idipt+ without its prompted candidate has no prompt step")
        maps = self.generator
        self.generator = self.prompt_generator
        try:
            out = self._map(x)[0]
        finally:
            self.prompt_generator, self.generator = self.generator, maps
        return out

    def _map(self, x: torch.Tensor) -> tuple[MethodOutput, SourcePass]:
        if not self.config.prompted_candidate:
            return self._source_step(x)
        if x.shape[0] > 1:
            return self.adapt_batch_with_source(x)
        return self.adapt_with_source(x)

    def _decide_from(self, source: SourcePass, prompted: list[int] | None) -> MethodOutput:
        """The operating point's decisions on a batch's source passes, image by image in arrival
        order (``prompted``: I-DiPT's classes of the images, None while they are pending)."""
        return self._decide_host(source.logits, self._observed(source), prompted)

    def _observed(self, source: SourcePass) -> list[np.ndarray] | None:
        """What the operating point reads of a batch's source passes, on the host: the logits, the
        features and block 1's appearance statistics (None: no operating point)."""
        if self.operating_point is None or self.arrays is None:
            return None
        stats = appearance_statistics(source.block1_out, self.model.num_prefix_tokens)
        return [t.detach().float().cpu().numpy() for t in (source.logits, source.features, stats)]

    def _decide_host(
        self, source_logits: torch.Tensor, host: list[np.ndarray] | None, prompted: list[int] | None
    ) -> MethodOutput:
        """The decisions from a batch's source logits and what the operating point reads of them."""
        n = source_logits.shape[0]
        sites = self.sites if len(self.sites) == n else [self.site] * n
        logits = source_logits.clone()
        named = [-1] * n if prompted is None else prompted
        op, arrays = self.operating_point, self.arrays
        records: list[DecisionRecord | None] = []
        if op is None or arrays is None or host is None:
            reason = self._off_reason()
            for i in range(n):
                records.append(
                    DecisionRecord(NOT_ACCEPTED, reason=reason, site=sites[i] or "", prompted=named[i])
                )
        else:
            offsets = torch.zeros_like(logits)
            for i in range(n):  # arrival order: each image joins its site before the next is decided
                obs = arrays.observe(host[0][i], host[1][i], host[2][i])
                decision = op.step(obs, self.config.source_gate, sites[i])
                if not self.config.report_operating_point:
                    decision = decision.held_for_review()
                records.append(decision_record(decision, obs.margin, named[i]))
                # l_1 - l_0 becomes the margin over the site's threshold: the source ranking is
                # kept, only where the two classes are divided moves.
                offsets[i, 1] = decision.threshold
            logits = logits - offsets
        return MethodOutput(
            logits=logits,
            source_logits=source_logits,
            decisions=records,
            decision=records[0],
            diagnostics={"op_units": float(len(op.units())) if op is not None else 0.0},
        )

    def _off_reason(self) -> NoSiteRule:
        if not self.config.operating_point:
            return NoSiteRule.SWITCHED_OFF
        if self.reference is None:
            return NoSiteRule.NO_REFERENCE
        return NoSiteRule.MANY_CLASSES

    def _source_step(self, x: torch.Tensor, count: bool = True) -> tuple[MethodOutput, SourcePass]:
        """The source pass and its uncertainty map, without I-DiPT's prompt tuning (``count``: as a
        step of the method; the map step before a prompt step is not one)."""
        cfg = self.config
        with torch.no_grad():
            source = self.model.source_pass(x)
            uncertainty = mc_dropout_uncertainty(
                self.model, source, cfg.mc_passes, cfg.mc_dropout, self.generator
            )
            t_u, t_r = select_tokens(uncertainty, cfg.mask_percent)
        self.steps += x.shape[0] if count else 0
        out = MethodOutput(
            logits=source.logits,
            source_logits=source.logits,
            uncertainty=uncertainty,
            uncertain_tokens=t_u,
            reliable_tokens=t_r,
        )
        return out, source

    def recover(self) -> str:
        """Forget I-DiPT's image-specific history (the prompt bank); the site groups are kept."""
        super().recover()
        return "prompt bank cleared (image-specific prompts restart; site operating points kept)"

    # ------------------------------------------------------------------ state
    def state_tensors(self) -> dict[str, torch.Tensor]:
        tensors = super().state_tensors()
        tensors["rng.prompt"] = self.prompt_generator.get_state()
        if self.operating_point is not None:
            tensors.update(operating_point_state(self.operating_point)[0])
        return tensors

    def state_meta(self) -> dict[str, Any]:
        meta = super().state_meta()
        meta["operating_point"] = (
            operating_point_state(self.operating_point)[1] if self.operating_point is not None else None
        )
        return meta

    def load_state(self, tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> None:
        saved = meta.get("operating_point")
        if (saved is None) != (self.operating_point is None):
            raise ValueError(
                "the state's site operating points do not match this session "
                "(saved with and loaded without the model's source reference, or the other way round)"
            )
        super().load_state(tensors, meta)
        # A state saved before the prompt step had a generator of its own made both in one step.
        self.prompt_generator.set_state(tensors.get("rng.prompt", tensors["rng.cpu"]).to(torch.uint8).cpu())
        if self.operating_point is not None and saved is not None:
            load_operating_point(self.operating_point, tensors, saved)
