"""``f2tta bench`` planning without data: seeds, sweeps, the table's rows; the workers' progress ticker."""

from __future__ import annotations

import pytest

from lab.bench import BenchError, parse_seeds, parse_sweep, plan_rows


def test_parse_seeds() -> None:
    assert parse_seeds("0-7") == tuple(range(8))
    assert parse_seeds("3, 0-1,3") == (0, 1, 3)
    for bad in ("", "a", "3-1", "1-x"):
        with pytest.raises(BenchError):
            parse_seeds(bad)


def test_parse_sweep() -> None:
    assert parse_sweep("k=10,20") == ("mask_percent", [("10", 10.0), ("20", 20.0)])
    assert parse_sweep("bank=5, 40") == ("bank_size", [("5", 5), ("40", 40)])
    assert parse_sweep("delta=0.01,10") == ("delta", [("0.01", 0.01), ("10", 10.0)])
    assert parse_sweep("tent:lr=0.001,0.01") == ("lr", [("0.001", 0.001), ("0.01", 0.01)])
    for bad in ("k", "k=", "nope=1", "bank=1.5", "delta=0", "tent:k=10", "nomethod:lr=1"):
        with pytest.raises(BenchError):
            parse_sweep(bad)


def test_plan_rows_ablation_and_sweeps() -> None:
    rows = plan_rows(["source", "idipt"], True, ablation=True, sweep=None)
    assert [r.name for r in rows] == [
        "source",
        "idipt",
        "idipt[use_uom=False]",
        "idipt[use_pgd=False]",
        "idipt[use_uom=False,use_pgd=False]",
        "idipt[use_graphs=False]",
    ]
    assert rows[4].overrides == (("use_uom", False), ("use_pgd", False))
    k = plan_rows(["source"], False, ablation=False, sweep="k=10,20")
    assert [(r.name, r.overrides) for r in k] == [
        ("idipt[k=10]", (("mask_percent", 10.0),)),
        ("idipt[k=20]", (("mask_percent", 20.0),)),
    ]
    delta = plan_rows(["source", "idipt"], True, ablation=False, sweep="delta=0.1,1")
    assert [(r.name, r.delta) for r in delta] == [
        ("source[delta=0.1]", 0.1),
        ("source[delta=1]", 1.0),
        ("idipt[delta=0.1]", 0.1),
        ("idipt[delta=1]", 1.0),
    ]
    tent = plan_rows(["source"], True, ablation=False, sweep="tent:lr=0.01")
    assert [(r.name, r.method, r.overrides) for r in tent] == [
        ("source", "source", ()),
        ("tent[lr=0.01]", "tent", (("lr", 0.01),)),
    ]
    with pytest.raises(BenchError, match="unknown method"):
        plan_rows(["nope"], True, ablation=False, sweep=None)
    with pytest.raises(BenchError, match="mask_percent"):
        plan_rows(["idipt"], False, ablation=False, sweep="k=100")


def test_worker_image_ticker_batches_counts() -> None:
    import queue

    from lab.bench.run import _ImageTicker

    q: queue.Queue[int] = queue.Queue()
    every_image = _ImageTicker(q, every=0.0)
    for _ in range(3):
        every_image()
    assert [q.get_nowait() for _ in range(3)] == [1, 1, 1]
    batched = _ImageTicker(q, every=3600.0)
    for _ in range(5):
        batched()
    assert q.empty()
    batched.flush()
    batched.flush()  # nothing new: nothing sent
    assert q.get_nowait() == 5 and q.empty()


def test_the_job_cache_key_covers_every_engine_and_lab_package() -> None:
    """A change anywhere in the engine (a method, the session, a reader) or in the lab's code that
    decides what a job records (its job, protocol, streams, generators) invalidates cached jobs."""
    from lab.bench.cache import code_sources

    root, sources = code_sources()
    names = {p.relative_to(root).as_posix() for p in sources}
    assert {
        "engine/run/session.py",
        "engine/methods/idipt_plus/_method.py",
        "engine/io/images.py",
        "lab/bench/cache.py",
        "lab/bench/job.py",
        "lab/bench/protocol.py",
        "lab/bench/streams.py",
        "lab/synth/generate.py",
        "lab/reviewer.py",
    } <= names
    assert not [name for name in names if not name.startswith(("engine/", "lab/"))]
