"""How much the desktop app costs on top of the engine, and whether the UI stays responsive.

Runs the same image stream (a) through a headless ``Session.step`` loop on the main thread of its
own process, as ``f2tta run`` runs it, and (b) through the app (main window at 1280×800 +
controller + worker thread, offscreen) in its own process, alternating the two ``--repeats``
times, then (c) one long run of ``--long-images`` images through the app alone, and prints:

* the ratio of the app's wall time to the headless loop's (target <= 1.05);
* the longest stall of the UI event loop while the engine works, measured with a QTimer that
  pings every 10 ms (target < 50 ms), the 99th percentile of the ping gaps, and the three longest
  stalls with the event that caused each (a queued call to a controller handler is named after
  the handler; ``Paint``/``UpdateRequest`` are repaints): ``benchmarks/_stalls.py``;
* for the long run, the longest stall while the first 100 rows arrived and while the last 100
  did: per-image UI work that grows with the rows already shown shows as the second outgrowing
  the first (the long run uses ``--long-method``, by default ``source``: the fastest engine step
  hands the UI the most rows per second, the hardest case for the window);
* the torch thread count inside the app's worker thread, and whether the GUI thread ever ran an
  OpenMP team of its own (it must not: see below).

``--handlers`` (debug) also prints, for each app run, the GUI thread's events by name: how many
took over 1 ms, the longest and the total.

Each measurement has a process to itself because of libgomp (torch's OpenMP on Linux): the
threads of every OpenMP team in a process count towards its "managed threads", and once they
outnumber the CPUs libgomp stops spin-waiting at its barriers and puts threads to sleep, which
on a quiet 2-core machine costs about half the speed of a small model. An earlier version of
this script ran the headless loop on the main thread and then the app in the same process: the
main thread's idle team throttled the worker's, and the app looked twice as slow as it is.

Usage::

    QT_QPA_PLATFORM=offscreen python benchmarks/app_overhead.py [--model CKPT] [--stream DIR]
        [--images N] [--method idipt] [--device cpu] [--repeats 3] [--variants default,OMP_WAIT_POLICY=PASSIVE]
        [--long-images 2000] [--long-method source] [--handlers]

Defaults: the demo model, ``--images`` generated site-4 histology images with their labels
(``labels.csv``, so the figures against the dataset's labels are computed as in a labelled
folder), and a tiny generated model when the demo model is absent. ``--variants`` measures both
processes under each environment variant listed (``benchmarks/_variants.py``), interleaved
within each repeat, and prints the figures of each variant.
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

from _stalls import (
    PING_MS,
    Pinger,
    Recording,
    busiest,
    cause,
    handler_table,
    longest,
    probing_application,
    stall_report,
)
from _variants import parse_variants, variant_env

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

__all__ = ["DEMO_MODEL", "PING_MS", "ROOT", "make_stream", "open_app", "wait_for"]

WARMUP_IMAGES = 8
WINDOW = (1280, 800)  # the smallest screen the app is made for (the offscreen screen is 800×800)
RATIO_TARGET, STALL_TARGET_MS, EDGE_ROWS = 1.05, 50.0, 100
DEMO_MODEL = ROOT / "resources" / "demo" / "model.safetensors"


def make_stream(directory: Path, count: int, size: int, seed: int = 1) -> Path:
    """``count`` images of a shifted site: generated histology (site4), with their ``labels.csv``."""
    from PIL import Image

    from lab.synth.generate import generate_arrays, get_spec

    directory.mkdir(parents=True, exist_ok=True)
    images, labels = generate_arrays("histo", "site4", count, size=size, seed=seed)
    classes = get_spec("histo").classes
    lines = ["file,label"]
    for i, img in enumerate(images):
        Image.fromarray(img).save(directory / f"img{i:04d}.png")
        lines.append(f"img{i:04d}.png,{classes[int(labels[i])]}")
    (directory / "labels.csv").write_text("\n".join(lines) + "\n")
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
    """The main window offscreen at 1280×800 with ``stream`` opened and the session loaded; returns
    its StudioApp."""
    from PySide6.QtWidgets import QApplication

    from app.core.phase import Phase
    from app.core.settings import AppSettings
    from app.shell.studio_app import StudioApp
    from app.views.main_window import MainWindow

    QApplication.instance() or QApplication([])
    window = MainWindow()
    # One image a step, as the headless loop steps (the app's default is a batch chosen from the device).
    app_settings = AppSettings(model=str(model), method=method, device=device, **{"batch": 1, **settings})
    studio = StudioApp(window, app_settings, home=home, persist_settings=False)
    window.resize(*WINDOW)
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
    """Start to end of a run in the app, with the UI's stalls meanwhile (after a warm-up run)."""
    from PySide6.QtCore import QEventLoop

    import engine  # noqa: F401 - before torch, as the app imports it (engine/_omp.py)

    recording = Recording()
    app = probing_application(recording)
    home = Path(tempfile.mkdtemp(prefix="f2tta-overhead-"))
    threads: list[int] = []

    def run(folder: Path, project: str) -> float:
        studio = open_app(model, folder, method, device, home, autosave_every=0, project=project)
        pinger = Pinger(recording, lambda: len(studio.controller.model.rows))
        loop = QEventLoop()
        studio.runFinished.connect(loop.quit)
        recording.gaps.clear()
        recording.events.clear()
        start = time.perf_counter()
        pinger.start()
        studio.controller.start()
        loop.exec()
        elapsed = time.perf_counter() - start
        pinger.stop()
        threads.append(_worker_threads(studio))
        studio.shutdown()
        studio.window.close()
        app.processEvents()
        return elapsed

    run(warmup, "warmup")
    elapsed = run(stream, "measured")
    return {
        "seconds": elapsed,
        "recording": recording.to_json(),
        "threads": threads[-1],
        "gui_teams": _gui_thread_teams(),
    }


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
    kind: str,
    args: argparse.Namespace,
    model: Path,
    stream: Path,
    warmup: Path,
    env: dict[str, str],
    method: str,
) -> dict[str, Any]:
    """One measurement in a fresh process with the environment ``env``."""
    cmd = [sys.executable, __file__, "--child", kind, "--model", str(model), "--stream", str(stream)]
    cmd += ["--warmup", str(warmup), "--method", method, "--device", args.device]
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
    parser.add_argument("--long-images", type=int, default=2000, help="images of the long app run (0: none)")
    parser.add_argument("--long-method", default="source", help="the long run's method")
    parser.add_argument("--handlers", action="store_true", help="debug: the GUI thread's events by name")
    args = parser.parse_args()
    if args.child:
        run = child_headless if args.child == "headless" else child_app
        print(json.dumps(run(args.model, args.stream, args.warmup, args.method, args.device)))
        return 0

    tmp = Path(tempfile.mkdtemp(prefix="f2tta-bench-"))
    model = args.model or (DEMO_MODEL if DEMO_MODEL.exists() else make_tiny_model(tmp))
    stream = args.stream or make_stream(tmp / "stream", args.images, args.size)
    warmup = make_stream(tmp / "warmup", WARMUP_IMAGES, args.size, seed=2)
    count = sum(1 for p in stream.iterdir() if p.suffix == ".png")
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
    if args.long_images > 0:
        _long_run(args, model, tmp, warmup)
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
    plain = measure("headless", args, model, stream, warmup, env, args.method)
    app = measure("app", args, model, stream, warmup, env, args.method)
    recording = Recording.from_json(app["recording"])
    gaps = sorted(g.ms for g in recording.gaps)
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
    _print_stalls(recording, args.handlers)


