"""The blocks a site's comparisons froze, kept and replayed: a comparison is drawn once, ever.

Every block a comparison freezes (its first, when it starts; each extension of a promoted one)
is recorded in the site's marks file before the queue shows anything of it
(:class:`engine.review.marks.BlockRecord`, appended once and never rewritten), and the ladder is
rebuilt from the rows, the marks and those records whenever the site is opened or a mark is
taken back. Replaying a record freezes the same images with the same index, so the same random
order is drawn: undoing and redoing marks, reopening the project, a folder that grew or maps that
caught up never draw a comparison again (``docs/review-certificates.md``).

A record is checked against what it describes before it is used: the candidate the ladder would
test next, the images it covers (a hash of their keys) and the disagreements it sampled (a hash
of their positions). A record that does not match -- the marks before it now lead elsewhere, the
folder's images changed, the record was edited -- is set aside, with a note, and never used; it
stays in the file, and its index is never given to another comparison (so no record can be drawn
again at the same level by taking marks back).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence

from engine.review.ladder import Block, Comparison, SiteImages, SiteLadder
from engine.review.marks import BlockRecord
from engine.run.rows import CANDIDATE_DECIMALS, PredictionRow


def items_hash(rows: Sequence[PredictionRow], start: int, end: int) -> str:
    """sha256 of the keys of ``rows[start:end]`` (the images a block covers) and of the content of
    each picture decided (its fingerprint, ``engine.io.content``; a slide's tiles have none, the
    slide's own fingerprint is in the folder's identity): a picture replaced since is another image."""
    digest = hashlib.sha256()
    for row in rows[start:end]:
        digest.update(f"{row.key}\t{row.content}\n".encode("utf-8", "surrogateescape"))
    return digest.hexdigest()


def changes_hash(positions: Sequence[int]) -> str:
    """sha256 of a block's disagreements (positions in its part's arrival order, sorted)."""
    return hashlib.sha256(",".join(str(p) for p in sorted(positions)).encode()).hexdigest()


def record_of(part: int | None, c: Comparison, number: int, rows: Sequence[PredictionRow]) -> BlockRecord:
    """The record of block ``number`` of ``c`` (``rows``: its part's rows, in arrival order)."""
    block = c.blocks[number]
    return BlockRecord(
        part=part,
        comparison=c.index,
        number=number,
        candidate=c.candidate,
        threshold=c.threshold if math.isfinite(c.threshold) else None,
        start=block.start,
        end=block.end,
        disagreements=len(block.order),
        items=items_hash(rows, block.start, block.end),
        changes=changes_hash(block.order),
        level=c.alpha if number == 0 and c.passed_from else None,
    )


def _matches(record: BlockRecord, block: Block, rows: Sequence[PredictionRow]) -> str:
    """Why ``block`` (just frozen from ``record``) is not the block recorded ("" when it is)."""
    if not record.bound:
        return ""  # a start written before blocks existed: nothing to check it against
    if items_hash(rows, block.start, block.end) != record.items:
        return f"the images {block.start + 1} to {block.end} are not the ones it was frozen on"
    if len(block.order) != record.disagreements or changes_hash(block.order) != record.changes:
        return "the decisions it sampled changed"
    return ""


def _threshold_matches(record: BlockRecord, c: Comparison) -> bool:
    """The recorded threshold is the one frozen now, up to the journal's rounding of a row's
    candidates (a block recorded before rows in memory were rounded as the journal keeps them)."""
    if record.threshold is None:
        return not math.isfinite(c.threshold) or not record.bound
    rounding = 0.5 * 10.0**-CANDIDATE_DECIMALS
    return math.isfinite(c.threshold) and abs(c.threshold - record.threshold) <= rounding + 1e-9 * max(
        1.0, abs(c.threshold)
    )


def apply_record(
    ladder: SiteLadder, images: SiteImages, record: BlockRecord, rows: Sequence[PredictionRow]
) -> str:
    """Freeze ``record``'s block on ``ladder`` (which has no block open); "" when it was used,
    else why it was set aside (nothing changed then)."""
    if record.end > len(images):
        return f"it covers {record.end} images and the site has {len(images)}"
    if record.number == 0:
        c = ladder.start(
            images.head(record.end), index=record.comparison, candidate=record.candidate, level=record.level
        )
        if c is None or c.population != record.end:
            return "the marks before it no longer lead to it"
        why = _matches(record, c.blocks[0], rows) or (
            "" if _threshold_matches(record, c) else "the candidate's threshold changed"
        )
        if why:
            ladder.discard(c)
        return why
    c = next((c for c in ladder.chain() if c.index == record.comparison), None)
    if c is None or not c.extending or c.open_block is not None or len(c.blocks) != record.number:
        return "the comparison it extends is not in use now"
    if record.start < c.frozen or ladder.below_reach(c, images.head(record.end)) < record.end:
        return "the marks before it no longer lead to it"
    if record.start > c.frozen and ladder.extend(c, images, record.start) is not None:
        ladder.discard_block(c)  # images between must have had nothing to review
        return "the images before it changed"
    block = ladder.extend(c, images, record.end)
    if block is None:
        return "it has nothing left to review"
    why = _matches(record, block, rows)
    if why:
        ladder.discard_block(c)
    return why


def replay(
    ladder: SiteLadder,
    images: SiteImages,
    rows: Sequence[PredictionRow],
    pending: list[BlockRecord],
    labels: Mapping[int, int],
) -> list[tuple[BlockRecord, str]]:
    """Use ``pending`` records (in order) as far as the marks let the ladder reach them: a record
    is taken when no block is waiting for reviews. Records taken are removed from ``pending``;
    returns those set aside, with why."""
    set_aside: list[tuple[BlockRecord, str]] = []
    while True:
        ladder.review(labels)
        if ladder.active is not None or not pending:
            break
        record = pending.pop(0)
        why = apply_record(ladder, images, record, rows)
        if why:
            set_aside.append((record, why))
    ladder.frozen.clear()  # recorded already
    top = max((r.comparison or 0 for r in (*pending, *(r for r, _ in set_aside))), default=0)
    ladder.next_index = max(ladder.next_index, top + 1)
    return set_aside
