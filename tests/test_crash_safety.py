"""SIGKILL at random moments, of ``f2tta run`` and of the app's worker path, on one journal: the
state always equals the state after some finished image, and resuming -- with either program --
processes every remaining image exactly once."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from PIL import Image
from support import random_images

from engine import Session, list_images, open_folder
from engine.io.sources import source_hash
from engine.run.journal import ROWS_DIR
from engine.run.state import has_state, read_state
from tests.cli_helpers import read_rows, run_argv

REPO = Path(__file__).resolve().parents[1]


def _journal_rows(state: Path, source_id: str) -> list[dict[str, object]]:
    """The rows file of the journal, whole lines only (a line cut by a kill is left out)."""
    path = state / ROWS_DIR / f"{source_hash(source_id)}.jsonl"
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except ValueError:
            pass
    return rows


def _commands(model: Path, inp: Path, out: Path, state: Path, home: Path) -> dict[str, list[str]]:
    """``f2tta run`` and the app's scripted mode (its worker thread runs the same stream loop)."""
    return {
        "cli": [sys.executable, "-m", "engine.cli", *run_argv(model, inp, out, state, "--save-every", "1")],
        "app": [
            sys.executable,
            "-m",
            "app",
            str(inp),
            "--model",
            str(model),
            "--state",
            str(state),
            "--home",
            str(home),
            "--run",
            "--quit-when-done",
        ],
    }


def _kill_loop(model: Path, tmp_path: Path, n_images: int, kills: int, seed: int, programs: list[str]) -> int:
    inp = tmp_path / "in"
    inp.mkdir()
    for i, img in enumerate(random_images(n_images, seed=5)):
        Image.fromarray(img).save(inp / f"im{i:03d}.png")
    order = [p.name for p in list_images(inp)]
    source_id = open_folder(inp, ("normal", "tumor")).source_id

    reference = Session(model)
    fingerprints = [reference.state_fingerprint()]
    confidences = []
    for p in list_images(inp):
        confidences.append(f"{reference.step(p).confidence:.6f}")
        fingerprints.append(reference.state_fingerprint())

    out, state, home = tmp_path / "preds.csv", tmp_path / "state", tmp_path / "home"
    home.mkdir()
    (home / "settings.json").write_text(json.dumps({"autosave_every": 1}))  # the app saves after every image
    commands = _commands(model, inp, out, state, home)
    # Same thread count as the in-process reference: float reductions differ between thread counts.
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "OMP_NUM_THREADS": str(torch.get_num_threads()),
        "QT_QPA_PLATFORM": "offscreen",
    }
    rng = random.Random(seed)
    done_kills = 0
    while done_kills < kills:
        program = programs[done_kills % len(programs)]
        before = len(_journal_rows(state, source_id))
        proc = subprocess.Popen(
            commands[program], cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        target = before + rng.randint(0, 3)
        deadline = time.monotonic() + 120
        while (
            proc.poll() is None
            and time.monotonic() < deadline
            and len(_journal_rows(state, source_id)) <= target
        ):
            time.sleep(0.002)
        time.sleep(rng.uniform(0, 0.03))  # land anywhere: mid-step, mid-row, mid-save
        if proc.poll() is not None:
            break  # finished before we could kill it
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        done_kills += 1
        if has_state(state):
            _, meta = read_state(state)  # always readable and verified by its checksum
            seen = int(meta["images_seen"])
            sources = meta["extra"].get("sources", {})
            assert sources.get(source_id, {}).get("processed", []) == order[:seen]
            probe = Session(model)
            probe.load(state)
            assert probe.state_fingerprint() == fingerprints[seen]
    # Resume to the end with f2tta run, which also writes the CSV from the journal.
    final = subprocess.run(commands["cli"], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert final.returncode == 0, final.stderr
    rows = read_rows(out)
    assert [r["item"] for r in rows] == order, "every image once, in arrival order"
    assert [int(r["index"]) for r in rows] == list(range(n_images))
    assert [r["key"] for r in _journal_rows(state, source_id)] == order
    probe = Session(model)
    probe.load(state)
    assert probe.state_fingerprint() == fingerprints[-1]
    assert [r["confidence"] for r in rows] == confidences  # same predictions as a run never killed
    return done_kills


def test_sigkill_few_points(tiny_model_path: Path, tmp_path: Path) -> None:
    assert _kill_loop(tiny_model_path, tmp_path, n_images=40, kills=3, seed=1, programs=["cli"]) >= 1


def test_sigkill_app_worker_and_cli_on_one_journal(tiny_model_path: Path, tmp_path: Path) -> None:
    kills = _kill_loop(tiny_model_path, tmp_path, n_images=40, kills=4, seed=3, programs=["app", "cli"])
    assert kills >= 2, "the app was killed at least once"


@pytest.mark.slow
def test_sigkill_many_points(tiny_model_path: Path, tmp_path: Path) -> None:
    kills = _kill_loop(tiny_model_path, tmp_path, n_images=120, kills=30, seed=7, programs=["cli"])
    print(f"kill points survived: {kills}")
    assert kills >= 20


@pytest.mark.slow
def test_sigkill_many_points_app_worker(tiny_model_path: Path, tmp_path: Path) -> None:
    kills = _kill_loop(
        tiny_model_path, tmp_path, n_images=120, kills=16, seed=11, programs=["app", "app", "cli"]
    )
    print(f"kill points survived: {kills}")
    assert kills >= 10
