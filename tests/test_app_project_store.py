"""Projects on disk (app.core.projects): removal that survives a concurrent writer."""

from __future__ import annotations

from pathlib import Path

import pytest


def test_deleting_a_project_tries_again_when_a_file_appears_during_removal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The UI thread may write a review file while the worker removes the folder ("not empty")."""
    import shutil

    import app.core.projects as projects

    folder = tmp_path / "p"
    (folder / "review").mkdir(parents=True)
    real, calls = shutil.rmtree, []

    def racing(path: Path) -> None:
        calls.append(path)
        if len(calls) == 1:
            raise OSError(39, "Directory not empty")
        real(path)

    monkeypatch.setattr(projects.shutil, "rmtree", racing)
    projects._remove_tree(folder)
    assert not folder.exists() and len(calls) == 2
    (folder / "review").mkdir(parents=True)
    monkeypatch.setattr(projects.shutil, "rmtree", lambda path: (_ for _ in ()).throw(OSError(39, "busy")))
    with pytest.raises(OSError):
        projects._remove_tree(folder, attempts=2)
