"""One stream of the committed suite: every method and review variant replayed, one cell per site.

A stream is a (kind, source model, class mix, δ, protocol): each site's evaluation images drawn
at the class mix, cut into Dirichlet(δ) fragments and shuffled together (a drifting site and a
site read in scan order keep their own order), then replayed from cached source passes
(``lab.bench.replay``). The protocol says what the method is told: nothing (``free-form``,
the paper's), each image's site (``known-sites``: a folder or slide is a site), or each image's
site with two sites given as one folder (``mixed-folders``). Variants of ``idipt+``:

* ``idipt+``: the decisions as they were made (label-free, online);
* ``idipt+ final``: each site decided by the rule in use once the stream is done, no review
  (label-free, retroactive: the report written afterwards; the source model's by default, since
  candidates wait for certificates);
* ``idipt+ guarded``: each site decided by its last accepted operating point, unreviewed (what
  ``report_operating_point`` would report, retroactive; the second suite's ``idipt+ final``);
* ``idipt+ K=k`` (``noise=e`` when the simulated reviewer errs on a share ``e`` of its marks):
  after up to k reviews per site drawn by the site's ladder, retroactive; ``… online`` what a
  reader saw when. Where sites are told, a site the method split in two parts (the
  ``mixed-folders`` protocol's folder of two sites, say) shares its k reviews over its parts in
  proportion to their images, one ladder per part (``lab.reviewer``).

Each promoted or verified comparison is checked against the *true* labels of the images it
covered: one whose candidate was in truth no better there is a false verification.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from engine.data.readers import Dataset, open_dataset
from engine.model.card import LoadedModel, load_model
from engine.model.prompted_vit import PromptedViT
from engine.model.source_reference import SourceReference, find_reference
from engine.review.ladder import GUARDED, PROMOTED, VERIFIED
from lab.bench.endpoints import best_threshold_errors
from lab.bench.paired import Paired, paired
from lab.bench.plain_labels import plain_uses
from lab.bench.recipe import SuiteError
from lab.bench.replay import PassCache, SourcePasses, replay
from lab.bench.streams import HELP_THEN_HARM, ORDERED_MIXES, help_then_harm, interleave, resample_site
from lab.reviewer import ReviewedStream, review_stream

ADAPTIVE = "idipt+"  # the method whose sites, ladders and reviews the variants follow


@dataclass(frozen=True)
class StreamJob:
    kind: str  # the kind's name in the cells (``histo``, ``histo-v2``)
    model: str
    model_path: str
    eval_data: str
    passes_dir: str
    mix: float | str
    delta: float
    fragments: int
    images_per_site: int
    stream_seed: int
    source: str
    methods: tuple[str, ...]
    review_budgets: tuple[int, ...] = ()
    protocol: str = "free-form"
    mixed_pair: tuple[int, ...] = ()  # 1-based numbers of the two sites given as one folder
    reviewer_noise: tuple[float, ...] = (0.0,)
    review_at: float = 1.0
    review_moments: tuple[float, ...] = ()  # also a reviewer coming at these shares (no noise)
    plain_uses: bool = False  # also the plain uses of the same K labels


@dataclass(frozen=True)
class SuiteCell:
    """One site of one stream: each method and variant against the source model."""

    kind: str
    model: str
    mix: str
    delta: float
    site: str
    source: bool  # the model's source site
    results: dict[str, Paired]  # method or variant -> paired
    reviews: dict[str, int] = field(default_factory=dict)  # variant -> reviews answered at this site
    protocol: str = "free-form"
    best_errors: int = 0  # the errors of the best threshold on the source margin for these images

    def harmful(self, method: str) -> bool:
        return self.results[method].harmful

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "model": self.model,
            "mix": self.mix,
            "delta": self.delta,
            "protocol": self.protocol,
            "site": self.site,
            "source_site": self.source,
            "best_threshold_errors": self.best_errors,
            "methods": {m: r.to_json() for m, r in self.results.items()},
            **({"reviews": self.reviews} if self.reviews else {}),
        }


@dataclass(frozen=True)
class StreamResult:
    """The cells of one stream and what is counted per stream."""

    job: StreamJob
    cells: list[SuiteCell]
    units: int  # sites (named) or site groups (found by appearance) the adaptive method decided in
    verdicts: dict[str, tuple[int, int]]  # variant -> (comparisons promoted or verified, of which false)


def reviewed_name(
    method: str, budget: int, noise: float = 0.0, online: bool = False, at: float | None = None, use: str = ""
) -> str:
    """The result key of ``method``'s decisions after ``budget`` simulated reviews per site (``at``:
    the share of a site's images processed when the reviewer came, for a moment other than the
    recipe's ``review_at``; ``use``: a plain use of the same labels, ``lab.bench.plain_labels``,
    instead of the ladder)."""
    return (
        f"{method} K={budget}"
        + (f" {use}" if use else "")
        + (f" at={at:g}" if at is not None else "")
        + (f" noise={noise:g}" if noise else "")
        + (" online" if online else "")
    )


def site_sequences(ds: Dataset, job: StreamJob) -> tuple[list[np.ndarray], np.ndarray]:
    """Each site's images in the job's class mix (indices into ``ds.items``) and every item's class index."""
    labels = np.array([it.label for it in ds.items], dtype=np.int64)
    positive = labels == ds.positive_class
    domain_of = np.array([ds.domains.index(it.domain) for it in ds.items])
    seqs = []
    for d in range(len(ds.domains)):
        rng = np.random.default_rng(
            [job.stream_seed, d, 5]
        )  # a site's images: the same for every δ and model
        seqs.append(
            resample_site(np.flatnonzero(domain_of == d), positive, job.mix, job.images_per_site, rng)
        )
    return seqs, labels