def _print_stalls(recording: Recording, handlers: bool) -> None:
    print("  the three longest stalls and what caused each:")
    for line in stall_report(recording):
        print(f"    {line}")
    if handlers:
        print("  the GUI thread's events by name:")
        for line in handler_table(recording):
            print(f"    {line}")


def _long_run(args: argparse.Namespace, model: Path, tmp: Path, warmup: Path) -> None:
    """One app run of ``--long-images`` images: the stalls while the first and the last rows arrived."""
    n = args.long_images
    stream = make_stream(tmp / "long", n, args.size, seed=3)
    print(f"\nlong run: {n} generated images through the app, method {args.long_method}")
    result = measure("app", args, model, stream, warmup, dict(os.environ), args.long_method)
    recording = Recording.from_json(result["recording"])
    print(f"  {result['seconds']:.2f} s, load {os.getloadavg()[0]:.2f}")
    worst = 0.0
    for label, rows in (
        (f"rows 1-{EDGE_ROWS}", (0, EDGE_ROWS)),
        (f"rows {n - EDGE_ROWS + 1}-{n}", (n - EDGE_ROWS, n)),
    ):
        found = longest(recording, 1, rows)
        if not found:
            print(f"  longest UI stall while {label} arrived: none measured")
            continue
        worst = max(worst, found[0].ms)
        print(
            f"  longest UI stall while {label} arrived: {found[0].ms:.1f} ms ({cause(recording, found[0])})"
        )
        top = busiest(recording, longest(recording, len(recording.gaps), rows))
        if top is not None:
            print(
                f"    the GUI thread's busiest event then: {top.name}, {top.cpu_ms:.1f} ms CPU ({top.ms:.1f} ms wall)"
            )
    verdict = "OK" if worst < STALL_TARGET_MS else "OVER"
    print(f"  longest of the two: {worst:.1f} ms (target < {STALL_TARGET_MS:.0f} ms) -> {verdict}")
    _print_stalls(recording, args.handlers)


def _summary(ratios: list[float], stalls: list[float], p99s: list[float]) -> None:
    ratio = statistics.median(ratios)
    verdict = "OK" if ratio <= RATIO_TARGET else "OVER"
    print(f"median app/headless time ratio: {ratio:.3f} (target <= {RATIO_TARGET}) -> {verdict}")
    stall = max(stalls)
    verdict = "OK" if stall < STALL_TARGET_MS else "OVER"
    print(f"longest UI event-loop stall: {stall:.1f} ms (target < {STALL_TARGET_MS:.0f} ms) -> {verdict}")
    print(f"median p99 ping gap: {statistics.median(p99s):.1f} ms (ping every {PING_MS} ms)")


if __name__ == "__main__":
    raise SystemExit(main())
