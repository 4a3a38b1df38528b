"""Arguments shared by the sub-commands: the model, the card overrides, the device, the method."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.config import parse_assignments
from engine.methods import DEFAULT_METHOD, list_methods, method_config, method_config_class

if TYPE_CHECKING:
    from engine.run.runner import JobOptions
    from engine.run.session import Session


def add_model_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model", required=True, type=Path, help="source checkpoint (.safetensors) with its .json card"
    )


def add_card_override_arguments(parser: argparse.ArgumentParser) -> None:
    """``--source-domain`` and ``--split-seed``: the model card's values, replaced for this run."""
    parser.add_argument("--source-domain", default=None, help="override the model card's source domain")
    parser.add_argument("--split-seed", type=int, default=None, help="split seed (default: the model card's)")


def add_device_arguments(parser: argparse.ArgumentParser) -> None:
    """``--device`` and ``--no-progress``."""
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:1, mps")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def add_ray_argument(parser: argparse.ArgumentParser, help_text: str) -> None:
    """``--ray [ADDRESS]``: a Ray cluster's address, or an empty string for a local Ray instance."""
    parser.add_argument("--ray", nargs="?", const="", default=None, metavar="ADDRESS", help=help_text)


def add_method_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--method",
        default=DEFAULT_METHOD,
        choices=list_methods(),
        help="adaptation method (default %(default)s)",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a method hyper-parameter, e.g. --set mask_percent=20 (repeatable; "
        "`f2tta methods NAME` lists them)",
    )


def method_config_from_args(args: argparse.Namespace) -> Any:
    """The method's config dataclass with ``--set`` overrides applied (None if it has none).

    Raises:
        ValueError: a ``--set`` item names no field or has a bad value (the message says which).
    """
    overrides = parse_assignments(method_config_class(args.method), args.set)
    return method_config(args.method, overrides)


def session_options(args: argparse.Namespace) -> dict[str, Any]:
    """The options a session is opened with, as a run's arguments give them (a cohort hands them to
    every site): the method, the device, the seed, the precision and ``--compile``."""
    return {
        "method": args.method,
        "device": args.device,
        "seed": args.seed,
        "precision": args.precision,
        "compiled": args.compile,
    }


def session_from_args(args: argparse.Namespace) -> tuple[Session, Any, int]:
    """The session a run opens from its arguments (the model, the method with its ``--set``, the
    device, seed, precision and ``--compile``), the method's config and the batch size (``--batch``,
    or the device's default for the method).

    Raises:
        F2TTAError, ValueError, KeyError, OSError: the model, the method or a setting cannot be used.
    """
    from engine.run.batch import default_batch
    from engine.run.session import Session  # torch: only when a command runs

    config = method_config_from_args(args)
    session = Session(args.model, method_config=config, **session_options(args))
    batch = args.batch if args.batch is not None else default_batch(session.device, session.max_batch)
    return session, config, batch


def job_options(args: argparse.Namespace, batch: int) -> JobOptions:
    """How a job runs, as a run's arguments give it (a cohort hands it to every site): the order,
    the tissue share, saving, ``--set``'s refusal of saved settings, the gate, the batch, the maps and
    when I-DiPT's prompted decisions are made (on demand unless ``--prompted`` says otherwise).
    The command, the review files and a manifest are the caller's to add."""
    from engine.run.runner import JobOptions  # torch: only when a command runs

    return JobOptions(
        order=args.order,
        order_seed=args.order_seed,
        min_tissue=args.min_tissue,
        save_every=max(1, args.save_every),
        keep_saved_settings=not args.set,
        accept_warnings=args.accept_warnings,
        batch=batch,
        maps=args.maps,
        prompted=getattr(args, "prompted", None) or "on-demand",
    )
