"""Dataset readers: the three layouts, the per-domain split, errors and unreadable files."""

from __future__ import annotations

import csv
import json
import logging
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from engine.data import DatasetError, Item, open_dataset, split_dataset, split_items
from engine.data.readers import camelyon_patch_path
from engine.training import load_items


def _png(path: Path, value: int = 128, size: int = 8) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.full((size, size, 3), value, np.uint8)).save(path)
    return path


def _folders(root: Path, layout: dict[str, dict[str, int]]) -> Path:
    for domain, classes in layout.items():
        for cls, n in classes.items():
            (root / domain / cls).mkdir(parents=True, exist_ok=True)
            for i in range(n):
                _png(root / domain / cls / f"img{i}.png", value=(10 * i) % 256)
    return root


def test_domain_folders(tmp_path: Path) -> None:
    root = _folders(
        tmp_path / "ds", {"b_site": {"tumor": 3, "normal": 2}, "a_site": {"normal": 4, "tumor": 1}}
    )
    _png(root / "a_site" / "stray.png")  # no class folder: ignored
    (root / "a_site" / "normal" / "notes.txt").write_text("not an image")
    ds = open_dataset(root)
    assert ds.layout == "folders"
    assert ds.classes == ("normal", "tumor")
    assert ds.domains == ("a_site", "b_site")
    assert ds.positive_class == 1
    assert len(ds.items) == 10
    assert ds.class_counts("b_site") == {"normal": 2, "tumor": 3}
    assert all(it.path.suffix == ".png" for it in ds.items)
    assert {it.label for it in ds.domain_items("a_site") if "tumor" in it.path.parts} == {1}
    assert ds.skipped == []


