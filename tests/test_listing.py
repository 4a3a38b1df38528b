"""Listing input folders (issue 13, item 5): never outside the folder, nothing dropped without a word."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
from hostile_files import encoded, rgb_image

from engine import ImageReadError, list_images, read_image


def _png(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(encoded(rgb_image(), "PNG"))
    return path


def _names(root: Path, files: list[Path]) -> list[str]:
    return [p.relative_to(root).as_posix() for p in files]


def test_symlinks_that_leave_the_folder_are_refused_with_a_message(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "in"
    _png(root / "a.png")
    _png(tmp_path / "outside" / "secret.png")
    (root / "everything").symlink_to("/")  # collected 35 138 files before
    (root / "elsewhere").symlink_to(tmp_path / "outside", target_is_directory=True)
    (root / "stolen.png").symlink_to(tmp_path / "outside" / "secret.png")
    (root / "inner").symlink_to(root / "sub", target_is_directory=True)  # inside: followed, listed once
    _png(root / "sub" / "b.png")
    with caplog.at_level(logging.WARNING):
        files = list_images(root)
    assert [p.name for p in files] == ["a.png", "b.png"]  # b.png once, through the link or not
    for name in ("everything", "elsewhere", "stolen.png"):
        assert f"{root / name}: symbolic link to " in caplog.text
    assert "leaves the input folder" in caplog.text
    from engine.io.images import scan_images

    listing = scan_images(root)
    assert sorted(p.path.name for p in listing.problems) == ["elsewhere", "everything", "stolen.png"]


def test_unreadable_subfolder_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "in"
    _png(root / "a.png")
    locked = root / "locked"
    _png(locked / "hidden.png")
    real_scandir = os.scandir

    def scandir(path: str | os.PathLike[str]) -> object:
        if Path(path) == locked:
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    with caplog.at_level(logging.WARNING):
        files = list_images(root)
    assert _names(root, files) == ["a.png"]
    assert f"{locked}: folder cannot be listed (Permission denied); its images are left out" in caplog.text


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions")
def test_unreadable_subfolder_is_reported_for_real(tmp_path: Path) -> None:
    root = tmp_path / "in"
    _png(root / "a.png")
    _png(root / "locked" / "hidden.png")
    (root / "locked").chmod(0)
    from engine.io.images import scan_images

    try:
        listing = scan_images(root)
    finally:
        (root / "locked").chmod(0o700)
    assert [p.path.name for p in listing.problems] == ["locked"]


def test_gif_is_listed_and_read(tmp_path: Path) -> None:
    root = tmp_path / "in"
    (root / "x.gif").parent.mkdir(parents=True)
    (root / "x.gif").write_bytes(encoded(rgb_image().convert("P"), "GIF"))
    assert _names(root, list_images(root)) == ["x.gif"]
    assert read_image(root / "x.gif").size == (20, 24)


def test_dangling_link_is_reported_not_listed(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    root = tmp_path / "in"
    root.mkdir()
    (root / "gone.png").symlink_to(root / "nowhere.png")
    with caplog.at_level(logging.WARNING):
        assert list_images(root) == []
    assert (
        f"{root / 'gone.png'}: symbolic link to {root / 'nowhere.png'}, which does not exist" in caplog.text
    )


def test_fifo_named_png_is_listed_and_skipped_with_the_right_reason(tmp_path: Path) -> None:
    root = tmp_path / "in"
    root.mkdir()
    os.mkfifo(root / "pipe.png")
    assert _names(root, list_images(root)) == ["pipe.png"]
    with pytest.raises(ImageReadError, match=r"named pipe \(FIFO\)"):
        read_image(root / "pipe.png")
