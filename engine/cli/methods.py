"""``f2tta methods``: list the registered methods and their hyper-parameters."""

from __future__ import annotations

import argparse
import dataclasses

from engine.methods import get_method_class, list_methods


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", nargs="?", help="show one method's hyper-parameters")


def main(args: argparse.Namespace) -> int:
    names = [args.name] if args.name else list_methods()
    for name in names:
        cls = get_method_class(name)
        summary = (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else ""
        print(f"{name}: {summary}")
        if cls.config_class is not None and args.name:
            for f in dataclasses.fields(cls.config_class):
                print(f"  {f.name} = {f.default!r}")
    return 0
