"""Two sets of figures that are never mixed, and whether they may mean anything (Qt-free).

A review mark never rewrites the dataset's label: the figures *against the dataset's labels*
(class sub-folders or a labels file) count only the images the dataset labels, with the dataset's
label as truth, whatever the reviewers marked; the figures *against the reviewers' marks* count
only the reviewed images, with the mark as truth. Where both exist the reports lead with the
dataset's and carry both. When the applicability gate fired for the open source (the engine's
``check_source``, or the app's one-class collapse), every figure carries :data:`GATE_CAPTION`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from app.core.clinical import ClinicalMetrics, clinical_metrics
from app.core.filters import PredictionRow
from app.core.review_record import ReviewTally

DATASET = "the dataset's labels"
REVIEWED = "the reviewers' marks"
GATE_CAPTION = "Model may not apply — these figures may mean nothing"
SORTED_CAPTION = (
    "Images arrived class by class — adaptation and these figures may not hold for a mixed stream"
)


def gate_caption(checks: Sequence[str]) -> str:
    """What every figure says under the checks that fired (empty: none fired).

    A class-sorted stream alone does not make the model inapplicable, it biases the adaptation
    (and the running figures) towards the order: it gets its own words. Any other check (image
    kind, resolution, a one-class collapse) means the model may not apply at all.
    """
    if not checks:
        return ""
    return SORTED_CAPTION if set(checks) == {"class-sorted"} else GATE_CAPTION


@dataclass(frozen=True)
class Figures:
    """The clinical figures of the open source, by the truth they are measured against.

    Attributes:
        dataset: over the images the dataset labels (marks never change it).
        reviewed: over the reviewed images only, each mark as its truth.
        gate: why the model may not apply to these images (empty: no check fired).
        caption: what every figure says under ``gate`` (:func:`gate_caption`; empty with no gate).
        review: the reviewer's work: confirmations, corrections and the marks' agreement with the
            decisions reported now (:func:`app.core.review_record.review_tally`, the one way it is
            counted).
    """

    dataset: ClinicalMetrics
    reviewed: ClinicalMetrics
    gate: tuple[str, ...] = ()
    caption: str = ""
    review: ReviewTally = field(default_factory=ReviewTally)

    @property
    def any(self) -> bool:
        """Either set has figures."""
        return bool(self.dataset.labelled or self.reviewed.labelled)

    @property
    def lead(self) -> ClinicalMetrics | None:
        """The figures a report leads with: the dataset's where it labels any image, else the reviewers'."""
        if self.dataset.labelled:
            return self.dataset
        return self.reviewed if self.reviewed.labelled else None

    @property
    def lead_truth(self) -> str:
        """:data:`DATASET` or :data:`REVIEWED` (what :attr:`lead` is measured against; empty: nothing)."""
        if self.dataset.labelled:
            return DATASET
        return REVIEWED if self.reviewed.labelled else ""


def dataset_title(images: int) -> str:
    return f"Against {DATASET} ({images} image{'s' if images != 1 else ''})"


def reviewed_title(images: int) -> str:
    return f"Against {REVIEWED} ({images} reviewed image{'s' if images != 1 else ''})"


def figures(
    rows: Sequence[PredictionRow],
    dataset_truth: Sequence[int | None],
    marks: Mapping[str, int],
    classes: Sequence[str],
    gate: Sequence[str] = (),
    checks: Sequence[str] = (),
) -> Figures:
    """Both figure sets of ``rows`` (the decisions as shown).

    Args:
        rows: the rows in arrival order.
        dataset_truth: each row's label from the dataset (None: unlabelled), in the same order.
        marks: the reviewers' class of each reviewed image, by item key.
        classes: the model's class names.
        gate: the warnings of the checks that fired.
        checks: the names of those checks (``image-kind``, ``class-sorted``, ``resolution``,
            ``collapse``), which choose the caption.
    """
    labelled = [
        dataclasses.replace(row, ground_truth=truth, truth_label=_name(truth, classes))
        for row, truth in zip(rows, dataset_truth, strict=True)
        if truth is not None
    ]
    reviewed = [
        dataclasses.replace(row, ground_truth=marks[row.key], truth_label=_name(marks[row.key], classes))
        for row in rows
        if row.key in marks and 0 <= marks[row.key] < len(classes)
    ]
    return Figures(
        clinical_metrics(labelled, classes),
        clinical_metrics(reviewed, classes),
        tuple(gate),
        gate_caption(checks) if gate else "",
    )


def _name(label: int, classes: Sequence[str]) -> str:
    return classes[label] if 0 <= label < len(classes) else str(label)
