"""Exports written completely or reported as failed (issue 21, cases 1, 4, 6, 7, 14 and "also seen").

A full disk gave "Reports written … report.pdf" and a 53 kB PDF without an end marker; the PDF
cut tables at the page end (10 of 25 error rows, 26 of 1 998 classes); a name that is not UTF-8
left no report and an empty ``.predictions.csv.tmp``; a FIFO named ``report.pdf`` was replaced;
a right-to-left override laid a name out reversed; a SIGKILL during the export left the new CSV
beside the old PDF and an orphan ``.report.pdf.tmp``.
"""

from __future__ import annotations

import contextlib
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from app_fixtures import make_folder, report_data, sample_row
from app_studio import Studio, exported, read_pdf_text

ROOT = Path(__file__).resolve().parents[1]
REPORT_FILES = {"predictions.csv", "run_config.json", "report.pdf"}


def test_pdf_tables_continue_across_pages(tmp_path: Path, qapp: object) -> None:
    from app.reports.pdf import write_pdf

    errors = tuple(
        f"/data/scans/{'deeply nested folder ' * 28}/case {i}: cannot be read (truncated) ERRTOKEN{i:02d}"
        for i in range(25)
    )
    classes = [f"class{i:04d}" for i in range(1998)]
    data = report_data(
        (sample_row(0),), errors=errors, card={"arch": "vit_tiny_patch16_224", "classes": classes}
    )
    pages, text = read_pdf_text(write_pdf(tmp_path / "r.pdf", data))
    shown_errors = [i for i in range(25) if f"ERRTOKEN{i:02d}" in text]
    assert len(shown_errors) == 25, f"{len(shown_errors)} of 25 error rows in the PDF"
    shown_classes = sum(f"class{i:04d}" in text for i in range(1998))
    assert shown_classes == 1998, f"{shown_classes} of 1998 classes in the PDF"
    assert f"{pages} / {pages}" in text


def test_control_characters_in_names_are_neutralised_in_the_pdf(tmp_path: Path, qapp: object) -> None:
    from app.reports.pdf import write_pdf

    rows = (
        sample_row(0, name="\u202egnp.exe.png", guard_message="collapse guard after image 0: reset"),
        sample_row(1, name="two\nlines.png", guard_message="collapse guard after image 1: reset"),
    )
    _, text = read_pdf_text(write_pdf(tmp_path / "r.pdf", report_data(rows)))
    assert "\u202e" not in text and "\\u202egnp.exe.png" in text
    assert "two\\nlines.png" in text


def test_a_truncated_pdf_is_never_accepted() -> None:
    from app.reports.export import BrokenReportError, check_pdf

    body = b"%PDF-1.4\n1 0 obj\n<<>>\nendobj\n"
    good = body + b"xref\n0 1\ntrailer\n<<>>\nstartxref\n" + str(len(body)).encode() + b"\n%%EOF\n"
    check_pdf(good)
    moved = good.replace(b"startxref\n" + str(len(body)).encode(), b"startxref\n3")
    for broken in (good[:-20], good[:30], b"<html>" + good, moved):
        with pytest.raises(BrokenReportError):
            check_pdf(broken)


