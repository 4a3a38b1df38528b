"""Every file path and dotted module name that the docs and docstrings mention exists.

A moved or deleted module leaves its old name behind in prose (``docs/benchmark.md`` once named a
cache module that had moved); this test reads ``docs/*.md``, the README and every module of
``engine``, ``lab``, ``app``, ``benchmarks`` and ``scripts``, and checks each ``engine/...``/``lab/...``/``app/...``
path and each ``engine.x.y`` / ``lab.x.y`` / ``app.x.y`` name in backticks: the path exists, the module exists, and the first
name after the module is defined in it.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PATH = re.compile(
    r"(?<![\w./-])((?:engine|lab|app|tests|scripts|benchmarks|docs|resources|packaging)/[\w./*-]*\w)"
)
#: A dotted name inside backticks (Markdown code, reST roles): ``engine.run.session.Session``.
DOTTED = re.compile(r"`[~!]?((?:engine|lab|app)(?:\.\w+)+)(?:\(\))?`")
#: Suffixes of file names that look dotted.
FILE_SUFFIXES = (".md", ".py", ".json", ".toml", ".csv", ".svs", ".png", ".pdf")
#: Words that look like paths but are not (a ratio's name).
NOT_PATHS = frozenset({"app/headless"})


def _texts() -> list[Path]:
    return [
        *sorted(ROOT.glob("docs/*.md")),
        ROOT / "README.md",
        *sorted(ROOT.glob("engine/**/*.py")),
        *sorted(ROOT.glob("lab/**/*.py")),
        *sorted(ROOT.glob("app/**/*.py")),
        *sorted(ROOT.glob("benchmarks/*.py")),
        *sorted(ROOT.glob("scripts/*.py")),
    ]


def _module_file(dotted: str) -> Path | None:
    base = ROOT / dotted.replace(".", "/")
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _defines(source: str, name: str) -> bool:
    """``name`` is defined or imported at some level of ``source`` (a class, function, assignment)."""
    pattern = rf"^\s*(?:async def|def|class) {name}\b|^\s*{name}\s*[:=]|\bimport\b.*\b{name}\b|^\s+{name},?$"
    return re.search(pattern, source, re.M) is not None


def _stale_dotted(name: str) -> str | None:
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        module = _module_file(".".join(parts[:cut]))
        if module is not None:
            rest = parts[cut:]
            if rest and not _defines(module.read_text(encoding="utf-8"), rest[0]):
                return f"{name} ({rest[0]} is not in {module.relative_to(ROOT)})"
            return None
    return f"{name} (no such module)"


def stale_names() -> list[str]:
    problems = []
    for text_file in _texts():
        text = text_file.read_text(encoding="utf-8")
        where = text_file.relative_to(ROOT)
        for match in PATH.finditer(text):
            path = match.group(1)
            if "*" in path or path in NOT_PATHS:
                continue
            if not (ROOT / path).exists() and not (ROOT / f"{path}.py").exists():
                problems.append(f"{where}: path {path}")
        for match in DOTTED.finditer(text):
            if match.group(1).endswith(FILE_SUFFIXES):
                continue
            problem = _stale_dotted(match.group(1))
            if problem is not None:
                problems.append(f"{where}: {problem}")
    return problems


def test_every_path_and_module_named_in_docs_and_docstrings_exists() -> None:
    problems = stale_names()
    assert not problems, "names that point nowhere:\n" + "\n".join(problems)


def test_the_check_finds_a_stale_name() -> None:
    assert _stale_dotted("engine.run.session.Session") is None
    assert _stale_dotted("engine.session") is not None  # moved to engine.run.session
    assert _stale_dotted("engine.run.session.NoSuchThing") is not None
    assert not _defines("class Session:\n    pass\n", "Journal")
