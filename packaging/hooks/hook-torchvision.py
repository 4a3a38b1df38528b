"""torchvision: pyinstaller-hooks-contrib's hook plus torchvision's compiled operators.

torchvision >= 0.26 ships its C++ operators as ``_C_stable.so`` / ``image_stable.so`` (torch's stable ABI),
which the stock hook (it names ``torchvision._C``) does not collect; without them ``import torchvision`` — and
so ``import timm`` — fails with "operator torchvision::nms does not exist". ``torchvision.extension`` looks for
them next to its ``__file__``, so they go to ``torchvision/`` in the bundle; their own dependencies (libjpeg,
libpng, ... from ``torchvision.libs``) follow through PyInstaller's binary dependency analysis.
"""

import runpy
from pathlib import Path

from PyInstaller.utils.hooks import collect_dynamic_libs

_delegate = runpy.run_path(str(Path(__file__).with_name("_delegate.py")))
globals().update(_delegate["stock_hook"]("hook-torchvision.py"))

binaries = [
    *globals().get("binaries", []),
    *collect_dynamic_libs("torchvision", destdir="torchvision", search_patterns=["*.so", "*.pyd", "*.dylib"]),
]
