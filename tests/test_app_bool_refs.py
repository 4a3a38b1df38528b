"""PySide6's reference-count bug on True/False (app/_bool_refs.py): a session that emits and
disconnects more often than True and False have references must not abort the interpreter."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Emits a Signal(bool) and connects/disconnects a slot more times than both singletons have
# references, so an interpreter with the bug and without the reserve dies with bool_dealloc.
SCRIPT = """
import sys
from PySide6.QtCore import QCoreApplication, QObject, Signal
from app._bool_refs import emit_takes_a_reference, protect_bools

app = QCoreApplication([])
bug = emit_takes_a_reference()
rounds = sys.getrefcount(True) + sys.getrefcount(False) + 1000  # counted before any reserve
if sys.argv[1] == "protect":
    assert protect_bools() == bug, "the reserve is added exactly when the bug is there"

class Emitter(QObject):
    fired = Signal(bool)

emitter = Emitter()
def slot(value):
    pass
for _ in range(rounds):
    emitter.fired.connect(slot)
    emitter.fired.emit(True)
    emitter.fired.disconnect(slot)
print("bug" if bug else "no bug", flush=True)
"""


def _run(mode: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, mode], env=env, capture_output=True, text=True, timeout=300
    )


def test_signals_can_be_emitted_and_disconnected_without_running_out_of_bools() -> None:
    protected = _run("protect")
    assert protected.returncode == 0, protected.stderr[-2000:]
    if protected.stdout.strip() == "bug":
        # The same work without the reserve aborts: the guard is what keeps the app alive.
        bare = _run("bare")
        assert bare.returncode != 0 and "bool_dealloc" in bare.stderr, bare.stderr[-2000:]
    else:
        assert protected.stdout.strip() == "no bug"
