"""The review of a folder the method split in parts: one ladder per part, a stratified queue, starts
kept per part, marks files written before parts still load, and the wording says which part."""

from __future__ import annotations

import csv
import dataclasses
import json
from pathlib import Path

import numpy as np

from engine.methods.idipt_plus import CANDIDATES
from engine.review.marks import BLOCK_KEY, START_KEY, MarkStore, marks_path
from engine.run.certificates import site_certificates
from engine.run.certify import certificates_json, write_certified
from engine.run.review import SiteReview
from engine.run.rows import PredictionRow
from engine.vocabulary import Rule
from tests.review_rows import CLASSES, review_all, site_rows


def split_rows() -> tuple[list[PredictionRow], np.ndarray, np.ndarray]:
    """A folder decided in three units: 60 images before the split (group 0), then two parts
    (groups 3 and 4) interleaved, 140 and 70 images; ``(rows, labels, group of each row)``."""
    first, y0 = site_rows(60, 2.0, seed=1)
    a, ya = site_rows(140, 2.0, seed=2)
    b, yb = site_rows(70, -2.0, seed=3)
    later = [(r, 3, y) for r, y in zip(a, ya, strict=True)] + [(r, 4, y) for r, y in zip(b, yb, strict=True)]
    order = np.random.default_rng(0).permutation(len(later))
    stream = [(r, 0, y) for r, y in zip(first, y0, strict=True)] + [later[i] for i in order]
    rows = [
        dataclasses.replace(
            r, index=i, position=i, key=f"img{i:03d}.png", name=f"img{i:03d}.png", site_group=g
        )
        for i, (r, g, _) in enumerate(stream)
    ]
    return rows, np.array([y for _, _, y in stream]), np.array([g for _, g, _ in stream])


def test_each_part_has_its_own_ladder_and_no_certificate_mixes_parts(tmp_path: Path) -> None:
    rows, labels, groups = split_rows()
    review = SiteReview(tmp_path, "/data/two scanners", 2)
    review.open(rows)
    assert [p.group for p in review.parts] == [0, 3, 4]
    assert [len(p.positions) for p in review.parts] == [60, 140, 70]
    review_all(review, labels)
    assert review.comparisons()
    for part in review.parts:
        for c in (c for c in part.ladder.comparisons if c.order):  # every image it tests is of its part
            assert {int(groups[part.positions[i]]) for i in c.order} == {part.group}
    # the decisions are each part's own ladder's
    decided = review.decisions()
    for k, part in enumerate(review.parts):
        assert np.array_equal(decided[part.positions], part.ladder.decide(review.images(k)))


def test_the_queue_serves_the_part_with_fewest_reviews_for_its_share() -> None:
    rows, labels, _ = split_rows()
    review = SiteReview(None, "/data/two scanners", 2)
    review.open(rows)
    share = np.array([len(p.positions) for p in review.parts]) / len(rows)
    answered = 0
    while (index := review.next_item()) is not None and answered < 27:
        answered += 1
        review.set_mark(rows[index].key, int(labels[index]))
        done = np.array([p.reviews() for p in review.parts])
        if all(p.ladder.active is not None for p in review.parts):
            # while every part has an open comparison, none is ahead of its share by a whole review
            assert np.all(done <= np.ceil(share * answered) + 1), (answered, done)
    assert answered >= 12  # the parts' ladders took several answers each before they all settled
    assert min(p.reviews() for p in review.parts) > 0


def test_starts_are_kept_per_part_and_the_review_reopens_the_same(tmp_path: Path) -> None:
    rows, labels, _ = split_rows()
    review = SiteReview(tmp_path, "/data/two scanners", 2)
    review.open(rows)
    for _ in range(12):
        index = review.next_item()
        assert index is not None
        review.set_mark(rows[index].key, int(labels[index]))
    review.close()
    records = [
        json.loads(line) for line in marks_path(tmp_path, "/data/two scanners").read_text().splitlines()
    ]
    parts = {r["block"]["part"] for r in records if r["k"].startswith(BLOCK_KEY)}
    assert parts == {None, 3, 4}, "one block record at least per part; the first part's name none"
    for _ in range(2):  # reopened twice: nothing the first reading does may lose the second its blocks
        again = SiteReview(tmp_path, "/data/two scanners", 2)
        again.open(rows)
        again.close()
    assert [p.starts for p in again.parts] == [p.starts for p in review.parts]
    assert [len(p.records) for p in again.parts] == [len(p.records) for p in review.parts]
    assert [(c.candidate, c.verdict, len(c.reviewed)) for c in again.comparisons()] == [
        (c.candidate, c.verdict, len(c.reviewed)) for c in review.comparisons()
    ]
    assert np.array_equal(again.decisions(), review.decisions())


