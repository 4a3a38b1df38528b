"""The stream loop in batches, and reading ahead (``engine/run/stream.py``, ``engine/run/reading.py``).

* The source pass decides the same at any batch size (B = 1, 7, 32): the source model's
  predictions, and SourceOnly's decisions.
* Outcomes and rows come in arrival order, unreadable items inside a batch included.
* Out of memory at a batch B falls back to smaller batches (undone exactly, with a log line) while
  the step can be undone; later, it ends the run as any failure of the step does.
* Items are read ahead on helper threads, never more than ``read_ahead`` of them; a slide's
  reading threads read through handles of their own.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
from app_fixtures import make_slide
from PIL import Image
from support import failing_reader, random_images

from engine import (
    Journal,
    Predicted,
    Saved,
    Session,
    Skipped,
    StreamItem,
    StreamRun,
    open_folder,
    open_slide_source,
)
from engine.io.slides import Slide
from engine.run.batch import default_batch, model_pixels
from engine.run.reading import TileReader, read_ahead, read_item


def _folder(root: Path, n: int, seed: int = 3) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for i, img in enumerate(random_images(n, seed=seed)):
        Image.fromarray(img).save(root / f"img{i:02d}.png")
    return root


def _steps(session: Session, items: list[StreamItem], batch: int, **options: object) -> list[Predicted]:
    run = StreamRun(session, items, batch=batch, **options)  # type: ignore[arg-type]
    return [o for o in run.outcomes() if isinstance(o, Predicted)]


@pytest.mark.parametrize("method", ["source", "idipt"])
def test_source_decisions_do_not_depend_on_the_batch(
    tiny_model_path: Path, tmp_path: Path, method: str
) -> None:
    items = list(open_folder(_folder(tmp_path / "in", 40), ("normal", "tumor")).items)
    runs = {b: _steps(Session(tiny_model_path, method=method), items, b) for b in (1, 7, 32)}
    one = runs[1]
    assert [p.item.key for p in one] == [it.key for it in items]
    for batch in (7, 32):
        other = runs[batch]
        assert [p.item.key for p in other] == [it.key for it in items], "arrival order"
        assert [p.step.source_prediction for p in other] == [p.step.source_prediction for p in one]
        assert np.allclose(
            [p.step.source_probs for p in other], [p.step.source_probs for p in one], atol=1e-6
        )
        assert [p.row.index for p in other] == list(range(40))
        if method == "source":  # its decision is the source pass's
            assert [p.step.prediction for p in other] == [p.step.prediction for p in one]
            assert [p.step.decision for p in other] == [p.step.decision for p in one]


def test_pixels_reach_the_model_as_the_per_image_preprocessing_gave_them(tiny_model_path: Path) -> None:
    session = Session(tiny_model_path, method="source")
    images = random_images(3, size=47, seed=5)
    mean = torch.tensor(session.card.mean).view(3, 1, 1)
    std = torch.tensor(session.card.std).view(3, 1, 1)
    expected = []
    for img in images:  # the formula of the per-image preprocessing before batches
        pil = Image.fromarray(img).resize((32, 32), Image.Resampling.BILINEAR)
        x = torch.from_numpy(np.asarray(pil, dtype=np.float32).copy()).permute(2, 0, 1) / 255.0
        expected.append(((x - mean) / std).unsqueeze(0))
    batch = session.to_input([session.prepare(img) for img in images])
    assert torch.equal(batch, torch.cat(expected))
    assert torch.equal(session.preprocess(images[1]), expected[1])
    assert model_pixels(np.asarray(Image.fromarray(images[0]).resize((32, 32))), 32).shape == (32, 32, 3)


def test_rows_keep_arrival_order_with_unreadable_items_inside_batches(
    tiny_model_path: Path, tmp_path: Path
) -> None:
    source = open_folder(_folder(tmp_path / "in", 11), ("normal", "tumor"))
    bad = {"img01.png", "img04.png", "img05.png", "img10.png"}
    reader = failing_reader(bad)
    journal = Journal(tmp_path / "st")
    run = StreamRun(
        Session(tiny_model_path, method="idipt"),
        source.items,
        reader,
        source_id=source.source_id,
        journal=journal,
        batch=3,
        save_every=2,
    )
    outcomes = [o for o in run.outcomes() if not isinstance(o, Saved)]
    assert [o.item.key for o in outcomes] == [it.key for it in source.items], "one outcome each, in order"
    assert {o.item.key for o in outcomes if isinstance(o, Skipped)} == bad
    record = journal.source(source.source_id)
    good = [it.key for it in source.items if it.key not in bad]
    assert record.processed == good and sorted(k for k, _ in record.skipped) == sorted(bad)
    assert [r.key for r in journal.rows(source.source_id)] == good
    assert [r.index for r in journal.rows(source.source_id)] == list(range(len(good)))
    journal.close()


def _out_of_memory_above(session: Session, limit: int, calls: list[int]) -> None:
    """The method's step runs out of memory on batches above ``limit``, *after* its update."""
    real = session.method.forward_and_adapt

    def step(x: torch.Tensor) -> object:
        calls.append(int(x.shape[0]))
        out = real(x)
        if x.shape[0] > limit:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 8.00 GiB")
        return out

    session.method.forward_and_adapt = step  # type: ignore[method-assign,assignment]


