"""``f2tta methods``: list the registered methods and their hyper-parameters."""

from __future__ import annotations

import argparse

from engine.config import fields_of
from engine.methods import get_method_class, list_methods


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", nargs="?", help="show one method's hyper-parameters")


def main(args: argparse.Namespace) -> int:
    names = [args.name] if args.name else list_methods()
    for name in names:
        try:
            cls = get_method_class(name)
        except KeyError as exc:
            print(f"error: {exc.args[0]}")
            return 2
        summary = (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else ""
        print(f"{name}: {summary}")
        if args.name:
            for info in fields_of(cls.config_class):
                print(f"  {info.describe()}")
    return 0
