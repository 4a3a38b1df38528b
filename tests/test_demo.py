"""``make demo`` (``python -m lab.demo``): one folder per site, the per-site table, a simulated reviewer."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lab.demo import REVIEWS, main


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
        # six images per folder: no operating point can be fitted, and the demo says per site why
        # nothing changed: too few images, or a rule that would call some images otherwise awaits reviews
        said = [line for line in text.splitlines() if line.strip().startswith("adapting changed no decision")]
        assert len(said) == 5, said
        too_few = "no site threshold is fitted to this folder's 6 images yet: too few images (a site needs 40"
        assert all(too_few in line or "would call some images otherwise" in line for line in said), said
        assert too_few in said[0], said  # site1, the source site
        assert "adapting changed no decision" in text
        assert "simulated reviewer" in text
        _check_the_answers_line(text)
    assert sorted(p.name for p in (out / "predictions").glob("site?.csv")) == [
        f"site{i}.csv" for i in range(1, 6)
    ]
    assert (out / "predictions" / "site2.csv").read_text().count("\n") == 7


@pytest.mark.slow
def test_the_demo_says_its_gain_comes_from_the_simulated_reviewers_answers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 38: the gain is the answers' (nothing changes before them), and the count is the one given."""
    assert main(["--out", str(tmp_path / "demo"), "--per-site", "60"]) == 0
    text = capsys.readouterr().out
    assert _check_the_answers_line(text) > 0
    after = next(line for line in text.splitlines() if line.startswith("after the reviews"))
    assert float(after.split("target mean gain ")[1].split()[0]) > 0


def _check_the_answers_line(text: str) -> int:
    """Each site says how many answers it was given and who decides it now; the closing line says
    the gain came from their sum (the decisions before them changed nothing). Returns the sum."""
    before = next(line for line in text.splitlines() if line.startswith("all "))
    assert "target mean gain +0.0 points; 0.0 % of the decisions changed" in before
    given = {
        line.split(":")[0]: int(line.split(":")[1].split()[0])
        for line in text.splitlines()
        if re.match(r"site\d: \d+ answer\(s\); now .* decides this folder$", line)
    }
    assert sorted(given) == [f"site{i}" for i in range(1, 6)]
    each = ", ".join(f"{site} {n}" for site, n in given.items())
    assert f"all of it comes from the simulated reviewer's {sum(given.values())} answers ({each})" in text
    return sum(given.values())


def test_the_readme_says_how_many_answers_the_demo_gives() -> None:
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    line = " ".join(readme.split("make demo ")[1].split("make test")[0].replace("#", " ").split())
    assert (
        f"answers up to {REVIEWS} questions" in line
        and "all the gain it prints comes from those answers" in line
    )
