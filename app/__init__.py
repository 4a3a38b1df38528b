"""F²TTA Studio: review images from a new site (PySide6 desktop app); the original model decides each
image until the reviewer's answers show a rule fitted to the site is better.

The app follows the ndv/napari split (``docs/architecture.md``), one package per role:

* :mod:`app.core`: Qt-free state and logic (the run model, statistics, projects, review marks,
  settings, names and words), unit-tested without a display; import-linter keeps it Qt-free.
* :mod:`app.worker`: the engine session in its own thread (:mod:`app.worker.engine_worker`).
* :mod:`app.reports`: the PDF, CSV, JSON and GeoJSON reports and the data they are made from.
* :mod:`app.views`: passive widgets that emit Qt signals.
* :mod:`app.control`: the controller that joins the views, the worker and the core -- a plain
  object that sees the window and the worker only as protocols; import-linter keeps it Qt-free.
* :mod:`app.shell`: the Qt around it: the worker's thread, the views' timer, the runtime guards and
  the explicit signal wiring (:class:`app.shell.studio_app.StudioApp`, which ``main()`` builds).
* :mod:`app.runtime`: process-wide guards (garbage collection, malloc arenas, Qt singletons).
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
