"""``make demo`` (``python -m engine.demo``): runs end to end, prints the per-site table, runs again."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine import DEFAULT_METHOD
from engine.demo import main


def test_demo_runs_twice_and_prints_source_against_adapted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "demo"
    for _ in range(2):  # a second run replaces the first one's outputs
        assert main(["--out", str(out), "--per-domain", "4"]) == 0
        text = capsys.readouterr().out
        assert f"{DEFAULT_METHOD} against the source model, per site (20 images)" in text
        lines = {line.split()[0]: line.split() for line in text.splitlines() if line.startswith("site")}
        assert set(lines) == {"site", "site1", "site2", "site3", "site4", "site5"}
        assert lines["site1"][1] == "(source)" and lines["site1"][2] == "4"
        assert "target mean" in text
    assert (out / "predictions.csv").read_text().count("\n") == 21
