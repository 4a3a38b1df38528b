"""A model card changed under a saved state (issue 42, item 5).

The state was bound to its model's weights (their fingerprint) and nothing covered the card beside
them: a card with the classes reversed, the weights unchanged, resumed a project with exit 0, and
its ``reviews.csv`` named the other class for every mark. A state now records the card's fields
that give the outputs their meaning (classes, positive class, input size, normalisation,
resolution) and is refused, naming what changed, when the card no longer gives them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from app_fixtures import make_folder
from cli_helpers import read_rows, run_argv
from support import card_beside

from app.core.projects import Project
from app.worker.opening import open_journal
from engine import Session
from engine.cli import main as f2tta
from engine.errors import StateError
from engine.run.state import read_state, write_state


def _card(checkpoint: Path) -> Path:
    return checkpoint.with_suffix(".json")


def _edit_card(checkpoint: Path, **changes: object) -> None:
    path = _card(checkpoint)
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))


def _state_after_a_run(checkpoint: Path, state: Path) -> None:
    session = Session(checkpoint, method="source")
    session.save(state)


@pytest.mark.parametrize(
    ("field", "value", "shown"),
    [
        ("classes", ["tumor", "normal"], "classes ['normal', 'tumor'] then, ['tumor', 'normal'] now"),
        ("positive_class", 0, "positive_class 1 then, 0 now"),
        ("mean", [0.4, 0.5, 0.5], "mean [0.5, 0.5, 0.5] then, [0.4, 0.5, 0.5] now"),
        ("mpp", 0.5, "mpp None then, 0.5 now"),
    ],
)
def test_a_state_is_refused_when_its_card_says_something_else(
    tiny_model_path: Path, tmp_path: Path, field: str, value: object, shown: str
) -> None:
    checkpoint = card_beside(tiny_model_path, tmp_path)
    _state_after_a_run(checkpoint, tmp_path / "state")
    _edit_card(checkpoint, **{field: value})
    with pytest.raises(StateError) as caught:
        Session(checkpoint, method="source").load(tmp_path / "state")
    assert shown in str(caught.value) and "Put back the card" in str(caught.value)


def test_what_does_not_change_the_outputs_meaning_may_change(tiny_model_path: Path, tmp_path: Path) -> None:
    """The control: notes in the card (its source domain, its training record) do not refuse a state."""
    checkpoint = card_beside(tiny_model_path, tmp_path)
    _state_after_a_run(checkpoint, tmp_path / "state")
    _edit_card(checkpoint, source_domain="another note", training={"epochs": 3})
    Session(checkpoint, method="source").load(tmp_path / "state")


def test_a_state_saved_before_the_record_is_accepted_and_records_it(
    tiny_model_path: Path, tmp_path: Path
) -> None:
    checkpoint = card_beside(tiny_model_path, tmp_path)
    _state_after_a_run(checkpoint, tmp_path / "state")
    tensors, meta = read_state(tmp_path / "state")
    del meta["model_card"]
    write_state(tmp_path / "state", tensors, meta)
    session = Session(checkpoint, method="source")
    session.load(tmp_path / "state")
    session.save(tmp_path / "state")
    assert read_state(tmp_path / "state")[1]["model_card"]["classes"] == ["normal", "tumor"]


def test_f2tta_run_refuses_to_resume_under_a_reversed_card(
    tiny_model_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    checkpoint = card_beside(tiny_model_path, tmp_path)
    folder = make_folder(tmp_path, 6, labelled="none")
    out, state = tmp_path / "out.csv", tmp_path / "state"
    argv = run_argv(checkpoint, folder, out, state, "--method", "source", "--accept-warnings")
    assert f2tta(argv) == 0
    before = out.read_bytes()
    assert {r["prediction"] for r in read_rows(out)} <= {"normal", "tumor"}
    _edit_card(checkpoint, classes=["tumor", "normal"])
    capsys.readouterr()
    assert f2tta(argv) == 2
    assert "classes ['normal', 'tumor'] then, ['tumor', 'normal'] now" in capsys.readouterr().err
    assert out.read_bytes() == before, "the predictions are left as they were"


def test_the_app_says_the_projects_state_does_not_fit_the_card(tiny_model_path: Path, tmp_path: Path) -> None:
    checkpoint = card_beside(tiny_model_path, tmp_path)
    project = Project(tmp_path / "project", external=True)
    journal, error = open_journal(project, Session(checkpoint, method="source"))
    assert journal is not None and error is None
    journal.save(Session(checkpoint, method="source"))
    journal.close()
    _edit_card(checkpoint, classes=["tumor", "normal"])
    journal, error = open_journal(project, Session(checkpoint, method="source"))
    if journal is not None:
        journal.close()
    assert error is not None and "classes ['normal', 'tumor'] then, ['tumor', 'normal'] now" in error
