"""Per-image cost of I-DiPT and I-DiPT+ steps relative to SourceOnly inference.

Measures, in one process on the same inputs, the median wall time per image of SourceOnly, of a
full I-DiPT step (prompt bank already full, so the graphs run) and of a full I-DiPT+ step for a
timm ViT (default ``vit_base_patch16_224`` at 224 px, random weights: nothing is downloaded),
batch 1. The three are timed interleaved, image by image, so machine noise hits them alike.

I-DiPT+ runs with a source reference fitted on random images and no source gate, after a site
group has been filled to its capacity (1 000 images of two clusters whose threshold moved, so its
fits pass the guards and run every bootstrap). A step decides by the group's threshold; a group
is refitted when it has grown by a tenth (at most every 100 images at capacity), so the refit of
a full group is timed separately and its cost spread over the images between two refits is added
to the step ("amortised"); the refit alone is the worst single image. Prints peak memory and the
ratios; the last line is ``ratio R`` = I-DiPT / SourceOnly.

The ratio is a ratio of work where the threads have their cores. The work is counted too: the line
before the last gives the GFLOP that torch.profiler counts in one SourceOnly pass and one I-DiPT
step (matrix products and the patch embedding; attention is not counted), the same whatever the
load. For ViT-B/16 at 224 px a step is 167.0 GFLOP against SourceOnly's 33.7, ``work ratio``
4.956 (4.984 before d9853a5, whose prediction starts from the source pass's tokens and block 1's
attention heads, the same numbers bit for bit); for ViT-Tiny 5.56 (the graphs' width 512 weighs
more against its 192 channels). Where a ViT-B/16 step's time goes, in SourceOnly passes (one
thread, bank full, 4 images, load 5, the method's calls timed by wrappers): the source pass 0.94,
MC dropout 0.05, the prompt graphs before and after the Adam step 0.13, the two masked views of
138 tokens forward 1.32 and back to the prompts 1.51, the prompted prediction 1.05, Adam 0.01,
the rest 0.02 (5.03). Nothing in that is extra work: the views, the prediction and the source
pass are the method's, and the one saving left that is not bit for bit (the last block on the
CLS token alone, about 5 %) changes outputs by up to 1.4e-6, so it is not done. The wall ratio
at one thread follows the counted work within this machine's noise: the code before and after
d9853a5, interleaved (8 rounds, a worker per tree, load 3.7-6.4), measured 5.05 and 5.07 (per
round 4.69-5.43 and 4.37-5.56): the 0.6 % saved is below one round's noise; on a quieter machine
(load 0.5-1.0, 6 rounds) 5.02 and 4.93, and at two threads as the load rose from 2.3 to 3.0
5.20 and 5.31 (one round 8.1 for both). ``--threads 1 --images 6`` printed 4.74 (load 4.2-5.3)
and the default threads 6.12 (load 5.2-3.2), both with work ratio 4.956. With more threads
than free cores (torch's default on a shared machine) the wall ratio is not a ratio of work: on
this 2-core machine under a load of 4-5, one interleaved run measured 5.10 at one thread and
6.27 at two for the same code (5.12 and 5.87 for the code of c937494, when 5.13 was reported);
probably because the step's many short operations (its backward above all) wait for a
descheduled thread more often than SourceOnly's few long ones. The 4.94 / 5.27 / 5.89 of
earlier turns were such runs.
``--threads`` sets torch's threads; the load average is printed at the start and at the end.

Why the wall ratio stays above the counted work on a quiet machine (5.20 at one thread, load 1.0,
2026-11-29; the work ratio is 4.950 with attention counted too): ``--shares`` times each pass's
operations under torch.profiler. There (one thread, load 0.7-1.0) a step's matrix products took
4.88 times SourceOnly's and its attention 5.91 times, but the rest -- the element-wise operations
that count no FLOP: layer norms, GELUs, softmaxes and their gradients, the masks, the prompt graphs,
Adam -- 14.06 times (8.2 % of the step against 3.1 % of a source pass), which lifts the whole to
5.22. The backward through the frozen blocks to the prompts is what adds them, and it is the
method's; a ratio of 5.0 would need those operations cheaper, not less work (compiling the
prompted ViT's forward with inductor on the CPU did not: docs/benchmark.md, issue 41).

    python benchmarks/step_cost.py [--arch vit_base_patch16_224] [--img-size 224] [--images 12] [--batch B] [--threads N]
        [--shares]
"""

from __future__ import annotations