def test_out_of_memory_at_a_batch_falls_back_to_smaller_batches(
    tiny_model_path: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    items = list(open_folder(_folder(tmp_path / "in", 20), ("normal", "tumor")).items)
    reference = Session(tiny_model_path, method="idipt", seed=2)
    expected = _steps(reference, items, 4)
    session = Session(tiny_model_path, method="idipt", seed=2)
    calls: list[int] = []
    _out_of_memory_above(session, 4, calls)
    run = StreamRun(session, items, batch=16)
    with caplog.at_level(logging.WARNING, logger="engine.run.stream"):
        got = [o for o in run.outcomes() if isinstance(o, Predicted)]
    assert calls[:3] == [16, 8, 4] and run.batch == 4
    assert [m for m in caplog.messages if "out of memory" in m] == [
        "out of memory at a batch of 16 images; going on with batches of 8",
        "out of memory at a batch of 8 images; going on with batches of 4",
    ]
    assert run.summary.failure is None and len(got) == 20
    assert [p.step.prediction for p in got] == [p.step.prediction for p in expected]
    assert [p.step.probs.tolist() for p in got] == [p.step.probs.tolist() for p in expected]
    assert session.state_fingerprint() == reference.state_fingerprint(), "the failed batches were undone"


def test_out_of_memory_that_cannot_be_undone_ends_the_run(tiny_model_path: Path, tmp_path: Path) -> None:
    items = list(open_folder(_folder(tmp_path / "in", 20), ("normal", "tumor")).items)
    session = Session(tiny_model_path, method="idipt")
    real = session.method.forward_and_adapt
    calls: list[int] = []

    def step(x: torch.Tensor) -> object:
        calls.append(int(x.shape[0]))
        if len(calls) == 4:  # after two steps at 4: its state is no longer kept aside
            raise RuntimeError("CUDA out of memory. Tried to allocate 8.00 GiB")
        return real(x)

    session.method.forward_and_adapt = step  # type: ignore[method-assign,assignment]
    run = StreamRun(session, items, batch=4)
    got = [o for o in run.outcomes() if isinstance(o, Predicted)]
    assert len(got) == 12 and calls == [4, 4, 4, 4]
    assert run.summary.failure is not None and run.summary.failure.item.key == items[12].key
    assert "ran out of memory" in run.summary.failure.message


def test_items_are_read_ahead_on_helper_threads_within_the_bound() -> None:
    items = [StreamItem(i, f"k{i}", f"n{i}") for i in range(40)]
    lock = threading.Lock()
    state = {"reading": 0, "taken": 0, "most_ahead": 0}
    threads: set[str] = set()

    def read(item: StreamItem) -> int:
        with lock:
            state["reading"] += 1
            state["most_ahead"] = max(state["most_ahead"], item.position - state["taken"])
            threads.add(threading.current_thread().name)
        time.sleep(0.002 * (item.position % 3))
        with lock:
            state["reading"] -= 1
        return item.position

    got = []
    for item, value in read_ahead(items, read, workers=3, depth=6):
        got.append(value)
        state["taken"] = item.position + 1
    assert got == list(range(40)), "in arrival order"
    assert state["most_ahead"] <= 6, "never more than depth items ahead"
    assert len(threads) > 1 and all(t.startswith("f2tta-read") for t in threads)
    assert list(read_ahead(items[:3], lambda it: it.position, workers=0, depth=0)) == [
        (items[0], 0),
        (items[1], 1),
        (items[2], 2),
    ]


def _settle(decoded: Callable[[], int], handed: Callable[[], int]) -> None:
    """Wait until every item handed to the reading threads has been decoded (nothing blocks them)."""
    deadline = time.monotonic() + 30.0
    while decoded() < handed():
        assert time.monotonic() < deadline, f"{handed() - decoded()} reads handed out never finished"
        time.sleep(0.001)


def test_a_stalled_consumer_has_at_most_the_bound_decoded_ahead() -> None:
    """What keeps a 20 000-tile slide from being decoded ahead of the model: a consumer that takes
    items and stops finds, once every read handed out has run, at most ``depth`` decoded beyond them."""
    depth, lock = 4, threading.Lock()
    count = {"handed": 0, "decoded": 0}

    def source() -> Iterator[StreamItem]:
        for i in range(200):
            with lock:
                count["handed"] += 1
            yield StreamItem(i, f"k{i}", f"n{i}")

    def decode(item: StreamItem) -> int:
        with lock:
            count["decoded"] += 1
        return item.position

    reading = read_ahead(source(), decode, workers=3, depth=depth)
    got: list[int] = []
    for stall_after in (1, 4):  # one item taken, then three more
        got += [value for _, value in itertools.islice(reading, stall_after - len(got))]
        _settle(lambda: count["decoded"], lambda: count["handed"])
        assert count["decoded"] <= len(got) + depth, f"{count['decoded']} decoded with {len(got)} taken"
    reading.close()  # what was handed out but not started is cancelled
    assert got == [0, 1, 2, 3] and count["decoded"] <= len(got) + depth


class _Counted(list[StreamItem]):
    """A run's pending items that count how many were handed to its reading (it iterates them once)."""

    handed = 0

    def __iter__(self) -> Iterator[StreamItem]:
        for item in super().__iter__():
            self.handed += 1
            yield item


def test_a_stalled_run_has_at_most_its_batch_and_read_ahead_decoded(
    tiny_model_path: Path, tmp_path: Path
) -> None:
    items = list(open_folder(_folder(tmp_path / "in", 30), ("normal", "tumor")).items)
    decoded: list[int] = []

    def reader(item: StreamItem) -> Image.Image | np.ndarray:
        decoded.append(item.position)
        return read_item(item)

    session = Session(tiny_model_path, method="source")
    run = StreamRun(session, items, reader, batch=2, read_ahead=3, readers=2)
    run.pending = pending = _Counted(run.pending)
    outcomes = run.outcomes()
    first = next(outcomes)  # the first batch's first row; the consumer stops here
    _settle(lambda: len(decoded), lambda: pending.handed)
    assert isinstance(first, Predicted) and first.item == items[0] and pending.handed > 0
    assert len(decoded) <= 2 + 3, f"{len(decoded)} of {len(items)} decoded for a batch of 2 and 3 ahead"
    outcomes.close()


def test_a_slide_is_read_through_a_handle_per_reading_thread(tmp_path: Path) -> None:
    path = make_slide(tmp_path / "s.tif", size=(512, 384), mpp=0.5)
    source = open_slide_source(path, 64, None, min_tissue=0.25)
    with Slide(path) as slide:
        reader = TileReader(slide, source.plan)
        inline = [reader(item) for item in source.items[:6]]
        assert reader._opened == [], "the opening thread reads through the slide it was given"
        ahead = [picture for _, picture in read_ahead(source.items[:6], reader, workers=2, depth=4)]
        assert all(np.array_equal(a, b) for a, b in zip(inline, ahead, strict=True))
        handles = list(reader._opened)
        assert 1 <= len(handles) <= 2 and all(h is not slide for h in handles)
        reader.close()
        assert reader._opened == [] and not any(h._handle_open for h in handles)
        assert slide._handle_open, "the app's own handle stays open"


def test_the_default_batch_follows_the_device_and_the_methods_limit() -> None:
    cpu = torch.device("cpu")
    assert default_batch(cpu, None) == 16 and default_batch(cpu, 1) == 1 and default_batch(cpu, 4) == 4
    assert default_batch(torch.device("cuda"), None) == 64


def test_f2tta_run_checks_and_records_its_batch(
    tiny_model_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from engine.cli import main as f2tta

    folder = _folder(tmp_path / "in", 6)

    def run(name: str, *extra: str) -> int:
        paths = [
            "--input",
            str(folder),
            "--state",
            str(tmp_path / name),
            "--out",
            str(tmp_path / f"{name}.csv"),
        ]
        return f2tta(["run", "--model", str(tiny_model_path), *paths, "--no-progress", *extra])

    for bad in ("0", "1025"):
        assert run("bad", "--batch", bad) == 2
        assert "--batch must be between 1 and 1024" in capsys.readouterr().err
    assert not (tmp_path / "bad").exists()
    assert run("idipt", "--method", "idipt") == 0
    assert json.loads((tmp_path / "idipt.config.json").read_text())["run"]["batch"] == 16
    assert run("plus", "--method", "idipt+", "--batch", "8") == 0
    assert json.loads((tmp_path / "plus.config.json").read_text())["run"]["batch"] == 8, "the default batches"
    assert run("one", "--method", "source", "--batch", "1") == 0
    assert json.loads((tmp_path / "one.config.json").read_text())["run"]["batch"] == 1


def test_a_state_that_cannot_be_kept_aside_runs_the_batch_without_undo(
    tiny_model_path: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    items = list(open_folder(_folder(tmp_path / "in", 8), ("normal", "tumor")).items)
    session = Session(tiny_model_path, method="idipt")

    def no_room() -> object:
        raise RuntimeError("CUDA out of memory. Tried to allocate 1.00 GiB")

    monkeypatch.setattr(session, "snapshot", no_room)
    with caplog.at_level(logging.WARNING, logger="engine.run.stream"):
        got = _steps(session, items, 4)
    assert len(got) == 8, "the batches ran"
    assert any("cannot be kept aside" in m for m in caplog.messages)
