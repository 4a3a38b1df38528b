"""``f2tta train-source``: train a source ViT on one domain and write checkpoint + model card."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from engine.data.readers import open_dataset
from engine.errors import F2TTAError
from engine.model.card import card_path_for
from engine.model.source_reference import reference_path
from engine.training import (
    DEFAULT_ARCH,
    DEFAULT_IMG_SIZE,
    DEFAULT_MODEL_KWARGS,
    DEFAULT_RECIPE,
    RECIPES,
    EpochStats,
    TrainConfig,
    recipe_config,
    train_source,
)
from engine.util.files import check_outputs
from engine.util.text import shown


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data", required=True, help="dataset folder or CSV (domain folders, manifest, WILDS)"
    )
    parser.add_argument("--source", required=True, help="domain to train on")
    parser.add_argument(
        "--out", required=True, help="MODEL.safetensors to write (the card goes to MODEL.json)"
    )
    parser.add_argument(
        "--recipe",
        choices=list(RECIPES),
        default=DEFAULT_RECIPE,
        help="training recipe: every setting below defaults to the recipe's (default %(default)s; "
        "adamw-p16: 16 px patches, 6 blocks of width 256, AdamW, label smoothing, crops and blur)",
    )
    parser.add_argument("--arch", default=None, help=f"timm architecture (default {DEFAULT_ARCH})")
    parser.add_argument(
        "--img-size", type=int, default=None, help=f"input side in pixels (default {DEFAULT_IMG_SIZE})"
    )
    parser.add_argument(
        "--model-kwargs",
        default=None,
        help=f"JSON of extra timm.create_model arguments (default: the recipe's, {json.dumps(DEFAULT_MODEL_KWARGS)} "
        f"for the default recipe; {{}} for an --arch other than the recipe's)",
    )
    parser.add_argument("--epochs", type=int, default=None, help="maximum epochs (default: the recipe's, 40)")
    parser.add_argument("--batch-size", type=int, default=None, help="default: the recipe's, 64")
    parser.add_argument(
        "--lr", type=float, default=None, help="peak learning rate (default: the recipe's, 1e-3 / 5e-4)"
    )
    parser.add_argument(
        "--patience",
        type=int,
        default=None,
        help="early-stopping patience in epochs (default: the recipe's, 10)",
    )
    parser.add_argument("--seed", type=int, default=0, help="training seed (weights, batches, augmentation)")
    parser.add_argument("--split-seed", type=int, default=0, help="seed of the per-domain 60/15/25 split")
    parser.add_argument(
        "--pretrained", action="store_true", help="start from timm's pretrained weights (local cache only)"
    )
    parser.add_argument("--positive-class", default=None, help="name or index of the positive class")
    parser.add_argument(
        "--eval-domains", action="store_true", help="also report every domain's test accuracy"
    )
    parser.add_argument("--device", default=None, help="cpu, cuda, mps (default: auto)")


def _model_kwargs(args: argparse.Namespace, recipe: TrainConfig) -> dict[str, Any]:
    if args.model_kwargs is None:
        same_arch = args.arch is None or args.arch == recipe.arch
        return dict(recipe.model_kwargs) if same_arch else {}
    try:
        value = json.loads(args.model_kwargs)
    except json.JSONDecodeError as exc:
        raise F2TTAError(f"--model-kwargs is not valid JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise F2TTAError("--model-kwargs must be a JSON object, e.g. '{\"depth\": 6}'")
    return value


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    """The recipe named by ``--recipe`` with the settings given on the command line in place of its own."""
    recipe = recipe_config(args.recipe)
    given = {
        "arch": args.arch,
        "img_size": args.img_size,
        "epochs": args.epochs,
        "batch_size": args.batch_size,
        "lr": args.lr,
        "patience": args.patience,
    }
    return recipe_config(
        args.recipe,
        model_kwargs=_model_kwargs(args, recipe),
        seed=args.seed,
        split_seed=args.split_seed,
        pretrained=args.pretrained,
        device=args.device,
        **{k: v for k, v in given.items() if v is not None},
    )


def main(args: argparse.Namespace) -> int:
    try:
        cfg = config_from_args(args)
        check_outputs([args.out, card_path_for(args.out), reference_path(args.out)])  # before training
        ds = open_dataset(args.data, positive_class=args.positive_class)
        print(ds.summary())

        def show(s: EpochStats) -> None:
            mark = " *" if s.best else ""
            print(
                f"epoch {s.epoch:3d}/{cfg.epochs}  loss {s.loss:.4f}  train acc {100 * s.train_acc:5.1f}%  "
                f"val acc {100 * s.val_acc:5.1f}%  lr {s.lr:.1e}  {s.seconds:.1f}s{mark}",
                flush=True,
            )

        result = train_source(
            ds, args.source, cfg, out=args.out, on_epoch=show, eval_domains=args.eval_domains
        )
    except (F2TTAError, OSError) as exc:
        print(f"error: {shown(exc)}", file=sys.stderr)
        return 1
    t = result.card.training
    print(
        f"recipe {t['recipe']}, best epoch {t['best_epoch']}: val acc {100 * result.val_acc:.1f}%, test acc {100 * result.test_acc:.1f}%"
    )
    for domain, acc in result.domain_test_acc.items():
        tag = " (source)" if domain == args.source else ""
        print(f"  {domain}: test acc {100 * acc:.1f}%{tag}")
    if result.skipped:
        print(
            f"{len(result.skipped)} unreadable file(s) skipped, e.g. {result.skipped[0].path}: {result.skipped[0].reason}"
        )
    print(f"wrote {args.out} and its card {args.out.rsplit('.', 1)[0]}.json")
    return 0