import argparse
import logging
import os
import resource
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine import LoadedModel, MethodOutput, ModelCard, Session
from engine.methods import IDiPTConfig
from engine.methods.idipt_plus import IDiPTPlus, IDiPTPlusConfig, Observation
from engine.model.source_reference import fit_reference
from engine.util.device import select_device


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def _timed_step(session: Session, imgs: list[np.ndarray], device: torch.device) -> tuple[float, MethodOutput]:
    """Seconds per image of one ``forward_and_adapt`` on ``imgs`` (preprocessing not timed) and its output."""
    x = session.to_input([session.prepare(img) for img in imgs])
    _sync(device)
    start = time.perf_counter()
    out = session.method.forward_and_adapt(x)
    _sync(device)
    return (time.perf_counter() - start) / len(imgs), out


def _counted_gflop(fn: Callable[[], object]) -> float:
    """GFLOP that torch.profiler counts in ``fn()``: matrix products, convolutions and a few element-wise
    operations, from their shapes (attention is not counted), so the same whatever the machine's load."""
    with profile(activities=[ProfilerActivity.CPU], with_flops=True) as prof:
        fn()
    return float(sum(event.flops for event in prof.key_averages())) / 1e9


#: The profiler's names of the matrix products (and the patch embedding's convolution) on the CPU.
_PRODUCTS = ("aten::addmm", "aten::mm", "aten::bmm", "aten::baddbmm", "aten::mkldnn_convolution")


