"""``f2tta``: the command-line entry point.

Each sub-command lives in its own module with ``add_arguments(parser)`` and ``main(args) -> int``;
modules are imported only when their command runs, so ``f2tta --help`` stays fast. The product's
commands are here; ``synth``, ``bench`` and ``bench-suite`` are the lab's (:data:`LAB_COMMANDS`).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("engine.cli.run", "adapt to a folder of images in arrival order and write predictions"),
    "train-source": ("engine.cli.train_source", "train a source ViT on one domain"),
    "reference": ("engine.cli.reference", "compute a model's source reference (for idipt+)"),
    "methods": ("engine.cli.methods", "list the registered adaptation methods"),
}
#: The module whose ``COMMANDS`` table adds the lab's sub-commands (``synth``, ``bench``,
#: ``bench-suite``: ``lab/cli/__init__.py``) where the lab is installed, as in a source checkout.
#: The engine names it and imports nothing else of the lab: each command's module is the lab's.
LAB_COMMANDS = "lab.cli"


def commands() -> dict[str, tuple[str, str]]:
    """Each sub-command -> (its module, its help): the product's, then the lab's where it is installed."""
    try:
        lab = importlib.import_module(LAB_COMMANDS)
    except ModuleNotFoundError as exc:
        if exc.name not in ("lab", LAB_COMMANDS):
            raise  # the lab is there but something it needs is not: say so
        return dict(COMMANDS)
    extra: dict[str, tuple[str, str]] = lab.COMMANDS
    return {**COMMANDS, **extra}


def build_parser(table: dict[str, tuple[str, str]] | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="f2tta", description="F²TTA Studio command line")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (_module, help_text) in (commands() if table is None else table).items():
        sub.add_parser(name, help=help_text, add_help=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    table = commands()
    parser = build_parser(table)
    # Parse only the global part; the sub-command parses the rest itself.
    top, rest = parser.parse_known_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if top.verbose else logging.INFO,
        format="%(levelname)s %(name)s: %(message)s",
    )
    from engine.util.text import EscapingFilter

    for handler in logging.getLogger().handlers:  # names in log lines never forge a line
        if not any(isinstance(f, EscapingFilter) for f in handler.filters):
            handler.addFilter(EscapingFilter())
    if top.command is None:
        parser.print_help()
        return 2
    module_name, help_text = table[top.command]
    module = importlib.import_module(module_name)
    sub_parser = argparse.ArgumentParser(prog=f"f2tta {top.command}", description=help_text)
    module.add_arguments(sub_parser)
    args = sub_parser.parse_args(rest)
    result: int = module.main(args)
    return result


if __name__ == "__main__":
    raise SystemExit(main())
