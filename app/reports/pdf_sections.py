"""The report's back pages as blocks (see :mod:`app.reports.pdf_blocks`): the model card as a table, the
method and state, the guard events, what adaptation changed and the hyper-parameters appendix."""

from __future__ import annotations

import json
from typing import Any

from app._engine import UNDECIDED, decision_summary, get_method_class, list_methods
from app.core.certificates import REVERTED_PATH
from app.reports.files import ReportData, guard_events
from app.reports.pdf_html import Block, breakable, chunked, esc, grid_table, h2, pct

MAX_GUARD_EVENTS = 50  # guard events listed (the JSON and the CSV have them all)
INLINE_CLASSES = 12  # more classes than this are listed in a table of their own
CLASSES_PER_ROW = 8


# -- model, method, appendix -------------------------------------------------------------------
def card_pairs(data: ReportData) -> list[tuple[str, Any]]:
    """The model card as rows of a table (what a reader needs, not the raw JSON)."""
    card = data.card
    classes = card.get("classes", [])
    positive = card.get("positive_class", 1)
    pairs: list[tuple[str, Any]] = [
        ("Checkpoint", data.model_path),
        ("Architecture", f"{data.model_description} (timm template {card.get('arch', '?')})"),
        (
            "Classes",
            ", ".join(str(c) for c in classes)
            if len(classes) <= INLINE_CLASSES
            else f"{len(classes)} classes, listed in the table below",
        ),
        (
            "Positive class",
            classes[positive] if isinstance(positive, int) and positive < len(classes) else positive,
        ),
        ("Input", f"{card.get('img_size')} px, mean {card.get('mean')}, std {card.get('std')}"),
        ("Trained on", card.get("source_domain") or "not recorded"),
        ("Training resolution", f"{card['mpp']} µm/px" if card.get("mpp") else "not recorded"),
        ("Weights SHA-256 (file, checked at load)", data.weights_sha256 or "not recorded in the card"),
        ("Model fingerprint (architecture and tensors)", data.model_fingerprint),
    ]
    training = card.get("training") or {}
    if isinstance(training, dict) and training:
        epochs = training.get("epochs")
        best = training.get("best_epoch")
        pairs.append(
            (
                "Training",
                f"{training.get('optimizer', '?')}, lr {training.get('lr')}, {epochs} epochs"
                + (f" (best {best})" if best is not None else "")
                + f", batch {training.get('batch_size')}",
            )
        )
        for key, label in (("val_acc", "Validation accuracy"), ("test_acc", "Test accuracy")):
            if isinstance(training.get(key), int | float):
                pairs.append((label, pct(float(training[key]))))
        per_site = training.get("domain_test_acc")
        if isinstance(per_site, dict) and per_site:
            pairs.append(
                (
                    "Test accuracy per site",
                    ", ".join(f"{k} {pct(float(v))}" for k, v in sorted(per_site.items())),
                )
            )
        aug = training.get("augmentation")
        if isinstance(aug, dict):
            pairs.append(("Augmentation", ", ".join(k for k, v in aug.items() if v) or "none"))
        dataset = training.get("dataset")
        if isinstance(dataset, dict):
            synth = dataset.get("synth")
            origin = (
                f"generated ({synth.get('kind')}, seed {synth.get('seed')})"
                if isinstance(synth, dict)
                else dataset.get("root")
            )
            pairs.append(("Training data", origin))
    return pairs


def class_blocks(data: ReportData) -> list[Block]:
    """Every class of a card with many, :data:`CLASSES_PER_ROW` a row (a card of 1 998 classes
    showed 26 of them: one cell of 20 000 characters, cut at the page end)."""
    classes = [str(c) for c in data.card.get("classes", [])]
    if len(classes) <= INLINE_CLASSES:
        return []
    body = [
        [
            f"{start + 1}-{min(start + CLASSES_PER_ROW, len(classes))}",
            esc(", ".join(classes[start : start + CLASSES_PER_ROW])),
        ]
        for start in range(0, len(classes), CLASSES_PER_ROW)
    ]
    return chunked(f"Classes of the model ({len(classes)})", ["#", "Classes"], body)


def method_pairs(data: ReportData) -> list[tuple[str, Any]]:
    pairs: list[tuple[str, Any]] = [
        ("Method", f"{data.method_label or data.method} (registered as '{data.method}')"),
        ("Device", data.device),
        ("Seed", data.run_config.get("seed", "")),
        ("State fingerprint", data.state_fingerprint),
    ]
    return pairs + [(f"Project {k}", v) for k, v in data.project.items() if v is not None]


def hyperparameter_rows(data: ReportData) -> list[list[str]]:
    """Setting, value used, default and meaning (the field's help) of each hyper-parameter."""
    config = data.run_config.get("method_config", {})
    known = {name: (default, meaning) for name, default, meaning in data.hyperparameters}
    rows = []
    for key, value in config.items() if isinstance(config, dict) else []:
        text = json.dumps(value) if isinstance(value, dict | list) else str(value)
        default, meaning = known.get(key, ("", ""))
        changed = "" if not default or default == text else " (changed)"
        rows.append([esc(key), breakable(text) + changed, esc(default), esc(meaning)])
    return rows