def _time_shares(fn: Callable[[], object]) -> tuple[float, float, float]:
    """Milliseconds of self time in ``fn()``, by torch.profiler on the CPU: in matrix products, in
    attention (its fused kernel, forward and backward) and in every other operation."""
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    products = attention = total = 0.0
    for event in prof.key_averages():
        total += event.self_cpu_time_total
        if "attention" in event.key:
            attention += event.self_cpu_time_total
        elif event.key in _PRODUCTS:
            products += event.self_cpu_time_total
    return products / 1e3, attention / 1e3, (total - products - attention) / 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", default="vit_base_patch16_224")
    parser.add_argument("--img-size", type=int, default=224)
    parser.add_argument("--images", type=int, default=12, help="timed steps per method")
    parser.add_argument("--batch", type=int, default=1, help="images per step (I-DiPT+: 1 whatever this is)")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    parser.add_argument(
        "--shares",
        action="store_true",
        help="also the time each spends in matrix products, attention and the rest (torch.profiler, CPU)",
    )
    args = parser.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    print(f"load average at the start {os.getloadavg()[0]:.1f} ({os.cpu_count()} CPUs)")

    device = select_device(args.device)
    card = ModelCard(arch=args.arch, classes=("normal", "tumor"), img_size=args.img_size)
    torch.manual_seed(0)
    model = card.build().eval()
    for p in model.parameters():
        p.requires_grad_(False)
    loaded = LoadedModel(model, card, fingerprint="benchmark")
    config = IDiPTConfig()
    source = Session(loaded, method="source", device=device)
    idipt = Session(loaded, method="idipt", method_config=config, device=device)
    plus_config = IDiPTPlusConfig(source_gate=False)
    # The reference comes below, fitted on random images: silence the "no reference" warning.
    logging.getLogger("engine.methods.idipt_plus._method").setLevel(logging.ERROR)
    plus = Session(loaded, method="idipt+", method_config=plus_config, device=device)

    rng = np.random.default_rng(0)
    batch = max(1, args.batch)
    images = [
        [rng.integers(0, 256, (args.img_size, args.img_size, 3), dtype=np.uint8) for _ in range(batch)]
        for _ in range(args.images)
    ]
    warmup = [
        rng.integers(0, 256, (args.img_size, args.img_size, 3), dtype=np.uint8)
        for _ in range(config.bank_size + 2)
    ]
    with torch.no_grad():
        source.step(warmup[0])
        x_ref = torch.cat([source.preprocess(img) for img in warmup])
        labels = torch.arange(len(warmup)) % 2
        reference = fit_reference(source.model, [(x_ref, labels)], 2, loaded.fingerprint)
    plus.method.use_reference(reference)
    method = plus.method
    assert isinstance(method, IDiPTPlus) and method.operating_point is not None
    op = method.operating_point
    rng_fill = np.random.default_rng(1)
    dims = op.settings.feature_dims
    far = np.full(reference.appearance_basis.shape[0], 1e3)  # one group, far from every timed image
    for _ in range(op.settings.capacity):
        label = int(rng_fill.random() < 0.5)
        coords = rng_fill.normal(0.0, 0.8, dims)
        coords[0] += 3.0 if label else -3.0
        op.step(
            Observation(2.0 * (coords[0] - 3.5), coords, far + rng_fill.normal(0, 0.01, far.shape)), False
        )
    group = op.groups.groups[0]
    refits = []
    for _ in range(3):
        start = time.perf_counter()
        op._refit(group)
        refits.append(time.perf_counter() - start)
    refit_s = statistics.median(refits)
    images_per_refit = max(10, int(np.ceil(op.settings.refit * group.count)))
    for img in warmup:  # fills the prompt banks: the timed steps include PGD with the graphs
        idipt.step(img)
        plus.step(img)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()

    t_source: list[float] = []
    t_idipt: list[float] = []
    t_plus: list[float] = []
    for imgs in images:
        with torch.no_grad():
            t_source.append(_timed_step(source, imgs, device)[0])
        t_idipt.append(_timed_step(idipt, imgs, device)[0])
        t_plus.append(_timed_step(plus, imgs[:1], device)[0])

    med_s, med_i, med_p = statistics.median(t_source), statistics.median(t_idipt), statistics.median(t_plus)
    x_counted = source.to_input([source.prepare(img) for img in images[0]])
    with torch.no_grad():
        gflop_s = _counted_gflop(lambda: source.method.forward_and_adapt(x_counted))
    gflop_i = _counted_gflop(lambda: idipt.method.forward_and_adapt(x_counted))
    print(
        f"device {device}; torch threads {torch.get_num_threads()}; {args.arch} at {args.img_size} px, "
        f"batch {batch} (I-DiPT+ 1)"
    )
    print(f"SourceOnly  median {med_s * 1000:8.1f} ms/image  (n={len(t_source)})")
    print(f"I-DiPT step median {med_i * 1000:8.1f} ms/image  (n={len(t_idipt)}, bank full, graphs on)")
    amortised = med_p + refit_s / images_per_refit
    print(f"I-DiPT+ step median {med_p * 1000:7.1f} ms/image  (n={len(t_plus)})")
    print(
        f"I-DiPT+ refit of a full group ({group.count} images, fit {group.fit.reason if group.fit else None}) "
        f"{refit_s * 1000:.1f} ms, every {images_per_refit} images: amortised step {amortised * 1000:.1f} ms/image"
    )
    print(
        f"images per second: SourceOnly {1 / med_s:.1f}, I-DiPT {1 / med_i:.1f}, I-DiPT+ {1 / amortised:.1f} "
        "(amortised)"
    )
    print(f"load average at the end {os.getloadavg()[0]:.1f}")
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak process RSS {rss_mb:.0f} MiB")
    if device.type == "cuda":
        print(f"peak CUDA memory allocated {torch.cuda.max_memory_allocated() / 2**20:.0f} MiB")
    print(
        f"ratio I-DiPT+ / I-DiPT {amortised / med_i:.2f} (amortised; worst single image with a refit {(med_p + refit_s) / med_i:.2f})"
    )
    print(f"ratio I-DiPT+ / SourceOnly {amortised / med_s:.2f}")
    print(
        f"counted work per image (torch.profiler, attention not counted): SourceOnly {gflop_s / batch:.2f} GFLOP, "
        f"I-DiPT {gflop_i / batch:.2f} GFLOP: work ratio {gflop_i / gflop_s:.3f}"
    )
    if args.shares and device.type == "cpu":
        x_shared = source.to_input([source.prepare(img) for img in images[1]])
        with torch.no_grad():
            s_parts = _time_shares(lambda: source.method.forward_and_adapt(x_shared))
        i_parts = _time_shares(lambda: idipt.method.forward_and_adapt(x_shared))
        for name, parts in (("SourceOnly", s_parts), ("I-DiPT", i_parts)):
            print(
                f"{name} under the profiler: matrix products {parts[0]:.1f} ms, attention {parts[1]:.1f} ms, "
                f"the rest {parts[2]:.1f} ms ({parts[2] / sum(parts):.1%})"
            )
        r = [i / s for s, i in zip(s_parts, i_parts, strict=True)]
        print(
            f"ratios of time, I-DiPT / SourceOnly: matrix products {r[0]:.2f}, attention {r[1]:.2f}, "
            f"the rest {r[2]:.2f}; all {sum(i_parts) / sum(s_parts):.2f}"
        )
    print(f"ratio {med_i / med_s:.2f}")


if __name__ == "__main__":
    main()
