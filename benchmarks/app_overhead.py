"""How much the desktop app costs on top of the engine, and whether the UI stays responsive.

Runs the same image stream (a) through a headless ``Session.step`` loop and (b) through the app
(main window + controller + worker thread, offscreen), alternating the two ``--repeats`` times,
and prints:

* the ratio of the app's wall time to the headless loop's (target <= 1.10);
* the longest stall of the UI event loop while the engine works, measured with a QTimer that
  pings every 10 ms (target < 100 ms), plus the 99th percentile of the ping gaps.

Usage::

    QT_QPA_PLATFORM=offscreen python benchmarks/app_overhead.py [--model CKPT] [--stream DIR]
        [--images N] [--method idipt] [--device cpu] [--repeats 3]

Defaults: the demo model and stream under ``resources/demo`` when present, else a tiny generated
model and ``--images`` generated images (the figures then measure the app's fixed costs only).

The headless loop is timed twice, on the main thread (as the CLI runs it) and on a secondary
thread (as the app's worker runs it): with libgomp, torch's OpenMP team spins differently on the two
and on a busy 2-core machine the main-thread loop can be several times slower. The ratio uses the
faster of the two, so it never flatters the app.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

PING_MS = 10
DEMO_MODEL = ROOT / "resources" / "demo" / "model.safetensors"
DEMO_STREAMS = (ROOT / "resources" / "demo" / "stream", ROOT / "resources" / "demo" / "images")


def make_stream(directory: Path, count: int, size: int) -> Path:
    """``count`` images of a shifted site: generated histology (site4) when the engine's generator is
    there, else coloured noise."""
    import numpy as np
    from PIL import Image

    directory.mkdir(parents=True, exist_ok=True)
    try:
        from engine.data.synth import generate_arrays

        images, _ = generate_arrays("histo", "site4", count, size=size, seed=1)
    except ImportError:
        rng = np.random.default_rng(0)
        images = np.stack(
            [
                np.clip(np.array([200, 150, 190]) - 80 * (i % 2) + rng.normal(0, 30, (size, size, 3)), 0, 255)
                for i in range(count)
            ]
        ).astype(np.uint8)
    for i, img in enumerate(images):
        Image.fromarray(img).save(directory / f"img{i:04d}.png")
    return directory


def make_tiny_model(directory: Path) -> Path:
    from engine import ModelCard, save_model

    card = ModelCard(
        arch="vit_tiny_patch16_224",
        classes=("normal", "tumor"),
        img_size=64,
        model_kwargs={"depth": 4, "patch_size": 8},
    )
    path = directory / "tiny.safetensors"
    save_model(card.build(), card, path)
    return path


def headless(model: Path, stream: Path, method: str, device: str) -> float:
    """Seconds for the plain engine loop: read each image, step."""
    from engine import Session, list_images, read_image

    session = Session(model, method=method, device=None if device == "auto" else device)
    files = list_images(stream)
    start = time.perf_counter()
    for path in files:
        session.step(read_image(path))
    return time.perf_counter() - start


def headless_in_thread(model: Path, stream: Path, method: str, device: str) -> float:
    """The same loop on a secondary thread, as the app runs it (see the module notes)."""
    result: list[float] = []
    worker = threading.Thread(target=lambda: result.append(headless(model, stream, method, device)))
    worker.start()
    worker.join()
    return result[0]


def wait_for(signal: Any) -> None:
    """Run the Qt event loop until ``signal`` is emitted once."""
    from PySide6.QtCore import QEventLoop

    loop = QEventLoop()
    signal.connect(loop.quit)
    loop.exec()
    signal.disconnect(loop.quit)


def open_app(model: Path, stream: Path, method: str, device: str, home: Path, **settings: Any) -> Any:
    """The main window offscreen with ``stream`` opened and the session loaded; returns the controller."""
    from PySide6.QtWidgets import QApplication

    from app.controller import Controller
    from app.settings import AppSettings
    from app.state import Phase
    from app.views.main_window import MainWindow

    QApplication.instance() or QApplication([])
    window = MainWindow()
    app_settings = AppSettings(model=str(model), method=method, device=device, **settings)
    controller = Controller(window, app_settings, home=home, persist_settings=False)
    window.show()
    controller.load_session()
    wait_for(controller.sessionChanged)
    controller.open_folder(str(stream))
    wait_for(controller.sourceOpened)
    assert controller.phase is Phase.READY, controller.phase
    return controller


def through_app(model: Path, stream: Path, method: str, device: str, home: Path) -> tuple[float, list[float]]:
    """Seconds from Start to the run's end in the app, and the UI ping gaps (ms) meanwhile."""
    from PySide6.QtCore import QEventLoop, QTimer
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication([])
    controller = open_app(model, stream, method, device, home, autosave_every=0)

    gaps: list[float] = []
    last = [time.perf_counter()]

    def ping() -> None:
        now = time.perf_counter()
        gaps.append((now - last[0]) * 1000.0)
        last[0] = now

    timer = QTimer()
    timer.setInterval(PING_MS)
    timer.timeout.connect(ping)
    loop = QEventLoop()
    controller.runFinished.connect(loop.quit)
    start = time.perf_counter()
    last[0] = start
    timer.start()
    controller.start()
    loop.exec()
    elapsed = time.perf_counter() - start
    timer.stop()
    controller.shutdown()
    controller.window.close()
    app.processEvents()
    return elapsed, gaps


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path)
    parser.add_argument("--stream", type=Path)
    parser.add_argument("--images", type=int, default=60, help="generated images when no stream is given")
    parser.add_argument("--size", type=int, default=96)
    parser.add_argument("--method", default="idipt")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="f2tta-bench-"))
    model = args.model or (DEMO_MODEL if DEMO_MODEL.exists() else None)
    if model is None:
        print("demo model not found: using a tiny generated model")
        model = make_tiny_model(tmp)
    stream = args.stream or next((d for d in DEMO_STREAMS if d.is_dir()), None)
    if stream is None:
        print(f"demo stream not found: generating {args.images} images of {args.size}px")
        stream = make_stream(tmp / "stream", args.images, args.size)

    from PySide6.QtWidgets import QApplication

    from engine import list_images

    QApplication.instance() or QApplication([])
    count = len(list_images(stream))
    print(f"model {model}\nstream {stream} ({count} images), method {args.method}, device {args.device}")
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
    headless(model, stream, args.method, args.device)  # warm-up: imports, allocator, kernels

    plain, threaded, app_times, worst, p99 = [], [], [], [], []
    for r in range(args.repeats):
        plain.append(headless(model, stream, args.method, args.device))
        threaded.append(headless_in_thread(model, stream, args.method, args.device))
        elapsed, gaps = through_app(model, stream, args.method, args.device, tmp / f"home{r}")
        app_times.append(elapsed)
        gaps.sort()
        worst.append(max(gaps) if gaps else 0.0)
        p99.append(gaps[int(0.99 * (len(gaps) - 1))] if gaps else 0.0)
        best = min(plain[-1], threaded[-1])
        print(
            f"repeat {r + 1}: headless {plain[-1]:.2f} s (main thread), {threaded[-1]:.2f} s (worker thread); "
            f"app {elapsed:.2f} s ({count / elapsed:.1f} img/s); ratio {elapsed / best:.3f}; "
            f"longest UI stall {worst[-1]:.1f} ms, p99 gap {p99[-1]:.1f} ms"
        )
    # Conservative: the app is compared with the faster of the two headless loops of the same repeat.
    ratio = statistics.median(a / min(p, t) for a, p, t in zip(app_times, plain, threaded, strict=True))
    stall = max(worst)
    print(
        f"\nheadless median: {statistics.median(plain):.2f} s main thread, {statistics.median(threaded):.2f} s worker thread"
    )
    print(f"app median: {statistics.median(app_times):.2f} s")
    print(
        f"median app/headless time ratio: {ratio:.3f} (target <= 1.10) -> {'OK' if ratio <= 1.10 else 'OVER'}"
    )
    print(
        f"longest UI event-loop stall: {stall:.1f} ms (target < 100 ms) -> {'OK' if stall < 100 else 'OVER'}"
    )
    print(f"median p99 ping gap: {statistics.median(p99):.1f} ms (ping every {PING_MS} ms)")
    print(f"load average during the benchmark: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
