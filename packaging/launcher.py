"""Entry script of the PyInstaller bundle (``packaging/f2tta-studio.spec``).

Started as ``f2tta-studio`` it is the desktop app (``app.main:main``); started through a link or copy
named ``f2tta`` it is the engine's command line (``engine.cli:main``), so one bundle serves both.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from pathlib import Path


def main() -> int:
    multiprocessing.freeze_support()  # the benchmark's worker processes re-enter this executable
    # A clinical install never reaches a model hub: timm and huggingface_hub stay offline unless
    # the site's IT sets HF_HUB_OFFLINE=0 on purpose.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if Path(sys.argv[0]).name.lower() in ("f2tta", "f2tta.exe"):
        from engine.cli import main as cli_main

        return int(cli_main())
    from app.main import main as app_main

    return int(app_main())


if __name__ == "__main__":
    raise SystemExit(main())
