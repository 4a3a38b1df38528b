"""``f2tta-studio [PATH] [--model M] [--project NAME] [--method NAME] [--device D] [--run] [--export DIR]
[--quit-when-done]``: the desktop app's entry point (also ``python -m app``).

Exit codes: 0 success; 1 failure (model, project, source, state or reports could not be used);
2 bad command line; 3 the run completed but some images could not be processed; 4 the model may
not apply to the images (the applicability check, as ``f2tta run``): nothing was run without
``--accept-warnings``.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from app import APP_NAME, __version__

# The libraries Qt's X11 platform plugin needs beyond Qt's wheel (Debian/Ubuntu package names).
# (What `ldd` lists for Qt's libqxcb.so and libQt6XcbQpa.so that a desktop may lack.)
XCB_LIBRARIES = {
    "libxcb-cursor.so.0": "libxcb-cursor0",
    "libxkbcommon-x11.so.0": "libxkbcommon-x11-0",
    "libxcb-icccm.so.4": "libxcb-icccm4",
    "libxcb-keysyms.so.1": "libxcb-keysyms1",
    "libxcb-shape.so.0": "libxcb-shape0",
    "libxcb-image.so.0": "libxcb-image0",
    "libxcb-render-util.so.0": "libxcb-render-util0",
    "libEGL.so.1": "libegl1",
    "libGL.so.1": "libgl1",
    "libfontconfig.so.1": "libfontconfig1",
    "libdbus-1.so.3": "libdbus-1-3",
}


def missing_xcb_libraries() -> list[str]:
    """The packages to install when Qt will use X11 and a library its plugin needs is missing.

    Without them Qt aborts with "could not load the Qt platform plugin xcb" and no hint of what
    to install, so the app checks first (Linux, a display, no other platform chosen).
    """
    import ctypes
    import os

    if not sys.platform.startswith("linux") or os.environ.get("QT_QPA_PLATFORM", "xcb") != "xcb":
        return []
    if not os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"):
        return []
    missing = []
    for library, package in XCB_LIBRARIES.items():
        try:
            ctypes.CDLL(library)
        except OSError:
            missing.append(package)
    return missing


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="f2tta-studio",
        description=(
            f"{APP_NAME}: review images from a new site. The original model decides each image until "
            "your answers in the review queue show a rule fitted to the site is better."
        ),
    )
    parser.add_argument("path", nargs="?", type=Path, help="a folder of images or a slide to open")
    parser.add_argument("--model", help="checkpoint (.safetensors) with its model card .json beside it")
    parser.add_argument(
        "--project", "--profile", dest="project", help="the project that keeps the adaptation state"
    )
    parser.add_argument(
        "--state",
        type=Path,
        metavar="DIR",
        help="use this state directory (e.g. one written by `f2tta run --state DIR`) instead of a project",
    )
    parser.add_argument(
        "--cohort",
        type=Path,
        metavar="DIR",
        help="also show the cohort in this state folder (`f2tta run --state DIR` over several slides or folders)",
    )
    parser.add_argument(
        "--method", help="adaptation method (default: engine.DEFAULT_METHOD; `f2tta methods` lists them)"
    )
    parser.add_argument("--device", help="auto, cpu, cuda, cuda:N or mps")
    parser.add_argument(
        "--order",
        choices=("name", "mtime", "manifest", "interleaved"),
        help="arrival order of folder images (interleaved: a seeded shuffle, see --seed)",
    )
    parser.add_argument("--seed", type=int, help="seed of the interleaved arrival order (default 0)")
    parser.add_argument(
        "--batch", type=int, help="images per model step (default: the setting, else chosen from the device)"
    )
    parser.add_argument("--run", action="store_true", help="start processing as soon as PATH is open")
    parser.add_argument(
        "--export", type=Path, metavar="DIR", help="write every report kind into DIR at the end"
    )
    parser.add_argument("--quit-when-done", action="store_true", help="quit when the run (and export) ends")
    parser.add_argument(
        "--accept-warnings",
        action="store_true",
        help="with --run: run images the applicability check flags (in a project of their own; "
        "without it nothing is run and the exit code is 4, as f2tta run)",
    )
    parser.add_argument(
        "--home", type=Path, help="user data folder (default: $F2TTA_STUDIO_HOME or the OS default)"
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from app.runtime.malloc import limit_malloc_arenas

    limit_malloc_arenas()  # before Qt, torch and the worker threads allocate
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(levelname)s %(name)s: %(message)s",
    )
    if args.path is not None and not args.path.exists():
        print(f"f2tta-studio: {args.path}: no such file or folder", file=sys.stderr)
        return 2
    if args.cohort is not None and not args.cohort.is_dir():
        print(f"f2tta-studio: --cohort {args.cohort}: no such folder", file=sys.stderr)
        return 2
    if (args.run or args.export) and args.path is None:
        print("f2tta-studio: --run and --export need a PATH to open", file=sys.stderr)
        return 2
    missing = missing_xcb_libraries()
    if missing:
        print(
            "f2tta-studio: Qt needs X11 libraries that are not installed. On Debian/Ubuntu: "
            f"sudo apt-get install {' '.join(missing)} (or set QT_QPA_PLATFORM=offscreen for scripted runs)",
            file=sys.stderr,
        )
        return 1

    # Qt and the engine are imported only now, so --help and --version stay fast.
    import pyqtgraph as pg
    from PySide6.QtCore import QTimer
    from PySide6.QtGui import QIcon
    from PySide6.QtWidgets import QApplication

    from app._engine import MAX_BATCH
    from app.control.script import ScriptedRun, ScriptOptions
    from app.core.projects import ProjectError, check_name
    from app.core.settings import load_settings
    from app.runtime.singleton_refs import protect_singletons
    from app.shell.studio_app import StudioApp
    from app.views.cohort_view import open_cohort_window
    from app.views.main_window import ICON, MainWindow

    protect_singletons()  # before the first signals: PySide6 takes references from True and None
    pg.setConfigOptions(antialias=True, imageAxisOrder="row-major")
    home = args.home.expanduser() if args.home else None
    settings = load_settings(None if home is None else home / "settings.json")
    overrides: dict[str, Any] = {
        key: value
        for key, value in (
            ("model", args.model and str(Path(args.model).expanduser().resolve())),
            ("project", args.project),
            ("method", args.method),
            ("device", args.device),
            ("order", args.order),
        )
        if value
    }
    if args.seed is not None:
        overrides["order_seed"] = args.seed
    if args.batch is not None:
        if not 1 <= args.batch <= MAX_BATCH:
            print(f"f2tta-studio: --batch must be between 1 and {MAX_BATCH}", file=sys.stderr)
            return 2
        overrides["batch"] = args.batch
    if overrides.get("method") and overrides["method"] != settings.method:
        overrides["method_config"] = {}  # the saved hyper-parameters belong to the other method
    if "project" in overrides:
        try:
            check_name(overrides["project"])
        except ProjectError as exc:
            print(f"f2tta-studio: {exc}", file=sys.stderr)
            return 2
    settings = dataclasses.replace(settings, **overrides)

    existing = QApplication.instance()
    app = existing if isinstance(existing, QApplication) else QApplication(sys.argv[:1])
    app.setApplicationName(APP_NAME)
    app.setApplicationVersion(__version__)
    if ICON.exists():
        app.setWindowIcon(QIcon(str(ICON)))
    window = MainWindow()
    script = ScriptOptions(
        path=args.path.resolve() if args.path else None,
        run=args.run,
        export=args.export.resolve() if args.export else None,
        quit_when_done=args.quit_when_done,
        accept_warnings=args.accept_warnings,
    )
    # Command-line overrides are for this session only; settings changed in the dialog are saved.
    state_dir = args.state.expanduser().resolve() if args.state else None
    # The app object starts the worker thread, the views' timer and the runtime guards, and wires
    # the window and the worker to the (Qt-free) controller.
    studio = StudioApp(
        window,
        settings,
        home=home,
        persist_settings=not overrides and state_dir is None,
        state_dir=state_dir,
        model_chosen=bool(args.model),
    )
    scripted = ScriptedRun(studio.controller, script)
    scripted.finished.connect(app.exit)
    previous_hook = sys.excepthook
    if args.quit_when_done:
        # An unexpected error in a slot would otherwise be printed and the smoke check would wait forever.
        def fail(exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
            logging.getLogger("app").critical("unexpected error", exc_info=(exc_type, exc, tb))
            app.exit(1)

        sys.excepthook = fail
    screen = app.primaryScreen().availableGeometry()
    if settings.maximized or screen.width() < 1500 or screen.height() < 950:
        window.showMaximized()  # a laptop screen: use all of it (the window fits 1280×800)
    else:
        window.show()
    # The session loads inside the event loop: a project refused while it loads (a damaged profile,
    # its model moved away) ends a scripted run at once, and a request to quit made before the loop
    # ran would be lost (the run never ended).
    QTimer.singleShot(0, studio.controller.load_session)
    if args.cohort is not None:
        cohort = args.cohort
        QTimer.singleShot(0, lambda: open_cohort_window(window, cohort))
    try:
        code = app.exec()
    finally:
        sys.excepthook = previous_hook
        studio.shutdown()
        window.close()
    return int(code)


if __name__ == "__main__":
    raise SystemExit(main())
