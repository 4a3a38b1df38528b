"""SIGKILL at random moments, of ``f2tta run`` and of the app's worker path, on one journal: the
state always equals the state after some finished image (after some finished batch, in batches),
and resuming -- with either program -- processes every remaining image exactly once. Folders and
slides, one image a step and batches of several."""

from __future__ import annotations

import contextlib
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
from app_fixtures import make_slide
from PIL import Image
from support import random_images

from engine import (
    DEFAULT_METHOD,
    FolderSource,
    Mapped,
    Predicted,
    Prompted,
    Session,
    SlideSource,
    StreamRun,
    list_images,
    open_folder,
    open_slide_source,
)
from engine.io.slides import Slide
from engine.io.sources import source_hash
from engine.run.journal import ROWS_DIR
from engine.run.state import has_state, read_state
from engine.run.stream import Reader, read_item, tile_reader
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


def _commands(
    model: Path, inp: Path, out: Path, state: Path, home: Path, *extra: str
) -> dict[str, list[str]]:
    """``f2tta run`` and the app's scripted mode (its worker thread runs the same stream loop)."""
    return {
        "cli": [
            sys.executable,
            "-m",
            "engine.cli",
            *run_argv(model, inp, out, state, "--save-every", "1", *extra),
        ],
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
            *(extra[extra.index("--batch") : extra.index("--batch") + 2] if "--batch" in extra else ()),
        ],
    }


def _reference(
    model: Path, inp: Path, method: str, batch: int, maps: str, prompted: str
) -> tuple[str, list[str], list[str], list[str], dict[tuple[int, int, int], str]]:
    """What a run never killed gives: the source id, the items' names and keys in order, each
    image's confidence, and the state's fingerprint after every step, by (images decided, images
    whose map is made, images whose prompted decision is made): with the maps behind, (n, 0, 0)
    ... (N, 0, 0) then (N, 1, 0) ... (N, N, 0), then, ``prompted`` behind, (N, N, 1) ... (N, N, N).
    A method without a prompt step counts every decided image as prompted (its record says so)."""
    session = Session(model, method=method)
    fingerprints = {(0, 0, 0): session.state_fingerprint()}
    mapped = made = 0
    confidences = []
    with contextlib.ExitStack() as stack:
        if inp.is_dir():
            source: FolderSource | SlideSource = open_folder(inp, ("normal", "tumor"))
            reader: Reader = read_item
        else:
            source = open_slide_source(inp, session.card.img_size, session.card.mpp)
            reader = tile_reader(stack.enter_context(Slide(inp)), source.plan)
        run = StreamRun(session, source.items, reader, batch=batch, maps=maps, prompted=prompted)
        behind = run.behind and session.method.has_map_step
        for outcome in run.outcomes():
            if isinstance(outcome, Mapped):
                mapped += 1
            elif isinstance(outcome, Prompted):
                made += 1
            else:
                assert isinstance(outcome, Predicted)
                confidences.append(f"{outcome.step.confidence:.6f}")
                mapped += not behind
                made += not run.prompt_stage
            fingerprints[(session.images_seen, mapped, made)] = session.state_fingerprint()
    names, keys = [it.name for it in source.items], [it.key for it in source.items]
    return source.source_id, names, keys, confidences, fingerprints


