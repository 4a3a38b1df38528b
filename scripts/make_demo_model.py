"""Regenerate the demo source model in ``resources/demo/`` (deterministic for this torch/timm).

Generates synthetic histology (``f2tta synth histo --seed 0``) into a temporary folder, trains the
small ViT of :data:`engine.training.DEFAULT_MODEL_KWARGS` on site1's train split, writes
``model.safetensors`` + ``model.json`` and a ``README.md`` with the per-site test accuracies,
and prints them. Takes a few minutes on two CPU cores.

    python scripts/make_demo_model.py [--out-dir resources/demo] [--per-domain 1000] [--keep-data DIR]
    python scripts/make_demo_model.py --readme-only   # re-measure the saved model, rewrite README.md
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine.data import open_dataset  # noqa: E402
from engine.model.card import load_model, save_model  # noqa: E402
from engine.training import EpochStats, TrainConfig, evaluate, train_source  # noqa: E402
from lab.synth import generate_arrays, site_names, write_synth  # noqa: E402
from lab.synth.generate import default_workers  # noqa: E402

SEED = 0
SOURCE = "site1"
FRESH_N, FRESH_SEED = 200, 2024  # the fresh-sample check of tests/test_synth.py
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


def fresh_accuracies(path: Path, n: int = FRESH_N, seed: int = FRESH_SEED) -> dict[str, float]:
    """Accuracy per site on newly generated images (the check of tests/test_synth.py)."""
    loaded = load_model(path)
    return {
        site: evaluate(loaded, generate_arrays("histo", site, n, size=loaded.card.img_size, seed=seed))
        for site in site_names("histo")
    }


def _table(acc: dict[str, float]) -> str:
    rows = [f"| {d} | {100 * a:.1f} %{' (source)' if d == SOURCE else ''} |" for d, a in sorted(acc.items())]
    targets = [a for d, a in acc.items() if d != SOURCE]
    mean_t = 100 * sum(targets) / len(targets)
    rows.append(f"| mean of targets | {mean_t:.1f} % (drop {100 * acc[SOURCE] - mean_t:.1f} points) |")
    return "| site | accuracy |\n|---|---|\n" + "\n".join(rows)


def write_readme(out_dir: Path) -> str:
    """Measure the saved model (size, forward time, accuracies) and write ``README.md``; returns it."""
    path = out_dir / "model.safetensors"
    loaded = load_model(path)
    card, t = loaded.card, loaded.card.training
    kw = card.model_kwargs
    grid = card.img_size // int(kw.get("patch_size", 16))
    params = sum(p.numel() for p in loaded.model.parameters())
    facts = {
        "architecture": f"`{card.arch}` with `{json.dumps(kw)}`, {card.img_size} px input",
        "tokens": f"{grid} x {grid} patches + CLS",
        "parameters": f"{params / 1e6:.2f} M",
        "checkpoint": f"{path.stat().st_size / 1e6:.1f} MB (safetensors, float32)",
        "forward, 1 image, CPU": f"{forward_ms(path):.1f} ms (median of 100, {torch.get_num_threads()} threads)",
        "training time": f"{t['seconds'] / 60:.1f} min (2 CPU cores shared with other jobs at the time)",
        "fingerprint": f"`{loaded.fingerprint}`",
    }
    fact_rows = "\n".join(f"| {k} | {v} |" for k, v in facts.items())
    per_domain = t["dataset"]["synth"]["per_domain"]
    text = f"""# Demo source model

A small ViT trained from scratch on site1 of the generated histology data (`f2tta synth histo`),
shipped so that the app, the CLI and the tests have a source model without downloading anything.

Regenerate it (bit-identical for the same torch/timm versions and CPU thread count; the
fingerprint below is the check):

    python scripts/make_demo_model.py            # data + training + this README, minutes on 2 cores
    python scripts/make_demo_model.py --readme-only   # re-measure the saved model, rewrite this file

which runs the equivalent of

    f2tta synth histo --out DATA --per-domain {per_domain} --size 96 --seed {SEED}
    f2tta train-source --data DATA --source {SOURCE} --out resources/demo/model.safetensors \\
        --epochs {CONFIG.epochs} --patience {CONFIG.patience} --seed {SEED} --split-seed {SEED} --eval-domains

## Model

| | |
|---|---|
{fact_rows}

Training: Adam (lr {t["lr"]}, {t["schedule"]}), batch {t["batch_size"]}, {t["epochs"]} epochs, weights
of the best validation epoch ({t["best_epoch"]}, val acc {100 * t["val_acc"]:.1f} %), augmentation
{", ".join(k for k, v in t["augmentation"].items() if v)} (`model.json`, `training.augmentation`).

## Test accuracy per site

Each site's test split (25 % of {per_domain} images per site, split seed {t["split_seed"]}), measured
when the model was trained (`model.json`, `training.domain_test_acc`):

{_table(t["domain_test_acc"])}

On freshly generated images ({FRESH_N} per site, seed {FRESH_SEED}; what
`tests/test_synth.py::test_histo_calibration_source_side` checks):

{_table(fresh_accuracies(path))}

The paper's Camelyon17 shift for comparison: source about 98 %, targets 55-78 %.
"""
    (out_dir / "README.md").write_text(text)
    return text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", type=Path, default=ROOT / "resources" / "demo")
    parser.add_argument("--per-domain", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=default_workers())
    parser.add_argument(
        "--keep-data", type=Path, default=None, help="write the generated data here and keep it"
    )
    parser.add_argument("--readme-only", action="store_true", help="only re-measure the saved model")
    args = parser.parse_args()
    if not args.readme_only:
        train(args)
    print(write_readme(args.out_dir))
    return 0


def train(args: argparse.Namespace) -> None:
    """Generate the data, train, and save checkpoint + card."""
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

        res = train_source(ds, SOURCE, CONFIG, on_epoch=show, eval_domains=True)
    # The card names how the data was made, not the temporary folder it lived in.
    training = dict(res.card.training)
    training["dataset"] = {**training["dataset"], "root": f"f2tta synth histo --seed {SEED} (temporary)"}
    out = args.out_dir / "model.safetensors"
    save_model(res.model, dataclasses.replace(res.card, training=training), out)
    for written in (out, out.with_suffix(".json")):
        written.chmod(0o644)  # shipped resources, readable by everyone
    for d, a in sorted(res.domain_test_acc.items()):
        print(f"{d}: test acc {100 * a:.1f} %{' (source)' if d == SOURCE else ''}")


if __name__ == "__main__":
    raise SystemExit(main())
