"""What batching changes in I-DiPT (``docs/method.md``, "Batches"): B = 1 against B on one stream.

Runs a method (default ``idipt``) along stream ``--seed`` of a dataset (the benchmark's protocol:
each domain's test split cut into Dirichlet fragments, shuffled) once image by image and once in
batches of ``--batch`` B, from the same model and seed, and compares image by image: the share of
equal decisions, accuracy against the labels (all images and target domains), and the uncertainty
maps -- the Pearson correlation of each image's two maps (its mean and 5th percentile) and the
overlap of the two T_U sets. Accuracy over the benchmark's eight streams is ``f2tta bench
--batch``'s; this script adds the maps, which the benchmark does not keep.

    python benchmarks/batch_agreement.py --data DATA --model MODEL [--batch 16] [--seed 0] [--limit N]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine import Predicted, Session, StreamItem, StreamRun, load_model
from engine.data.readers import open_dataset, read_array
from lab.bench.protocol import StreamParams, dataset_stream, default_fragments


def _run(
    model: Path, method: str, items: list[StreamItem], size: int, batch: int
) -> tuple[list[Predicted], float]:
    torch.manual_seed(0)
    session = Session(load_model(model), method=method, seed=0)

    def reader(item: StreamItem) -> np.ndarray:
        assert item.path is not None
        return read_array(item.path, size)

    start = time.perf_counter()
    got = [
        o
        for o in StreamRun(session, items, reader, batch=batch, keep_images=False).outcomes()
        if isinstance(o, Predicted)
    ]
    return got, time.perf_counter() - start


def _pearson(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.ravel() - a.mean(), b.ravel() - b.mean()
    denom = float(np.sqrt((a * a).sum() * (b * b).sum()))
    return float((a * b).sum() / denom) if denom > 0 else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--method", default="idipt")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0, help="the stream's seed")
    parser.add_argument("--limit", type=int, default=None, help="the stream's first N images (default: all)")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    card = load_model(args.model).card
    ds = open_dataset(args.data)
    fragments, _ = default_fragments(ds)
    stream = dataset_stream(ds, args.seed, StreamParams(fragments=fragments, limit=args.limit))
    items = [
        StreamItem(i, str(i), str(it.path), path=it.path, ground_truth=it.label)
        for i, it in enumerate(stream.items)
    ]
    domains = np.array([it.domain for it in stream.items])
    labels = np.array([it.label for it in stream.items])
    one, t_one = _run(args.model, args.method, items, card.img_size, 1)
    many, t_many = _run(args.model, args.method, items, card.img_size, args.batch)
    assert [p.item.key for p in one] == [p.item.key for p in many]

    pred_one = np.array([p.step.prediction for p in one])
    pred_many = np.array([p.step.prediction for p in many])
    target = domains != card.source_domain
    print(
        f"{args.method} on {args.data}, stream seed {args.seed}: {len(one)} images, {target.sum()} from target domains"
    )
    print(f"  time: B=1 {t_one:.0f} s, B={args.batch} {t_many:.0f} s ({t_one / t_many:.2f}x)")
    print(f"  equal decisions: {np.mean(pred_one == pred_many) * 100:.2f} %")
    for name, mask in (("all images", np.ones_like(target)), ("target domains", target)):
        a1 = np.mean(pred_one[mask] == labels[mask]) * 100
        ab = np.mean(pred_many[mask] == labels[mask]) * 100
        print(f"  accuracy, {name}: B=1 {a1:.2f} %, B={args.batch} {ab:.2f} % ({ab - a1:+.2f} points)")
    maps = [(p.step.uncertainty, q.step.uncertainty) for p, q in zip(one, many, strict=True)]
    if all(a is not None and b is not None for a, b in maps):
        r = np.array([_pearson(a, b) for a, b in maps if a is not None and b is not None])
        overlap = np.array(
            [
                len(set(p.step.uncertain_tokens.tolist()) & set(q.step.uncertain_tokens.tolist()))
                / max(1, len(p.step.uncertain_tokens))
                for p, q in zip(one, many, strict=True)
            ]
        )
        print(
            f"  uncertainty maps, per-image Pearson r: mean {np.nanmean(r):.4f}, median {np.nanmedian(r):.4f}, "
            f"5th percentile {np.nanpercentile(r, 5):.4f}; T_U overlap mean {overlap.mean() * 100:.1f} %"
        )


if __name__ == "__main__":
    main()
