"""openslide-bin: the OpenSlide shared library inside the package.

``openslide_bin`` loads ``libopenslide.so.1`` / ``libopenslide.1.dylib`` / ``libopenslide-1.dll`` from its
own package folder with ``importlib.resources``, so the library must land in ``openslide_bin/`` in the
bundle (PyInstaller's default patterns miss the versioned ``.so.1`` name). No stock hook exists.
"""

from PyInstaller.utils.hooks import PY_DYLIB_PATTERNS, collect_dynamic_libs

binaries = collect_dynamic_libs(
    "openslide_bin", destdir="openslide_bin", search_patterns=[*PY_DYLIB_PATTERNS, "*.so.*"]
)
