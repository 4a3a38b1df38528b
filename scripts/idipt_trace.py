"""Trace I-DiPT's diagnostics image by image on generated data (drift, norms, gates, accuracy).

    python scripts/idipt_trace.py [--kind histo] [--site site1] [--images 80] [--every 5] [--set bank_size=10]

Prints the loss, the norms of the enhanced prompts, the gate openings and the adapted vs source
probabilities every ``--every`` images, then the accuracy of both and the time per image.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine import IDiPTConfig, Session
from engine.cli._common import _coerce
from engine.data import generate_arrays

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=REPO / "resources" / "demo" / "model.safetensors")
    parser.add_argument("--kind", default="histo")
    parser.add_argument("--site", default="site1")
    parser.add_argument("--images", type=int, default=80)
    parser.add_argument("--data-seed", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--every", type=int, default=5)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()

    import dataclasses

    fields = {f.name: f for f in dataclasses.fields(IDiPTConfig)}
    overrides = {}
    for item in args.set:
        key, _, text = item.partition("=")
        overrides[key] = _coerce(fields[key], text)
    session = Session(args.model, method_config=IDiPTConfig(**overrides), seed=args.seed)
    imgs, labels = generate_arrays(
        args.kind, args.site, args.images, size=session.card.img_size, seed=args.data_seed
    )
    hits_a = hits_s = 0
    start = time.perf_counter()
    for i, (img, label) in enumerate(zip(imgs, labels, strict=True)):
        r = session.step(img)
        hits_a += int(r.prediction == label)
        hits_s += int(r.source_prediction == label)
        d = r.diagnostics
        if i % args.every == 0 or not np.isfinite(d["loss"]) or "guard" in d:
            print(
                f"{i:5d} loss {d['loss']:.4f} phi_S {d['phi_specific_norm']:.3f} phi_I {d['phi_invariant_norm']:.3f} "
                f"gate {d['gate_mean_abs']:.4f}/{d['gate_max_abs']:.4f} p {np.round(r.probs, 3)} "
                f"src {np.round(r.source_probs, 3)}" + (f"  GUARD: {d['guard']}" if "guard" in d else "")
            )
    n = len(labels)
    print(
        f"accuracy adapted {100 * hits_a / n:.1f} %, source {100 * hits_s / n:.1f} %; "
        f"{1000 * (time.perf_counter() - start) / n:.0f} ms/image"
    )


if __name__ == "__main__":
    main()