@contextlib.contextmanager
def _tiny_disk(path: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` at ``path`` (root with mount rights only: skipped otherwise)."""
    path.mkdir()
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True
    )
    if result.returncode != 0:
        pytest.skip("mounting a small tmpfs needs root with mount rights")
    try:
        yield path
    finally:
        subprocess.run(["umount", str(path)], check=False)


def test_a_full_disk_fails_the_export_and_changes_nothing(
    studio: Studio, tmp_path: Path, qtbot: object
) -> None:
    c = studio.processed(make_folder(tmp_path, 6, labelled="csv"))
    with _tiny_disk(tmp_path / "disk", "40k") as disk:
        ok, outcome = exported(c, disk, qtbot)
        names = {p.name for p in disk.iterdir()}
        pdf = (disk / "report.pdf").read_bytes() if "report.pdf" in names else b""
        assert not ok and "No space left on device" in str(outcome), f"{outcome}; a PDF of {len(pdf)} bytes"
        assert not names & REPORT_FILES and not any(n.endswith(".tmp") for n in names), names


def test_a_failing_pdf_stage_changes_nothing(
    studio: Studio, tmp_path: Path, qtbot: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a small disk at hand: the PDF's staging fails as on a full disk; the earlier set stays."""
    import app.reports.export

    c = studio.processed(make_folder(tmp_path, 4, labelled="csv"))
    out = tmp_path / "reports"
    ok, _ = exported(c, out, qtbot)
    assert ok
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    real = app.reports.export.stage

    def full_disk(directory: Path, name: str, data: bytes) -> None:
        if name == "report.pdf":
            raise OSError(28, "No space left on device")
        real(directory, name, data)

    monkeypatch.setattr(app.reports.export, "stage", full_disk)
    monkeypatch.setattr("app.reports.pdf.stage", full_disk)
    ok, message = exported(c, out, qtbot)
    assert not ok and "No space left on device" in str(message) and "unchanged" in str(message)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before, "the earlier reports, as they were"


def test_an_export_to_a_fifo_or_device_is_refused(studio: Studio, tmp_path: Path, qtbot: object) -> None:
    c = studio.processed(make_folder(tmp_path, 4, labelled="csv"))
    out = tmp_path / "reports"
    out.mkdir()
    os.mkfifo(out / "report.pdf")
    ok, message = exported(c, out, qtbot)
    assert not ok and "not a regular file" in str(message)
    assert stat.S_ISFIFO(os.lstat(out / "report.pdf").st_mode)
    assert sorted(p.name for p in out.iterdir()) == ["report.pdf"], "nothing else written"


def test_names_that_are_not_utf8_are_exported(studio: Studio, tmp_path: Path, qtbot: object) -> None:
    folder = make_folder(tmp_path, 3, labelled="none").rename(tmp_path / os.fsdecode(b"site\xe9"))
    (folder / "img001.png").rename(folder / os.fsdecode(b"caf\xe9.png"))
    c = studio.processed(folder)
    out = tmp_path / os.fsdecode(b"reports\xff")
    ok, paths = exported(c, out, qtbot)
    assert ok, paths
    assert {p.name for p in out.iterdir()} == REPORT_FILES
    assert b"caf\xe9.png" in (out / "predictions.csv").read_bytes(), (
        "the name's bytes, as f2tta run keeps them"
    )
    assert "site\\udce9" in (out / "run_config.json").read_text(encoding="ascii"), "escaped in JSON"


KILL = """
import os, signal, sys
from pathlib import Path
import app.reports.export as export

directory, kill_after = Path(sys.argv[1]), int(sys.argv[2])
export.prepare(directory, ["predictions.csv", "run_config.json", "report.pdf", "tiles.geojson"])
for name in ("predictions.csv", "run_config.json", "report.pdf"):
    export.stage(directory, name, b"new " + name.encode())
real, done = os.replace, [0]
def replace(src, dst):
    if done[0] == kill_after:
        os.kill(os.getpid(), signal.SIGKILL)
    real(src, dst)
    done[0] += 1
os.replace = replace
export.commit(directory, ["predictions.csv", "run_config.json", "report.pdf"],
              ["predictions.csv", "run_config.json", "report.pdf", "tiles.geojson"])
"""


@pytest.mark.parametrize("kill_after", [0, 1, 2, 3, 99], ids=["marker", "first", "second", "third", "none"])
def test_an_export_killed_at_any_point_leaves_one_whole_set(tmp_path: Path, kill_after: int) -> None:
    """Killed while the marker is written: the old set; after it: the next export completes the new one."""
    from app.reports.export import MARKER, prepare

    out = tmp_path / "reports"
    out.mkdir()
    for name in (*REPORT_FILES, "tiles.geojson"):
        (out / name).write_bytes(b"old " + name.encode())
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", KILL, str(out), str(kill_after)], env=env, capture_output=True
    )
    assert done.returncode == (0 if kill_after == 99 else -9), done.stderr[-2000:]
    prepare(out, [*REPORT_FILES, "tiles.geojson"])  # what the next export does first
    files = {p.name: p.read_bytes() for p in out.iterdir()}
    assert MARKER not in files and not any(n.endswith(".tmp") for n in files), sorted(files)
    marker_written = kill_after > 0
    if marker_written:
        assert files == {name: b"new " + name.encode() for name in REPORT_FILES}, "the new set, whole"
    else:
        assert files == {name: b"old " + name.encode() for name in (*REPORT_FILES, "tiles.geojson")}


def test_a_marker_names_only_report_files(tmp_path: Path) -> None:
    """The marker is a file in the user's folder: what it names beyond the report kinds is not touched."""
    import json

    from app.reports.export import MARKER, prepare
    from app.reports.files import REPORT_KINDS

    out = tmp_path / "reports"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    (tmp_path / "outside.txt").write_text("mine too")
    plan = {
        "format": "f2tta-export/1",
        "replace": ["../outside.txt"],
        "remove": ["notes.txt", "../outside.txt"],
    }
    (out / MARKER).write_text(json.dumps(plan))
    prepare(out, REPORT_KINDS)
    assert (out / "notes.txt").read_text() == "mine" and (tmp_path / "outside.txt").read_text() == "mine too"
    assert not (out / MARKER).exists()
