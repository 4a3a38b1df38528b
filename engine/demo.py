"""The embedded demo: a generated multi-site histology stream through the shipped demo model.

``python -m engine.demo`` (``make demo``) writes fresh synthetic H&E-like patches from five sites
(never seen in training: another seed), cuts them into the paper's free-form stream (Dirichlet
fragments of every site, shuffled), runs the headless job (``f2tta run``) on them with the default method (I-DiPT+,
``--method idipt`` for the paper's), and prints the accuracy of the adapted and of the source model
per site. Everything is generated
here; nothing is downloaded.
"""

from __future__ import annotations

import argparse
import csv
import shutil
import sys
from pathlib import Path

from engine.bench.protocol import build_stream
from engine.cli import main as cli_main
from engine.data import open_dataset, write_synth
from engine.methods import DEFAULT_METHOD
from engine.model.card import read_card

REPO = Path(__file__).resolve().parents[1]
DEMO_MODEL = REPO / "resources" / "demo" / "model.safetensors"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine.demo", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(".demo"), help="working folder (replaced)")
    parser.add_argument("--model", type=Path, default=DEMO_MODEL)
    parser.add_argument("--per-domain", type=int, default=100, help="images per site")
    parser.add_argument("--seed", type=int, default=1, help="data and stream seed (the demo model used 0)")
    parser.add_argument("--method", default=DEFAULT_METHOD)
    args = parser.parse_args(argv)

    card = read_card(args.model.with_suffix(".json"))
    data, stream_dir = args.out / "data", args.out / "stream"
    for folder in (data, stream_dir, args.out / "state"):
        shutil.rmtree(folder, ignore_errors=True)
    for old in args.out.glob("predictions.*"):  # the last demo's outputs: this run writes them anew
        old.unlink()
    print(f"generating {args.per_domain} images per site (synth histo, seed {args.seed}) in {data}")
    write_synth("histo", data, per_domain=args.per_domain, size=card.img_size, seed=args.seed, overwrite=True)
    ds = open_dataset(data)
    by_domain = {d: tuple(it for it in ds.items if it.domain == d) for d in ds.domains}
    stream = build_stream(by_domain, seed=args.seed, delta=1.0, fragments=5)
    stream_dir.mkdir(parents=True)
    truth: dict[str, tuple[str, str]] = {}
    for k, item in enumerate(stream.items):
        name = f"{k:05d}_{item.domain}{Path(item.path).suffix}"
        shutil.copyfile(item.path, stream_dir / name)
        truth[name] = (item.domain, ds.classes[item.label])
    print(f"stream of {len(stream)} images in {len(stream.fragments)} fragments -> {stream_dir}")

    preds = args.out / "predictions.csv"
    code = cli_main(
        [
            "run",
            "--model",
            str(args.model),
            "--input",
            str(stream_dir),
            "--state",
            str(args.out / "state"),
            "--out",
            str(preds),
            "--method",
            args.method,
            "--seed",
            str(args.seed),
        ]
    )
    if code != 0:
        return code
    with preds.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    print(f"\n{args.method} against the source model, per site ({len(rows)} images)")
    print(f"{'site':<12} {'images':>6} {'adapted %':>10} {'source %':>9}")
    totals = [0, 0, 0]
    target_acc: list[tuple[float, float]] = []
    for domain in ds.domains:
        mine = [r for r in rows if truth[r["item"]][0] == domain]
        if not mine:
            continue
        hit_a = sum(r["prediction"] == truth[r["item"]][1] for r in mine)
        hit_s = sum(r["source_prediction"] == truth[r["item"]][1] for r in mine)
        totals = [totals[0] + len(mine), totals[1] + hit_a, totals[2] + hit_s]
        acc_a, acc_s = 100 * hit_a / len(mine), 100 * hit_s / len(mine)
        tag = " (source)" if domain == card.source_domain else ""
        if domain != card.source_domain:
            target_acc.append((acc_a, acc_s))
        print(f"{domain + tag:<12} {len(mine):>6} {acc_a:>10.1f} {acc_s:>9.1f}")
    if target_acc:
        mean_a = sum(a for a, _ in target_acc) / len(target_acc)
        mean_s = sum(s for _, s in target_acc) / len(target_acc)
        print(f"{'target mean':<12} {'':>6} {mean_a:>10.1f} {mean_s:>9.1f}")
    print(
        f"{'all':<12} {totals[0]:>6} {100 * totals[1] / totals[0]:>10.1f} {100 * totals[2] / totals[0]:>9.1f}"
    )
    print(f"\npredictions: {preds}   state: {args.out / 'state'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
