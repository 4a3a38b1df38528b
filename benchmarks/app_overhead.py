"""How much the desktop app costs on top of the engine, and whether the UI stays responsive.

Runs the same image stream (a) through a headless ``Session.step`` loop on the main thread of its
own process, as ``f2tta run`` runs it, and (b) through the app (main window + controller + worker
thread, offscreen) in its own process, alternating the two ``--repeats`` times, and prints:

* the ratio of the app's wall time to the headless loop's (target <= 1.10);
* the longest stall of the UI event loop while the engine works, measured with a QTimer that
  pings every 10 ms (target < 100 ms), and the 99th percentile of the ping gaps;
* the torch thread count inside the app's worker thread, and whether the GUI thread ever ran an
  OpenMP team of its own (it must not: see below).

Each measurement has a process to itself because of libgomp (torch's OpenMP on Linux): the
threads of every OpenMP team in a process count towards its "managed threads", and once they
outnumber the CPUs libgomp stops spin-waiting at its barriers and puts threads to sleep, which
on a quiet 2-core machine costs about half the speed of a small model. An earlier version of
this script ran the headless loop on the main thread and then the app in the same process: the
main thread's idle team throttled the worker's, and the app looked twice as slow as it is.

Usage::

    QT_QPA_PLATFORM=offscreen python benchmarks/app_overhead.py [--model CKPT] [--stream DIR]
        [--images N] [--method idipt] [--device cpu] [--repeats 3] [--variants default,OMP_WAIT_POLICY=PASSIVE]

Defaults: the demo model and the demo stream when present, else a tiny generated model and
``--images`` generated site-4 histology images. ``--variants`` measures both processes under each
environment variant listed (``benchmarks/_variants.py``), interleaved within each repeat, and
prints the figures of each variant.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _variants import parse_variants, variant_env

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

PING_MS = 10
WARMUP_IMAGES = 8
DEMO_MODEL = ROOT / "resources" / "demo" / "model.safetensors"
DEMO_STREAMS = (ROOT / "resources" / "demo" / "stream", ROOT / "resources" / "demo" / "images")


def make_stream(directory: Path, count: int, size: int, seed: int = 1) -> Path:
    """``count`` images of a shifted site: generated histology (site4)."""
    from PIL import Image

    from engine.data.synth import generate_arrays

    directory.mkdir(parents=True, exist_ok=True)
    images, _ = generate_arrays("histo", "site4", count, size=size, seed=seed)
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


def wait_for(signal: Any) -> None:
    """Run the Qt event loop until ``signal`` is emitted once."""
    from PySide6.QtCore import QEventLoop

    loop = QEventLoop()
    signal.connect(loop.quit)
    loop.exec()
    signal.disconnect(loop.quit)


def open_app(model: Path, stream: Path, method: str, device: str, home: Path, **settings: Any) -> Any:
    """The main window offscreen with ``stream`` opened and the session loaded; returns its StudioApp."""
    from PySide6.QtWidgets import QApplication

    from app.core.phase import Phase
    from app.core.settings import AppSettings
    from app.shell.studio_app import StudioApp
    from app.views.main_window import MainWindow

    QApplication.instance() or QApplication([])
    window = MainWindow()
    app_settings = AppSettings(model=str(model), method=method, device=device, **settings)
    studio = StudioApp(window, app_settings, home=home, persist_settings=False)
    window.show()
    studio.controller.load_session()
    wait_for(studio.sessionChanged)
    studio.controller.open_folder(str(stream))
    wait_for(studio.sourceOpened)
    assert studio.controller.phase is Phase.READY, studio.controller.phase
    return studio


def _gui_thread_teams() -> int:
    """Threads started by the GUI thread that used CPU (libgomp names its team threads after the
    thread that starts the team; the worker's are named after ``f2tta-engine``)."""
    main = os.getpid()
    busy = 0
    for tid in os.listdir("/proc/self/task"):
        try:
            comm = Path(f"/proc/self/task/{tid}/comm").read_text().strip()
            fields = Path(f"/proc/self/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks = int(fields[11]) + int(fields[12])
        if int(tid) != main and comm == Path(f"/proc/{main}/comm").read_text().strip() and ticks > 50:
            busy += 1
    return busy


def child_headless(model: Path, stream: Path, warmup: Path, method: str, device: str) -> dict[str, Any]:
    """The plain engine loop on the main thread (read each image, step), after a warm-up."""
    from engine import Session, list_images, read_image  # first, as in f2tta run (engine/_omp.py)

    # isort: split
    import torch

    session = Session(model, method=method, device=None if device == "auto" else device)
    for path in list_images(warmup):
        session.step(read_image(path))
    files = list_images(stream)
    start = time.perf_counter()
    for path in files:
        session.step(read_image(path))
    return {"seconds": time.perf_counter() - start, "threads": torch.get_num_threads()}


def child_app(model: Path, stream: Path, warmup: Path, method: str, device: str) -> dict[str, Any]:
    """Start to end of a run in the app, with the UI ping gaps meanwhile (after a warm-up run)."""
    from PySide6.QtCore import QEventLoop, QTimer
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication([])
    home = Path(tempfile.mkdtemp(prefix="f2tta-overhead-"))
    threads: list[int] = []

    def run(folder: Path, profile: str) -> tuple[float, list[float]]:
        studio = open_app(model, folder, method, device, home, autosave_every=0, profile=profile)
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
        studio.runFinished.connect(loop.quit)
        start = time.perf_counter()
        last[0] = start
        timer.start()
        studio.controller.start()
        loop.exec()
        elapsed = time.perf_counter() - start
        timer.stop()
        threads.append(_worker_threads(studio))
        studio.shutdown()
        studio.window.close()
        app.processEvents()
        return elapsed, gaps

    run(warmup, "warmup")
    elapsed, gaps = run(stream, "measured")
    return {"seconds": elapsed, "gaps": gaps, "threads": threads[-1], "gui_teams": _gui_thread_teams()}


def _worker_threads(studio: Any) -> int:
    """``torch.get_num_threads()`` as seen on the worker thread (asked through a queued call)."""
    import torch
    from PySide6.QtCore import QMetaObject, QObject, Qt, Slot

    class Probe(QObject):
        value = -1

        @Slot()
        def ask(self) -> None:
            Probe.value = torch.get_num_threads()

    probe = Probe()
    probe.moveToThread(studio.engine_thread)
    QMetaObject.invokeMethod(probe, "ask", Qt.ConnectionType.BlockingQueuedConnection)
    return Probe.value


def measure(
    kind: str, args: argparse.Namespace, model: Path, stream: Path, warmup: Path, env: dict[str, str]
) -> dict[str, Any]:
    """One measurement in a fresh process with the environment ``env``."""
    cmd = [sys.executable, __file__, "--child", kind, "--model", str(model), "--stream", str(stream)]
    cmd += ["--warmup", str(warmup), "--method", args.method, "--device", args.device]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env)
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--model", type=Path)
    parser.add_argument("--stream", type=Path)
    parser.add_argument("--warmup", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--child", choices=("headless", "app"), help=argparse.SUPPRESS)
    parser.add_argument("--images", type=int, default=70, help="generated images when no stream is given")
    parser.add_argument("--size", type=int, default=96)
    parser.add_argument("--method", default="idipt")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--variants", default="default", help="comma-separated: default or NAME=VALUE")
    args = parser.parse_args()
    if args.child:
        run = child_headless if args.child == "headless" else child_app
        print(json.dumps(run(args.model, args.stream, args.warmup, args.method, args.device)))
        return 0

    tmp = Path(tempfile.mkdtemp(prefix="f2tta-bench-"))
    model = args.model or (DEMO_MODEL if DEMO_MODEL.exists() else make_tiny_model(tmp))
    stream = args.stream or next((d for d in DEMO_STREAMS if d.is_dir()), None)
    if stream is None:
        stream = make_stream(tmp / "stream", args.images, args.size)
    warmup = make_stream(tmp / "warmup", WARMUP_IMAGES, args.size, seed=2)
    count = len(list(stream.glob("*.png")))
    print(f"model {model}\nstream {stream} ({count} images), method {args.method}, device {args.device}")
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")

    variants = parse_variants(args.variants)
    figures: dict[str, dict[str, list[float]]] = {
        v: {"ratios": [], "stalls": [], "p99s": [], "headless": [], "app": []} for v in variants
    }
    for r in range(args.repeats):
        for variant in variants:
            env = variant_env(variant, variants)
            _repeat(f"{variant}, repeat {r + 1}", args, model, stream, warmup, env, figures[variant])
    for variant, fig in figures.items():
        print(f"\n{variant}: headless s {_list(fig['headless'])}, app s {_list(fig['app'])}")
        _summary(fig["ratios"], fig["stalls"], fig["p99s"])
    return 0


def _list(values: list[float]) -> str:
    return ", ".join(f"{v:.2f}" for v in values)


def _repeat(
    label: str,
    args: argparse.Namespace,
    model: Path,
    stream: Path,
    warmup: Path,
    env: dict[str, str],
    fig: dict[str, list[float]],
) -> None:
    """One headless and one app measurement with ``env``, appended to ``fig`` and printed."""
    plain = measure("headless", args, model, stream, warmup, env)
    app = measure("app", args, model, stream, warmup, env)
    gaps = sorted(app["gaps"])
    ratios, stalls, p99s = fig["ratios"], fig["stalls"], fig["p99s"]
    fig["headless"].append(plain["seconds"])
    fig["app"].append(app["seconds"])
    ratios.append(app["seconds"] / plain["seconds"])
    stalls.append(max(gaps) if gaps else 0.0)
    p99s.append(gaps[int(0.99 * (len(gaps) - 1))] if gaps else 0.0)
    print(
        f"{label}: headless {plain['seconds']:.2f} s ({plain['threads']} torch threads), "
        f"app {app['seconds']:.2f} s ({app['threads']} torch threads in the worker, "
        f"{app['gui_teams']} OpenMP threads of the GUI thread); ratio {ratios[-1]:.3f}; "
        f"longest UI stall {stalls[-1]:.1f} ms, p99 gap {p99s[-1]:.1f} ms; "
        f"load {os.getloadavg()[0]:.2f}"
    )


def _summary(ratios: list[float], stalls: list[float], p99s: list[float]) -> None:
    ratio = statistics.median(ratios)
    print(
        f"median app/headless time ratio: {ratio:.3f} (target <= 1.10) -> {'OK' if ratio <= 1.10 else 'OVER'}"
    )
    stall = max(stalls)
    print(
        f"longest UI event-loop stall: {stall:.1f} ms (target < 100 ms) -> {'OK' if stall < 100 else 'OVER'}"
    )
    print(f"median p99 ping gap: {statistics.median(p99s):.1f} ms (ping every {PING_MS} ms)")


if __name__ == "__main__":
    raise SystemExit(main())
