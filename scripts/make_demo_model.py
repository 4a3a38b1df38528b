"""Regenerate the demo source model in ``resources/demo/`` (deterministic for this torch/timm).

Generates synthetic histology (``f2tta synth histo --seed 0``) into a temporary folder, trains the
small ViT of :data:`engine.training.DEFAULT_MODEL_KWARGS` on site1's train split, writes
``model.safetensors`` + ``model.json`` and a ``README.md`` with the per-site test accuracies,
and prints them. Takes a few minutes on two CPU cores.

    python scripts/make_demo_model.py [--out-dir resources/demo] [--per-domain 1000] [--keep-data DIR]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine.data import open_dataset, write_synth  # noqa: E402
from engine.data.synth import default_workers  # noqa: E402
from engine.model_card import load_model, save_model  # noqa: E402
from engine.training import EpochStats, TrainConfig, train_source  # noqa: E402

SEED = 0
SOURCE = "site1"
CONFIG = TrainConfig(epochs=30, patience=8, batch_size=64, lr=1e-3, seed=SEED, split_seed=SEED)


def forward_ms(path: Path, repeats: int = 100) -> float:
    """Median wall time of one 1-image forward pass of the saved model, in milliseconds."""
    loaded = load_model(path)
    x = torch.randn(1, 3, loaded.card.img_size, loaded.card.img_size)
    times = []
    with torch.no_grad():
        for _ in range(10):
            loaded.model(x)
        for _ in range(repeats):
            t = time.perf_counter()
            loaded.model(x)
            times.append(time.perf_counter() - t)
    return 1000 * statistics.median(times)


def readme(
    card_training: dict[str, object], acc: dict[str, float], facts: dict[str, str], per_domain: int
) -> str:
    rows = "\n".join(
        f"| {d} | {100 * a:.1f} %{' (source)' if d == SOURCE else ''} |" for d, a in sorted(acc.items())
    )
    targets = [a for d, a in acc.items() if d != SOURCE]
    mean_t = 100 * sum(targets) / len(targets)
    fact_rows = "\n".join(f"| {k} | {v} |" for k, v in facts.items())
    return f"""# Demo source model

A small ViT trained from scratch on site1 of the generated histology data, shipped so that the app,
the CLI and the tests have a source model without downloading anything.

Regenerate it (deterministic for a given torch/timm version and CPU thread count):

    python scripts/make_demo_model.py

which runs the equivalent of

    f2tta synth histo --out DATA --per-domain {per_domain} --size 96 --seed {SEED}
    f2tta train-source --data DATA --source {SOURCE} --out resources/demo/model.safetensors \\
        --epochs {CONFIG.epochs} --patience {CONFIG.patience} --seed {SEED} --eval-domains

## Model

| | |
|---|---|
{fact_rows}

Training: Adam (lr {CONFIG.lr}, linear warm-up then cosine), batch {CONFIG.batch_size}, best of
{card_training["epochs"]} epochs by validation accuracy (epoch {card_training["best_epoch"]}), augmentation
flips, quarter turns and colour jitter (see `model.json`, `training.augmentation`).

## Test accuracy per site

Each site's test split (25 % of {per_domain} images, seeded split {SEED}):

| site | accuracy |
|---|---|
{rows}

Mean over the target sites: {mean_t:.1f} % (a drop of {100 * acc[SOURCE] - mean_t:.1f} points from the
source), the kind of shift the paper reports on Camelyon17 (source about 98 %, targets 55-78 %).
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", type=Path, default=ROOT / "resources" / "demo")
    parser.add_argument("--per-domain", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=default_workers())
    parser.add_argument(
        "--keep-data", type=Path, default=None, help="write the generated data here and keep it"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="f2tta-demo-") as tmp:
        data = args.keep_data or Path(tmp) / "histo"
        start = time.perf_counter()
        write_synth(
            "histo",
            data,
            per_domain=args.per_domain,
            size=96,
            seed=SEED,
            workers=args.workers,
            overwrite=True,
        )
        print(f"generated {5 * args.per_domain} images in {time.perf_counter() - start:.0f} s", flush=True)
        ds = open_dataset(data)

        def show(s: EpochStats) -> None:
            print(
                f"epoch {s.epoch:3d}  loss {s.loss:.4f}  train acc {100 * s.train_acc:5.1f}%  "
                f"val acc {100 * s.val_acc:5.1f}%  {s.seconds:.1f}s{' *' if s.best else ''}",
                flush=True,
            )

        out = args.out_dir / "model.safetensors"
        start = time.perf_counter()
        res = train_source(ds, SOURCE, CONFIG, on_epoch=show, eval_domains=True)
        train_s = time.perf_counter() - start
    # The card names how the data was made, not the temporary folder it lived in.
    training = dict(res.card.training)
    training["dataset"] = {**training["dataset"], "root": f"f2tta synth histo --seed {SEED} (temporary)"}
    save_model(res.model, dataclasses.replace(res.card, training=training), out)
    for written in (out, out.with_suffix(".json")):
        written.chmod(0o644)  # shipped resources, readable by everyone
    params = sum(p.numel() for p in res.model.parameters())
    kw = res.card.model_kwargs
    grid = res.card.img_size // int(kw.get("patch_size", 16))
    facts = {
        "architecture": f"`{res.card.arch}` with `{kw}`, {res.card.img_size} px input",
        "tokens": f"{grid} x {grid} patches + CLS",
        "parameters": f"{params / 1e6:.2f} M",
        "checkpoint": f"{out.stat().st_size / 1e6:.1f} MB (safetensors, float32)",
        "forward, 1 image, CPU": f"{forward_ms(out):.1f} ms (median of 100, {torch.get_num_threads()} threads)",
        "training time": f"{train_s / 60:.1f} min on {torch.get_num_threads()} CPU threads",
    }
    (args.out_dir / "README.md").write_text(readme(training, res.domain_test_acc, facts, args.per_domain))
    print()
    for k, v in facts.items():
        print(f"{k}: {v}")
    for d, a in sorted(res.domain_test_acc.items()):
        print(f"{d}: {100 * a:.1f} %{' (source)' if d == SOURCE else ''}")
    print(f"wrote {out}, {out.with_suffix('.json')} and {args.out_dir / 'README.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
