"""What a journal holds of a source that no longer matches its files: said when the source opens.

A source is identified by its content as well as its path (:mod:`engine.io.content`): a slide
replaced at the same path is another source, whose tiles are never added to the old one's rows
(:attr:`engine.io.sources.SlideSource.source_id`), and a picture's row records the content of the
file decided. When a source opens again, ``f2tta run`` and the app say what changed: the slide
there replaced since the journal processed tiles of the one before, pictures changed since their
decisions (their rows are of the pictures as they were), and processed images no longer in the
folder (counted apart, so a run reports "119 of 119 images processed", never "120 of 119").
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from engine.io.content import changed_since
from engine.io.sources import FolderSource, Source, same_place_other_slide
from engine.run.journal import Journal
from engine.run.rows import PredictionRow

#: Names listed in a note before "and N more".
_NAMES_SHOWN = 5


def processed_here(keys: Iterable[str], source: Source) -> int:
    """How many of the processed ``keys`` are items of ``source`` as it is listed now."""
    present = {item.key for item in source.items}
    return sum(key in present for key in keys)


def changed_pictures(rows: Sequence[PredictionRow], source: Source) -> list[str]:
    """The names of ``source``'s pictures whose file no longer has the content recorded with their
    decision (rows without a recorded content, from before it was recorded, are not judged)."""
    if not isinstance(source, FolderSource):
        return []
    paths = {item.key: item.path for item in source.items if item.path is not None}
    return [
        row.name
        for row in rows
        if row.content and row.key in paths and changed_since(row.content, paths[row.key])
    ]


def replaced_slide(journal: Journal, source: Source) -> int | None:
    """Tiles the journal processed of other slides at ``source``'s path, cut alike (the file there
    was replaced since), or None when it holds none."""
    found = [
        len(record.processed)
        for sid, record in journal.record.items()
        if same_place_other_slide(sid, source.source_id) and (record.processed or record.skipped)
    ]
    return sum(found) if found else None


def input_notes(journal: Journal, source: Source, rows: Sequence[PredictionRow]) -> tuple[str, ...]:
    """What to tell the user about ``source`` as the journal recorded it (empty: nothing changed)."""
    notes: list[str] = []
    tiles = replaced_slide(journal, source)
    if tiles is not None:
        notes.append(
            f"{source.display_name}: the slide file at this path is not the one this project processed "
            f"{tiles} tile(s) of (it was replaced); it is a new input, its tiles are never mixed with "
            "the earlier slide's, whose rows are kept"
        )
    changed = changed_pictures(rows, source)
    if changed:
        shown = ", ".join(changed[:_NAMES_SHOWN]) + (
            f" and {len(changed) - _NAMES_SHOWN} more" if len(changed) > _NAMES_SHOWN else ""
        )
        notes.append(
            f"{len(changed)} image(s) changed since their decisions (replaced or rewritten): {shown}. Their "
            "rows are of the images as they were decided, and no map is made from the new ones; give the "
            "new images new names to process them"
        )
    gone = len(rows) - processed_here((row.key for row in rows), source)
    if gone:
        notes.append(
            f"{gone} processed image(s) are no longer in {source.display_name}: their rows are kept and "
            "not counted among its images"
        )
    return tuple(notes)
