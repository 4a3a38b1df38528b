"""``f2tta reference``: compute a model's source reference from its source training split.

``f2tta train-source`` writes the reference with every model it trains; this command adds one to a
model trained earlier (or recomputes it), from the same dataset the model was trained on.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from engine.cli._common import add_card_override_arguments, add_model_argument
from engine.data import open_dataset, split_dataset
from engine.errors import F2TTAError
from engine.model.card import card_path_for, load_model
from engine.model.source_reference import reference_path, save_reference
from engine.training import compute_reference, describe_reference, load_items
from engine.util.atomic import atomic_write_bytes
from engine.util.text import shown


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_argument(parser)
    parser.add_argument("--data", required=True, type=Path, help="the dataset the model was trained on")
    add_card_override_arguments(parser)
    parser.add_argument(
        "--max-images", type=int, default=4000, metavar="N", help="use at most N train images (default 4000)"
    )


def main(args: argparse.Namespace) -> int:
    try:
        loaded = load_model(args.model)
        card = loaded.card
        source = args.source_domain or card.source_domain
        training = card.training if isinstance(card.training, dict) else {}
        split_seed = args.split_seed if args.split_seed is not None else int(training.get("split_seed", 0))
        ds = open_dataset(args.data)
        if source not in ds.domains:
            raise F2TTAError(
                f"source domain {source!r} is not a domain of {args.data}: {', '.join(ds.domains)}"
            )
        if tuple(ds.classes) != tuple(card.classes):
            raise F2TTAError(
                f"the model's classes {list(card.classes)} differ from the dataset's {list(ds.classes)}"
            )
        items = split_dataset(ds, split_seed)[source].train[: max(1, args.max_images)]
        images = load_items(items, card.img_size)
        ref = compute_reference(loaded.model, card.arch, card.mean, card.std, images, card.num_classes)
        if ref.fingerprint != loaded.fingerprint:
            raise F2TTAError("internal error: the reference fingerprint differs from the loaded model's")
        path = reference_path(args.model)
        about = describe_reference(ref, path, source, split_seed)
        save_reference(ref, path, about)
        card_file = card_path_for(args.model)
        card_json = json.loads(card_file.read_text(encoding="utf-8"))
        card_json.setdefault("training", {})["source_reference"] = about
        atomic_write_bytes(card_file, (json.dumps(card_json, indent=2) + "\n").encode())
    except (F2TTAError, OSError, ValueError) as exc:
        print(f"error: {shown(exc)}", file=sys.stderr)
        return 1
    print(
        f"wrote {path} from {ref.images} {source} train images "
        f"({about['appearance_dims']} appearance, {about['feature_dims']} feature directions); card updated"
    )
    return 0
