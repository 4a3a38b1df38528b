"""Adaptation methods; importing this package registers every built-in method.

Every public module of this package (no leading underscore; not ``base``, ``decision`` or the
shared ``parts`` sub-package) is imported, so a new method file
with ``@register_method("name")`` is picked up by the CLI, the app and the tests.
"""

from __future__ import annotations

import importlib
import pkgutil

from engine.methods.base import (
    DEFAULT_METHOD,
    MethodOutput,
    TTAMethod,
    get_method_class,
    list_methods,
    method_config,
    method_config_class,
    method_for_config,
    register_method,
)
from engine.methods.idipt import IDiPT, IDiPTConfig
from engine.methods.source import SourceOnly

#: Modules of this package that hold no method: the base class, the decision record, the shared parts.
_NOT_METHODS = frozenset({"base", "decision", "parts"})

for _module in pkgutil.iter_modules(__path__):
    if not _module.name.startswith("_") and _module.name not in _NOT_METHODS:
        importlib.import_module(f"{__name__}.{_module.name}")

__all__ = [
    "DEFAULT_METHOD",
    "IDiPT",
    "IDiPTConfig",
    "MethodOutput",
    "SourceOnly",
    "TTAMethod",
    "get_method_class",
    "list_methods",
    "method_config",
    "method_config_class",
    "method_for_config",
    "register_method",
]
