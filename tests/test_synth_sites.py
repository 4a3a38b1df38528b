"""The OCT kind and the second site set (``--sites v2``): determinism, the first set unchanged, appearance.

Nothing here runs a model on a target site: the sites are compared by statistics of their images.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from support import learnt_accuracy

from engine.cli import main as cli_main
from engine.data import open_dataset
from lab.synth import SynthError, _oct, generate_arrays, site_names, write_synth
from lab.synth.generate import get_spec

#: Every (kind, site set) pair that exists.
SETS = [("histo", "v1"), ("fundus", "v1"), ("lesion", "v1"), ("oct", "v1")] + [
    (k, "v2") for k in ("histo", "fundus", "lesion")
]


@pytest.mark.parametrize("kind", ["histo", "fundus", "lesion", "oct"])
def test_first_site_set_is_the_default(kind: str) -> None:
    """No ``--sites`` is ``--sites v1``; what v1 was is pinned in test_synth_sites5.py."""
    assert site_names(kind) == site_names(kind, "v1")
    for site in site_names(kind):
        a, la = generate_arrays(kind, site, 2, size=32, seed=11)
        b, lb = generate_arrays(kind, site, 2, size=32, seed=11, sites="v1")
        assert np.array_equal(a, b) and np.array_equal(la, lb), site


@pytest.mark.parametrize("kind", ["histo", "fundus", "lesion"])
def test_second_set_keeps_site1_and_adds_four_new_sites(kind: str) -> None:
    first, second = site_names(kind, "v1"), site_names(kind, "v2")
    assert second[0] == "site1" and len(second) == 5
    assert not set(second[1:]) & set(first), "new sites get new names"
    a, la = generate_arrays(kind, "site1", 5, size=40, seed=4)
    b, lb = generate_arrays(kind, "site1", 5, size=40, seed=4, sites="v2")
    assert np.array_equal(a, b) and np.array_equal(la, lb)
    # The new target sites draw other anatomy than the first set's site of the same position.
    _, l1 = generate_arrays(kind, 1, 40, size=24, seed=4)
    _, l2 = generate_arrays(kind, 1, 40, size=24, seed=4, sites="v2")
    assert not np.array_equal(l1, l2)


@pytest.mark.parametrize(("kind", "sites"), SETS)
def test_generation_is_deterministic_with_sane_values(kind: str, sites: str) -> None:
    for site in site_names(kind, sites):
        a, la = generate_arrays(kind, site, 4, size=40, seed=7, sites=sites)
        b, lb = generate_arrays(kind, site, 4, size=40, seed=7, sites=sites)
        c, _ = generate_arrays(kind, site, 4, size=40, seed=8, sites=sites)
        assert a.shape == (4, 40, 40, 3) and a.dtype == np.uint8 and la.dtype == np.int64
        assert np.array_equal(a, b) and np.array_equal(la, lb)
        assert not np.array_equal(a, c)
        assert set(la.tolist()) <= {0, 1}
        spread = a.reshape(4, -1).max(1).astype(int) - a.reshape(4, -1).min(1)
        assert (spread > 60).all(), (site, spread)  # an image, not a flat field
        assert 20 < a.mean() < 235, site


def _stats(images: np.ndarray) -> np.ndarray:
    """Per-image statistics: channel means and sds, gradient, saturation, unevenness, fine detail."""
    x = images.astype(np.float64)
    lum = x.mean(3)
    grad = (np.abs(np.diff(lum, axis=1)).mean((1, 2)) + np.abs(np.diff(lum, axis=2)).mean((1, 2))) / 2
    sat = (x.max(3) - x.min(3)).mean((1, 2))
    n, h, w = lum.shape
    uneven = lum.reshape(n, 4, h // 4, 4, w // 4).mean((2, 4)).reshape(n, -1).std(1)
    centre = lum[:, 1:-1, 1:-1] * 4
    around = lum[:, :-2, 1:-1] + lum[:, 2:, 1:-1] + lum[:, 1:-1, :-2] + lum[:, 1:-1, 2:]
    detail = np.abs(centre - around).mean((1, 2))
    return np.column_stack([x.mean((1, 2)), x.std((1, 2)), grad, sat, uneven, detail])


def _effect(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """|difference of means| / pooled sd per statistic."""
    pooled = np.sqrt((a.var(0, ddof=1) + b.var(0, ddof=1)) / 2) + 1e-6
    return np.asarray(np.abs(a.mean(0) - b.mean(0)) / pooled)


@pytest.mark.parametrize(("kind", "sites"), [s for s in SETS if s[0] == "oct" or s[1] == "v2"])
def test_every_site_differs_from_the_source_in_appearance(kind: str, sites: str) -> None:
    source = _stats(generate_arrays(kind, "site1", 12, size=48, seed=0, sites=sites)[0])
    again = _stats(generate_arrays(kind, "site1", 12, size=48, seed=1, sites=sites)[0])
    assert _effect(source, again).max() < 1.5, "the statistic separates two samples of one site"
    for site in site_names(kind, sites)[1:]:
        other = _stats(generate_arrays(kind, site, 12, size=48, seed=0, sites=sites)[0])
        assert _effect(source, other).max() > 3.0, site


def test_oct_is_grey_and_its_classes_differ_in_morphology() -> None:
    images, labels = generate_arrays("oct", "site1", 8, size=48, seed=3)
    assert (images[..., 0] == images[..., 1]).all() and (images[..., 1] == images[..., 2]).all()
    spec = get_spec("oct")
    assert spec.classes == ("edema", "normal") and spec.positive_class == "edema"
    assert sorted(set(labels.tolist())) == [0, 1]
    # The class is in the anatomy: oedema thickens the retina (ILM to RPE) and fills it with fluid.
    site = spec.sites[0]
    found: dict[int, list[tuple[float, float]]] = {0: [], 1: []}
    for i in range(40):
        rng = np.random.default_rng(i)
        label = i % 2
        refl, _ = _oct.anatomy(rng, _oct.severity(rng, label), site, 96)
        ilm = (refl > 0.01).argmax(0)
        rpe = refl.argmax(0)
        rows = np.arange(96)[:, None]
        retina = (rows > ilm) & (rows < rpe)
        found[label].append((float((rpe - ilm).mean()), float((retina & (refl < 0.005)).sum())))
    oedema, normal = np.array(found[0]), np.array(found[1])
    assert oedema[:, 0].mean() > normal[:, 0].mean() + 1.5  # pixels thicker on average over the scan
    assert oedema[:, 1].mean() > 5 * max(normal[:, 1].mean(), 1.0)  # fluid pixels


def test_write_synth_second_set(tmp_path: Path) -> None:
    out = tmp_path / "d"
    result = write_synth("fundus", out, per_domain=6, size=40, seed=2, sites="v2")
    meta = json.loads((out / "synth.json").read_text())
    assert meta["site_set"] == "v2" and list(meta["sites"]) == site_names("fundus", "v2")
    assert list(result.counts) == site_names("fundus", "v2")
    ds = open_dataset(out)
    assert ds.domains == tuple(sorted(site_names("fundus", "v2")))
    spec = get_spec("fundus", "v2")
    site = spec.sites[-1]
    images, labels = generate_arrays("fundus", site.name, 6, size=40, seed=2, sites="v2")
    ext = ".png" if site.jpeg_quality is None else ".jpg"
    path = out / site.name / spec.classes[labels[0]] / f"{0:06d}{ext}"
    with Image.open(path) as img:
        assert np.array_equal(np.asarray(img.convert("RGB")), images[0])
    first = json.loads(
        write_synth("oct", tmp_path / "o", per_domain=2, size=32).out.joinpath("synth.json").read_text()
    )
    assert first["site_set"] == "v1" and first["kind"] == "oct"


def test_unknown_site_set_and_a_set_oct_lacks_are_refused() -> None:
    with pytest.raises(SynthError, match="unknown site set"):
        get_spec("histo", "v9")
    with pytest.raises(SynthError, match="oct has no site set v6"):
        generate_arrays("oct", "site1", 2, sites="v6")
    with pytest.raises(SynthError, match="unknown kind"):
        get_spec("xray", "v2")


def test_force_removes_the_site_folders_of_an_earlier_kind_or_set(tmp_path: Path) -> None:
    """fundus (six sites) then lesion --force left fundus's site6 behind: read as a sixth lesion domain."""
    write_synth("fundus", tmp_path, per_domain=2, size=32)
    (tmp_path / "site6" / "notes.txt").write_text("mine")
    write_synth("lesion", tmp_path, per_domain=2, size=32, overwrite=True)
    assert (tmp_path / "site6" / "notes.txt").read_text() == "mine", "what the generator did not write stays"
    assert not list((tmp_path / "site6").rglob("0*.*")), "the fundus images of site6 are gone"
    write_synth("lesion", tmp_path, per_domain=2, size=32, overwrite=True, sites="v2")
    assert not (tmp_path / "site2").exists(), (
        "the first set's site2 was removed (it held only generated files)"
    )
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == sorted(
        [*site_names("lesion", "v2"), "site6"]
    )


