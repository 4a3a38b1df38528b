"""SIGKILL at random moments: the state always equals the state after some finished image, and
resuming processes every remaining image exactly once."""

from __future__ import annotations

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

from engine import Session, list_images
from engine.state import has_state, read_state
from tests.cli_helpers import read_rows, run_argv
from tests.conftest import random_images

REPO = Path(__file__).resolve().parents[1]


def _kill_loop(model: Path, tmp_path: Path, n_images: int, kills: int, seed: int) -> int:
    inp = tmp_path / "in"
    inp.mkdir()
    for i, img in enumerate(random_images(n_images, seed=5)):
        Image.fromarray(img).save(inp / f"im{i:03d}.png")
    order = [p.name for p in list_images(inp)]

    reference = Session(model)
    fingerprints = [reference.state_fingerprint()]
    confidences = []
    for p in list_images(inp):
        confidences.append(f"{reference.step(p).confidence:.6f}")
        fingerprints.append(reference.state_fingerprint())

    out, state = tmp_path / "preds.csv", tmp_path / "state"
    cmd = [sys.executable, "-m", "engine.cli", *run_argv(model, inp, out, state, "--save-every", "1")]
    # Same thread count as the in-process reference: float reductions differ between thread counts.
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": str(torch.get_num_threads())}
    rng = random.Random(seed)
    done_kills = 0
    while done_kills < kills:
        before = len(read_rows(out))
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        target = before + rng.randint(0, 3)
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline and len(read_rows(out)) <= target:
            time.sleep(0.002)
        time.sleep(rng.uniform(0, 0.03))  # land anywhere: mid-step, mid-CSV-row, mid-save
        if proc.poll() is not None:
            break  # finished before we could kill it
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        done_kills += 1
        if has_state(state):
            _, meta = read_state(state)  # always readable and verified by its checksum
            seen = int(meta["images_seen"])
            sources = meta["extra"]["sources"]
            processed = next(iter(sources.values()))["processed"] if sources else []
            assert processed == order[:seen]
            probe = Session(model)
            probe.load(state)
            assert probe.state_fingerprint() == fingerprints[seen]
    # Resume to the end.
    final = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert final.returncode == 0, final.stderr
    rows = read_rows(out)
    assert [r["item"] for r in rows] == order
    assert [int(r["index"]) for r in rows] == list(range(n_images))
    probe = Session(model)
    probe.load(state)
    assert probe.state_fingerprint() == fingerprints[-1]
    assert [r["confidence"] for r in rows] == confidences  # same predictions as a run never killed
    return done_kills


def test_sigkill_few_points(tiny_model_path: Path, tmp_path: Path) -> None:
    assert _kill_loop(tiny_model_path, tmp_path, n_images=40, kills=3, seed=1) >= 1


@pytest.mark.slow
def test_sigkill_many_points(tiny_model_path: Path, tmp_path: Path) -> None:
    kills = _kill_loop(tiny_model_path, tmp_path, n_images=120, kills=30, seed=7)
    print(f"kill points survived: {kills}")
    assert kills >= 20
