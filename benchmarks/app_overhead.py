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

* for each app run, the GUI thread's own CPU time per event (the window's work, whatever the
  machine's load made of the wall time): the most any event took, the 99th percentile of the
  events over 1 ms, and how many took over 10 ms (target: none over ``CPU_TARGET_MS``), with the
  load average then.

Opening the folder is measured apart: the most GUI-thread CPU time an event took while it opened
(the handler of the opened folder, ``SessionController.on_worker_source_ready``), and, as the
window shows the folder for ``SETTLE_MS`` before each run starts (as a user sees it before
pressing Run), the most one took then (the work area's first paint). Both count in the most
GUI-thread CPU one event took (the summary's and the long run's worst figure).

``--load N`` starts N busy processes (one CPU each) beside the app for the whole measurement and
stops them at the end: the stalls "with a CPU load beside it". ``--compare DIR`` measures the app
of another source tree too, with this script (an export of an earlier commit:
``git archive REV | tar -x -C DIR``),
alternating with this one in each repeat and in the long run, so the two are measured under the
same load; the figures of each are printed side by side with their ratios.

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
        [--long-images 2000] [--long-method source] [--handlers] [--load 2] [--compare DIR]

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
SETTLE_MS = 500  # the window shows the opened folder this long before the run starts
LOADED_STALL_TARGET_MS, CPU_TARGET_MS = 100.0, 10.0  # the stall with a load beside the app; CPU per event
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


def open_app(
    model: Path, stream: Path, method: str, device: str, home: Path, recording: Any = None, **settings: Any
) -> Any:
    """The main window offscreen at 1280×800 with ``stream`` opened and the session loaded; returns
    its StudioApp. ``recording`` (a ``Recording``) is emptied as the folder is asked for: it then
    holds the GUI thread's events of opening it, the handler of the opened folder's among them."""
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
    if recording is not None:
        recording.events.clear()
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
    from PySide6.QtCore import QEventLoop, QTimer

    import engine  # noqa: F401 - before torch, as the app imports it (engine/_omp.py)

    recording = Recording()
    app = probing_application(recording)
    home = Path(tempfile.mkdtemp(prefix="f2tta-overhead-"))
    threads: list[int] = []

    opening: list[float] = []
    handler: list[float] = []

    def run(folder: Path, project: str) -> float:
        studio = open_app(model, folder, method, device, home, recording, autosave_every=0, project=project)
        # The handler of the opened folder (SessionController.on_worker_source_ready, a queued
        # call) ran in the last event before open_app returned: opening's, measured apart.
        handler.append(max((e.cpu_ms for e in recording.events), default=0.0))
        # The window shows the folder before the run starts, as a user sees it before pressing
        # Run: its first paint of the work area belongs to opening too.
        recording.events.clear()
        settle = QEventLoop()
        QTimer.singleShot(SETTLE_MS, settle.quit)
        settle.exec()
        opening.append(max((e.cpu_ms for e in recording.events), default=0.0))
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
        "opening_cpu_ms": opening[-1],
        "handler_cpu_ms": handler[-1],
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
    tree: Path = ROOT,
) -> dict[str, Any]:
    """One measurement in a fresh process with the environment ``env``, of the source ``tree``."""
    cmd = [sys.executable, __file__, "--child", kind, "--model", str(model), "--stream", str(stream)]
    cmd += ["--root", str(tree)]  # this script measures the app of ``tree``
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
    parser.add_argument("--load", type=int, default=0, help="busy processes to start beside the app")
    parser.add_argument("--compare", type=Path, help="another source tree whose app is measured too")
    parser.add_argument("--root", type=Path, help=argparse.SUPPRESS)  # the source tree a child measures
    args = parser.parse_args()
    if args.root is not None:
        sys.path.insert(0, str(args.root))
    if args.child:
        run = child_headless if args.child == "headless" else child_app
        print(json.dumps(run(args.model, args.stream, args.warmup, args.method, args.device)))
        return 0
    busy = start_load(args.load)
    try:
        return _main(args)
    finally:
        stop_load(busy)


