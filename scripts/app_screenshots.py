"""Save screenshots of F²TTA Studio's main window in its key states (``widget.grab()``).

Usage::

    QT_QPA_PLATFORM=offscreen python scripts/app_screenshots.py [OUT_DIR] [--model CKPT]

Uses the demo model when it exists (else a tiny generated one), a generated folder of images with
class sub-folders and a generated pyramidal TIFF slide, all in a temporary directory.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


def wait_until(app: object, condition: Callable[[], bool], timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("the app did not reach the expected state in time")
        app.processEvents()  # type: ignore[attr-defined]
        time.sleep(0.01)


def histology_stream(tmp: Path, app_fixtures: object) -> tuple[Path, Path]:
    """A folder of generated histology from a shifted site (with labels.csv) and a slide mosaic of it.

    Falls back to the test fixtures' plain images when the engine's generator is not available.
    """
    import numpy as np
    from PIL import Image

    try:
        from engine.data.synth import generate_arrays
    except ImportError:
        folder = app_fixtures.make_folder(tmp, count=40, labelled="csv")  # type: ignore[attr-defined]
        return folder, app_fixtures.make_slide(tmp / "slide.tif", size=(2048, 1536), mpp=0.5)  # type: ignore[attr-defined]
    images, labels = generate_arrays("histo", "site4", 40 + 16 * 12, size=96, seed=3)
    folder = tmp / "site4"
    folder.mkdir()
    lines = ["file,label"]
    for i in range(40):
        Image.fromarray(images[i]).save(folder / f"patch{i:03d}.png")
        lines.append(f"patch{i:03d}.png,{('normal', 'tumor')[int(labels[i])]}")
    (folder / "labels.csv").write_text("\n".join(lines) + "\n")
    # Slide: a 16 x 12 mosaic of patches inside an elliptical piece of tissue on white glass.
    mosaic = np.concatenate(
        [np.concatenate(list(images[40 + r * 16 : 40 + (r + 1) * 16]), axis=1) for r in range(12)], axis=0
    )
    h, w = mosaic.shape[:2]
    yy, xx = np.mgrid[0:h, 0:w]
    glass = ((yy - h / 2) / (h * 0.46)) ** 2 + ((xx - w / 2) / (w * 0.47)) ** 2 > 1
    mosaic[glass] = 244
    import tifffile

    slide = tmp / "slide.tif"
    with tifffile.TiffWriter(slide) as tw:
        for level in range(3):
            f = 2**level
            tw.write(
                np.ascontiguousarray(mosaic[::f, ::f]),
                tile=(128, 128),
                photometric="rgb",
                resolution=(2e4 / f, 2e4 / f),
                resolutionunit="CENTIMETER",
                subfiletype=0 if level == 0 else 1,
            )
    return folder, slide


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", type=Path, default=ROOT / "out" / "screenshots")
    parser.add_argument("--model", type=Path, help="checkpoint to use (default: demo model or a tiny one)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="f2tta-shots-"))
    os.environ["F2TTA_STUDIO_HOME"] = str(tmp / "home")

    import app_fixtures
    import pyqtgraph as pg
    from PySide6.QtWidgets import QApplication

    from app.controller import Controller
    from app.settings import DEMO_MODEL, AppSettings, available_devices, method_fields
    from app.state import Phase
    from app.views.about_dialog import AboutDialog
    from app.views.main_window import MainWindow
    from app.views.settings_dialog import SettingsDialog

    pg.setConfigOptions(antialias=True)
    app = QApplication.instance() or QApplication([])
    model = args.model or (DEMO_MODEL if DEMO_MODEL.exists() else None)
    if model is None:
        model = app_fixtures.make_model(tmp, mpp=1.0, img_size=64)
    folder, slide = histology_stream(tmp, app_fixtures)

    window = MainWindow()
    window.resize(1400, 900)
    settings = AppSettings(model=str(model), method_config={"mc_passes": 4})
    controller = Controller(window, settings, home=tmp / "home", persist_settings=False)
    window.show()
    shots: list[str] = []

    def shot(name: str, widget: object = window) -> None:
        app.processEvents()
        path = args.out / f"{name}.png"
        widget.grab().save(str(path))  # type: ignore[attr-defined]
        shots.append(str(path))

    controller.load_session()
    wait_until(app, lambda: controller.phase is Phase.DONE)
    shot("01_model_loaded")

    controller.open_folder(str(folder))
    wait_until(app, lambda: controller.phase is Phase.READY)
    controller.start()
    wait_until(app, lambda: window.table.model.rowCount() >= 15)
    controller.pause()
    wait_until(app, lambda: controller.phase is Phase.PAUSED)
    shot("02_folder_paused_overlay")

    controller.resume()
    wait_until(app, lambda: controller.phase is Phase.DONE)
    window.table.select_source_row(3)
    controller.model.select(window.table.model.row_at(3).position)
    window.image_view.reliable_box.setChecked(True)
    shot("03_folder_done_selected_row")
    window.table.mode_combo.setCurrentIndex(window.table.mode_combo.findData("low_confidence"))
    window.bottom_tabs.setCurrentIndex(1)
    shot("04_filter_low_confidence_log")
    window.table.mode_combo.setCurrentIndex(0)
    window.bottom_tabs.setCurrentIndex(0)

    controller.open_slide(str(slide))
    wait_until(app, lambda: controller.phase is Phase.READY)
    controller.start()
    wait_until(app, lambda: window.table.model.rowCount() >= 20)
    shot("05_slide_running_heatmap")
    wait_until(app, lambda: controller.phase is Phase.DONE)
    shot("06_slide_done")

    dialog = SettingsDialog(controller.state.settings, method_fields(), available_devices(), window)
    dialog.advanced_toggle.setChecked(True)
    dialog.show()
    shot("07_settings_advanced", dialog)
    dialog.close()
    about = AboutDialog("vit_tiny_patch16_224, classes normal, tumor", window)
    about.show()
    shot("08_about", about)
    about.close()

    controller.shutdown()
    for path in shots:
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
