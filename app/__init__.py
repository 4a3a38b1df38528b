"""F²TTA Studio: review images from a new site while the model adapts to it (PySide6 desktop app).

The app follows the ndv/napari split: passive views in :mod:`app.views` emit Qt signals, the
:class:`~app.controller.Controller` wires them to an engine session that lives in one worker thread
(:mod:`app.worker`), and Qt-free state (:mod:`app.state`, :mod:`app.stats`, :mod:`app.profiles`,
:mod:`app.sources`, :mod:`app.settings`) is unit-tested without a display.
"""

from __future__ import annotations

from importlib import metadata

try:
    __version__ = metadata.version("f2tta-studio")
except metadata.PackageNotFoundError:  # running from a source checkout that is not installed
    __version__ = "0.1.0"

APP_NAME = "F²TTA Studio"
RESEARCH_NOTICE = "For research use only. Not for use in diagnostic procedures."

__all__ = ["APP_NAME", "RESEARCH_NOTICE", "__version__"]
