"""The generated patches of models of two or more classes (lab.synth.many_classes)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from lab.synth.many_classes import KINDS, MECHANISMS, patch, site_classes, write_site


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_patches_are_seeded_and_each_mechanism_moves_them(kind: str) -> None:
    cls = KINDS[kind][0]
    base = patch(np.random.default_rng(5), kind, cls)
    assert base.shape == (48, 48, 3) and base.dtype == np.uint8
    assert np.array_equal(base, patch(np.random.default_rng(5), kind, cls))
    for site in (m if m != "fade" else "fade:0.4" for m in MECHANISMS[1:]):
        moved = patch(np.random.default_rng(5), kind, cls, site)
        assert moved.shape == base.shape and not np.array_equal(moved, base), site


def test_classes_differ_and_bad_names_are_refused() -> None:
    rng = np.random.default_rng(0)
    dark = {
        c: float(np.mean([patch(rng, "tissue-4", c).mean() for _ in range(20)])) for c in KINDS["tissue-4"]
    }
    assert dark["inflamed"] < dark["normal"] and dark["tumour"] < dark["normal"]
    with pytest.raises(ValueError, match="no class"):
        patch(rng, "tissue-4", "grade 1")
    with pytest.raises(ValueError, match="unknown site mechanism"):
        patch(rng, "tissue-4", "normal", "sepia")
    with pytest.raises(ValueError, match="fade needs a share"):
        patch(rng, "tissue-4", "normal", "fade")
    with pytest.raises(ValueError, match="scale takes a magnification"):
        patch(rng, "grades-4", "grade 3", "scale:3")
    smaller = patch(np.random.default_rng(2), "grades-4", "grade 3", "scale:0.8")
    assert not np.array_equal(smaller, patch(np.random.default_rng(2), "grades-4", "grade 3", "scale"))


def test_site_mixes_and_folders(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    labels = site_classes(rng, "tissue-4", 4000, 0.5, dominant=True)
    shares = np.bincount(labels, minlength=4) / labels.size
    assert shares == pytest.approx([0.5, 0.375, 0.0625, 0.0625], abs=0.03)
    equal = np.bincount(site_classes(rng, "nuclei-grades", 4000, 0.8), minlength=3) / 4000
    assert equal == pytest.approx([0.1, 0.8, 0.1], abs=0.03)
    # two classes: the one other class has the whole rest, dominant or not
    two = np.bincount(site_classes(rng, "atypia-2", 4000, 0.35, dominant=True), minlength=2) / 4000
    assert KINDS["atypia-2"] == ("normal", "atypical") and two == pytest.approx([0.35, 0.65], abs=0.03)
    write_site(str(tmp_path / "s"), rng, "nuclei-grades", [0, 1, 2, 2], "blur", "s")
    written = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.png"))
    assert written == [
        "s/grade 1/s-0000.png",
        "s/grade 2/s-0002.png",
        "s/grade 2/s-0003.png",
        "s/normal/s-0001.png",
    ]
    assert Image.open(tmp_path / written[0]).size == (48, 48)
