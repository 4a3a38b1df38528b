"""A cohort of 20 generated slides killed at random moments (issue 43's targets), with ``--workers 2``
and on a local Ray instance: every site ends with the rows of a run of its slide alone, each tile
once, however often a worker or the driver was SIGKILL'ed. Slow: each driver start spawns workers
(or Ray) that import torch."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from cohort_helpers import cohort_argv, cohort_slides, csv_rows

from engine.cli import main as f2tta
from tests.cli_helpers import run_argv

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
EXTRA = ("--threads", "1", "--batch", "4", "--save-every", "2")


def _children(pid: int) -> list[tuple[int, str]]:
    """``(pid, command line)`` of the processes whose parent is ``pid`` (Linux /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if int(stat.rpartition(")")[2].split()[1]) == pid:
            found.append((int(entry.name), cmdline))
    return found


def _processes(marker: str) -> list[int]:
    """Processes whose command line holds ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if marker in (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"):
                    found.append(int(entry.name))
    return found


def _rows_written(state: Path) -> int:
    """Lines in every site's rows files (grows as the sites run; cut back on resume)."""
    return sum(len(p.read_bytes().splitlines()) for p in state.glob("sites/*/rows/*.jsonl"))


def _references(model: Path, slides: list[Path], tmp_path: Path) -> dict[str, list[dict[str, str]]]:
    """Each slide run alone (one torch thread, as the cohort's sites)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        refs = {}
        for slide in slides:
            alone = tmp_path / "alone" / slide.stem
            argv = run_argv(model, slide, alone / "p.csv", alone / "state", "--method", "source")
            assert f2tta([*argv, "--accept-warnings", "--batch", "4"]) == 0
            refs[slide.stem] = csv_rows(alone / "p.csv")
        return refs
    finally:
        torch.set_num_threads(threads)


def _check(out: Path, refs: dict[str, list[dict[str, str]]]) -> None:
    for site, rows in refs.items():
        got = csv_rows(out / site / "predictions.csv")
        assert [r["item"] for r in got] == [r["item"] for r in rows], f"{site}: every tile once, in order"
        assert got == rows, f"{site}: the rows of its slide run alone"


def _kill_loop(
    model: Path, tmp_path: Path, extra: tuple[str, ...], victims: list[str], seed: int
) -> list[str]:
    slides = cohort_slides(tmp_path / "slides", 20)
    refs = _references(model, slides, tmp_path)
    state, out = tmp_path / "cohort", tmp_path / "out"
    command = [
        sys.executable,
        "-m",
        "engine.cli",
        *cohort_argv(model, [tmp_path / "slides"], state, out, *extra),
    ]
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    rng = random.Random(seed)
    killed: list[str] = []
    driver: subprocess.Popen[bytes] | None = None
    try:
        for victim in victims:
            if driver is None:
                driver = subprocess.Popen(
                    command, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
                )
            target = _rows_written(state) + rng.randint(5, 80)
            deadline = time.monotonic() + 300
            while driver.poll() is None and _rows_written(state) < target and time.monotonic() < deadline:
                time.sleep(0.01)
            time.sleep(rng.uniform(0, 0.2))  # anywhere: mid-batch, mid-save, between sites
            if driver.poll() is not None:
                break  # the cohort finished first
            if victim == "driver":
                driver.send_signal(signal.SIGKILL)
                driver.wait()
                driver = None
                killed.append("driver")
                continue
            marker = "spawn_main" if victim == "worker" else "ray::_ray_site"
            pids = (
                [p for p, cmd in _children(driver.pid) if marker in cmd]
                if victim == "worker"
                else _processes(marker)
            )
            if pids:
                os.kill(rng.choice(pids), signal.SIGKILL)
                killed.append(victim)
        if driver is not None:
            assert driver.wait(timeout=600) in (0, None), "the driver survives its workers' deaths"
        final = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
        assert final.returncode == 0, final.stderr[-3000:]
    finally:
        if driver is not None and driver.poll() is None:
            driver.kill()
            driver.wait()
    _check(out, refs)
    return killed


def test_twenty_slides_in_two_workers_survive_ten_kills(tiny_model_path: Path, tmp_path: Path) -> None:
    victims = ["worker", "driver"] * 5
    killed = _kill_loop(tiny_model_path, tmp_path, (*EXTRA, "--workers", "2"), victims, seed=43)
    print(f"kills: {killed}")
    assert killed.count("worker") >= 2 and killed.count("driver") >= 2


def test_twenty_slides_on_a_local_ray_survive_ten_kills(tiny_model_path: Path, tmp_path: Path) -> None:
    pytest.importorskip("ray")
    victims = ["ray", "driver"] * 5
    killed = _kill_loop(tiny_model_path, tmp_path, (*EXTRA, "--ray", "--workers", "2"), victims, seed=7)
    print(f"kills: {killed}")
    assert killed.count("ray") >= 2 and killed.count("driver") >= 2
