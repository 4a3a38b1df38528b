"""Seeded fuzzing of read_image: mutated headers of every allowed format give an image or a skip, fast."""

from __future__ import annotations

import time
import warnings
from pathlib import Path

import numpy as np
import pytest
from hostile_files import SEEDS, mutate

from engine import ImageReadError, read_image

MAX_SECONDS = 2.0  # CPU time of one read: what the decoder itself spends, whatever else the machine runs
MAX_WALL_SECONDS = 30.0  # wall time: catches a read that blocks or sleeps instead of computing


def _fuzz(tmp_path: Path, count: int, seed: int) -> tuple[int, int, float]:
    """Read ``count`` mutated files round-robin over the seeds; returns (read, skipped, slowest CPU seconds).

    The bound is on the reading thread's CPU time, not wall time: on a shared machine (CI runs
    beside other jobs) a wall-clock bound fails on load, not on the decoder; a second, generous
    wall-clock bound still catches a read that blocks.
    """
    rng = np.random.default_rng(seed)
    seeds = {name: make() for name, make in sorted(SEEDS.items())}
    names = list(seeds)
    path = tmp_path / "fuzz.png"
    read = skipped = 0
    slowest = 0.0
    for i in range(count):
        name = names[i % len(names)]
        path.write_bytes(mutate(seeds[name], rng))
        start, start_cpu = time.perf_counter(), time.thread_time()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # plugins warn about odd tags; only exceptions matter here
                img = read_image(path)
        except ImageReadError as exc:
            skipped += 1
            assert str(exc).startswith(f"{path}: ") and len(str(exc)) > len(f"{path}: "), (name, i)
        except BaseException as exc:
            raise AssertionError(f"case {i} ({name}, seed {seed}): {type(exc).__name__}: {exc}") from exc
        else:
            read += 1
            assert img.mode == "RGB" and min(img.size) >= 1, (name, i)
        elapsed, wall = time.thread_time() - start_cpu, time.perf_counter() - start
        assert elapsed < MAX_SECONDS, f"case {i} ({name}, seed {seed}) took {elapsed:.2f} s of CPU"
        assert wall < MAX_WALL_SECONDS, f"case {i} ({name}, seed {seed}) took {wall:.2f} s (wall)"
        slowest = max(slowest, elapsed)
    return read, skipped, slowest


def test_every_seed_is_a_readable_file_of_an_allowed_format(tmp_path: Path) -> None:
    for name, make in SEEDS.items():
        path = tmp_path / f"{name}.img"
        path.write_bytes(make())
        assert read_image(path).mode == "RGB", name


def test_mutated_headers_of_every_allowed_format(tmp_path: Path) -> None:
    read, skipped, _ = _fuzz(tmp_path, count=100 * len(SEEDS), seed=13)
    assert read > 0 and skipped > 0  # the mutations reach both outcomes


@pytest.mark.slow
def test_twenty_thousand_mutated_files(tmp_path: Path) -> None:
    read, skipped, slowest = _fuzz(tmp_path, count=20_000, seed=2013)
    assert read + skipped == 20_000
    print(f"20000 mutated files: {read} read, {skipped} skipped, slowest {slowest:.3f} s of CPU")
