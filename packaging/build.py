#!/usr/bin/env python3
"""Build the F²TTA Studio desktop bundle: one folder made by PyInstaller, and on Linux an AppImage.

    python packaging/build.py                    # CPU build of torch in a fresh build venv (the default)
    python packaging/build.py --torch cuda       # CUDA build of torch (Linux, Windows)
    python packaging/build.py --torch-from-env   # bundle this Python environment's torch as it is
    python packaging/build.py --appimage         # also the AppImage (Linux; needs appimagetool, see README)

The bundle is ``dist/f2tta-studio/`` (``f2tta-studio`` starts the app, ``f2tta`` the command line), with
``build-info.json`` saying what went in. Standard library only: it runs with any Python >= 3.11.
See packaging/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SPEC = HERE / "f2tta-studio.spec"
NAME = "f2tta-studio"
PYTORCH_INDEX = "https://download.pytorch.org/whl"
DEFAULT_CUDA = "cu128"
IS_WINDOWS = sys.platform == "win32"
IS_MACOS = sys.platform == "darwin"
IS_LINUX = sys.platform.startswith("linux")


class BuildError(RuntimeError):
    pass


def log(message: str) -> None:
    print(f"[build] {message}", flush=True)


def run(cmd: list[str], *, env: dict[str, str] | None = None, dry_run: bool = False) -> None:
    log("$ " + " ".join(shlex.quote(str(c)) for c in cmd))
    if dry_run:
        return
    code = subprocess.call([str(c) for c in cmd], env=env)
    if code != 0:
        raise BuildError(f"command failed with exit code {code}: {cmd[0]} ...")


def torch_index_url(flavour: str, cuda: str, override: str | None) -> str | None:
    """Where pip takes torch from: None = the default index (PyPI or the site's mirror)."""
    if override:
        return None if override == "pypi" else override
    if flavour == "cpu":
        # PyPI's torch is a CPU build on macOS and Windows, a CUDA build on Linux x86_64.
        return None if IS_MACOS or (IS_LINUX and platform.machine() == "aarch64") else f"{PYTORCH_INDEX}/cpu"
    if IS_MACOS:
        raise BuildError(
            "there is no CUDA build of torch for macOS; use --torch cpu (MPS is in the CPU build)"
        )
    return None if IS_LINUX else f"{PYTORCH_INDEX}/{cuda}"


def reachable(url: str, timeout: float = 15.0) -> bool:
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/torch/", timeout=timeout) as reply:
            return bool(reply.status < 400)
    except (urllib.error.URLError, OSError, ValueError):
        return False


def venv_python(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if IS_WINDOWS else "bin/python")


def prepare_venv(args: argparse.Namespace) -> Path:
    """A fresh build venv with torch of the asked flavour, the project (not editable) and PyInstaller."""
    venv = args.venv or args.work / f"venv-{args.torch}"
    index = torch_index_url(args.torch, args.cuda, args.torch_index_url)
    if index and not args.dry_run and not reachable(index):
        raise BuildError(
            f"cannot reach {index} for a {args.torch.upper()} build of torch. Point --torch-index-url at a "
            "mirror of it, or build from this environment's torch with --torch-from-env"
        )
    if args.fresh and venv.exists() and not args.dry_run:
        shutil.rmtree(venv)
    python = venv_python(venv)
    if not python.exists():
        run([args.python, "-m", "venv", venv], dry_run=args.dry_run)
    pip = [python, "-m", "pip", "install", "--disable-pip-version-check"]
    run([*pip, "--upgrade", "pip"], dry_run=args.dry_run)
    run(
        [*pip, *args.torch_packages.split(), *(["--index-url", index] if index else [])], dry_run=args.dry_run
    )
    # The project itself from its source tree (with its metadata, for the app's version), and PyInstaller;
    # torch is already satisfied, so pip keeps the flavour installed above.
    run([*pip, ROOT, "pyinstaller>=6.11", "pyinstaller-hooks-contrib"], dry_run=args.dry_run)
    return python


def check_env_python(python: Path, dry_run: bool) -> dict[str, str]:
    """Versions in the build environment; fails early when PyInstaller or the project is missing."""
    probe = (
        "import json, torch, PyInstaller, PySide6, timm, app, engine\n"
        "print(json.dumps({'torch': torch.__version__, 'cuda': str(torch.version.cuda),"
        " 'pyinstaller': PyInstaller.__version__, 'pyside6': PySide6.__version__, 'timm': timm.__version__}))"
    )
    if dry_run:
        return {}
    out = subprocess.run([str(python), "-c", probe], cwd=ROOT, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise BuildError(
            f"{python} cannot import torch, PyInstaller, PySide6, timm and the project:\n{out.stderr.strip()}\n"
            f"install them first: {python} -m pip install pyinstaller -e {ROOT}"
        )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def tree_size(path: Path) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            file = Path(dirpath, name)
            if not file.is_symlink():
                total += file.stat().st_size
    return total


def human(size: int) -> str:
    """1.2 GiB, 345.6 MiB, ..."""
    value, unit = float(size), "B"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            break
        value /= 1024
    return f"{value:.1f} {unit}"


def finish_bundle(bundle: Path, info: dict[str, object]) -> int:
    """Readable by every user, an ``f2tta`` command beside ``f2tta-studio``, and build-info.json."""
    if not IS_WINDOWS:
        # Model files written with mkstemp are 0600; a bundle installed by root must be readable by all.
        for dirpath, dirs, files in os.walk(bundle):
            for name in dirs + files:
                path = Path(dirpath, name)
                if not path.is_symlink():
                    mode = path.stat().st_mode
                    path.chmod(mode | 0o444 | (0o111 if path.is_dir() or mode & 0o100 else 0))
        cli = bundle / "f2tta"
        if not cli.exists():
            cli.symlink_to(NAME)
    size = tree_size(bundle)
    info["size_bytes"] = size
    (bundle / "build-info.json").write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    return size


def smoke_check(bundle: Path) -> None:
    """The bundle starts (--version) and its torch, timm and engine import (``f2tta methods``)."""
    exe = bundle / (f"{NAME}.exe" if IS_WINDOWS else NAME)
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    for cmd in ([exe, "--version"], [] if IS_WINDOWS else [bundle / "f2tta", "methods"]):
        if not cmd:
            continue
        out = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env, timeout=600)
        if out.returncode != 0:
            raise BuildError(f"bundle check {cmd[-1]} failed ({out.returncode}):\n{out.stdout}{out.stderr}")
        log(f"check {Path(cmd[0]).name} {cmd[1]}: ok ({(out.stdout or out.stderr).strip().splitlines()[0]})")


def build_appimage(args: argparse.Namespace, bundle: Path) -> Path | None:
    """AppDir from the bundle, then the AppImage with appimagetool, or with a type-2 runtime + mksquashfs."""
    if not IS_LINUX:
        raise BuildError("an AppImage is built on Linux only")
    appdir = args.work / "AppDir"
    if appdir.exists():
        shutil.rmtree(appdir)
    lib = appdir / "usr" / "lib" / NAME
    lib.parent.mkdir(parents=True)
    log(f"AppDir {appdir}")
    try:  # hard links: no second copy of a multi-GB bundle on the same disk
        shutil.copytree(bundle, lib, symlinks=True, copy_function=os.link)
    except OSError:
        shutil.rmtree(lib, ignore_errors=True)
        shutil.copytree(bundle, lib, symlinks=True)
    shutil.copy2(HERE / "appimage" / "AppRun", appdir / "AppRun")
    (appdir / "AppRun").chmod(0o755)
    desktop = ROOT / "resources" / f"{NAME}.desktop"
    icons = ROOT / "resources" / "icons"
    shutil.copy2(desktop, appdir / f"{NAME}.desktop")
    shutil.copy2(icons / f"{NAME}-256.png", appdir / f"{NAME}.png")
    (appdir / ".DirIcon").symlink_to(f"{NAME}.png")
    share = appdir / "usr" / "share"
    for src, dest in (
        (desktop, share / "applications" / f"{NAME}.desktop"),
        (icons / f"{NAME}-256.png", share / "icons/hicolor/256x256/apps" / f"{NAME}.png"),
        (icons / f"{NAME}-64.png", share / "icons/hicolor/64x64/apps" / f"{NAME}.png"),
        (icons / f"{NAME}.svg", share / "icons/hicolor/scalable/apps" / f"{NAME}.svg"),
    ):
        if src.exists():
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest)

    arch = platform.machine()
    out = args.dist / f"F2TTA_Studio-{arch}.AppImage"
    tool = args.appimagetool or os.environ.get("APPIMAGETOOL") or shutil.which("appimagetool")
    runtime = args.appimage_runtime or os.environ.get("APPIMAGE_RUNTIME")
    if tool:
        run([tool, "--no-appstream", appdir, out], env={**os.environ, "ARCH": arch})
    elif runtime and shutil.which("mksquashfs"):
        # What appimagetool does: the type-2 runtime (an ELF) followed by the AppDir as squashfs.
        squash = args.work / "AppDir.squashfs"
        squash.unlink(missing_ok=True)
        run(
            [
                "mksquashfs",
                appdir,
                squash,
                "-root-owned",
                "-noappend",
                "-comp",
                args.appimage_comp,
                "-no-progress",
            ]
        )
        with out.open("wb") as fh:
            fh.write(Path(runtime).read_bytes())
            with squash.open("rb") as src:
                shutil.copyfileobj(src, fh, 16 << 20)
        squash.unlink()
        out.chmod(0o755)
    else:
        log(
            "AppImage NOT made: no appimagetool (--appimagetool, $APPIMAGETOOL or PATH), and no type-2 runtime "
            "(--appimage-runtime) with mksquashfs. Neither is on PyPI or Debian's archive; the AppDir is ready: "
            f"appimagetool {appdir} {out}"
        )
        return None
    log(f"AppImage {out}: {human(out.stat().st_size)}")
    return out


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="packaging/build.py", description=__doc__.splitlines()[0])
    parser.add_argument("--torch", choices=("cpu", "cuda"), default="cpu", help="torch flavour (default cpu)")
    parser.add_argument(
        "--cuda", default=DEFAULT_CUDA, help=f"CUDA wheel tag on Windows (default {DEFAULT_CUDA})"
    )
    parser.add_argument(
        "--torch-from-env",
        action="store_true",
        help="bundle the torch of the Python running this script (no build venv, no download); with "
        "--torch cpu the CUDA libraries a CUDA build can start without are left out",
    )
    parser.add_argument(
        "--torch-index-url", help="pip index for torch (a mirror; 'pypi' = the default index)"
    )
    parser.add_argument(
        "--torch-packages",
        default="torch torchvision",
        help="what pip installs for torch (default: %(default)s)",
    )
    parser.add_argument("--python", default=sys.executable, help="Python that makes the build venv")
    parser.add_argument("--venv", type=Path, help="build venv (default WORK/venv-FLAVOUR; reused)")
    parser.add_argument("--fresh", action="store_true", help="recreate the build venv")
    parser.add_argument("--dist", type=Path, default=ROOT / "dist", help="output folder (default dist/)")
    parser.add_argument("--work", type=Path, default=ROOT / "build" / "packaging", help="work folder")
    parser.add_argument("--clean", action="store_true", help="drop PyInstaller's cache first (slower)")
    parser.add_argument("--no-check", action="store_true", help="skip starting the bundle after the build")
    parser.add_argument("--appimage", action="store_true", help="also make the AppImage (Linux)")
    parser.add_argument("--appimagetool", help="appimagetool executable (default: $APPIMAGETOOL or PATH)")
    parser.add_argument("--appimage-runtime", help="AppImage type-2 runtime file, used with mksquashfs")
    parser.add_argument(
        "--appimage-comp", default="zstd", help="squashfs compression with --appimage-runtime"
    )
    parser.add_argument("--dry-run", action="store_true", help="print the steps, build nothing")
    args = parser.parse_args(argv)
    args.dist = args.dist.resolve()
    args.work = args.work.resolve()
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    start = time.monotonic()
    try:
        if args.torch_from_env:
            python = Path(sys.executable)
            log(f"build environment: this Python ({python}), torch target {args.torch}")
        else:
            python = prepare_venv(args)
            log(f"build environment: {python}, {args.torch.upper()} build of torch")
        versions = check_env_python(python, args.dry_run)
        if versions:
            log("versions: " + ", ".join(f"{k} {v}" for k, v in versions.items()))
            if args.torch == "cpu" and versions.get("cuda", "None") != "None":
                log(
                    f"torch {versions['torch']} is a CUDA build: the CPU bundle keeps only the CUDA libraries "
                    "that torch's own libraries link against (it is larger than one from a CPU build)"
                )
            if args.torch == "cuda" and versions.get("cuda", "None") == "None":
                raise BuildError(f"--torch cuda, but torch {versions['torch']} in {python} is a CPU build")
        env = {**os.environ, "F2TTA_TORCH_TARGET": args.torch, "F2TTA_BUNDLE_NAME": NAME}
        cmd = [python, "-m", "PyInstaller", SPEC, "--noconfirm", "--distpath", args.dist]
        cmd += ["--workpath", args.work / "pyinstaller", *(["--clean"] if args.clean else [])]
        run(cmd, env=env, dry_run=args.dry_run)
        if args.dry_run:
            return 0
        bundle = args.dist / NAME
        info: dict[str, object] = {
            "name": NAME,
            "torch_target": args.torch,
            "torch_from_env": args.torch_from_env,
            **versions,
            "python": platform.python_version(),
            "platform": f"{platform.system()} {platform.machine()}",
            "built": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        size = finish_bundle(bundle, info)
        if not args.no_check:
            smoke_check(bundle)
        log(f"bundle {bundle}: {human(size)}, built in {time.monotonic() - start:.0f} s")
        if args.appimage:
            build_appimage(args, bundle)
    except BuildError as exc:
        print(f"packaging/build.py: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
