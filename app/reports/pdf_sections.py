"""The report's back pages as blocks (see :mod:`app.reports.pdf_blocks`): the model card as a table, the
method and state, the guard events, what adaptation changed and the hyper-parameters appendix."""

from __future__ import annotations

import json
from typing import Any

from app._engine import decision_summary, get_method_class, list_methods
from app.core.certificates import REVIEWED_PATH, rule_name
from app.core.names import DECIDED_BY
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
                esc(_decided_by(str(e["path"]))),
                str(e["images"]),
                str(e["changed"]),
                str(e["fixed"]) if labelled else "n/a",
                str(e["broken"]) if labelled else "n/a",
            ]
        )
    intro = (
        "<p>Each decision is the source model's, or the source model's margin against its site "
        "group's operating point where every guard accepted one (<i>site threshold</i>). Fixed and "
        "broken count labelled images only."
        + (
            " <i>Review</i>: the folder's reviews put another rule in use; it decides these images "
            "(see Review certificates)."
            if any(e["path"] == REVIEWED_PATH for e in entries)
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


def _decided_by(path: str) -> str:
    """Who decided the images of a decision path, in the table's words (never the path's name)."""
    if path == REVIEWED_PATH:
        return "review: the rule the reviews put in use"
    return DECIDED_BY.get(path, path or "the method")


# -- review certificates -----------------------------------------------------------------------
def _bounds(c: dict[str, Any]) -> str:
    lower, upper = c.get("lower"), c.get("upper")
    if not c["reviews"] or lower is None or upper is None:
        return "not measured"
    return f"{float(lower):+.2f} … {float(upper):+.2f}"


def _what(c: dict[str, Any]) -> str:
    return (
        "adapting (the operating point)"
        if c["candidate"] == "operating point"
        else f"the {c['candidate']} candidate"
    )


def certificate_blocks(data: ReportData) -> list[Block]:
    """What the folder's reviews certified: each comparison of its ladder, tested on a uniformly
    random sample of the images it changes, its bounds, verdict and scope; where nothing was
    certified, that the decisions are unverified."""
    comparisons = [c for c in data.certificates if c["disagreements"]]
    if not comparisons:
        return []
    reviews = sum(int(c["reviews"]) for c in comparisons)
    body = [
        [
            str(i + 1),
            esc(_what(c)),
            str(c["covers_images"]),
            str(c["disagreements"]),
            str(c["reviews"]),
            f"{100 * float(c['level']):.1f} %".replace(".0 %", " %"),
            _bounds(c),
            f"<b>{esc(c['verdict'])}</b>",
        ]
        for i, c in enumerate(comparisons)
    ]
    certified = [c for c in comparisons if c["verdict"] != "open"]
    html = (
        "<p>Each comparison tests whether a rule is better than the one in use on the images it would "
        "decide otherwise, from a reviewer's marks on a <b>uniformly random sample</b> of them "
        f"({reviews} reviews used in all); each is tested at a smaller error level than the one before, "
        "so the certificates of this folder are wrong together with probability at most 5 % (control is "
        "per folder). <i>Verified</i>: adapting helps. <i>Promoted</i>: a stronger candidate decides the "
        "images its certificate covers. <i>Reverted</i>: adapting harms; the source model decides. "
        "<i>Not better</i>: the candidate is not used. Bounds: the mean gain per changed decision (+1: every "
        "change a fix). A certificate covers the images its comparison was frozen on and the later images "
        "reviews of their own covered; images that arrived after it and are not covered yet are reported "
        "with the rule below it. Reviews never change the label-free adaptation itself. Rule in use: "
        f"<b>{esc(rule_name(data.rule_in_use))}</b>.</p>"
    )
    if not certified:
        html += (
            "<p><b>Nothing was certified</b>: no comparison was decided, so every decision in this "
            "report that adapting changed is unverified.</p>"
        )
    head = ["#", "Tests", "Images", "To review", "Reviews", "Level", "Gain bounds", "Verdict"]
    html += grid_table(head, body)
    items = "".join(f"<li>{esc(str(c['says']))}</li>" for c in comparisons)
    html += f"<ul style='margin-top:2px'>{items}</ul>"
    return [Block(h2("Review certificates") + html)]
