"""``f2tta run`` over a cohort (issue 43, items 1, 2 and 5): each input one site with its own
state, CSV and GeoJSON, the rows of a run of that input alone, one summary; resumed without
processing anything twice; bad input refused with a clear message before anything changes.

The kill loops and Ray are in ``tests/test_cohort_slow.py``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
from cohort_helpers import cohort_slide, cohort_slides, csv_rows, run_cohort, summary_rows
from PIL import Image
from support import random_images

from engine.cli import main as f2tta
from engine.io.cohort import CohortError, cohort_inputs, read_manifest, slides_in
from engine.io.sources import open_folder, source_hash
from engine.run.lock import DirectoryLock
from tests.cli_helpers import run_argv

THREADS = ["--threads", str(torch.get_num_threads())]  # the thread count of the single runs here


def _single(model: Path, inp: Path, state: Path, out: Path, *extra: str) -> int:
    argv = run_argv(model, inp, out, state, "--method", "source", "--accept-warnings", *extra)
    return f2tta(argv)


def _image_folder(folder: Path, n: int = 12) -> Path:
    folder.mkdir(parents=True)
    for i, img in enumerate(random_images(n, seed=3)):
        Image.fromarray(img).save(folder / f"im{i:02d}.png")
    return folder


def test_each_site_gets_the_rows_of_its_own_run_and_the_summary_counts_them(
    tiny_model_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    slides = cohort_slides(tmp_path / "slides", 2)
    folder = _image_folder(tmp_path / "site-images")
    inputs = [*slides, folder]
    state, out = tmp_path / "cohort", tmp_path / "out"
    assert run_cohort(tiny_model_path, inputs, state, out, *THREADS) == 0
    summary = summary_rows(out)
    assert list(summary) == ["slide00", "slide01", "site-images"]
    for inp, site in zip(inputs, summary, strict=True):
        alone = tmp_path / "alone" / site
        assert _single(tiny_model_path, inp, alone / "state", alone / "p.csv") == 0
        rows = csv_rows(out / site / "predictions.csv")
        assert rows == csv_rows(alone / "p.csv") and len(rows) > 10
        row = summary[site]
        assert (row["status"], row["exit_code"], row["kind"]) == (
            "done",
            "0",
            "folder" if inp == folder else "slide",
        )
        assert int(row["images"]) == int(row["processed"]) == int(row["processed_now"]) == len(rows)
        counts = {c: sum(r["prediction"] == c for r in rows) for c in ("normal", "tumor")}
        assert row["decisions"] == f"normal {counts['normal']}; tumor {counts['tumor']}"
        assert row["decided_by"] == "the original model"
        assert Path(row["state"]) == state / "sites" / site
        assert (Path(row["state"]) / "journal.json").is_file(), "an ordinary f2tta run state per site"
        if inp != folder:
            geojson = json.loads((out / site / "predictions.geojson").read_text())
            assert geojson == json.loads((alone / "p.geojson").read_text())
    document = json.loads((out / "cohort-summary.json").read_text())
    assert document["totals"]["processed"] == sum(int(r["processed"]) for r in summary.values())
    assert "per site" in document["error_control"] and "5 %" in document["error_control"]
    recorded = json.loads((state / "cohort.json").read_text())
    assert [s["path"] for s in recorded["sites"]] == [str(p) for p in inputs]
    assert all(s["content"] for s in recorded["sites"][:2]), "each slide's content fingerprint"
    err = capsys.readouterr().err
    assert "cohort of 3 site(s): 3 done" in err


def test_a_cohort_resumes_without_processing_anything_twice_and_grows(
    tiny_model_path: Path, tmp_path: Path
) -> None:
    slides = cohort_slides(tmp_path / "slides", 3)
    state, out = tmp_path / "cohort", tmp_path / "out"
    assert run_cohort(tiny_model_path, [tmp_path / "slides"], state, out, *THREADS) == 0  # a folder of slides
    first = {s: csv_rows(out / s / "predictions.csv") for s in summary_rows(out)}
    assert list(first) == ["slide00", "slide01", "slide02"]
    assert run_cohort(tiny_model_path, [tmp_path / "slides"], state, out, *THREADS) == 0
    again = summary_rows(out)
    assert {s: r["processed_now"] for s, r in again.items()} == dict.fromkeys(first, "0")
    assert {s: csv_rows(out / s / "predictions.csv") for s in again} == first
    # A new input joins the cohort; the sites not named this time keep their rows and summary.
    (tmp_path / "more").mkdir()
    cohort_slide(tmp_path / "more" / "late.tif", 9)
    (tmp_path / "more" / "late.csv").write_text("path\nlate.tif\n")  # relative to the manifest
    assert run_cohort(tiny_model_path, [tmp_path / "more" / "late.csv"], state, out, *THREADS) == 0
    summary = summary_rows(out)
    assert list(summary) == [*first, "late"] and summary["late"]["status"] == "done"
    assert all(summary[s]["status"] == "done" for s in first)
    assert not (out / "late" / "predictions.csv").read_text().count("slide00")
    assert slides[0].is_file()


def test_a_site_that_cannot_be_read_is_reported_and_the_others_run(
    tiny_model_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = cohort_slides(tmp_path / "slides", 2)
    bogus = tmp_path / "bogus.svs"
    bogus.write_bytes(b"II*\x00" + os.urandom(200))
    state, out = tmp_path / "cohort", tmp_path / "out"
    assert run_cohort(tiny_model_path, [good[0], bogus, good[1]], state, out, *THREADS) == 2
    summary = summary_rows(out)
    assert summary["bogus"]["status"] == "refused" and summary["bogus"]["exit_code"] == "2"
    assert "bogus.svs" in summary["bogus"]["message"]
    assert "not a slide format OpenSlide can read" in summary["bogus"]["message"]
    assert not (out / "bogus" / "predictions.csv").exists()
    assert [summary[s]["status"] for s in ("slide00", "slide01")] == ["done", "done"]
    assert "bogus: refused" in capsys.readouterr().err


@pytest.mark.parametrize(
    "case",
    [
        "same path twice",
        "two rows one site",
        "two manifests one site",
        "no path column",
        "an image",
        "missing",
    ],
)
def test_bad_inputs_are_refused_before_anything_is_written(
    tiny_model_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    a, b = cohort_slides(tmp_path / "slides", 2)
    manifests = tmp_path / "m"
    manifests.mkdir()
    (manifests / "one.csv").write_text(f"path,site\n{a},A\n{b},a\n")
    (manifests / "x.csv").write_text(f"path,site\n{a},tumour\n")
    (manifests / "y.csv").write_text(f"path,site\n{b},Tumour\n")
    (manifests / "nopath.csv").write_text(f"where,site\n{a},A\n")
    png = tmp_path / "im.png"
    Image.fromarray(random_images(1)[0]).save(png)
    inputs, expected = {
        "same path twice": ([a, tmp_path / "slides" / ".." / "slides" / a.name], "is named twice"),
        "two rows one site": ([manifests / "one.csv"], "two inputs would be site 'a'"),
        "two manifests one site": ([manifests / "x.csv", manifests / "y.csv"], "would be site 'Tumour'"),
        "no path column": ([manifests / "nopath.csv"], "no path column"),
        "an image": ([a, png], "is an image, not a slide"),
        "missing": ([a, tmp_path / "nowhere.svs"], "input not found"),
    }[case]
    state, out = tmp_path / "cohort", tmp_path / "out"
    assert run_cohort(tiny_model_path, inputs, state, out) == 2
    err = capsys.readouterr().err
    assert expected in err and "nothing was started" in err
    assert not state.exists() and not out.exists()


def test_a_manifest_of_a_million_rows_is_refused_without_reading_it_whole(tmp_path: Path) -> None:
    manifest = tmp_path / "huge.csv"
    with manifest.open("w") as fh:
        fh.write("path,site\n")
        fh.writelines(f"/nowhere/slide{i}.svs,s{i}\n" for i in range(1_000_000))
    assert manifest.stat().st_size < 64 << 20  # under the size bound: the row bound refuses it
    with pytest.raises(CohortError, match=r"more than 100,000 sites \(refused at line 100002\)"):
        cohort_inputs([manifest])
    with pytest.raises(CohortError, match="more than 3 sites"):
        read_manifest(manifest, limit=3)
    big = tmp_path / "big.csv"
    with big.open("wb") as fh:
        fh.truncate(65 << 20)  # sparse: larger than any manifest is read
    with pytest.raises(CohortError, match="MiB, more than the 64 MiB"):
        cohort_inputs([big])


def test_a_cohort_state_is_used_by_one_process(
    tiny_model_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    slides = cohort_slides(tmp_path / "slides", 2)
    state, out = tmp_path / "cohort", tmp_path / "out"
    state.mkdir()
    holder = DirectoryLock(state, "f2tta run (a cohort of 2 inputs)")
    try:
        assert run_cohort(tiny_model_path, slides, state, out) == 2
    finally:
        holder.close()
    err = capsys.readouterr().err
    assert f"is in use by process {os.getpid()}" in err and "nothing was started" in err
    assert not out.exists() and not (state / "cohort.json").exists()


def test_states_and_names_are_not_mixed(
    tiny_model_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = cohort_slides(tmp_path / "slides", 2)
    state, out = tmp_path / "cohort", tmp_path / "out"
    assert run_cohort(tiny_model_path, [a, b], state, out, *THREADS) == 0
    before = (state / "cohort.json").read_bytes()
    renamed = tmp_path / "renamed.csv"
    renamed.write_text(f"path,site\n{a},other\n")
    assert run_cohort(tiny_model_path, [renamed], state, out) == 2
    assert "is site 'slide00' of the cohort" in capsys.readouterr().err
    taken = tmp_path / "taken.csv"
    taken.write_text(f"path,site\n{b},slide00\n")
    assert run_cohort(tiny_model_path, [taken], state, out) == 2
    assert "site 'slide00' of the cohort" in capsys.readouterr().err
    assert (state / "cohort.json").read_bytes() == before
    # A cohort's state is not a single run's, and the other way round.
    assert _single(tiny_model_path, a, state, tmp_path / "p.csv") == 2
    assert "is a cohort's state" in capsys.readouterr().err
    assert _single(tiny_model_path, a, tmp_path / "single", tmp_path / "p.csv") == 0
    assert run_cohort(tiny_model_path, [a, b], tmp_path / "single", tmp_path / "out2") == 2
    assert "is the state of a single f2tta run" in capsys.readouterr().err
    # A summary this cohort did not write is never overwritten; --out is a folder.
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "cohort-summary.csv").write_text("mine\n")
    assert run_cohort(tiny_model_path, [a, b], state, foreign) == 2
    assert "was not written with the state" in capsys.readouterr().err
    assert (foreign / "cohort-summary.csv").read_text() == "mine\n"
    assert run_cohort(tiny_model_path, [a, b], tmp_path / "c2", tmp_path / "preds.csv") == 2
    assert "--out of a cohort is a folder" in capsys.readouterr().err


def test_what_is_a_cohort(tmp_path: Path) -> None:
    slides = cohort_slides(tmp_path / "slides", 2)
    images = _image_folder(tmp_path / "images")
    assert cohort_inputs([slides[0]]) is None and cohort_inputs([images]) is None, "one input: as before"
    assert cohort_inputs([tmp_path / "nowhere"]) is None, "f2tta run says it is not found, as before"
    assert [i.site for i in cohort_inputs([tmp_path / "slides"]) or []] == ["slide00", "slide01"]
    assert slides_in(images) == []
    # A TIFF of one level is a picture: a folder that holds one besides slides is a folder of images.
    Image.fromarray(random_images(1)[0]).save(tmp_path / "slides" / "photo.tif")
    assert slides_in(tmp_path / "slides") == [] and cohort_inputs([tmp_path / "slides"]) is None
    manifest = tmp_path / "m.tsv"
    manifest.write_text(f"file\tsite\tlabel\n{slides[1]}\tHospital B 1\ttumor\nimages\t\t\n")
    found = cohort_inputs([manifest]) or []
    assert [(i.site, i.kind, i.label) for i in found] == [
        ("Hospital B 1", "slide", "tumor"),
        ("images", "folder", ""),
    ]
    manifest.write_text(f"file\tsite\n{slides[1]}\t../up\n")
    with pytest.raises(CohortError, match="cannot be a site name"):
        cohort_inputs([manifest])


def test_workers_and_ray_options_need_a_cohort(
    tiny_model_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    slide = cohort_slide(tmp_path / "s.tif", 1)
    assert _single(tiny_model_path, slide, tmp_path / "st", tmp_path / "p.csv", "--workers", "2") == 2
    assert "one input is one site" in capsys.readouterr().err
    assert not (tmp_path / "st").exists()


def test_a_sites_reviews_file_certifies_that_site_as_a_run_of_it_alone(
    tiny_model_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Review state stays per site: the manifest's reviews column is that site's --reviews."""
    first = _image_folder(tmp_path / "first", 6)
    second = _image_folder(tmp_path / "second", 6)
    reviews = tmp_path / "reviews.csv"
    site = source_hash(open_folder(first, ("normal", "tumor")).source_id)  # the folder the marks were made on
    reviews.write_text(f"item,review,reviewed_at,site\nim00.png,normal,2026-11-26T10:00:00+01:00,{site}\n")
    manifest = tmp_path / "cohort.csv"
    manifest.write_text("path,site,reviews\nfirst,,reviews.csv\nsecond,,\n")
    state, out = tmp_path / "cohort", tmp_path / "out"
    assert run_cohort(tiny_model_path, [manifest], state, out, *THREADS, method="idipt+") == 0
    alone = run_argv(tiny_model_path, first, tmp_path / "p.csv", tmp_path / "st", "--reviews", str(reviews))
    assert f2tta(alone) == 0
    cohort_certified = (out / "first" / "predictions.certified.csv").read_text()
    assert cohort_certified == (tmp_path / "p.certified.csv").read_text()
    assert json.loads((out / "first" / "predictions.certificates.json").read_text()) == json.loads(
        (tmp_path / "p.certificates.json").read_text()
    )
    summary = summary_rows(out)
    assert summary["first"]["review"].startswith("1 mark(s) of reviews.csv used")
    assert summary["second"]["review"].startswith("no review marks given")
    assert not (out / "second" / "predictions.certified.csv").exists()
    assert "per site" in capsys.readouterr().err, "the error rule is said when reviews were applied"
    assert second.is_dir()


def test_two_workers_give_the_rows_of_the_serial_run(tiny_model_path: Path, tmp_path: Path) -> None:
    slides = cohort_slides(tmp_path / "slides", 3)
    serial, parallel = tmp_path / "serial", tmp_path / "parallel"
    assert run_cohort(tiny_model_path, slides, serial / "state", serial / "out", "--threads", "1") == 0
    argv = ["--threads", "1", "--workers", "2"]
    assert run_cohort(tiny_model_path, slides, parallel / "state", parallel / "out", *argv) == 0
    for site in ("slide00", "slide01", "slide02"):
        rows = csv_rows(parallel / "out" / site / "predictions.csv")
        assert rows == csv_rows(serial / "out" / site / "predictions.csv") and rows
    keep = ("status", "images", "processed", "decisions", "decided_by")
    assert [{k: r[k] for k in keep} for r in summary_rows(parallel / "out").values()] == [
        {k: r[k] for k in keep} for r in summary_rows(serial / "out").values()
    ]