def _kill_loop(
    model: Path,
    tmp_path: Path,
    n_images: int,
    kills: int,
    seed: int,
    programs: list[str],
    method: str = DEFAULT_METHOD,
    batch: int = 1,
    slide: bool = False,
    maps: str = "behind",
    prompted: str = "on-demand",
) -> int:
    if slide:
        inp = make_slide(tmp_path / "slide.tif", size=(512, 384), mpp=0.5)
    else:
        inp = tmp_path / "in"
        inp.mkdir()
        for i, img in enumerate(random_images(n_images, seed=5)):
            Image.fromarray(img).save(inp / f"im{i:03d}.png")
        assert [p.name for p in list_images(inp)] == sorted(p.name for p in inp.iterdir())
    assert prompted == "on-demand" or "app" not in programs, "the app leaves them to its review"
    source_id, names, keys, confidences, fingerprints = _reference(model, inp, method, batch, maps, prompted)
    n_images = len(names)

    out, state, home = tmp_path / "preds.csv", tmp_path / "state", tmp_path / "home"
    home.mkdir()
    (home / "settings.json").write_text(json.dumps({"autosave_every": 1}))  # the app saves after every image
    extra = ["--method", method, "--batch", str(batch)] + (["--accept-warnings"] if slide else [])
    extra += ["--maps", maps]  # the app's worker steps as its settings say (maps behind by default)
    # f2tta run without marks and the app leave I-DiPT's prompted decisions to a review (on demand)
    extra += ["--prompted", prompted]
    commands = _commands(model, inp, out, state, home, *extra)
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
            record = meta["extra"].get("sources", {}).get(source_id, {})
            assert record.get("processed", []) == keys[:seen]
            point = (seen, int(record.get("mapped", seen)), int(record.get("prompted", seen)))
            assert point in fingerprints, (
                f"a state saved after {point} (decided, mapped, prompted), inside a batch"
            )
            probe = Session(model, method=method)
            probe.load(state)
            assert probe.state_fingerprint() == fingerprints[point]
    # Resume to the end with f2tta run, which also writes the CSV from the journal.
    final = subprocess.run(commands["cli"], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert final.returncode == 0, final.stderr
    rows = read_rows(out)
    assert [r["item"] for r in rows] == names, "every image once, in arrival order"
    assert [int(r["index"]) for r in rows] == list(range(n_images))
    last = {str(r["key"]): r for r in _journal_rows(state, source_id)}  # the last copy of each row
    assert list(last) == keys and not any(r.get("map_status") for r in last.values()), "every map made"
    assert all(r["map"] != "pending" for r in rows)
    if prompted == "behind":
        assert not any(r.get("prompted_status") for r in last.values()), "every prompted decision made"
    probe = Session(model, method=method)
    probe.load(state)
    assert probe.state_fingerprint() == fingerprints[max(fingerprints)], "the state of a run never killed"
    assert [r["confidence"] for r in rows] == confidences  # same predictions as a run never killed
    return done_kills


@pytest.mark.slow  # a kill loop (43-133 s here); the default suite keeps the folder's batches
def test_sigkill_few_points(tiny_model_path: Path, tmp_path: Path) -> None:
    assert _kill_loop(tiny_model_path, tmp_path, n_images=40, kills=3, seed=1, programs=["cli"]) >= 1


@pytest.mark.slow  # a kill loop (43-133 s here); the default suite keeps the folder's batches
def test_sigkill_app_worker_and_cli_on_one_journal(tiny_model_path: Path, tmp_path: Path) -> None:
    kills = _kill_loop(tiny_model_path, tmp_path, n_images=40, kills=4, seed=3, programs=["app", "cli"])
    assert kills >= 2, "the app was killed at least once"


def test_sigkill_batches_of_a_folder(tiny_model_path: Path, tmp_path: Path) -> None:
    kills = _kill_loop(
        tiny_model_path, tmp_path, n_images=40, kills=3, seed=5, programs=["cli"], method="idipt", batch=4
    )
    assert kills >= 1


@pytest.mark.slow  # a kill loop (43-133 s here); the default suite keeps the folder's batches
def test_sigkill_batches_of_a_slide(tiny_model_path: Path, tmp_path: Path) -> None:
    kills = _kill_loop(
        tiny_model_path, tmp_path, 0, kills=3, seed=9, programs=["cli"], method="idipt", batch=5, slide=True
    )
    assert kills >= 1


@pytest.mark.slow  # a kill loop (43-133 s here); the default suite keeps the folder's batches
def test_sigkill_maps_behind_batches_of_a_slide(tiny_model_path: Path, tmp_path: Path) -> None:
    """The default method at B = 5 on a slide: kills while deciding and while the maps follow."""
    kills = _kill_loop(tiny_model_path, tmp_path, 0, kills=4, seed=13, programs=["cli"], batch=5, slide=True)
    assert kills >= 1


@pytest.mark.slow  # a kill loop (43-133 s here); the default suite keeps the folder's batches
def test_sigkill_maps_inline(tiny_model_path: Path, tmp_path: Path) -> None:
    kills = _kill_loop(tiny_model_path, tmp_path, 24, kills=2, seed=17, programs=["cli"], maps="inline")
    assert kills >= 1


@pytest.mark.slow
def test_sigkill_many_points(tiny_model_path: Path, tmp_path: Path) -> None:
    """I-DiPT's prompted decisions made in the run too: kills land in the prompt step as well."""
    kills = _kill_loop(
        tiny_model_path, tmp_path, n_images=120, kills=30, seed=7, programs=["cli"], prompted="behind"
    )
    print(f"kill points survived: {kills}")
    assert kills >= 20


@pytest.mark.slow
def test_sigkill_many_points_app_worker(tiny_model_path: Path, tmp_path: Path) -> None:
    kills = _kill_loop(
        tiny_model_path, tmp_path, n_images=120, kills=16, seed=11, programs=["app", "app", "cli"]
    )
    print(f"kill points survived: {kills}")
    assert kills >= 10
