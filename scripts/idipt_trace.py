"""Trace I-DiPT's diagnostics image by image on generated data (drift, norms, gates, accuracy).

    python scripts/idipt_trace.py [--kind histo] [--site site1] [--images 80] [--every 5] [--set bank_size=10]
    python scripts/idipt_trace.py --data DATA --stream-seed 0 [--images 0] [--every 125] [--set lr=0.01]

Prints the loss, the norms of the enhanced prompts, the gate openings and the adapted vs source
probabilities every ``--every`` images, then the accuracy of both and the time per image. With
``--data`` it follows the benchmark's stream ``--stream-seed`` of that dataset (``--images 0``: the
whole stream) and ends with a per-domain table: adapted and source accuracy, predicted-positive
share and the true positive share, so a per-site bias shows.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine import Session
from engine.config import build_config, parse_assignments
from engine.data import open_dataset
from engine.data.readers import read_array
from engine.methods import IDiPTConfig
from lab.bench.protocol import StreamParams, dataset_stream, default_fragments
from lab.synth import generate_arrays

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
    parser.add_argument("--data", type=Path, default=None, help="follow a benchmark stream of this dataset")
    parser.add_argument("--stream-seed", type=int, default=0)
    args = parser.parse_args()

    config = build_config(IDiPTConfig, parse_assignments(IDiPTConfig, args.set))
    session = Session(args.model, method_config=config, seed=args.seed)
    domains: list[str] = []
    if args.data is None:
        imgs, labels = generate_arrays(
            args.kind, args.site, args.images, size=session.card.img_size, seed=args.data_seed
        )
        positive = 1
    else:
        imgs, labels, domains, positive = stream_arrays(args.data, session, args.stream_seed, args.images)
    preds: list[int] = []
    source_preds: list[int] = []
    hits_a = hits_s = 0
    start = time.perf_counter()
    for i, (img, label) in enumerate(zip(imgs, labels, strict=True)):
        r = session.step(img)
        hits_a += int(r.prediction == label)
        hits_s += int(r.source_prediction == label)
        preds.append(r.prediction)
        source_preds.append(r.source_prediction)
        d = r.diagnostics
        event = r.guard_event
        if i % args.every == 0 or not np.isfinite(d["loss"]) or event is not None:
            print(
                f"{i:5d} loss {d['loss']:.4f} phi_S {d['phi_specific_norm']:.3f} phi_I {d['phi_invariant_norm']:.3f} "
                f"gate {d['gate_mean_abs']:.4f}/{d['gate_max_abs']:.4f} p {np.round(r.probs, 3)} "
                f"src {np.round(r.source_probs, 3)}" + (f"  GUARD: {event.message}" if event else "")
            )
    n = len(labels)
    print(
        f"accuracy adapted {100 * hits_a / n:.1f} %, source {100 * hits_s / n:.1f} %; "
        f"{1000 * (time.perf_counter() - start) / n:.0f} ms/image"
    )
    if domains:
        per_domain(np.asarray(labels), np.asarray(preds), np.asarray(source_preds), domains, positive)


def stream_arrays(
    data: Path, session: Session, seed: int, limit: int
) -> tuple[np.ndarray, np.ndarray, list[str], int]:
    """The benchmark's stream ``seed`` of ``data`` (test split, δ 1, the default F), decoded."""
    ds = open_dataset(data)
    fragments, _ = default_fragments(ds)
    split_seed = int(session.card.training.get("split_seed", 0) or 0)
    stream = dataset_stream(
        ds, seed, StreamParams(fragments=fragments, split_seed=split_seed, limit=limit or None)
    )
    images = np.stack([read_array(it.path, session.card.img_size) for it in stream.items])
    labels = np.asarray([it.label for it in stream.items])
    return images, labels, [it.domain for it in stream.items], ds.positive_class


def per_domain(
    labels: np.ndarray, preds: np.ndarray, source: np.ndarray, domains: list[str], positive: int
) -> None:
    """Per-domain accuracy and predicted-positive share, adapted vs source, and the true share."""
    dom = np.asarray(domains)
    print("| domain | adapted | source | predicted positive (adapted / source / true) |")
    print("|---|---|---|---|")
    for d in sorted(set(domains)):
        m = dom == d
        print(
            f"| {d} | {100 * np.mean(preds[m] == labels[m]):.1f} | {100 * np.mean(source[m] == labels[m]):.1f} "
            f"| {100 * np.mean(preds[m] == positive):.1f} / {100 * np.mean(source[m] == positive):.1f} / "
            f"{100 * np.mean(labels[m] == positive):.1f} % |"
        )


if __name__ == "__main__":
    main()