def told_sites(job: StreamJob, domains: tuple[str, ...], site_of: np.ndarray) -> np.ndarray | None:
    """What the method is told of each image's site under the job's protocol (None: nothing)."""
    if job.protocol == "free-form":
        return None
    names: np.ndarray = np.array(domains, dtype=object)[site_of]
    if job.protocol == "mixed-folders":
        pair = [domains[number - 1] for number in job.mixed_pair]
        names = np.where(np.isin(names, pair), "+".join(pair), names)
    return names


def noisy(labels: np.ndarray, share: float, classes: int, rng: np.random.Generator) -> np.ndarray:
    """The labels with a share of them replaced by another class (a reviewer's mistakes)."""
    if share <= 0:
        return labels
    out = labels.copy()
    wrong = np.asarray(rng.random(labels.shape[0]) < share, dtype=bool)
    out[wrong] = (labels[wrong] + rng.integers(1, classes, int(wrong.sum()))) % classes
    return out


def false_verifications(review: ReviewedStream, unit: np.ndarray, truth: np.ndarray) -> tuple[int, int]:
    """``(promoted or verified, of which false)``: each judged against the true labels of the
    images its verdict speaks for (a promoted candidate's coverage, with the blocks that extended
    it: the candidate was in truth not better on their disagreements taken together)."""
    made = false = 0
    for u, ladder in review.ladders.items():
        y = truth[np.flatnonzero(unit == u)]
        for c in ladder.comparisons:
            if c.verdict not in (PROMOTED, VERIFIED) or not c.disagreements:
                continue
            at, before, after = ladder.covered_changes(c, review.images[u])
            gain = float(np.mean((after == y[at]).astype(float) - (before == y[at]).astype(float)))
            made += 1
            false += gain <= 0
    return made, false


def guarded_decisions(
    margin: np.ndarray, guarded: np.ndarray, unit: np.ndarray, source: np.ndarray
) -> np.ndarray:
    """Each unit's images at its last accepted operating point, unreviewed (the label-free rule
    the method reports with ``report_operating_point`` on, retroactive); the source's elsewhere."""
    out = source.astype(np.int64).copy()
    for u in np.unique(unit[unit >= 0]):
        at = np.flatnonzero(unit == u)
        accepted = at[np.isfinite(guarded[at])]
        if accepted.size:
            out[at] = (margin[at] > guarded[accepted[-1]]).astype(np.int64)
    return out


@dataclass(frozen=True)
class LoadedStream:
    """One job's stream, ready to replay: the model, its source reference and, in arrival order,
    the source passes, the true classes, each image's site (index into ``domains``) and the site
    the method is told (None: free form)."""

    domains: tuple[str, ...]
    loaded: LoadedModel
    ref: SourceReference | None
    passes: SourcePasses
    labels: np.ndarray
    site_of: np.ndarray
    told: np.ndarray | None


def load_stream(job: StreamJob) -> LoadedStream:
    """Read ``job``'s data, model and cached source passes and put its stream in arrival order.

    Raises:
        SuiteError: the model was trained with a source reference that is now missing or unusable.
    """
    torch.set_num_threads(1)
    ds = open_dataset(job.eval_data)
    loaded = load_model(job.model_path)
    ref = find_reference(loaded.path, loaded.fingerprint, loaded.card.num_classes, PromptedViT(loaded.model))
    if ref is None and "source_reference" in loaded.card.training:
        # Replayed without it, idipt+ would be scored as another method (every decision the source's).
        raise SuiteError(f"{Path(job.model_path).name}: its source reference is missing or unusable")
    all_passes: SourcePasses = PassCache(Path(job.passes_dir)).passes(
        Path(job.model_path), [it.path for it in ds.items]
    )
    seqs, labels = site_sequences(ds, job)
    if (
        job.mix == HELP_THEN_HARM
    ):  # the source model's errors first: any change near the boundary helps, then harms
        predicted = np.argmax(all_passes.logits, axis=1)
        seqs = [help_then_harm(seq, predicted[seq] == labels[seq]) for seq in seqs]
    order, site_of = interleave(
        seqs, job.delta, job.fragments, job.stream_seed, [job.mix in ORDERED_MIXES] * len(seqs)
    )
    domains = tuple(ds.domains)
    told = told_sites(job, domains, site_of)
    return LoadedStream(domains, loaded, ref, all_passes.take(order), labels[order], site_of, told)