def test_stale_site_folders_are_refused_without_force(tmp_path: Path) -> None:
    write_synth("fundus", tmp_path, per_domain=2, size=32)
    for site in site_names("fundus")[:5]:
        shutil.rmtree(tmp_path / site)
    with pytest.raises(SynthError, match=r"earlier f2tta synth run wrote \(site6\)"):
        write_synth("lesion", tmp_path, per_domain=2, size=32)
    assert (tmp_path / "site6").is_dir() and not (tmp_path / "site1").exists(), "nothing was written"


def test_cli_sites_and_oct(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["--per-domain", "2", "--size", "32", "--workers", "1"]
    assert cli_main(["synth", "histo", "--out", str(tmp_path / "h"), "--sites", "v2", *base]) == 0
    out = capsys.readouterr().out
    assert "v2site5: " in out and "wrote 10 histo (v2 sites) images" in out
    assert json.loads((tmp_path / "h" / "synth.json").read_text())["site_set"] == "v2"
    assert cli_main(["synth", "oct", "--out", str(tmp_path / "o"), *base]) == 0
    assert "wrote 10 oct images" in capsys.readouterr().out
    assert cli_main(["synth", "oct", "--out", str(tmp_path / "p"), "--sites", "v6", *base]) == 1
    assert "oct has no site set v6" in capsys.readouterr().err
    assert not (tmp_path / "p" / "site1").exists()
    with pytest.raises(SystemExit):
        cli_main(["synth", "histo", "--out", str(tmp_path / "q"), "--sites", "v9"])


@pytest.mark.slow
def test_oct_source_site_is_learnable() -> None:
    """The OCT classes are learnable on the source site with half the default recipe's budget
    (20 epochs, patience 6, 480 training images; >= 85 % as the histology sites' test asks, 92 %
    measured here). The default recipe's 94-96 % (docs/data.md) took over ten minutes on one
    thread, past the test timeout on CI's two cores."""
    assert learnt_accuracy("oct", "site1") >= 0.85
