"""Screenshots of review-certified adaptation (issue 18) in a real X window at 1280×800.

A generated histology site (``f2tta synth histo``, site4, 600 images in class sub-folders, seed 3)
is run through the demo model with I-DiPT+ and its guards loosened (Settings ▸ Advanced:
``min_separation`` 1, ``max_disagreement`` 0.5, ``min_edge`` 0, ``quantile`` 0.5, ``min_images``
20), so that label-free adaptation changes decisions in several site groups: it helps in two, and
in a third (41 images) every decision it changed is wrong. A reviewer then goes through the review
queue with the keyboard, marking each image with its true class (the digit keys), twenty times;
the harmed group turns reverted. Then undo and redo, a restart (the verdict is still there) and
the exported PDF, rendered with ``pdftoppm``. Uses the display helpers of
:mod:`scripts.app_screenshots` (the same packages).

Usage::

    python scripts/review_screenshots.py [OUT_DIR] [--size 1280x800]

The reviews are planned before they are made: the project's journal holds the rows the app made,
and the queue is replayed with the engine's own ``ReviewQueue`` and ``CertificateBook``, so the
script knows which image the app selects next and which key its true class is.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from app_screenshots import PYTHON, App, Display  # noqa: E402

from engine import CertificateBook, PredictionRow, ReviewQueue, source_hash  # noqa: E402

PROJECT = "Site 4"
LOOSE = {"min_separation": 1.0, "max_disagreement": 0.5, "min_edge": 0.0, "quantile": 0.5, "min_images": 20}
REVIEWS = 20


def make_site(tmp: Path) -> Path:
    """600 generated histology images of site4 in normal/ and tumor/ sub-folders."""
    out = tmp / "synth"
    subprocess.run(
        [
            PYTHON,
            "-m",
            "engine.cli",
            "synth",
            "histo",
            "--out",
            str(out),
            "--per-domain",
            "600",
            "--seed",
            "3",
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=True,
    )
    return out / "site4"


def journal_rows(home: Path, site: Path) -> list[PredictionRow]:
    """The rows the app made (the project's journal), in arrival order."""
    path = home / "profiles" / PROJECT / "state" / "rows" / f"{source_hash(str(site.resolve()))}.jsonl"
    rows = [
        PredictionRow.from_json(json.loads(line)) for line in path.read_text().splitlines() if line.strip()
    ]
    return sorted(rows, key=lambda r: r.index)


def plan_reviews(rows: list[PredictionRow], count: int) -> list[tuple[PredictionRow, str | None]]:
    """Each review in turn: the queue's first image (as the app orders it) and the verdict it brings."""
    book, queue = CertificateBook(), ReviewQueue()
    for i, row in enumerate(rows):
        book.note_image(row.site_group, row.changed)
        if row.changed:
            queue.add(i, row.site_group)
    plan = []
    for _ in range(count):
        head = queue.next(book.reviews_per_group(), book.decided_groups())
        if head is None:
            break
        row = rows[head]
        queue.remove(head)
        assert row.ground_truth is not None
        plan.append(
            (
                row,
                book.add_reviewed_image(
                    row.site_group, row.prediction, row.source_prediction, row.ground_truth
                ),
            )
        )
    return plan


def shoot(display: Display, out: Path, home: Path, site: Path) -> None:
    home.mkdir(parents=True, exist_ok=True)
    settings = {
        "method_config": LOOSE,
        "order": "interleaved",
        "reviewer": "Dr Ada Lovelace",
        "project": PROJECT,
    }
    (home / "settings.json").write_text(json.dumps(settings))
    app = App(display, home, [str(site), "--project", PROJECT, "--run"])
    app.wait_log("Run finished")
    app.focus()
    display.key("Escape")
    display.capture(out / "01_run_finished.png")
    plan = plan_reviews(journal_rows(home, site), REVIEWS)
    x, y, w, h = app.geometry()
    display.click(x + int(w * 0.62), y + int(h * 0.3))  # the table takes the keys
    display.key("q")
    display.capture(out / "02_review_queue.png")
    reverted = False
    for n, (row, verdict) in enumerate(plan, start=1):
        display.key(str(row.ground_truth + 1), delay_ms=30)  # the true class: 1 normal, 2 tumor
        if n == 5:
            display.capture(out / "03_queue_after_5_reviews.png")
        if verdict == "reverted" and not reverted:
            reverted = True
            app.wait_log("reverted after")
            display.capture(out / f"04_group_{row.site_group}_reverted_after_{n}_reviews.png")
    display.capture(out / "05_queue_after_20_reviews.png")
    display.run("xdotool", "mousemove", str(x + int(w * 0.54)), str(y + int(h * 0.205)))
    display.capture(out / "06_reverted_row_tooltip.png")
    display.key("alt+c")
    display.capture(out / "07_certificates_tab.png")
    display.key("ctrl+z")
    display.capture(out / "08_undo.png")
    display.key("ctrl+shift+z")
    display.capture(out / "09_redo.png")
    app.quit()

    app = App(display, home, [str(site), "--project", PROJECT, "--export", str(out / "report")])
    app.wait_log("Reports written")
    app.focus()
    display.key("alt+c")
    display.capture(out / "10_after_restart_certificates.png")
    display.click(x + int(w * 0.62), y + int(h * 0.35))
    display.key("q")
    display.capture(out / "11_after_restart_queue.png")
    display.key("ctrl+comma")
    time.sleep(1.5)
    display.capture(out / "12_settings_reviewer_name.png")
    display.key("Escape")
    app.quit()
    subprocess.run(
        ["pdftoppm", "-png", "-r", "80", str(out / "report" / "report.pdf"), str(out / "pdf")], check=True
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", type=Path, default=ROOT / "out" / "review-screenshots")
    parser.add_argument("--size", default="1280x800")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="f2tta-review-shots-"))
    site = make_site(tmp)
    display = Display(93, args.size)
    try:
        shoot(display, args.out / args.size, tmp / "home", site)
    finally:
        display.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
