"""The review queue: which disagreement a reviewer should look at next.

Each review teaches most where a verdict is still open and has the least evidence, so items are
ordered by site group: the undecided group with the fewest reviews first, and as its count rises
the next group takes its turn (the groups alternate); within a group, in arrival order (a person
reviews images as they come). Items of groups already verified or reverted come after all
others, in the same order among themselves. Ties between groups go to the one whose next item
arrived first, so the order never depends on how group numbers compare (None is a group too).
"""

from __future__ import annotations

import heapq
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

Group = int | None


@dataclass(frozen=True)
class QueueItem:
    """One disagreement waiting for review."""

    item: int  # the caller's id for the image (stream position or row index)
    group: Group  # the site group it was judged in
    arrival: int  # arrival order (smaller came first)


def review_order(
    items: Iterable[QueueItem],
    reviews: Mapping[Group, int],
    decided: Collection[Group] = (),
) -> list[int]:
    """Every item's id in the order it should be reviewed (see the module docstring).

    Args:
        items: the disagreements not reviewed yet.
        reviews: reviews each group already has (a group not in it has none).
        decided: groups already verified or reverted.
    """
    by_group: dict[Group, list[QueueItem]] = {}
    for entry in sorted(items, key=lambda e: e.arrival):
        by_group.setdefault(entry.group, []).append(entry)
    order: list[int] = []
    for late in (False, True):
        groups = [g for g in by_group if (g in decided) == late]
        heap = [(reviews.get(g, 0), by_group[g][0].arrival, k) for k, g in enumerate(groups)]
        heapq.heapify(heap)
        position = [0] * len(groups)
        while heap:
            count, _, k = heapq.heappop(heap)
            queue = by_group[groups[k]]
            order.append(queue[position[k]].item)
            position[k] += 1
            if position[k] < len(queue):
                heapq.heappush(heap, (count + 1, queue[position[k]].arrival, k))
    return order


class ReviewQueue:
    """The disagreements of one site waiting for review, in arrival order."""

    def __init__(self) -> None:
        self._items: dict[int, QueueItem] = {}
        self._arrivals = 0

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, item: object) -> bool:
        return item in self._items

    def add(self, item: int, group: Group) -> None:
        """A disagreement arrived (adding an id twice keeps its first arrival)."""
        if item not in self._items:
            self._items[item] = QueueItem(item, group, self._arrivals)
            self._arrivals += 1

    def remove(self, item: int) -> None:
        """The item was reviewed (or withdrawn); unknown ids are ignored."""
        self._items.pop(item, None)

    def pending(self) -> list[QueueItem]:
        return list(self._items.values())

    def order(self, reviews: Mapping[Group, int], decided: Collection[Group] = ()) -> list[int]:
        """All pending ids in review order (:func:`review_order`)."""
        return review_order(self._items.values(), reviews, decided)

    def next(
        self, reviews: Mapping[Group, int], decided: Collection[Group] = (), include_decided: bool = True
    ) -> int | None:
        """The id to review next (None: nothing pending, or only decided groups' items when
        ``include_decided`` is False)."""
        first: dict[Group, QueueItem] = {}
        for entry in self._items.values():  # insertion order is arrival order
            first.setdefault(entry.group, entry)
        best: tuple[bool, int, int] | None = None
        chosen: int | None = None
        for group, entry in first.items():
            late = group in decided
            if late and not include_decided:
                continue
            key = (late, reviews.get(group, 0), entry.arrival)
            if best is None or key < best:
                best, chosen = key, entry.item
        return chosen
