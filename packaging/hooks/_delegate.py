"""Shared by this folder's hooks: run the hook that PyInstaller or pyinstaller-hooks-contrib ships for the
same module, so a hook here can extend it instead of copying it.

A hook in ``packaging/hooks`` (the spec's ``hookspath``) has priority over the stock hook of the same name,
which PyInstaller then ignores; :func:`stock_hook` runs that stock hook and returns its globals.
Not a hook itself (no ``hook-`` prefix); hooks load it with ``runpy``.
"""

from __future__ import annotations

import os
import runpy
from pathlib import Path
from typing import Any

#: Set by the spec from ``F2TTA_TORCH_TARGET``: "cpu" (the default) or "cuda".
TORCH_TARGET = os.environ.get("F2TTA_TORCH_TARGET", "cpu").lower()

HOOK_NAMES = (
    "hiddenimports",
    "excludedimports",
    "datas",
    "binaries",
    "module_collection_mode",
    "warn_on_missing_hiddenimports",
    "bindepend_symlink_suppression",
    "hook",
)


def stock_hook(filename: str) -> dict[str, Any]:
    """Globals of the stock hook ``filename`` (e.g. ``hook-torch.py``): contrib first, then PyInstaller's."""
    import PyInstaller.hooks as core_hooks

    folders = []
    try:
        import _pyinstaller_hooks_contrib.stdhooks as contrib_hooks

        folders.append(Path(contrib_hooks.__file__).parent)
    except ImportError:
        pass
    folders.append(Path(core_hooks.__file__).parent)
    for folder in folders:
        path = folder / filename
        if path.is_file():
            ns = runpy.run_path(str(path), run_name=f"__pyinstaller_stock_{path.stem}")
            return {name: ns[name] for name in HOOK_NAMES if name in ns}
    return {}
