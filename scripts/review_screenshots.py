"""Screenshots of the site review in a real X window (Xvfb + openbox, driven with xdotool).

The shipped histology demo set (160 images of one site, labels.csv) is run with the demo model and
the default method; the app is quit and started again on the same folder (its rows restored); Q
starts a comparison and opens its queue; a reviewer who knows the true classes marks each queued
image with the digit keys until the first comparison is decided; then the Certificates tab, the
table with the rule in use, undo, and the exported PDF rendered with ``pdftoppm``.

The reviews are planned before they are made: the project's journal holds the rows the app made,
and the queue is replayed with the engine's own ``SiteReview`` (the component the app uses), so the
script knows which image the app selects next and which key is its true class.

With ``--later`` the folder holds the first half of the demo set when it is run and reviewed;
the other half arrives afterwards and is run: its rows are shown with the promoted candidate's
call, marked provisional (07), until the queue's answers on them cover them (08).

``--model M --folder DIR`` take another model and a folder with a ``labels.csv`` (file, label)
instead (a model with more than two classes: its site rules, issue 39).

Usage::

    python scripts/review_screenshots.py [OUT_DIR] [--size 1280x800] [--mixed | --later]
        [--model M --folder DIR]

Needs what ``scripts/app_screenshots.py`` needs (its notes list the packages).
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from app_screenshots import App, Display  # noqa: E402

from engine import PredictionRow, SiteReview, open_folder  # noqa: E402
from engine.io.sources import source_hash  # noqa: E402

MAX_REVIEWS = 60


def journal_rows(home: Path, source_id: str) -> list[PredictionRow]:
    """The rows the app's project journal kept for ``source_id`` (last copy of each image)."""
    (rows_file,) = home.glob(f"profiles/*/state/rows/{source_hash(source_id)}.jsonl")
    found: dict[str, PredictionRow] = {}
    for line in rows_file.read_text().splitlines():
        try:
            row = PredictionRow.from_json(json.loads(line))
        except (ValueError, KeyError, TypeError):
            continue
        found[row.key] = row
    return sorted(found.values(), key=lambda r: r.index)


def plan(folder: Path, home: Path, classes: tuple[str, ...]) -> tuple[list[int], int]:
    """The digit keys a reviewer who knows the truth presses, in the queue's order, until the first
    comparison is decided; and how many images the queue held."""
    truth = {r["file"]: classes.index(r["label"]) for r in csv.DictReader((folder / "labels.csv").open())}
    source = open_folder(folder, classes)
    review = SiteReview(None, source.source_id, len(classes))
    review.open(journal_rows(home, source.source_id))
    keys: list[int] = []
    first = review.next_item()
    queued = len(review.queue())
    index = first
    while index is not None and len(keys) < MAX_REVIEWS:
        label = truth[review.rows[index].name]
        keys.append(label + 1)
        review.set_mark(review.rows[index].key, label)
        if any(c.verdict != "open" for c in review.comparisons()):
            break
        index = review.next_item()
    print(f"planned {len(keys)} reviews of a queue of {queued}; rule in use after them: {review.in_use()}")
    return keys, queued


def plan_cover(folder: Path, home: Path, classes: tuple[str, ...]) -> list[int]:
    """The digit keys that answer the queue until no row is provisional, replayed on a copy of the
    project's review folder (the project itself is not touched)."""
    truth = {r["file"]: classes.index(r["label"]) for r in csv.DictReader((folder / "labels.csv").open())}
    source = open_folder(folder, classes)
    (review_dir,) = home.glob("profiles/*/review")
    with tempfile.TemporaryDirectory() as scratch:
        copy = shutil.copytree(review_dir, Path(scratch) / "review")
        review = SiteReview(copy, source.source_id, len(classes))
        review.open(journal_rows(home, source.source_id))
        keys: list[int] = []
        while review.provisional().any() and len(keys) < MAX_REVIEWS:
            index = review.next_item()
            if index is None:
                break
            label = truth[review.rows[index].name]
            keys.append(label + 1)
            review.set_mark(review.rows[index].key, label)
        review.close()
    print(f"planned {len(keys)} more reviews; provisional rows left: {int(review.provisional().sum())}")
    return keys