def start_load(count: int) -> list[subprocess.Popen[bytes]]:
    """``count`` processes that each keep a CPU busy until :func:`stop_load`."""
    spin = "import signal, sys; signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))\nwhile True: pass"
    return [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(count)]


def stop_load(busy: list[subprocess.Popen[bytes]]) -> None:
    for process in busy:
        process.terminate()
    for process in busy:
        process.wait(timeout=10)


def trees(args: argparse.Namespace) -> dict[str, Path]:
    """The source trees whose app is measured, by label."""
    found = {"this tree": ROOT}
    if args.compare is not None:
        found[f"compared ({args.compare})"] = args.compare.resolve()
    return found


def _main(args: argparse.Namespace) -> int:
    tmp = Path(tempfile.mkdtemp(prefix="f2tta-bench-"))
    model = args.model or (DEMO_MODEL if DEMO_MODEL.exists() else make_tiny_model(tmp))
    stream = args.stream or make_stream(tmp / "stream", args.images, args.size)
    warmup = make_stream(tmp / "warmup", WARMUP_IMAGES, args.size, seed=2)
    count = sum(1 for p in stream.iterdir() if p.suffix == ".png")
    print(f"model {model}\nstream {stream} ({count} images), method {args.method}, device {args.device}")
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
    if args.load:
        print(f"load: {args.load} busy processes beside the app, started by this script (a CPU each)")
    print(f"trees measured: {', '.join(f'{k}' for k in trees(args))}")

    variants = parse_variants(args.variants)
    keys = [(v, t) for v in variants for t in trees(args)]
    figures: dict[tuple[str, str], dict[str, list[float]]] = {
        k: {"ratios": [], "stalls": [], "p99s": [], "headless": [], "app": [], "cpu": []} for k in keys
    }
    for r in range(args.repeats):
        for variant in variants:
            env = variant_env(variant, variants)
            plain = measure("headless", args, model, stream, warmup, env, args.method)
            for label, tree in trees(args).items():
                fig = figures[(variant, label)]
                _repeat(
                    f"{variant}, {label}, repeat {r + 1}",
                    args,
                    plain,
                    tree,
                    (model, stream, warmup),
                    env,
                    fig,
                )
    for (variant, label), fig in figures.items():
        print(f"\n{variant}, {label}: headless s {_list(fig['headless'])}, app s {_list(fig['app'])}")
        _summary(fig["ratios"], fig["stalls"], fig["p99s"], fig["cpu"], bool(args.load))
    if args.long_images > 0:
        long = {
            label: _long_run(args, model, tmp, warmup, label, tree) for label, tree in trees(args).items()
        }
        if len(long) == 2:
            (a, x), (b, y) = long.items()
            print(
                f"\nlong run, {a} / {b}: longest stall {_ratio(x[0], y[0])}, worst GUI-thread CPU per event {_ratio(x[1], y[1])}"
            )
    return 0


def _opening(result: dict[str, Any]) -> str:
    return (
        f"opening the folder (before the run): its handler {result.get('handler_cpu_ms', 0.0):.1f} ms CPU, "
        f"the first paint {result['opening_cpu_ms']:.1f} ms CPU at most"
    )


def worst_event(recording: Recording, result: dict[str, Any]) -> float:
    """The most GUI-thread CPU time one event took: the run's, opening's handler and first paint."""
    opened = max(result["opening_cpu_ms"], result.get("handler_cpu_ms", 0.0))
    return max(cpu_per_event(recording)[0], opened)


def _ratio(a: float, b: float) -> str:
    return f"{a:.1f} / {b:.1f} ms = {a / b:.2f}" if b else f"{a:.1f} / {b:.1f} ms"


def cpu_per_event(recording: Recording) -> tuple[float, float, int]:
    """The GUI thread's CPU time per event: the most, the 99th percentile of the events noted
    (those over 1 ms of wall time) and how many took over ``CPU_TARGET_MS``."""
    cpu = sorted(e.cpu_ms for e in recording.events)
    if not cpu:
        return 0.0, 0.0, 0
    return cpu[-1], cpu[int(0.99 * (len(cpu) - 1))], sum(c > CPU_TARGET_MS for c in cpu)