def run_stream(job: StreamJob) -> StreamResult:
    """Replay every method and variant of ``job`` over its stream; one cell per site."""
    stream = load_stream(job)
    loaded, ref, passes, y, site_of, sites = (
        stream.loaded,
        stream.ref,
        stream.passes,
        stream.labels,
        stream.site_of,
        stream.told,
    )
    replayed = {
        m: replay(m, passes, ref, loaded, None, seed=job.stream_seed, sites=sites if m == ADAPTIVE else None)
        for m in job.methods
    }
    source_preds = replayed["source"].preds
    decisions = {m: r.preds for m, r in replayed.items() if m != "source"}
    reviewed: dict[str, np.ndarray] = {}
    verdicts: dict[str, tuple[int, int]] = {}
    units = 0
    adaptive = replayed.get(ADAPTIVE)
    if adaptive is not None:
        units = int(np.unique(adaptive.group[adaptive.group >= 0]).size)
        two_class = bool(np.isfinite(adaptive.margin).all()) and bool(adaptive.candidates)
        group = adaptive.group.astype(np.int64)

        def review(budget: int, marks: np.ndarray, at: float = job.review_at) -> ReviewedStream:
            return review_stream(
                adaptive.preds,
                source_preds,
                adaptive.margin,
                adaptive.threshold.astype(np.float64) if two_class else None,
                adaptive.candidates if two_class else {},
                group,
                marks,
                budget,
                at,
                seed=job.stream_seed,
                site=sites,  # a told site split in parts shares its K answers over them
            )

        decisions[f"{ADAPTIVE} final"] = review(0, y).decisions
        if two_class and GUARDED in adaptive.candidates:
            decisions[f"{ADAPTIVE} guarded"] = guarded_decisions(
                adaptive.margin, adaptive.candidates[GUARDED], group, source_preds
            )
        for budget in (b for b in job.review_budgets if b > 0):
            for noise in job.reviewer_noise:
                rng = np.random.default_rng([job.stream_seed, 31, budget, round(noise * 1000)])
                sim = review(budget, noisy(y, noise, loaded.card.num_classes, rng))
                key = reviewed_name(ADAPTIVE, budget, noise)
                decisions[key] = sim.decisions
                decisions[reviewed_name(ADAPTIVE, budget, noise, online=True)] = sim.online_decisions
                reviewed[key] = sim.reviewed
                verdicts[key] = false_verifications(sim, group, y)
            for at in (m for m in job.review_moments if m != job.review_at):
                sim = review(budget, y, at)
                key = reviewed_name(ADAPTIVE, budget, at=at)
                decisions[key] = sim.decisions
                decisions[reviewed_name(ADAPTIVE, budget, at=at, online=True)] = sim.online_decisions
                reviewed[key] = sim.reviewed
                verdicts[key] = false_verifications(sim, group, y)
            if job.plain_uses:
                for at in dict.fromkeys((job.review_at, *job.review_moments)):
                    plain = plain_uses(
                        source_preds,
                        adaptive.margin,
                        adaptive.candidates if two_class else {},
                        None,  # replayed from source passes: no prompted decision
                        group,
                        y,
                        budget,
                        at,
                        seed=job.stream_seed,
                        site=sites,
                        reported=adaptive.preds,
                    )
                    moment = None if at == job.review_at else at
                    for use, (retro, online) in plain.items():
                        decisions[reviewed_name(ADAPTIVE, budget, at=moment, use=use)] = retro
                        decisions[reviewed_name(ADAPTIVE, budget, at=moment, use=use, online=True)] = online
    margins = (
        passes.logits[:, 1].astype(np.float64) - passes.logits[:, 0] if passes.logits.shape[1] == 2 else None
    )
    mix = job.mix if isinstance(job.mix, str) else f"{job.mix:g}"
    cells = []
    for s, name in enumerate(stream.domains):
        mask = site_of == s
        best = (
            best_threshold_errors(margins[mask], y[mask])
            if margins is not None
            else int(np.sum(source_preds[mask] != y[mask]))
        )
        cells.append(
            SuiteCell(
                job.kind,
                job.model,
                mix,
                job.delta,
                name,
                name == job.source,
                {m: paired(y[mask], source_preds[mask], d[mask]) for m, d in decisions.items()},
                {m: int(r[mask].sum()) for m, r in reviewed.items()},
                job.protocol,
                best,
            )
        )
    return StreamResult(job, cells, units, verdicts)