def mixed_folder(demo: Path, folder: Path) -> Path:
    """The demo set's images and 120 generated images of histology site4 (v1: another scanner and
    stain), renamed in a seeded random interleaving, with their labels."""
    import numpy as np
    from PIL import Image

    from lab.synth.generate import generate_arrays

    rows = list(csv.DictReader((demo / "labels.csv").open()))
    images: list[tuple[str, Image.Image, str]] = [
        (r["label"], Image.open(demo / r["file"]).convert("RGB"), "demo") for r in rows
    ]
    arrays, labels = generate_arrays("histo", "site4", 120, size=96, seed=11)
    images += [
        (("normal", "tumor")[int(y)], Image.fromarray(a), "site4")
        for a, y in zip(arrays, labels, strict=True)
    ]
    folder.mkdir(parents=True)
    order = np.random.default_rng(11).permutation(len(images))
    with (folder / "labels.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["file", "label"])
        for k, i in enumerate(order):
            label, image, _ = images[i]
            name = f"slide_{k:03d}.png"
            image.save(folder / name)
            writer.writerow([name, label])
    return folder


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("out", nargs="?", default="out/review-screenshots", type=Path)
    parser.add_argument("--size", default="1280x800")
    parser.add_argument(
        "--mixed",
        action="store_true",
        help="a folder that mixes the demo set with 120 generated images of another histology site "
        "(v1 site4), interleaved: the method splits it in parts, each reviewed on its own",
    )
    parser.add_argument(
        "--later",
        action="store_true",
        help="the folder's second half arrives after the review: its rows are provisional until covered",
    )
    parser.add_argument("--model", type=Path, help="another model (its card beside it)")
    parser.add_argument("--folder", type=Path, help="another folder of images with a labels.csv")
    args = parser.parse_args()
    out: Path = args.out / args.size
    classes: tuple[str, ...] = ("normal", "tumor")
    model_args: list[str] = []
    if args.model is not None:
        from engine.model.card import read_card

        classes = tuple(read_card(args.model.with_suffix(".json")).classes)
        model_args = ["--model", str(args.model.resolve())]
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        demo = ROOT / "resources" / "demo-sets" / "histology"
        if args.folder is not None:
            folder = shutil.copytree(args.folder, tmp / args.folder.name)
        elif args.mixed:
            folder = mixed_folder(demo, tmp / "two-scanners")
        else:
            folder = shutil.copytree(demo, tmp / "site2-histology")
        later: list[str] = []
        if args.later:  # the second half waits outside the folder until the review is done
            names = sorted(p.name for p in folder.iterdir() if p.suffix != ".csv")
            later = names[len(names) // 2 :]
            (tmp / "later").mkdir()
            for name in later:
                (folder / name).rename(tmp / "later" / name)
        home = tmp / "home"
        display = Display(97, args.size)
        try:
            app = App(display, home, [*model_args, str(folder), "--run"])
            app.wait_log("Run finished")
            app.quit()
            keys, _ = plan(folder, home, classes)
            app = App(display, home, [*model_args, str(folder)])
            app.wait_log("earlier session")
            app.focus()
            display.key("q")
            display.capture(out / "01_queue_opened.png")
            for n, key in enumerate(keys):
                display.key(str(key), delay_ms=30)
                if n == 4:
                    display.key("alt+c")
                    display.capture(out / "02_certificates_under_review.png")
                    app.focus()
            time.sleep(1.0)
            display.capture(out / "03_comparison_decided_banner.png")
            display.key("alt+c")
            display.capture(out / "04_certificates_decided.png")
            display.key("ctrl+z")
            display.capture(out / "05_after_undo.png")
            display.key("ctrl+shift+z")
            app.quit()
            if args.later:
                for name in later:
                    (tmp / "later" / name).rename(folder / name)
                app = App(display, home, [*model_args, str(folder), "--run"])
                app.wait_log("Run finished")
                app.focus()
                display.capture(out / "07_later_images_provisional.png")
                app.quit()
                more = plan_cover(folder, home, classes)
                app = App(display, home, [*model_args, str(folder)])
                app.wait_log("earlier session")
                app.focus()
                display.key("q")
                for key in more:
                    display.key(str(key), delay_ms=30)
                time.sleep(1.0)
                display.capture(out / "08_later_images_covered.png")
                app.quit()
            app = App(display, home, [*model_args, str(folder), "--export", str(out / "report")])
            app.wait_log("Reports written")
            display.capture(out / "06_reopened_reports_written.png")
            app.quit()
        finally:
            display.close()
    pdf = out / "report" / "report.pdf"
    if pdf.exists():
        subprocess.run(["pdftoppm", "-png", "-r", "70", str(pdf), str(out / "pdf")], check=True)
    for path in sorted(out.glob("*.png")):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