def cpu_line(recording: Recording) -> str:
    worst, p99, over = cpu_per_event(recording)
    return (
        f"GUI-thread CPU per event: worst {worst:.1f} ms, p99 {p99:.1f} ms, "
        f"{over} events over {CPU_TARGET_MS:.0f} ms (target: none)"
    )


def _list(values: list[float]) -> str:
    return ", ".join(f"{v:.2f}" for v in values)


def _repeat(
    label: str,
    args: argparse.Namespace,
    plain: dict[str, Any],
    tree: Path,
    files: tuple[Path, Path, Path],
    env: dict[str, str],
    fig: dict[str, list[float]],
) -> None:
    """One app measurement of ``tree`` with ``env`` beside the headless one ``plain``, appended
    to ``fig`` and printed (``files``: the model, the stream and the warm-up stream)."""
    model, stream, warmup = files
    app = measure("app", args, model, stream, warmup, env, args.method, tree)
    recording = Recording.from_json(app["recording"])
    fig["cpu"].append(worst_event(recording, app))
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
    print(f"  {cpu_line(recording)}; {_opening(app)}")
    _print_stalls(recording, args.handlers)


def _print_stalls(recording: Recording, handlers: bool) -> None:
    print("  the three longest stalls and what caused each:")
    for line in stall_report(recording):
        print(f"    {line}")
    if handlers:
        print("  the GUI thread's events by name:")
        for line in handler_table(recording):
            print(f"    {line}")


def _long_run(
    args: argparse.Namespace, model: Path, tmp: Path, warmup: Path, label: str, tree: Path
) -> tuple[float, float]:
    """One app run of ``tree`` of ``--long-images`` images: the stalls while the first and the
    last rows arrived; the longest stall and the most GUI-thread CPU time an event took."""
    n = args.long_images
    stream = tmp / "long"
    if not stream.exists():
        make_stream(stream, n, args.size, seed=3)
    print(f"\nlong run, {label}: {n} generated images through the app, method {args.long_method}")
    result = measure("app", args, model, stream, warmup, dict(os.environ), args.long_method, tree)
    recording = Recording.from_json(result["recording"])
    gaps = [g.ms for g in recording.gaps]
    print(
        f"  {result['seconds']:.2f} s, load {os.getloadavg()[0]:.2f}; longest UI stall {max(gaps, default=0.0):.1f} ms"
    )
    print(f"  {cpu_line(recording)}; {_opening(result)}")
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
    target = LOADED_STALL_TARGET_MS if args.load else STALL_TARGET_MS
    verdict = "OK" if worst < target else "OVER"
    print(f"  longest of the two: {worst:.1f} ms (target < {target:.0f} ms) -> {verdict}")
    _print_stalls(recording, args.handlers)
    return max(gaps, default=0.0), worst_event(recording, result)


def _summary(
    ratios: list[float], stalls: list[float], p99s: list[float], cpu: list[float], loaded: bool
) -> None:
    ratio = statistics.median(ratios)
    verdict = "OK" if ratio <= RATIO_TARGET else "OVER"
    print(f"median app/headless time ratio: {ratio:.3f} (target <= {RATIO_TARGET}) -> {verdict}")
    stall = max(stalls)
    target = LOADED_STALL_TARGET_MS if loaded else STALL_TARGET_MS
    verdict = "OK" if stall < target else "OVER"
    print(f"longest UI event-loop stall: {stall:.1f} ms (target < {target:.0f} ms) -> {verdict}")
    print(f"median p99 ping gap: {statistics.median(p99s):.1f} ms (ping every {PING_MS} ms)")
    worst = max(cpu)
    verdict = "OK" if worst <= CPU_TARGET_MS else "OVER"
    print(
        f"most GUI-thread CPU one event took: {worst:.1f} ms (target <= {CPU_TARGET_MS:.0f} ms) -> {verdict}"
    )


if __name__ == "__main__":
    raise SystemExit(main())
