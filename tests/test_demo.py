"""``make demo`` (``python -m engine.demo``): one folder per site, the per-site table, a simulated reviewer."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.demo import main


def test_demo_runs_twice_and_says_why_a_small_site_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "demo"
    for _ in range(2):  # a second run replaces the first one's outputs
        assert main(["--out", str(out), "--per-site", "6", "--reviews", "3"]) == 0
        text = capsys.readouterr().out
        lines = {line.split()[0]: line.split() for line in text.splitlines() if line.startswith("site")}
        assert {"site1", "site2", "site3", "site4", "site5"} <= set(lines)
        assert lines["site1"][1] == "(source)" and lines["site1"][2] == "6"
        assert "target mean gain" in text and "fixed / " in text
        # six images per folder: no operating point can be fitted, and the demo says so per site
        assert text.count("a site needs 40 before its operating point is fitted; this folder has 6") == 5
        assert "adapting changed no decision" in text
        assert "simulated reviewer" in text
    assert sorted(p.name for p in (out / "predictions").glob("site?.csv")) == [
        f"site{i}.csv" for i in range(1, 6)
    ]
    assert (out / "predictions" / "site2.csv").read_text().count("\n") == 7