def guard_blocks(data: ReportData) -> list[Block]:
    """The collapse guard's actions: image index, item and what was reset."""
    events = guard_events(data.rows)
    if not events:
        watched = data.method not in list_methods() or get_method_class(data.method).collapse_check
        text = (
            "The collapse guard did not act on these images."
            if watched
            else "The collapse guard does not watch this method: its decisions are the source model's "
            "or guarded per site group (see below)."
        )
        return [Block(h2("Guard events") + f"<p>{esc(text)}</p>")]
    shown = events[:MAX_GUARD_EVENTS]
    body = [[str(r.index), breakable(r.name), esc(r.guard_message)] for r in shown]
    blocks = chunked("Guard events", ["Image", "Item", "What the guard did"], body)
    if len(events) > len(shown):
        blocks.append(Block(f"<p>… and {len(events) - len(shown)} more (see run_config.json).</p>"))
    return blocks


def change_blocks(data: ReportData) -> list[Block]:
    """What adaptation changed, per site group and decision path (methods that record decisions)."""
    entries = decision_summary(data.rows)
    if not entries:
        return []
    body = []
    for e in entries:
        labelled = e["labelled"]
        body.append(
            [
                "none" if e["group"] is None else str(e["group"]),
                esc(e["path"]),
                str(e["images"]),
                str(e["changed"]),
                str(e["fixed"]) if labelled else "n/a",
                str(e["broken"]) if labelled else "n/a",
            ]
        )
    intro = (
        "<p>Each decision is the source model's, or the source model's margin against its site "
        "group's operating point where every guard accepted one (path <i>accepted</i>). Fixed and "
        "broken count labelled images only."
        + (
            " Path <i>reverted</i>: a site group whose reviews showed that adapting harmed it; its "
            "decisions are the source model's (see Review certificates)."
            if any(e["path"] == REVERTED_PATH for e in entries)
            else ""
        )
        + "</p>"
    )
    return chunked(
        "What adaptation changed", ["Site group", "Path", "Images", "Changed", "Fixed", "Broken"], body, intro
    )


# -- review certificates -----------------------------------------------------------------------
def _bound(summary: dict[str, Any]) -> str:
    """The 95 % upper bound on the harm of adapting, in points of the group's images."""
    if not summary["reviews"]:
        return "not measured"
    if float(summary["lower"]) > 0:
        return "none (it helps)"
    return f"≤ {100 * float(summary['harm_bound']):.1f} points"


def _group(group: int | None) -> str:
    return "none" if group is None else str(group)


def certificate_blocks(data: ReportData) -> list[Block]:
    """What the reviews certified per site group, on how many reviews, at what confidence, and
    where nothing was certified, that the adapted decisions are unverified. Groups whose decisions
    adapting never changed have nothing to review: they share one line."""
    groups = data.certificates
    if not groups:
        return []
    level = f"{100 * float(groups[0]['confidence']):.0f} %"
    reviews = sum(int(g["reviews"]) for g in groups)
    texts = dict(zip((g["group"] for g in groups), data.certificate_texts, strict=False))
    changed = [g for g in groups if g["disagreements"] or g["reviews"]]
    body = [
        [
            _group(g["group"]),
            str(g["images"]),
            f"{g['disagreements']} ({float(g['disagreement_share']):.0%})",
            str(g["reviews"]),
            _bound(g),
            f"<b>{esc(g['verdict'])}</b>"
            + (f" after {g['decided_at']} reviews" if g["decided_at"] is not None else ""),
        ]
        for g in changed
    ]
    certified = [g for g in groups if g["verdict"] != UNDECIDED]
    html = (
        f"<p>A reviewer's mark on a disagreement (an image whose adapted decision differs from the "
        f"source model's) tests, per site group, whether adapting helped there ({reviews} such reviews "
        f"in all). <i>Verified</i>: adapting helps, at {level} confidence. <i>Reverted</i>: the reviews "
        f"showed harm (above 1 point of the group's images, or harm at {level} confidence); the group's "
        "decisions in this report are the source model's. <i>Undecided</i>: the adapted decisions stand "
        "but are <b>unverified</b>. The reviews never changed the adaptation itself.</p>"
    )
    if not certified:
        html += (
            "<p><b>Nothing was certified</b>: in no site group did the reviews verify or revert "
            "adapting, so every adapted decision in this report is unverified.</p>"
        )
    head = ["Site group", "Images", "Disagreements", "Reviews used", f"Harm bound ({level})", "Verdict"]
    if body:
        html += grid_table(head, body)
    rest = [g for g in groups if g not in changed]
    if rest:
        names = ", ".join(_group(g["group"]) for g in rest)
        images = sum(int(g["images"]) for g in rest)
        html += (
            f"<p>Site group{'s' if len(rest) > 1 else ''} {esc(names)} ({images} images): adapting changed "
            "none of their decisions, so there was nothing to review.</p>"
        )
    items = "".join(f"<li>{esc(texts[g['group']])}</li>" for g in changed if g["group"] in texts)
    if items:
        html += f"<ul style='margin-top:2px'>{items}</ul>"
    return [Block(h2("Review certificates") + html)]
