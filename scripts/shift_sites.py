"""Sites made by shifts the generators do not have: corrupted fresh images of the source site.

A check of adaptation methods on kinds of shift that are not in ``f2tta synth``: the source site
of a generated dataset is copied unchanged (so the source model's split stays as it was trained),
and every *shift site* holds fresh images of the source site (drawn with another seed, so none was
seen in training) under one image corruption: sensor noise, defocus blur, JPEG compression, low
contrast, a brightness offset, a hue rotation, a display gamma, or a magnification change. These
are the corruption families of the common robustness benchmarks (ImageNet-C and its medical
variants), applied at one fixed, moderate strength each; nothing here was tuned to any method.

    python scripts/shift_sites.py --data data/histo --out data/histo-shifts [--per-site 1000] \
        [--shifts noise,blur,jpeg,contrast,brightness,hue,gamma,zoom] [--prevalence noise=0.2,...]
    f2tta bench --data data/histo-shifts --model resources/demo/model.safetensors ...
"""

from __future__ import annotations

import argparse
import io
import json
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
from PIL import Image, ImageFilter

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lab.synth.generate import SYNTH_JSON, generate_arrays, parse_prevalence

Shift = Callable[[np.ndarray, np.random.Generator], np.ndarray]


def _noise(img: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return np.clip(img + rng.normal(0.0, 18.0, img.shape), 0, 255).astype(np.uint8)


def _blur(img: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return np.asarray(Image.fromarray(img).filter(ImageFilter.GaussianBlur(1.6)))


def _jpeg(img: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    buf = io.BytesIO()
    Image.fromarray(img).save(buf, format="JPEG", quality=12)
    with Image.open(buf) as out:
        return np.asarray(out.convert("RGB"))


def _contrast(img: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    mean = img.reshape(-1, 3).mean(axis=0)
    return np.clip(mean + 0.55 * (img - mean), 0, 255).astype(np.uint8)


def _brightness(img: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return np.clip(img.astype(np.float32) + 40.0, 0, 255).astype(np.uint8)


def _hue(img: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    hsv = np.asarray(Image.fromarray(img).convert("HSV")).copy()
    hsv[..., 0] = (hsv[..., 0].astype(np.int32) + 20) % 256  # about 28 degrees
    return np.asarray(Image.fromarray(hsv, mode="HSV").convert("RGB"))


def _gamma(img: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return (255.0 * (img / 255.0) ** 1.7).astype(np.uint8)


def _zoom(img: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    h, w = img.shape[:2]
    crop = Image.fromarray(img).crop((w // 6, h // 6, w - w // 6, h - h // 6))
    return np.asarray(crop.resize((w, h), Image.Resampling.BILINEAR))


SHIFTS: dict[str, Shift] = {
    "noise": _noise,
    "blur": _blur,
    "jpeg": _jpeg,
    "contrast": _contrast,
    "brightness": _brightness,
    "hue": _hue,
    "gamma": _gamma,
    "zoom": _zoom,
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, type=Path, help="a dataset written by f2tta synth")
    parser.add_argument("--out", required=True, type=Path, help="dataset folder to write")
    parser.add_argument("--source", default="site1", help="the source site (copied unchanged)")
    parser.add_argument("--per-site", type=int, default=1000, help="fresh images per shift site")
    parser.add_argument("--shifts", default=",".join(SHIFTS), help="comma-separated shifts")
    parser.add_argument("--seed", type=int, default=100, help="seed of the fresh images (one more per shift)")
    parser.add_argument("--prevalence", default=None, help="SITE=P: positive share of a shift site")
    args = parser.parse_args()

    meta = json.loads((args.data / SYNTH_JSON).read_text(encoding="utf-8"))
    kind, size, classes = meta["kind"], int(meta["size"]), list(meta["classes"])
    shifts = [s.strip() for s in args.shifts.split(",") if s.strip()]
    unknown = [s for s in shifts if s not in SHIFTS]
    if unknown:
        parser.error(f"unknown shift(s) {', '.join(unknown)}; choose from {', '.join(SHIFTS)}")
    prevalence = parse_prevalence(args.prevalence) if args.prevalence else {}
    if args.out.exists():
        shutil.rmtree(args.out)
    shutil.copytree(args.data / args.source, args.out / args.source)
    counts: dict[str, dict[str, int]] = {}
    for k, name in enumerate(shifts):
        images, labels = generate_arrays(
            kind, args.source, args.per_site, size=size, seed=args.seed + k, share=prevalence.get(name)
        )
        rng = np.random.default_rng(args.seed + k)
        for c in classes:
            (args.out / name / c).mkdir(parents=True)
        for i, (img, label) in enumerate(zip(images, labels, strict=True)):
            Image.fromarray(SHIFTS[name](img, rng)).save(args.out / name / classes[label] / f"{i:06d}.png")
        counts[name] = {c: int((labels == j).sum()) for j, c in enumerate(classes)}
        print(f"  {name}: " + ", ".join(f"{c} {n}" for c, n in counts[name].items()))
    record = {
        "generator": "scripts/shift_sites.py",
        "kind": kind,
        "positive_class": meta.get("positive_class"),
        "classes": classes,
        "size": size,
        "source": {"data": str(args.data), "site": args.source, "synth": meta},
        "shifts": shifts,
        "seed": args.seed,
        "prevalence": prevalence,
        "counts": counts,
    }
    (args.out / SYNTH_JSON).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}: {args.source} (copied) and {len(shifts)} shift sites")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
