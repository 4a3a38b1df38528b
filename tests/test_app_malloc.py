"""The app's glibc malloc arena cap (``app/runtime/malloc.py``)."""

from __future__ import annotations

import platform

import pytest

from app.runtime.malloc import DEFAULT_ARENAS, ENV, limit_malloc_arenas

glibc = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc only")


@glibc
def test_cap_is_set_from_the_environment_or_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    monkeypatch.delenv(ENV, raising=False)
    assert limit_malloc_arenas() == DEFAULT_ARENAS
    monkeypatch.setenv(ENV, "4")
    assert limit_malloc_arenas() == 4
    monkeypatch.setenv(ENV, "0")
    assert limit_malloc_arenas() == 0
    monkeypatch.setenv(ENV, "not a number")
    assert limit_malloc_arenas() == DEFAULT_ARENAS
    assert limit_malloc_arenas(3) == 3


@glibc
def test_glibcs_own_setting_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_ARENA_MAX", "1")
    assert limit_malloc_arenas() == 0 and limit_malloc_arenas(2) == 0


def test_no_op_without_glibc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    monkeypatch.setattr(platform, "libc_ver", lambda: ("", ""))
    assert limit_malloc_arenas(2) == 0
