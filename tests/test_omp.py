"""The engine's OpenMP wait-policy default (engine/_omp.py): only on busy CPUs, never over the user's."""

from __future__ import annotations

import subprocess
import sys

import pytest

from engine._omp import choose_wait_policy


def _no_load_average() -> float:
    raise OSError("no load average here")


@pytest.mark.parametrize(
    ("environ", "load", "expected"),
    [
        ({}, lambda: 2.0, "PASSIVE"),  # the load reaches the 2 CPUs: threads sleep at barriers
        ({}, lambda: 7.5, "PASSIVE"),
        ({}, lambda: 1.9, None),  # idle CPUs: libgomp's default (spin, then sleep) is faster
        ({}, _no_load_average, None),
        ({"OMP_WAIT_POLICY": "ACTIVE"}, lambda: 7.5, None),  # the user's choice stands
        ({"GOMP_SPINCOUNT": "300000"}, lambda: 7.5, None),
    ],
)
def test_passive_only_on_busy_cpus_and_never_over_the_users_choice(
    environ: dict[str, str], load: object, expected: str | None
) -> None:
    env = dict(environ)
    assert choose_wait_policy(env, load, lambda: 2) == expected  # type: ignore[arg-type]
    assert env.get("OMP_WAIT_POLICY") == (expected or environ.get("OMP_WAIT_POLICY"))
    assert env.get("GOMP_SPINCOUNT") == environ.get("GOMP_SPINCOUNT")


_FIRST_TORCH_IMPORT = """
import sys

class Spy:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" and "seen" not in globals():
            globals()["seen"] = "engine._omp" in sys.modules
        return None

sys.meta_path.insert(0, Spy())
import engine
engine.Session  # the names load on first use; this one loads torch
print(seen)
"""


def test_the_choice_is_made_before_torch_is_loaded() -> None:
    """``import engine`` runs engine._omp before anything imports torch (libgomp reads the policy when loaded)."""
    out = subprocess.run(
        [sys.executable, "-c", _FIRST_TORCH_IMPORT], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "True"
