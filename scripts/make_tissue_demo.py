"""Regenerate the four-class demo: its model in ``resources/demo-tissue/`` and its folder in
``resources/demo-sets/tissue/``.

A model with more than two classes, so that the app shows out of the box how a grading or
tissue-type model is reviewed (issue 39, item 3). The images are ``tissue-4`` patches of
:mod:`lab.synth.many_classes` (normal, tumour, stroma, inflamed; 48 px), drawn from data seed 0,
which no suite uses. The model, a ViT of two blocks with 8-px patches, is trained with
``f2tta train-source`` on the training site (150 images per class; it writes the source reference
too). The demo folder is 160 images of the ``stain`` site (another stain's colours; 60 % normal),
JPEG quality 92, ground truth in ``labels.csv``, named in a shuffled order so that they arrive
mixed. It is a demo, not a result: the suite that measured this kind is
``benchmarks/suites/many-classes-7.json`` (``docs/benchmark.md``, "The seventh suite").

    python scripts/make_tissue_demo.py            # data, training, the folder and the README
    python scripts/make_tissue_demo.py --readme-only

Takes about two minutes on two CPU cores.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from many_classes_suite import train_source  # noqa: E402  (scripts/, beside this one)

from lab.demo import install_demo_model  # noqa: E402
from lab.synth.many_classes import KINDS, patch, site_classes, write_site  # noqa: E402

KIND, SEED, PER_CLASS, SITE, MECHANISM, REFERENCE = "tissue-4", 0, 150, "stain", "stain", 0.6
SIZE = 48
TRAINING = {"model_kwargs": {"patch_size": 8, "depth": 2}, "epochs": 12, "patience": 4, "batch_size": 32}
COUNT, QUALITY, FRESH_N, FRESH_SEED = 160, 92, 200, 2024
MECHANISMS = ("none", "stain", "blur", "dim-noisy", "scale", "fade:0.4")


def train(out_dir: Path) -> None:
    rng = np.random.default_rng([SEED, 0])
    classes = KINDS[KIND]
    with tempfile.TemporaryDirectory(prefix="f2tta-tissue-") as tmp:
        data, model = Path(tmp) / "tissue", Path(tmp) / "tissue.safetensors"
        write_site(
            str(data / "site0"), rng, KIND, np.repeat(np.arange(len(classes)), PER_CLASS), "none", "s0"
        )
        train_source(data, model, SIZE, TRAINING, SEED)
        install_demo_model(model, out_dir, f"lab.synth.many_classes {KIND}, data seed {SEED} (temporary)")


def write_set(out: Path, classes: tuple[str, ...]) -> None:
    """The demo folder: the ``stain`` site, shuffled names, labels in ``labels.csv``."""
    from PIL import Image

    rng = np.random.default_rng([SEED, 1])
    drawn = site_classes(rng, KIND, COUNT, REFERENCE)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    lines = ["file,label"]
    for i, label in enumerate(drawn):
        name = KINDS[KIND][int(label)]
        file = f"tissue_{SITE}_{i:03d}.jpg"
        Image.fromarray(patch(rng, KIND, name, MECHANISM)).save(out / file, quality=QUALITY)
        lines.append(f"{file},{name}")
    assert set(classes) == set(KINDS[KIND])
    (out / "labels.csv").write_text("\n".join(lines) + "\n")
    (out / "README.md").write_text(
        f"{COUNT} generated {KIND} patches of the {SITE} site (lab.synth.many_classes, data seed {SEED}, "
        f"{REFERENCE:.0%} normal), JPEG quality {QUALITY}, ground truth in labels.csv.\n"
        "Regenerate with `python scripts/make_tissue_demo.py`.\n"
    )


def write_readme(out_dir: Path) -> str:
    from engine.model.card import load_model
    from engine.training import evaluate

    loaded = load_model(out_dir / "model.safetensors")
    card, training = loaded.card, loaded.card.training
    index = {c: i for i, c in enumerate(card.classes)}
    rows = []
    for site in MECHANISMS:
        rng = np.random.default_rng([FRESH_SEED, MECHANISMS.index(site)])
        drawn = site_classes(rng, KIND, FRESH_N, 0.25)
        images = np.stack([patch(rng, KIND, KINDS[KIND][int(c)], site) for c in drawn])
        labels = np.array([index[KINDS[KIND][int(c)]] for c in drawn])
        accuracy = evaluate(loaded, (images, labels))
        rows.append(f"| {site if site != 'none' else 'site0 (training)'} | {100 * accuracy:.1f} % |")
    text = f"""# Four-class demo model (tissue types)

A small ViT trained from scratch on the training site of the generated `{KIND}` patches
(`lab/synth/many_classes.py`: classes {", ".join(card.classes)}; the site rules are set against
normal), shipped so that the app shows how a model with more than two classes is reviewed. Its
demo folder is `resources/demo-sets/tissue/` (the `stain` site). Regenerate both with

    python scripts/make_tissue_demo.py            # data + training + the folder + this README
    python scripts/make_tissue_demo.py --readme-only

| | |
|---|---|
| architecture | `{card.arch}` with `{json.dumps(card.model_kwargs)}`, {card.img_size} px input |
| training | {training.get("epochs")} epochs, best epoch {training.get("best_epoch")}, validation accuracy {100 * training.get("val_acc", 0):.1f} % |
| training site test split | {100 * training.get("test_acc", 0):.1f} % ({training.get("n_test")} images) |
| fingerprint | `{loaded.fingerprint}` |

Accuracy on freshly drawn images ({FRESH_N} per site, a quarter of each class, seed {FRESH_SEED}):

| site | accuracy |
|---|---|
{chr(10).join(rows)}
"""
    (out_dir / "README.md").write_text(text)
    return text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", type=Path, default=ROOT / "resources" / "demo-tissue")
    parser.add_argument("--set-dir", type=Path, default=ROOT / "resources" / "demo-sets" / "tissue")
    parser.add_argument("--readme-only", action="store_true")
    args = parser.parse_args()
    if not args.readme_only:
        train(args.out_dir)
        write_set(args.set_dir, KINDS[KIND])
    print(write_readme(args.out_dir))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