def test_all_image_extensions_are_listed(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    img = Image.fromarray(np.zeros((8, 8, 3), np.uint8))
    for i, ext in enumerate(["png", "jpg", "jpeg", "tif", "tiff", "bmp", "PNG"]):
        (root / "d" / ("x" if i % 2 else "y")).mkdir(parents=True, exist_ok=True)
        img.save(root / "d" / ("x" if i % 2 else "y") / f"f{i}.{ext}")
    ds = open_dataset(root)
    assert len(ds.items) == 7
    for it in ds.items:
        assert ds.read(it, size=16) is not None


def test_positive_class_by_name_index_and_hint(tmp_path: Path) -> None:
    root = _folders(tmp_path / "ds", {"s": {"glaucoma": 2, "normal": 2}})
    assert open_dataset(root).positive_class == 1
    assert open_dataset(root, positive_class="glaucoma").positive_class == 0
    assert open_dataset(root, positive_class=0).positive_class == 0
    (root / "synth.json").write_text(json.dumps({"positive_class": "glaucoma"}))
    assert open_dataset(root).positive_class == 0
    with pytest.raises(DatasetError, match="not one of"):
        open_dataset(root, positive_class="tumour")
    with pytest.raises(DatasetError, match="out of range"):
        open_dataset(root, positive_class=5)


def test_manifest_csv(tmp_path: Path) -> None:
    _png(tmp_path / "imgs" / "a.png")
    _png(tmp_path / "imgs" / "b.png")
    _png(tmp_path / "imgs" / "c.png")
    absolute = _png(tmp_path / "elsewhere" / "d.png")
    manifest = tmp_path / "list.csv"
    manifest.write_text(
        "path,label,domain\n"
        "imgs/a.png,tumor,h2\n"
        "imgs/b.png,normal,h1\n"
        "imgs/c.png,tumor,h1\n"
        f"{absolute},normal,h2\n"
        "imgs/missing.png,normal,h1\n"
    )
    ds = open_dataset(manifest)
    assert ds.layout == "manifest"
    assert ds.classes == ("normal", "tumor")
    assert ds.domains == ("h1", "h2")
    assert sorted((it.path.name, it.label, it.domain) for it in ds.items) == [
        ("a.png", 1, "h2"),
        ("b.png", 0, "h1"),
        ("c.png", 1, "h1"),
        ("d.png", 0, "h2"),
    ]
    assert [s.path.name for s in ds.skipped] == ["missing.png"]
    assert "cannot access" in ds.skipped[0].reason


def test_manifest_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("file,class\nx.png,a\n")
    with pytest.raises(DatasetError, match="unknown CSV"):
        open_dataset(bad)
    blank = tmp_path / "blank.csv"
    blank.write_text("path,label,domain\nx.png,,h1\n")
    with pytest.raises(DatasetError, match="line 2"):
        open_dataset(blank)


def _wilds(root: Path, index_column: bool) -> list[tuple[int, int, int, int, int, int]]:
    rows = [  # patient, node, x, y, tumor, center
        (4, 4, 3328, 21792, 1, 0),
        (4, 4, 3360, 21792, 0, 0),
        (15, 1, 100, 200, 1, 1),
        (15, 1, 132, 200, 0, 1),
        (102, 2, 64, 96, 0, 4),
        (102, 2, 96, 96, 1, 4),
    ]
    with (root / "metadata.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        header = ["patient", "node", "x_coord", "y_coord", "tumor", "slide", "center", "split"]
        w.writerow(([""] if index_column else []) + header)
        for i, (p, n, x, y, t, c) in enumerate(rows):
            # The real file writes the patient zero-padded ("004"); accept it either way.
            patient = f"{p:03d}" if i % 2 == 0 else str(p)
            w.writerow(([str(i)] if index_column else []) + [patient, n, x, y, t, p * 10 + n, c, i % 2])
            _png(root / camelyon_patch_path(str(p), str(n), str(x), str(y)))
    return rows


@pytest.mark.parametrize("index_column", [True, False])
def test_wilds_camelyon17(tmp_path: Path, index_column: bool) -> None:
    root = tmp_path / "camelyon17_v1.0"
    root.mkdir()
    _wilds(root, index_column)
    for target in (root, tmp_path, root / "metadata.csv"):
        ds = open_dataset(target)
        assert ds.layout == "camelyon17"
        assert ds.classes == ("normal", "tumor")
        assert ds.domains == ("center_0", "center_1", "center_4")
        assert ds.positive_class == 1
        assert len(ds.items) == 6 and not ds.skipped
    first = min(ds.items, key=lambda it: str(it.path))
    assert first.path == root / "patches/patient_004_node_4/patch_patient_004_node_4_x_3328_y_21792.png"
    assert first.label == 1 and first.domain == "center_0"


def test_camelyon_patch_path_padding() -> None:
    expected = "patches/patient_004_node_4/patch_patient_004_node_4_x_3328_y_21792.png"
    assert camelyon_patch_path("4", "4", "3328", "21792") == expected
    assert camelyon_patch_path("004", "4", "3328", "21792") == expected
    assert camelyon_patch_path("99", "0", "1.0", "2").startswith("patches/patient_099_node_0/")


def test_wilds_missing_patch_is_skipped(tmp_path: Path) -> None:
    _wilds(tmp_path, index_column=True)
    victim = tmp_path / camelyon_patch_path("15", "1", "100", "200")
    victim.unlink()
    ds = open_dataset(tmp_path)
    assert len(ds.items) == 5
    assert [s.path for s in ds.skipped] == [victim]


def test_split_proportions_and_determinism(tmp_path: Path) -> None:
    root = _folders(tmp_path / "ds", {"a": {"x": 50, "y": 50}, "b": {"x": 10, "y": 10}})
    ds = open_dataset(root)
    splits = split_dataset(ds, seed=3)
    assert set(splits) == {"a", "b"}
    a = splits["a"]
    assert (len(a.train), len(a.val), len(a.test)) == (60, 15, 25)
    b = splits["b"]
    assert (len(b.train), len(b.val), len(b.test)) == (12, 3, 5)
    for sp, domain in ((a, "a"), (b, "b")):
        parts = [set(sp.train), set(sp.val), set(sp.test)]
        assert set().union(*parts) == set(ds.domain_items(domain))
        assert sum(len(p) for p in parts) == len(ds.domain_items(domain))
    assert split_dataset(ds, seed=3) == splits
    assert split_dataset(ds, seed=4)["a"].test != a.test
    # The split does not depend on the listing order.
    items = ds.domain_items("a")
    assert split_items(list(reversed(items)), 3, "a") == a


def test_split_of_a_domain_is_independent_of_other_domains(tmp_path: Path) -> None:
    root = _folders(tmp_path / "ds", {"a": {"x": 8, "y": 8}, "b": {"x": 3, "y": 3}})
    before = split_dataset(open_dataset(root), seed=0)["a"]
    _folders(root, {"c": {"x": 5, "y": 5}})
    assert split_dataset(open_dataset(root), seed=0)["a"] == before


def test_empty_domain_is_an_error(tmp_path: Path) -> None:
    root = _folders(tmp_path / "ds", {"good": {"x": 2, "y": 2}})
    (root / "hollow" / "x").mkdir(parents=True)
    with pytest.raises(DatasetError, match="hollow"):
        open_dataset(root)


def test_no_domains_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "ds").mkdir()
    with pytest.raises(DatasetError, match="no domain folders"):
        open_dataset(tmp_path / "ds")
    with pytest.raises(DatasetError, match="not found"):
        open_dataset(tmp_path / "nowhere")


def test_single_class_source_is_an_error(tmp_path: Path) -> None:
    root = _folders(tmp_path / "ds", {"mixed": {"x": 2, "y": 2}, "pure": {"x": 3}})
    ds = open_dataset(root)  # fine as a target domain
    assert len(ds.require_source("mixed")) == 4
    with pytest.raises(DatasetError, match="single class"):
        ds.require_source("pure")
    with pytest.raises(DatasetError, match="no domain 'absent'"):
        ds.require_source("absent")


def test_corrupt_file_is_reported_when_read(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    root = _folders(tmp_path / "ds", {"s": {"x": 3, "y": 3}})
    corrupt = root / "s" / "x" / "img1.png"
    corrupt.write_bytes(b"\x89PNG\r\n\x1a\n" + b"garbage" * 10)
    empty = root / "s" / "y" / "img2.png"
    empty.write_bytes(b"")
    ds = open_dataset(root)  # listing only stats files: the corrupt one is not decoded here
    assert corrupt in {it.path for it in ds.items}
    assert [s.path for s in ds.skipped] == [empty]
    assert "empty" in ds.skipped[0].reason

    item = next(it for it in ds.items if it.path == corrupt)
    with caplog.at_level(logging.WARNING):
        assert ds.read(item) is None
    assert str(corrupt) in caplog.text
    assert ds.skipped[-1].path == corrupt and ds.skipped[-1].reason

    skipped: list = []
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        x, y = load_items(ds.items, 16, skipped)
    assert x.shape == (4, 3, 16, 16) and y.tolist() == [0, 0, 1, 1]
    assert [s.path for s in skipped] == [corrupt]
    assert str(corrupt) in caplog.text


def test_header_check_catches_corrupt_files_at_listing(tmp_path: Path) -> None:
    root = _folders(tmp_path / "ds", {"s": {"x": 2, "y": 2}})
    bad = root / "s" / "y" / "img0.png"
    bad.write_bytes(b"not an image at all")
    ds = open_dataset(root, check="header")
    assert [s.path for s in ds.skipped] == [bad]
    assert len(ds.items) == 3


def test_item_is_hashable_and_frozen() -> None:
    it = Item(Path("a.png"), 1, "d")
    assert {it: 1}[Item(Path("a.png"), 1, "d")] == 1
    with pytest.raises(AttributeError):
        it.label = 2  # type: ignore[misc]


# --- issue 13: datasets never reach outside their folder; poison pills are skips ------------------


@pytest.mark.parametrize(
    "given",
    ["../outside/x.png", "imgs/../../outside/x.png", "{outside}/x.png", "imgs/link_out.png"],
    ids=["dotdot", "dotdot-through-folder", "absolute", "symlink"],
)
def test_manifest_paths_outside_its_folder_are_refused(tmp_path: Path, given: str) -> None:
    _png(tmp_path / "outside" / "x.png")
    base = tmp_path / "data"
    _png(base / "imgs" / "a.png")
    _png(base / "imgs" / "b.png")
    (base / "imgs" / "link_out.png").symlink_to(tmp_path / "outside" / "x.png")
    manifest = base / "list.csv"
    manifest.write_text(
        "path,label,domain\nimgs/a.png,tumor,h1\nimgs/b.png,normal,h1\n"
        + given.format(outside=tmp_path / "outside")
        + ",normal,h1\n"
    )
    with pytest.raises(
        DatasetError, match=r"list\.csv, line 4: .* lies outside the folder of list\.csv"
    ) as info:
        open_dataset(manifest)
    assert "allow_outside=True" in str(info.value)
    ds = open_dataset(manifest, allow_outside=True)  # the explicit option
    assert len(ds.items) == 3


def test_wilds_metadata_cannot_point_outside(tmp_path: Path) -> None:
    root = tmp_path / "wilds"
    root.mkdir()
    _wilds(root, index_column=False)
    with (root / "metadata.csv").open("a", newline="") as fh:
        csv.writer(fh).writerow(["../../../../../../etc", 1, 0, 0, 0, 1, 0, 0])
    with pytest.raises(DatasetError, match=r"lies outside the folder of metadata\.csv"):
        open_dataset(root)


def test_dataset_folder_symlinks_out_are_recorded_not_followed(tmp_path: Path) -> None:
    root = _folders(tmp_path / "ds", {"s": {"x": 2, "y": 2}})
    _folders(tmp_path / "other", {"t": {"x": 2, "y": 2}})
    (root / "borrowed").symlink_to(tmp_path / "other" / "t", target_is_directory=True)  # a domain
    (root / "s" / "x" / "more").symlink_to(tmp_path / "other" / "t" / "y", target_is_directory=True)
    ds = open_dataset(root)
    assert ds.domains == ("s",) and len(ds.items) == 4
    assert sorted(s.path.name for s in ds.skipped) == ["borrowed", "more"]
    assert all("leaves the" in s.reason for s in ds.skipped)
    wide = open_dataset(root, allow_outside=True)
    assert wide.domains == ("borrowed", "s") and len(wide.items) == 10


def test_poison_pill_tiff_is_a_skip_when_read(tmp_path: Path) -> None:
    from hostile_files import tiff_undefined_strip_offsets

    root = _folders(tmp_path / "ds", {"s": {"x": 2, "y": 2}})
    pill = root / "s" / "x" / "img0.png"
    pill.write_bytes(tiff_undefined_strip_offsets())
    ds = open_dataset(root)
    item = next(it for it in ds.items if it.path == pill)
    assert ds.read(item) is None  # a TypeError inside Pillow before
    assert ds.skipped[-1].path == pill and "TypeError" in ds.skipped[-1].reason


def test_header_check_refuses_postscript_without_ghostscript(tmp_path: Path) -> None:
    from hostile_files import postscript

    root = _folders(tmp_path / "ds", {"s": {"x": 2, "y": 2}})
    ps = root / "s" / "x" / "img1.png"
    ps.write_bytes(postscript())
    ds = open_dataset(root, check="header")
    assert [s.path for s in ds.skipped] == [ps]
    assert "PostScript/EPS is never opened" in ds.skipped[0].reason