def test_a_marks_file_written_before_parts_still_loads(tmp_path: Path) -> None:
    """A start record without a part (every marks file before splits) is the first part's."""
    rows, _ = site_rows()
    store = MarkStore(tmp_path, "/data/folder", 2)
    store._file.append({"k": START_KEY, "site": store.site, "starts": [200]})  # as files before parts
    store.close()
    record = json.loads(marks_path(tmp_path, "/data/folder").read_text().splitlines()[-1])
    assert set(record) == {"k", "site", "starts"}
    review = SiteReview(tmp_path, "/data/folder", 2)
    review.open(rows)
    assert len(review.parts) == 1 and review.starts == [200] and review.ladder.active is not None
    assert review.ladder.active.covered == 200
    # the rows of a split folder: the same record is the first part's
    split, _, _ = split_rows()
    store = MarkStore(tmp_path / "b", "/data/two scanners", 2)
    store._file.append({"k": START_KEY, "site": store.site, "starts": [50]})
    store.close()
    review = SiteReview(tmp_path / "b", "/data/two scanners", 2)
    review.open(split)
    assert [p.starts for p in review.parts] == [[50], [], []]


def test_the_certificates_and_the_certified_csv_say_which_part(tmp_path: Path) -> None:
    rows, labels, groups = split_rows()
    review = SiteReview(None, "/data/two scanners", 2)
    review.open(rows)
    review_all(review, labels)
    data = certificates_json(review)
    assert data["rule_in_use"] in ("by part", "source") or data["rule_in_use"] in CANDIDATES
    assert [(p["part"], p["images"]) for p in data["parts"]] == [
        ("part 1 of 3", 60),
        ("part 2 of 3", 140),
        ("part 3 of 3", 70),
    ]
    for part in data["parts"]:  # each part's rule by its identifier, and in words
        assert part["rule"] in ("source", *CANDIDATES)
        assert (
            f"{part['part']} ({part['images']} images): {Rule(part['rule']).words} decides" in data["decides"]
        )
    parts = {c["part"] for c in data["comparisons"]}
    assert parts <= {"part 1 of 3 (60 images)", "part 2 of 3 (140 images)", "part 3 of 3 (70 images)"}
    assert len(parts) >= 2
    for c in data["comparisons"]:  # each certificate speaks of its part's images
        images = int(c["part"].split("(")[1].split()[0])
        short = c["part"].partition(" (")[0]
        assert c["covers_images"] == images and f"among the first {images} of {short}" in c["says"]
        assert "this folder" not in c["says"].replace(f"{short} of this folder", ""), (
            "a part's certificate never speaks for the whole folder"
        )
    lines = site_certificates(review).certificates  # the app's certificates table names each line's part
    assert {line.part.partition(" (")[0] for line in lines} == {p.partition(" (")[0] for p in parts}
    certified, _ = write_certified(tmp_path / "out.csv", review, CLASSES)
    with certified.open(newline="") as fh:
        table = list(csv.DictReader(fh))
    names = {0: "part 1 of 3", 3: "part 2 of 3", 4: "part 3 of 3"}
    in_use = {p["part"]: p["rule"] for p in data["parts"]}
    for row, group in zip(table, groups, strict=True):
        assert row["part"] == names[int(group)] and row["rule"] in ("source", *CANDIDATES)
        if row["coverage"] == "covered":  # a row its part's certificate covers: that part's rule
            assert row["rule"] == in_use[row["part"]]


def test_a_site_of_one_unit_reads_as_before() -> None:
    rows, labels = site_rows()
    review = SiteReview(None, "/data/folder", 2)
    review.open(rows)
    review_all(review, labels)
    (in_use,) = review.in_use()
    assert len(review.parts) == 1 and in_use.rule in ("fit", "source", "shift", "prior") and not in_use.part
    document = certificates_json(review)
    assert "part" not in json.dumps(document["comparisons"]) and document["parts"] == []
    assert document["rule_in_use"] == in_use.rule


def test_a_row_processed_again_is_read_again_for_its_decision_path(tmp_path: Path) -> None:
    """Whether the method reported a label-free decision is read from the rows not read before
    (asked for every batch shown); a row processed again after a crash replaces its earlier one,
    and its decision path is read again, either way."""
    rows, _ = site_rows(40, 2.0)
    review = SiteReview(tmp_path, "folder", 2)
    review.add_rows(rows)
    assert set(review.row_rules()) == {Rule.SOURCE}  # nothing accepted: the source model decides
    review.add_rows([dataclasses.replace(rows[7], decision_path="accepted")])
    assert set(review.row_rules()) == {Rule.LABEL_FREE}
    review.add_rows([dataclasses.replace(rows[-1], key="new", name="new.png", index=40, position=40)])
    assert set(review.row_rules()) == {Rule.LABEL_FREE}  # read once, kept as rows are added
    review.add_rows([rows[7]])  # processed again, not accepted this time
    assert set(review.row_rules()) == {Rule.SOURCE}
