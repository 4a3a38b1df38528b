"""packaging/: the desktop entry, the build script's plan, the wheel's contents (pipx) and — slow — the
PyInstaller bundle itself, started offscreen on the demo stream and a slide."""

from __future__ import annotations

import configparser
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGING = ROOT / "packaging"
RESOURCES = ROOT / "resources"
DESKTOP = RESOURCES / "f2tta-studio.desktop"
DEMO_MODEL = RESOURCES / "demo" / "model.safetensors"


def build_py(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(PACKAGING / "build.py"), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )


def test_packaging_sources_compile() -> None:
    for path in [
        PACKAGING / "f2tta-studio.spec",
        *PACKAGING.glob("*.py"),
        *(PACKAGING / "hooks").glob("*.py"),
    ]:
        compile(path.read_text(encoding="utf-8"), str(path), "exec")


def test_desktop_entry_names_the_gui_script_and_an_existing_icon() -> None:
    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keys are case-sensitive
    parser.read(DESKTOP, encoding="utf-8")
    entry = parser["Desktop Entry"]
    assert entry["Type"] == "Application"
    assert entry["Exec"].split()[0] == "f2tta-studio" == entry["TryExec"]
    assert 'f2tta-studio = "app.main:main"' in (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert (RESOURCES / "icons" / f"{entry['Icon']}.svg").is_file()
    assert (RESOURCES / "icons" / f"{entry['Icon']}-256.png").is_file()
    validator = shutil.which("desktop-file-validate")
    if validator:
        out = subprocess.run([validator, str(DESKTOP)], capture_output=True, text=True)
        assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX shell script")
def test_apprun_is_an_executable_shell_script() -> None:
    apprun = PACKAGING / "appimage" / "AppRun"
    assert os.access(apprun, os.X_OK)
    assert subprocess.run(["sh", "-n", str(apprun)]).returncode == 0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the index URLs below are Linux x86_64's")
def test_build_plan_cpu_by_default_and_from_env_on_request() -> None:
    default = build_py("--dry-run", "--work", "/nonexistent/work")
    assert default.returncode == 0, default.stderr
    if os.uname().machine == "x86_64":
        assert "--index-url https://download.pytorch.org/whl/cpu" in default.stdout
    assert "-m venv /nonexistent/work/venv-cpu" in default.stdout
    assert "-m PyInstaller" in default.stdout

    from_env = build_py("--dry-run", "--torch-from-env")
    assert from_env.returncode == 0, from_env.stderr
    assert "-m venv" not in from_env.stdout and "pip install" not in from_env.stdout
    assert f"{sys.executable} -m PyInstaller" in from_env.stdout

    assert build_py("--torch", "rocm").returncode == 2  # argparse refuses unknown flavours


@pytest.mark.slow
def test_wheel_carries_the_packages_and_the_run_time_resources(tmp_path: Path) -> None:
    """What `pipx install .` installs: engine/, app/ and resources/ (demo model, icons), found at run time."""
    # From a copy of what the build reads, so setuptools' build/ folder stays out of the checkout.
    src = tmp_path / "src"
    for name in (
        "pyproject.toml",
        "README.md",
        "MANIFEST.in",
        "setup.py",
        "setup.cfg",
        "engine",
        "app",
        "resources",
    ):
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        elif path.is_file():
            src.mkdir(exist_ok=True)
            shutil.copy2(path, src / name)
    out = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-cache-dir", str(src), "-w", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    (wheel,) = tmp_path.glob("f2tta_studio-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        site = tmp_path / "site"
        zf.extractall(site)
    sources = {
        path.relative_to(ROOT).as_posix()
        for package in ("engine", "app")
        for path in (ROOT / package).rglob("*.py")
        if "__pycache__" not in path.parts
    }
    assert {
        "engine/methods/idipt/__init__.py",
        "engine/methods/idipt_plus/__init__.py",
        "app/main.py",
    } <= sources
    absent = sorted(sources - names)
    assert not absent, f"the wheel lacks modules of the checkout: {absent[:10]}"
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    scripts = (site / entry_points).read_text(encoding="utf-8")
    assert "f2tta-studio = app.main:main" in scripts and "f2tta = engine.cli:main" in scripts
    wanted = {"resources/icons/f2tta-studio.svg", "resources/icons/f2tta-studio-256.png"}
    if DEMO_MODEL.exists():
        wanted |= {
            "resources/demo/model.safetensors",
            "resources/demo/model.json",
            "resources/demo/model.reference.safetensors",  # idipt+ and foa-shift need it
        }
    missing = sorted(wanted - names)
    assert not missing, f"the wheel lacks run-time resources {missing} (see packaging/README.md, pipx)"

    # Installed (not from the checkout), the app finds them where it looks.
    probe = (
        "import app, app.core.settings, app.views.main_window as mw\n"
        "print(app.__file__); print(app.core.settings.DEMO_MODEL.is_file()); print(mw.ICON.is_file())"
    )
    env = {**os.environ, "PYTHONPATH": str(site), "QT_QPA_PLATFORM": "offscreen"}
    res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    app_file, demo_found, icon_found = res.stdout.split()
    assert Path(app_file).is_relative_to(site)
    assert icon_found == "True"
    assert demo_found == str(DEMO_MODEL.exists())


def _run(cmd: list[str | Path], timeout: float, **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout, **kwargs)  # type: ignore[call-overload,no-any-return]


def _du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.skipif(sys.platform == "win32", reason="the smoke test drives the POSIX bundle (f2tta link)")
def test_bundle_smoke() -> None:
    """Build the one-folder bundle (CPU target, this environment's torch), then use it like a site would."""
    pytest.importorskip("PyInstaller", reason="PyInstaller is not installed (pip install pyinstaller)")
    scratch = Path(tempfile.mkdtemp(prefix="f2tta-bundle-"))
    try:
        if shutil.disk_usage(scratch).free < 12 * 2**30:
            pytest.skip("needs 12 GiB free for the bundle and its build")
        start = time.monotonic()
        built = _run(
            [
                sys.executable,
                PACKAGING / "build.py",
                "--torch-from-env",
                "--dist",
                scratch / "dist",
                "--work",
                scratch / "work",
            ],
            timeout=1500,
            cwd=ROOT,
        )
        build_s = time.monotonic() - start
        assert built.returncode == 0, built.stdout[-5000:] + built.stderr[-5000:]
        bundle = scratch / "dist" / "f2tta-studio"
        size = _du(bundle)
        print(f"\nbundle {bundle}: {size / 2**30:.2f} GiB, built in {build_s:.0f} s")

        internal = bundle / "_internal"
        info = json.loads((bundle / "build-info.json").read_text(encoding="utf-8"))
        assert info["torch_target"] == "cpu"
        assert abs(info["size_bytes"] - size) < 2**16  # all but build-info.json itself
        assert (internal / "resources" / "icons" / "f2tta-studio.svg").is_file()
        assert any((internal / "openslide_bin").glob("*openslide*"))
        # The CPU target leaves out what torch only dlopen()s on a GPU, and triton.
        assert not (internal / "triton").exists()
        assert not list(internal.rglob("libtorch_cuda_linalg*")), "GPU-only linear algebra was bundled"
        assert not list(internal.rglob("libcudnn_engines*")), "cuDNN's engines were bundled"
        assert not list(internal.rglob("libcusolver*")), "cuSOLVER was bundled"

        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("PYTHON", "VIRTUAL_ENV", "LD_LIBRARY_PATH"))
        }
        env.update(QT_QPA_PLATFORM="offscreen", HOME=str(scratch / "home"))
        cwd = scratch  # nothing of the checkout on the path: the bundle must be complete
        data = scratch / "demo"
        synth = _run(
            [bundle / "f2tta", "synth", "histo", "--out", data, "--per-domain", "4"], 600, env=env, cwd=cwd
        )
        assert synth.returncode == 0, synth.stdout[-3000:] + synth.stderr[-3000:]
        images = [p for p in data.rglob("*") if p.suffix.lower() in (".png", ".jpg", ".jpeg", ".tif", ".bmp")]
        assert len(images) >= 8

        model_args: list[str | Path] = []
        if not DEMO_MODEL.exists():  # the demo model is not trained yet: a tiny one stands in
            from engine import ModelCard, save_model

            card = ModelCard(
                arch="vit_tiny_patch16_224",
                classes=("normal", "tumor"),
                img_size=32,
                model_kwargs={"depth": 2, "patch_size": 8},
            )
            save_model(card.build(), card, scratch / "model.safetensors")
            model_args = ["--model", scratch / "model.safetensors"]

        out = scratch / "out"
        app = [bundle / "f2tta-studio", data, *model_args, "--run", "--export", out, "--quit-when-done"]
        ran = _run([*app, "--home", scratch / "studio"], 900, env=env, cwd=cwd)
        assert ran.returncode == 0, ran.stdout[-5000:] + ran.stderr[-5000:]
        with (out / "predictions.csv").open(newline="", encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh))
        assert len(rows) == len(images)
        assert (out / "report.pdf").read_bytes().startswith(b"%PDF")
        config = json.loads((out / "run_config.json").read_text(encoding="utf-8"))
        if DEMO_MODEL.exists():  # the shipped demo model, found inside the bundle
            assert Path(config["model"]["path"]).is_relative_to(internal)

        # A whole-slide image through the bundled OpenSlide: the GeoJSON of the tiles comes too.
        sys.path.insert(0, str(Path(__file__).parent))
        from app_fixtures import make_slide

        slide = make_slide(scratch / "slide.tif", size=(768, 512), mpp=0.5)
        out_slide = scratch / "out-slide"
        app = [
            bundle / "f2tta-studio",
            slide,
            *model_args,
            "--run",
            "--accept-warnings",  # the card records no training resolution: the gate warns, a script goes on only when told
            "--export",
            out_slide,
            "--quit-when-done",
        ]
        ran = _run([*app, "--home", scratch / "studio"], 900, env=env, cwd=cwd)
        assert ran.returncode == 0, ran.stdout[-5000:] + ran.stderr[-5000:]
        geo = json.loads((out_slide / "tiles.geojson").read_text(encoding="utf-8"))
        assert geo["type"] == "FeatureCollection" and geo["features"]
        assert (out_slide / "report.pdf").read_bytes().startswith(b"%PDF")
        print(f"smoke test passed in {time.monotonic() - start:.0f} s in all")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
