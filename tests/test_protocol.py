"""The F²TTA stream protocol: fragments of Dirichlet lengths, shuffled, deterministic."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

from engine.data.readers import Dataset, Item
from lab.bench.protocol import (
    FUNDUS_FRAGMENTS,
    HISTOLOGY_FRAGMENTS,
    StreamParams,
    apply_prior,
    build_stream,
    dataset_stream,
    default_fragments,
    domain_test_sets,
    fragment_lengths,
    parse_prior,
)


def _sets(sizes: dict[str, int]) -> dict[str, list[Item]]:
    return {d: [Item(Path(f"/x/{d}/img{i:04d}.png"), i % 2, d) for i in range(n)] for d, n in sizes.items()}


SIZES = {"site1": 57, "site2": 40, "site3": 3}


def test_stream_is_deterministic_and_independent_of_listing_order() -> None:
    sets = _sets(SIZES)
    a = build_stream(sets, seed=3, delta=1.0, fragments=10)
    shuffled = {d: random.Random(1).sample(v, len(v)) for d, v in reversed(list(sets.items()))}
    b = build_stream(shuffled, seed=3, delta=1.0, fragments=10)
    assert a == b
    c = build_stream(sets, seed=4, delta=1.0, fragments=10)
    assert [it.path for it in a.items] != [it.path for it in c.items]


def test_every_test_image_appears_exactly_once() -> None:
    sets = _sets(SIZES)
    for seed in range(4):
        stream = build_stream(sets, seed=seed, delta=0.5, fragments=10)
        expected = sorted(str(it.path) for v in sets.values() for it in v)
        assert sorted(str(it.path) for it in stream.items) == expected


def test_fragments_cover_the_stream_one_domain_each() -> None:
    stream = build_stream(_sets(SIZES), seed=0, delta=1.0, fragments=10)
    pos = 0
    counts: dict[str, int] = {}
    for frag in stream.fragments:
        assert frag.start == pos and frag.length >= 1
        assert {it.domain for it in stream.items[pos : pos + frag.length]} == {frag.domain}
        counts[frag.domain] = counts.get(frag.domain, 0) + 1
        pos += frag.length
    assert pos == len(stream)
    assert counts == {"site1": 10, "site2": 10, "site3": 3}  # 3 images: 3 one-image fragments
    assert stream.fragment_index().tolist() == sorted(stream.fragment_index().tolist())


@pytest.mark.parametrize(("n", "f"), [(1, 10), (10, 10), (11, 10), (1000, 100), (5, 1)])
def test_fragment_lengths_sum_and_minimum(n: int, f: int) -> None:
    rng = np.random.default_rng(0)
    for delta in (0.01, 1.0, 100.0):
        lengths = fragment_lengths(n, f, delta, rng)
        assert sum(lengths) == n and min(lengths) >= 1 and len(lengths) == min(n, f)
    assert fragment_lengths(0, 10, 1.0, rng) == []


def test_small_delta_gives_more_unequal_fragments() -> None:
    def spread(delta: float) -> float:
        rng = np.random.default_rng(0)
        cvs = []
        for _ in range(20):
            lengths = np.asarray(fragment_lengths(1000, 10, delta, rng), dtype=float)
            cvs.append(lengths.std() / lengths.mean())
        return float(np.mean(cvs))

    small, one, large = spread(0.01), spread(1.0), spread(100.0)
    assert small > one > large
    assert large < 0.2 and small > 1.5


def test_head_limits_the_stream() -> None:
    stream = build_stream(_sets(SIZES), seed=1, delta=1.0, fragments=10)
    head = stream.head(17)
    assert head.items == stream.items[:17]
    assert sum(f.length for f in head.fragments) == 17
    assert stream.head(None) is stream and stream.head(10_000) is stream


def _dataset(root: Path, sizes: dict[str, int]) -> Dataset:
    items = [it for v in _sets(sizes).values() for it in v]
    return Dataset(root, "folders", ("normal", "tumor"), tuple(sorted(sizes)), items)


def test_dataset_stream_uses_the_test_split(tmp_path: Path) -> None:
    ds = _dataset(tmp_path, {"a": 40, "b": 24})
    params = StreamParams(delta=1.0, fragments=5, split_seed=0, limit=None)
    stream = dataset_stream(ds, 2, params)
    tests = domain_test_sets(ds, 0)
    assert sorted(str(i.path) for i in stream.items) == sorted(str(i.path) for v in tests.values() for i in v)
    assert len(stream) == 10 + 6
    assert len(dataset_stream(ds, 2, StreamParams(fragments=5, limit=7))) == 7
    val = dataset_stream(ds, 2, StreamParams(fragments=5, subset="val"))
    assert sorted(str(i.path) for i in val.items) == sorted(
        str(i.path) for v in domain_test_sets(ds, 0, "val").values() for i in v
    )
    assert not {i.path for i in val.items} & {i.path for i in stream.items}


def test_default_fragments_rules(tmp_path: Path) -> None:
    small = _dataset(tmp_path, {"a": 40, "b": 24})
    assert default_fragments(small)[0] == FUNDUS_FRAGMENTS
    big = _dataset(tmp_path, {"a": 4400, "b": 4000})
    assert default_fragments(big)[0] == HISTOLOGY_FRAGMENTS
    (tmp_path / "synth.json").write_text(json.dumps({"kind": "histo"}))
    assert default_fragments(small) == (HISTOLOGY_FRAGMENTS, "generated histo data")
    (tmp_path / "synth.json").write_text(json.dumps({"kind": "fundus"}))
    assert default_fragments(big)[0] == FUNDUS_FRAGMENTS


def test_stream_params_validation() -> None:
    for bad in ({"delta": 0.0}, {"delta": float("nan")}, {"fragments": 0}, {"limit": 0}, {"subset": "train"}):
        with pytest.raises(ValueError):
            StreamParams(**bad)


def _labelled(n_pos: int, n_neg: int, domain: str = "site2") -> list[Item]:
    return [Item(Path(f"/x/{domain}/p{i:04d}.png"), 1, domain) for i in range(n_pos)] + [
        Item(Path(f"/x/{domain}/n{i:04d}.png"), 0, domain) for i in range(n_neg)
    ]


@pytest.mark.parametrize(("share", "n_pos", "n_neg"), [(0.2, 25, 100), (0.8, 100, 25), (0.5, 60, 60)])
def test_prior_keeps_the_largest_subset_with_the_share(share: float, n_pos: int, n_neg: int) -> None:
    sets = {"site2": _labelled(60, 100), "site1": _labelled(5, 5, "site1")}
    out = apply_prior(sets, [("site2", share)], positive=1, seed=0)
    kept = out["site2"]
    assert sum(it.label == 1 for it in kept) == min(n_pos, 60)
    assert abs(sum(it.label == 1 for it in kept) / len(kept) - share) < 0.01
    assert set(kept) <= set(sets["site2"])
    assert out["site1"] == tuple(sets["site1"])  # domains without a prior are untouched
    # seeded by the split seed and the domain, not by the listing order
    again = apply_prior({"site2": list(reversed(sets["site2"]))}, [("site2", share)], positive=1, seed=0)
    assert again["site2"] == kept
    other = apply_prior(sets, [("site2", share)], positive=1, seed=1)
    assert share == 0.5 or other["site2"] != kept


def test_prior_refuses_unknown_domains_and_bad_text() -> None:
    sets = {"site2": _labelled(10, 10)}
    with pytest.raises(ValueError, match="not a domain"):
        apply_prior(sets, [("site9", 0.2)], positive=1, seed=0)
    with pytest.raises(ValueError, match="negative"):
        apply_prior({"site2": _labelled(10, 0)}, [("site2", 0.2)], positive=1, seed=0)
    assert parse_prior("site3=0.8, site2=0.2") == (("site2", 0.2), ("site3", 0.8))
    for bad in ("site2", "site2=1", "site2=0", "site2=x", "=0.3", "site2=0.2,site2=0.3", ""):
        with pytest.raises(ValueError):
            parse_prior(bad)
    with pytest.raises(ValueError, match="strictly between"):
        StreamParams(prior=(("site2", 1.5),))


def test_dataset_stream_applies_the_prior(tmp_path: Path) -> None:
    items = _labelled(40, 40, "site1") + _labelled(40, 40, "site2")
    ds = Dataset(tmp_path, "folders", ("normal", "tumor"), ("site1", "site2"), items, positive_class=1)
    plain = dataset_stream(ds, 0, StreamParams(fragments=4))
    shifted = dataset_stream(ds, 0, StreamParams(fragments=4, prior=(("site2", 0.2),)))
    site2 = [it for it in shifted.items if it.domain == "site2"]
    assert abs(sum(it.label for it in site2) / len(site2) - 0.2) < 0.02
    assert [it for it in shifted.items if it.domain == "site1"] != []
    assert len(shifted) < len(plain)
