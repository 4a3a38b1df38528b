"""What an export costs for a model with many classes (issue 29, case 4).

A valid card with 400 classes (the card's limit is 10 000) and 12 labelled images took 285 s and
3.4 GB to export: the figures were dense class-by-class matrices, laid out in full in the PDF.
The figures now cover the classes shown (every class of a model with up to 20, else the classes
present), a matrix is drawn for at most 12 of them (the most frequent confusions otherwise) and
the JSON keeps the non-zero cells of a large one, so the cost follows the images, not the classes
squared.

Each class count runs in a fresh process (so its peak memory is its own): the run model is given
12 labelled images of a site, the report data is gathered as the app gathers it, the tables are
staged and the PDF is rendered and committed, as an export in the app does. Printed per class
count: the seconds of each part, the process's peak resident memory and the files' sizes.

Usage::

    QT_QPA_PLATFORM=offscreen python benchmarks/export_classes.py [--classes 2,400,10000] [--images 12]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


def child(classes: int, images: int) -> dict[str, Any]:
    """One export of ``images`` labelled images under a card of ``classes`` classes."""
    import numpy as np
    from PySide6.QtGui import QGuiApplication

    from app.core.messages import ItemResult, SessionInfo
    from app.core.open_session import OpenSession
    from app.core.overlay import Overlay
    from app.core.projects import ProjectInfo
    from app.core.run_model import RunModel
    from app.core.settings import AppSettings
    from app.reports.data import collect_report_data
    from app.reports.pdf import PdfRender, commit_pdf
    from app.worker.exporting import TabularExport
    from engine import FolderSource, ModelCard, PredictionRow, StreamItem

    QGuiApplication.instance() or QGuiApplication([])
    tmp = Path(tempfile.mkdtemp(prefix="f2tta-classes-"))
    names = tuple(f"class{k:05d}" for k in range(classes))
    card = ModelCard(arch="vit_tiny_patch16_224", classes=names, img_size=32, model_kwargs={"depth": 2})
    rng = np.random.default_rng(0)
    truths = rng.integers(0, classes, images)
    items = tuple(
        StreamItem(i, f"k{i}", f"img{i}.png", path=tmp / f"img{i}.png", ground_truth=int(truths[i]))
        for i in range(images)
    )
    source = FolderSource(tmp, "name", items, "labels.csv")
    model = RunModel()
    model.open(source, 0, (), 1, names)
    overlay = Overlay.from_step((4, 4), rng.random(16), np.array([1]), np.array([2]))
    preview = rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)
    results = []
    for i in range(images):
        prediction = int(truths[i]) if i % 3 else int(rng.integers(0, classes))
        row = PredictionRow(
            index=i,
            position=i,
            key=f"k{i}",
            name=f"img{i}.png",
            prediction=prediction,
            prediction_label=names[prediction],
            confidence=0.9,
            positive_prob=0.1,
            source_prediction=int(truths[i]),
            source_label=names[int(truths[i])],
            source_confidence=0.8,
            uncertainty=0.01,
            ground_truth=int(truths[i]),
            truth_label=names[int(truths[i])],
            seconds=0.01,
        )
        results.append(ItemResult(row, overlay, preview, np.full(classes, 1.0 / classes, np.float32)))
    model.add_results(results)
    model.flush(force=True)
    state = OpenSession(AppSettings(), tmp, persist_settings=False)
    state.info = SessionInfo(
        card, "m.safetensors", "idipt", "cpu", "mf", "sf", images, {}, ProjectInfo("p", tmp)
    )
    times: dict[str, float] = {}
    before_mb = int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    start = time.perf_counter()
    data = collect_report_data(model, state, lambda: b"")
    assert data is not None
    times["gather"] = time.perf_counter() - start
    start = time.perf_counter()
    export = TabularExport(tmp / "out", data, lambda _position: preview, threading.Event())
    for _ in export.steps():
        pass
    times["tables"] = time.perf_counter() - start
    start = time.perf_counter()
    render = PdfRender(export.data)
    for _ in render.steps():
        pass
    assert export.staged is not None
    written = commit_pdf(export.staged, render.result)
    times["pdf"] = time.perf_counter() - start
    assert not isinstance(written, str), written
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    return {
        "classes": classes,
        "images": images,
        "seconds": times,
        "peak_mb": peak_mb,
        "before_mb": before_mb,
        "figure_classes": len(model.figures().dataset.classes),
        "files_kb": {p.name: round(p.stat().st_size / 1024, 1) for p in written},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--classes", default="2,400,10000", help="comma-separated class counts")
    parser.add_argument("--images", type=int, default=12)
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(child(args.child, args.images)))
        return 0
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
    for classes in (int(c) for c in args.classes.split(",")):
        cmd = [sys.executable, __file__, "--child", str(classes), "--images", str(args.images)]
        done = subprocess.run(cmd, capture_output=True, text=True, check=True)
        r = json.loads(done.stdout.strip().splitlines()[-1])
        s = r["seconds"]
        total = sum(s.values())
        print(
            f"{classes} classes, {r['images']} images: {total:.2f} s (gather {s['gather']:.2f}, "
            f"tables {s['tables']:.2f}, PDF {s['pdf']:.2f}), RSS {r['before_mb']:.0f} MB before the "
            f"export, peak {r['peak_mb']:.0f} MB, "
            f"figures over {r['figure_classes']} classes, files (kB) {r['files_kb']}; "
            f"load {os.getloadavg()[0]:.2f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
