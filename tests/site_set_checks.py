"""What the tests of every later site set check (``test_synth_sites3.py`` to ``test_synth_sites6.py``).

Nothing here runs a model: a set is checked by its site names, its site1, determinism, both classes
at every site, and one measurable property per target site that two samples of site1 do not show.

A committed set is pinned by its structure (site names, labels, shapes) exactly and by summary
statistics of its images within tolerances (``tests/data/site_set_pins.json``), not by a hash of its
bytes: the generators compute in floating point, and another processor or numpy build rounds a few
pixels one level the other way (the hashes of four sets failed on an AMD EPYC with numpy 2.4.6).
Run ``python tests/site_set_checks.py KIND SET`` to pin a new set.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lab.synth import generate_arrays, site_names
from lab.synth._site_sets import KIND_SITE_SETS

#: (target images, site1 images) -> whether the target shows its site's property.
Check = Callable[[np.ndarray, np.ndarray], bool]


def lum(x: np.ndarray) -> np.ndarray:
    """Per-pixel luminance (the mean of R, G, B) of a batch (n, h, w, 3)."""
    return np.asarray(x.astype(np.float64).mean(3))


def fine_detail(x: np.ndarray) -> np.ndarray:
    """Per image, the mean distance of each pixel's luminance from the mean of its two vertical
    neighbours (fine detail: blur lowers it, sharpening and noise raise it)."""
    y = lum(x)
    return np.asarray(np.abs(y[:, 1:-1] - (y[:, :-2] + y[:, 2:]) / 2).mean((1, 2)))


def roughness(profiles: np.ndarray) -> np.ndarray:
    """Per profile (a row of ``profiles``, ``(n, length)``), the mean absolute second difference."""
    return np.asarray(np.abs(profiles[:, 2:] - 2 * profiles[:, 1:-1] + profiles[:, :-2]).mean(1))


def lower(target: np.ndarray, source: np.ndarray) -> bool:
    """The target's mean is more than 3 pooled standard deviations below the source's."""
    pooled = np.sqrt((target.var(ddof=1) + source.var(ddof=1)) / 2) + 1e-9
    return bool((source.mean() - target.mean()) / pooled > 3.0)


def higher(target: np.ndarray, source: np.ndarray) -> bool:
    """The target's mean is more than 3 pooled standard deviations above the source's."""
    return lower(source, target)


#: The pins: ``{"sets": {"KIND SET": {site: {"labels": [...], "images": [summary, ...]}}}}``.
PINS = Path(__file__).parent / "data" / "site_set_pins.json"

#: What a pin summarises: three 48 px images (and their labels) of every site of a set, seed 11.
SAMPLE = {"n": 3, "size": 48, "seed": 11}

#: How far (in 0-255 levels) each statistic of an image may move before its set counts as changed.
#: Perturbing every exp, log, power, sin, cos, tanh, arctan2 and sqrt result in the generators by up
#: to 8 units in the last place moved them at most 0.01 (mean), 0.07 (sd), 0.15 (quantiles), 0.08
#: (thumbnail) and 0.04 (detail) over every pinned set; by up to 64 units, 0.14, 0.10, 1.0, 0.32 and
#: 0.14. A 25 % stronger sensor noise at one site moves detail by 0.44; a 2 % display gamma, 0.9.
TOLERANCE = {"mean": 0.25, "sd": 0.25, "quantiles": 1.5, "thumbnail": 0.5, "detail": 0.25}


def image_summary(image: np.ndarray) -> dict[str, list[float]]:
    """What pins one (h, w, 3) image: per channel its mean, sd and 5/50/95 % quantiles; a 4 x 4
    thumbnail of its luminance; its fine detail (the mean absolute Laplacian of the luminance)."""
    x = image.astype(np.float64)
    y = x.mean(2)
    h, w = y.shape
    thumb = y[: h // 4 * 4, : w // 4 * 4].reshape(4, h // 4, 4, w // 4).mean((1, 3))
    lap = 4 * y[1:-1, 1:-1] - y[:-2, 1:-1] - y[2:, 1:-1] - y[1:-1, :-2] - y[1:-1, 2:]
    stats = {
        "mean": x.mean((0, 1)),
        "sd": x.std((0, 1)),
        "quantiles": np.percentile(x.reshape(-1, 3), [5, 50, 95], axis=0).T.ravel(),
        "thumbnail": thumb.ravel(),
        "detail": np.asarray([np.abs(lap).mean()]),
    }
    return {k: [round(float(v), 2) for v in values] for k, values in stats.items()}


def set_summary(kind: str, sites: str) -> dict[str, Any]:
    """Every site of a set: the labels of the pinned sample and its images' summaries."""
    out: dict[str, Any] = {}
    for site in site_names(kind, sites):
        images, labels = generate_arrays(
            kind, site, SAMPLE["n"], size=SAMPLE["size"], seed=SAMPLE["seed"], sites=sites
        )
        assert images.shape == (SAMPLE["n"], SAMPLE["size"], SAMPLE["size"], 3) and images.dtype == np.uint8
        out[site] = {"labels": labels.tolist(), "images": [image_summary(one) for one in images]}
    return out


