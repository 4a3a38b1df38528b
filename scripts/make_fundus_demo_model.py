"""Regenerate the fundus demo model in ``resources/demo-fundus/`` with the documented commands.

Runs ``f2tta synth fundus --out DATA --seed 0`` and ``f2tta train-source --data DATA --source site1
--epochs 30 --patience 8 --seed 0`` (which also writes the source reference) in a temporary
folder, copies the checkpoint, its card and its reference in as ``model.*``, names the data in
the card instead of the temporary folder, and writes ``README.md`` with the per-site accuracy
measured on freshly generated images. Takes about ten minutes on two CPU cores.

    python scripts/make_fundus_demo_model.py [--out-dir resources/demo-fundus]
    python scripts/make_fundus_demo_model.py --readme-only   # re-measure the shipped model
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lab.demo import install_demo_model  # noqa: E402

SEED, SOURCE, EPOCHS, PATIENCE = 0, "site1", 30, 8
FRESH_N, FRESH_SEED = 200, 2024


def train(out_dir: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="f2tta-fundus-") as tmp:
        data, model = Path(tmp) / "fundus", Path(tmp) / "fundus.safetensors"
        cli = [sys.executable, "-m", "engine"]
        subprocess.run([*cli, "synth", "fundus", "--out", str(data), "--seed", str(SEED)], check=True)
        subprocess.run(
            [
                *cli, "train-source", "--data", str(data), "--source", SOURCE, "--epochs", str(EPOCHS),
                "--patience", str(PATIENCE), "--seed", str(SEED), "--out", str(model),
            ],
            check=True,
        )  # fmt: skip
        install_demo_model(model, out_dir, f"f2tta synth fundus --seed {SEED} (temporary)")


def write_readme(out_dir: Path) -> str:
    from engine.model.card import load_model
    from engine.training import evaluate
    from lab.synth import generate_arrays, site_names

    loaded = load_model(out_dir / "model.safetensors")
    card, training = loaded.card, loaded.card.training
    accuracy = {
        site: evaluate(loaded, generate_arrays("fundus", site, FRESH_N, size=card.img_size, seed=FRESH_SEED))
        for site in site_names("fundus")
    }
    rows = "\n".join(
        f"| {site} | {100 * acc:.1f} %{' (source)' if site == SOURCE else ''} |"
        for site, acc in accuracy.items()
    )
    text = f"""# Fundus demo model

A small ViT trained from scratch on site1 of the generated fundus photographs (`f2tta synth
fundus`, classes {", ".join(card.classes)}; positive class {card.classes[card.positive_class]}), shipped
beside the histology demo model (`resources/demo/`) so that the app runs fundus images out of the
box. Regenerate it with

    python scripts/make_fundus_demo_model.py            # data + training + this README
    python scripts/make_fundus_demo_model.py --readme-only

which runs

    f2tta synth fundus --out DATA --seed {SEED}
    f2tta train-source --data DATA --source {SOURCE} --epochs {EPOCHS} --patience {PATIENCE} --seed {SEED} \\
        --out fundus.safetensors

and copies `fundus.safetensors`, `fundus.json` and `fundus.reference.safetensors` in as `model.*`.

| | |
|---|---|
| architecture | `{card.arch}` with `{json.dumps(card.model_kwargs)}`, {card.img_size} px input |
| training | {training.get("epochs")} epochs, best epoch {training.get("best_epoch")}, validation accuracy {100 * training.get("val_acc", 0):.1f} % |
| site1 test split | {100 * training.get("test_acc", 0):.1f} % ({training.get("n_test")} images) |
| fingerprint | `{loaded.fingerprint}` |

Accuracy on freshly generated images ({FRESH_N} per site, seed {FRESH_SEED}):

| site | accuracy |
|---|---|
{rows}
"""
    (out_dir / "README.md").write_text(text)
    return text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", type=Path, default=ROOT / "resources" / "demo-fundus")
    parser.add_argument("--readme-only", action="store_true")
    args = parser.parse_args()
    if not args.readme_only:
        train(args.out_dir)
    print(write_readme(args.out_dir))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
