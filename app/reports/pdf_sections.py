"""The report's back pages as blocks (see :mod:`app.reports.pdf_blocks`): the model card as a table, the
method and state, the guard events, what adaptation changed and the hyper-parameters appendix."""

from __future__ import annotations

import json
from typing import Any

from app._engine import DecisionPath, decision_summary, get_method_class, list_methods
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
        (  # with more than two classes no class is "the positive" one: say what the card's field does
            "Positive class" if len(classes) <= 2 else "Class of the CSV's p_positive (its probability)",
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
                esc(_decided_by(str(e["path"]), data)),
                str(e["images"]),
                str(e["changed"]),
                str(e["fixed"]) if labelled else "n/a",
                str(e["broken"]) if labelled else "n/a",
            ]
        )
    intro = (
        "<p>Each decision is the original model's, or its score cut at the site group's threshold where "
        "every safety check accepted one and it was reported without review (<i>site threshold "
        "(unreviewed)</i>). Fixed and broken count labelled images only."
        + (
            " <i>Review</i>: the rule your answers showed better decides these images (see Review "
            "certificates)."
            if any(e["path"] == DecisionPath.REVIEWED for e in entries)
            else ""
        )
        + "</p>"
    )
    return chunked(
        "What adaptation changed",
        ["Site group", "Decided by", "Images", "Changed", "Fixed", "Broken"],
        body,
        intro,
    )


def _decided_by(path: str, data: ReportData) -> str:
    """Who decided the images of a decision path, in the table's words (never the path's name)."""
    document = data.certificates
    if path in (DecisionPath.REVIEWED, DecisionPath.PROVISIONAL):
        rule = document.rule_in_use if document is not None else None
        words = (
            f"{rule.short} (your answers' rule)"
            if rule is not None
            else "the rule each part's answers certified"
        )
        provisional = (
            " · provisional (reported with the rule below it)" if path == DecisionPath.PROVISIONAL else ""
        )
        return words + provisional
    if path == DecisionPath.HELD:
        return "original model (a site threshold awaits review)"
    try:
        return DecisionPath(path).words if path else "the method"
    except ValueError:  # a path of a method this app does not know
        return path


# -- review certificates -----------------------------------------------------------------------
def certificate_blocks(data: ReportData) -> list[Block]:
    """What the folder's reviews certified: each comparison of its ladder, tested on a uniformly
    random sample of the images it changes, what it showed and what it decides, in words; its
    level and bounds in a details table after it. Where nothing was certified, that the decisions
    are unverified."""
    document = data.certificates
    comparisons = [c for c in document.certificates if c.disagreements] if document is not None else []
    if document is None or not comparisons:
        return []
    reviews = sum(c.reviews for c in comparisons)
    body = [
        [
            str(i + 1),
            esc(c.candidate.short + (f", {c.part.partition(' (')[0]}" if c.part else "")),
            str(c.covers),
            str(c.disagreements),
            f"{c.reviews} + {c.earlier} earlier" if c.earlier else str(c.reviews),
            f"<b>{esc(c.verdict_words)}</b>",
        ]
        for i, c in enumerate(comparisons)
    ]
    certified = [c for c in comparisons if c.verdict.decided]
    html = (
        "<p>Each comparison asks whether a rule is better than the one in use on the images it would call "
        "otherwise, from your answers about a <b>uniformly random sample</b> of them "
        f"({reviews} answers used in all; a threshold fitted to your answers counts those it was fitted on "
        "as given, shown as earlier answers, and asks about the others). <i>Better, in use</i>: it decides the images its certificate "
        "covers; images that arrived after it and are not covered yet are reported with the rule below it. "
        "<i>Better, replaced</i>: a later rule your answers showed better decides instead. <i>Worse, turned "
        "back</i>: the original model decides. <i>Not shown better</i>: the rule is not used. The "
        "certificates of this folder are wrong together with probability at most 5 % (control is per "
        "folder; levels and bounds: Certificate details). Reviews never change the label-free adaptation "
        f"itself. Now <b>{esc(document.decides)}</b>.</p>"
    )
    if not certified:
        html += (
            "<p><b>Nothing was certified</b>: no comparison was decided, so every decision in this "
            "report that adapting changed is unverified.</p>"
        )
    head = ["#", "Rule tested", "Images", "Calls otherwise", "Answers", "Verdict"]
    html += grid_table(head, body)
    items = "".join(f"<li>{esc(c.says[:1].upper() + c.says[1:])}.</li>" for c in comparisons)
    html += f"<ul style='margin-top:2px'>{items}</ul>"
    details = [
        [
            str(i + 1),
            f"{100 * c.level:.1f} %".replace(".0 %", " %"),
            c.bounds,
            esc(c.details),
        ]
        for i, c in enumerate(comparisons)
    ]
    detail_html = (
        "<p>The statistics behind each comparison: the confidence level it is tested at (each at a smaller "
        "error level than the one before), bounds on the mean gain per changed decision (+1: every change "
        "a fix, −1: every change an error), the evidence and the rule's frozen threshold.</p>"
        + grid_table(["#", "Level", "Gain bounds", "Details"], details)
    )
    return [Block(h2("Review certificates") + html), Block(h2("Certificate details") + detail_html)]