def load_pins() -> dict[str, Any]:
    """The pinned sets, keyed ``"KIND SET"`` (summaries of ``SAMPLE``, which they record)."""
    data = json.loads(PINS.read_text())
    assert data["sample"] == SAMPLE, f"the pins summarise {data['sample']}, not {SAMPLE}"
    pins: dict[str, Any] = data["sets"]
    return pins


def pin_differences(got: Mapping[str, Any], pinned: Mapping[str, Any]) -> list[str]:
    """What differs between a set's summary and its pin beyond the tolerances (empty: unchanged)."""
    if list(got) != list(pinned):
        return [f"sites {list(got)} != pinned {list(pinned)}"]
    found = []
    for site, mine in got.items():
        if mine["labels"] != pinned[site]["labels"]:
            found.append(f"{site}: labels {mine['labels']} != pinned {pinned[site]['labels']}")
        for i, (a, b) in enumerate(zip(mine["images"], pinned[site]["images"], strict=True)):
            for stat, tol in TOLERANCE.items():
                moved = float(np.abs(np.subtract(a[stat], b[stat])).max())
                if moved > tol:
                    found.append(f"{site} image {i}: {stat} moved {moved:.2f} levels (tolerance {tol})")
    return found


def _write_pins(kind: str, sites: str, replace: bool) -> None:
    """Add (or with ``replace``, recompute) one set's pin in ``PINS``, one line per site."""
    data = json.loads(PINS.read_text()) if PINS.exists() else {"sample": SAMPLE, "sets": {}}
    key = f"{kind} {sites}"
    if key in data["sets"] and not replace:
        raise SystemExit(f"{key} is pinned already; a pinned set must not change (--replace to re-pin)")
    data["sets"][key] = set_summary(kind, sites)
    lines = ['{"sample": ' + json.dumps(data["sample"]) + ', "sets": {']
    for n, (name, one) in enumerate(sorted(data["sets"].items())):
        body = ",\n".join(f"  {json.dumps(site)}: {json.dumps(pin)}" for site, pin in one.items())
        lines.append(f"{json.dumps(name)}: {{\n{body}\n}}" + ("," if n < len(data["sets"]) - 1 else ""))
    PINS.parent.mkdir(exist_ok=True)
    PINS.write_text("\n".join([*lines, "}}"]) + "\n")


def keeps_site1_and_adds_new_sites(kind: str, sites: str, targets: list[str]) -> None:
    """site1 is the first set's, image for image; the target sites are new names with new anatomy."""
    names = site_names(kind, sites)
    assert names[0] == "site1" and len(names) == 5 and sorted(targets) == names[1:]
    others = [s for s in KIND_SITE_SETS[kind] if s != sites]
    for other in others:
        assert not set(names[1:]) & set(site_names(kind, other)), "new sites get new names"
    a, la = generate_arrays(kind, "site1", 5, size=40, seed=4)
    b, lb = generate_arrays(kind, "site1", 5, size=40, seed=4, sites=sites)
    assert np.array_equal(a, b) and np.array_equal(la, lb), "site1 is the first set's site1"
    # The target sites draw other anatomy (and labels) than every other set's site of the same position.
    _, mine = generate_arrays(kind, 1, 40, size=24, seed=4, sites=sites)
    for other in others:
        _, theirs = generate_arrays(kind, 1, 40, size=24, seed=4, sites=other)
        assert not np.array_equal(mine, theirs), other


