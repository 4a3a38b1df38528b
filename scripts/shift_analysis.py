"""What kind of shift does a source model see on each domain: lost ranking or moved threshold?

For every domain's test split (the benchmark's split) the frozen source model's outputs give:

* accuracy at the model's own decision (argmax), the figure SourceOnly reports;
* AUC of the positive class's probability: how well the model still *ranks* images there;
* accuracy at the domain's oracle threshold, the best single threshold on the positive-class
  probability chosen with the domain's labels: what re-calibrating the decision alone could reach;
* the share of images predicted positive against the share that is positive.

A domain with a high AUC but a low accuracy has lost only its operating point (a per-site bias
that a label-free method must detect and undo); a low AUC means the features themselves no longer
separate the classes. The oracle uses labels: it is an upper bound for analysis, never a method.

    python scripts/shift_analysis.py --data DATA --model MODEL.safetensors [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.data import open_dataset
from engine.data.readers import split_dataset
from engine.model.card import load_model
from engine.training import load_items, predict_logits
from lab.bench.metrics import oracle_threshold_accuracy, roc_auc


def analyse(data: Path, model: Path, split_seed: int | None = None) -> dict[str, dict[str, float]]:
    """Per-domain figures of the source model on the test split (see the module docstring)."""
    loaded = load_model(model)
    card = loaded.card
    ds = open_dataset(data)
    seed = split_seed if split_seed is not None else int(card.training.get("split_seed", 0) or 0)
    splits = split_dataset(ds, seed)
    out: dict[str, dict[str, float]] = {}
    for domain in ds.domains:
        x, y = load_items(splits[domain].test, card.img_size)
        probs = predict_logits(loaded.model, x, card.mean, card.std).softmax(-1).numpy()
        labels = y.numpy()
        pos = ds.positive_class
        score = probs[:, pos]
        is_pos = labels == pos
        out[domain] = {
            "images": float(len(labels)),
            "accuracy": float(100.0 * (probs.argmax(1) == labels).mean()),
            "auc": roc_auc(is_pos, score),
            "oracle_threshold_accuracy": oracle_threshold_accuracy(is_pos, score),
            "predicted_positive": float(100.0 * (probs.argmax(1) == pos).mean()),
            "positive": float(100.0 * is_pos.mean()),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--split-seed", type=int, default=None)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    result = analyse(args.data, args.model, args.split_seed)
    print("| domain | accuracy | AUC | oracle-threshold accuracy | predicted positive | positive |")
    print("|---|---|---|---|---|---|")
    for domain, r in result.items():
        print(
            f"| {domain} | {r['accuracy']:.1f} | {r['auc']:.1f} | {r['oracle_threshold_accuracy']:.1f} "
            f"| {r['predicted_positive']:.1f} % | {r['positive']:.1f} % |"
        )
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
