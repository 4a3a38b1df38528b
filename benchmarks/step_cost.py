"""Per-image cost of an I-DiPT step relative to SourceOnly inference (issue: engine core).

Measures, in one process on the same inputs, the median wall time per image of SourceOnly and of
a full I-DiPT step (prompt bank already full, so the graphs run) for a timm ViT (default
``vit_base_patch16_224`` at 224 px, random weights: nothing is downloaded), batch 1. The two are
timed interleaved, image by image, so machine noise hits both alike. Prints peak memory and, as
the last line, ``ratio R`` = I-DiPT / SourceOnly.

    python benchmarks/step_cost.py [--arch vit_base_patch16_224] [--img-size 224] [--images 12]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine import IDiPTConfig, LoadedModel, ModelCard, Session, select_device


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", default="vit_base_patch16_224")
    parser.add_argument("--img-size", type=int, default=224)
    parser.add_argument("--images", type=int, default=12, help="timed images per method")
    parser.add_argument("--device", default="auto")
    args = parser.parse_args()

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

    rng = np.random.default_rng(0)
    images = [
        rng.integers(0, 256, (args.img_size, args.img_size, 3), dtype=np.uint8) for _ in range(args.images)
    ]
    warmup = [
        rng.integers(0, 256, (args.img_size, args.img_size, 3), dtype=np.uint8)
        for _ in range(config.bank_size + 2)
    ]
    with torch.no_grad():
        source.step(warmup[0])
    for img in warmup:  # fills the prompt bank: the timed steps include PGD with the graphs
        idipt.step(img)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()

    t_source: list[float] = []
    t_idipt: list[float] = []
    for img in images:
        x = source.preprocess(img)
        _sync(device)
        start = time.perf_counter()
        with torch.no_grad():
            source.method.forward_and_adapt(x)
        _sync(device)
        t_source.append(time.perf_counter() - start)

        x = idipt.preprocess(img)
        _sync(device)
        start = time.perf_counter()
        idipt.method.forward_and_adapt(x)
        _sync(device)
        t_idipt.append(time.perf_counter() - start)

    med_s, med_i = statistics.median(t_source), statistics.median(t_idipt)
    print(
        f"device {device}; torch threads {torch.get_num_threads()}; {args.arch} at {args.img_size} px, batch 1"
    )
    print(f"SourceOnly  median {med_s * 1000:8.1f} ms/image  (n={len(t_source)})")
    print(f"I-DiPT step median {med_i * 1000:8.1f} ms/image  (n={len(t_idipt)}, bank full, graphs on)")
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak process RSS {rss_mb:.0f} MiB")
    if device.type == "cuda":
        print(f"peak CUDA memory allocated {torch.cuda.max_memory_allocated() / 2**20:.0f} MiB")
    print(f"ratio {med_i / med_s:.2f}")


if __name__ == "__main__":
    main()