def deterministic_with_both_classes(kind: str, sites: str) -> None:
    """Every site: the same images for a seed, others for another seed, both classes, not a flat field."""
    for site in site_names(kind, sites):
        a, la = generate_arrays(kind, site, 6, size=40, seed=7, sites=sites)
        b, lb = generate_arrays(kind, site, 6, size=40, seed=7, sites=sites)
        c, _ = generate_arrays(kind, site, 6, size=40, seed=8, sites=sites)
        assert a.shape == (6, 40, 40, 3) and a.dtype == np.uint8
        assert np.array_equal(a, b) and np.array_equal(la, lb)
        assert not np.array_equal(a, c)
        assert sorted(set(la.tolist())) == [0, 1], site
        spread = a.reshape(6, -1).max(1).astype(int) - a.reshape(6, -1).min(1)
        assert (spread > 60).all(), (site, spread)  # an image, not a flat field


def shows_mechanisms(kind: str, sites: str, checks: Mapping[str, Check]) -> None:
    """Each target site shows its property against site1; a second sample of site1 does not."""
    source = generate_arrays(kind, "site1", 12, size=96, seed=0, sites=sites)[0]
    again = generate_arrays(kind, "site1", 12, size=96, seed=1, sites=sites)[0]
    for site, check in checks.items():
        target = generate_arrays(kind, site, 12, size=96, seed=0, sites=sites)[0]
        assert check(target, source), site
        # The property is the site's, not any site's: site1 against itself does not show it.
        assert not check(again, source), f"{site}'s property separates two samples of site1"


if __name__ == "__main__":  # python tests/site_set_checks.py KIND SET [--replace]
    args = [a for a in sys.argv[1:] if a != "--replace"]
    _write_pins(args[0], args[1], "--replace" in sys.argv)


def site_set_tests(
    new: list[tuple[str, str]], properties: Mapping[tuple[str, str], Mapping[str, Check]]
) -> type:
    """The tests a later site set's file runs on each of its ``(kind, sites)`` in ``new``, with
    ``properties`` the check of each target site: its site names and site1, its determinism and both
    classes, and each target site's mechanism. A test file assigns the class to a ``Test`` name."""

    @pytest.mark.parametrize(("kind", "sites"), new)
    class TestSiteSet:
        def test_new_set_keeps_site1_and_adds_four_new_sites(self, kind: str, sites: str) -> None:
            keeps_site1_and_adds_new_sites(kind, sites, list(properties[(kind, sites)]))

        def test_new_set_is_deterministic_with_both_classes(self, kind: str, sites: str) -> None:
            deterministic_with_both_classes(kind, sites)

        def test_each_new_site_shows_its_mechanism(self, kind: str, sites: str) -> None:
            shows_mechanisms(kind, sites, properties[(kind, sites)])

    return TestSiteSet


def synth_cli(
    out: Path, kind: str, sites: str, capsys: pytest.CaptureFixture[str]
) -> tuple[dict[str, Any], str]:
    """``f2tta synth KIND --sites SITES`` into ``out`` (two images a site, 32 px): it exits 0, says
    what it wrote, its ``synth.json`` names the set and its sites, and each site's folder holds its
    two images in the format ``synth.json`` gives it; that file's content and what the command printed."""
    from engine.cli import main as cli_main

    args = [
        "synth",
        kind,
        "--out",
        str(out),
        "--sites",
        sites,
        "--per-domain",
        "2",
        "--size",
        "32",
        "--workers",
        "1",
    ]
    assert cli_main(args) == 0
    printed = capsys.readouterr().out
    assert f"wrote 10 {kind} ({sites} sites) images" in printed
    meta: dict[str, Any] = json.loads((out / "synth.json").read_text())
    assert meta["site_set"] == sites and list(meta["sites"]) == site_names(kind, sites)
    for name, site in meta["sites"].items():
        suffix = {"png": "*.png", "jpeg": "*.jpg"}[site["format"]]
        assert len(list((out / name).rglob(suffix))) == 2, name
    return meta, printed
