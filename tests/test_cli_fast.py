"""``import engine`` and ``f2tta --help`` do not load torch (the names load on first use)."""

from __future__ import annotations

import subprocess
import sys

import engine


def _fresh_python(code: str) -> subprocess.CompletedProcess[str]:
    """``code`` run by a Python interpreter of its own (nothing imported yet), which must succeed."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done


def test_help_and_import_load_no_torch() -> None:
    code = (
        "import sys\n"
        "from engine.cli import main\n"
        "try:\n"
        "    main(['--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
        "assert 'engine._omp' in sys.modules, 'the OpenMP policy runs first'\n"
    )
    _fresh_python(code)


def test_every_exported_name_resolves() -> None:
    missing = [name for name in engine.__all__ if getattr(engine, name, None) is None]
    assert not missing, missing
    assert set(engine.__all__) <= set(dir(engine))


def test_the_public_api_is_one_list_for_python_and_for_type_checkers() -> None:
    """``engine/__init__.py`` names each public name twice, for the lazy import and for type
    checkers: the two agree, each name comes from the module the table says, and the API stays small."""
    import ast
    from pathlib import Path

    source = Path(engine.__file__).read_text(encoding="utf-8")
    typed = {
        alias.asname: node.module
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ImportFrom) and node.module != "engine"
        for alias in node.names
        if alias.asname is not None
    }
    typed.pop("__version__")
    assert typed == engine._HOME
    assert set(engine.__all__) == {"__version__", *typed}
    assert len(source.splitlines()) < 100 and len(engine.__all__) <= 50


def test_the_product_commands_run_without_the_lab() -> None:
    """Where the lab is not installed ``f2tta`` lists and runs the product's commands alone; where it
    is, its commands are added (``engine.cli.LAB_COMMANDS``)."""
    code = (
        "import sys\n"
        "sys.modules['lab'] = None  # as in an install without the lab: importing it fails\n"
        "from engine.cli import COMMANDS, commands, main\n"
        "assert commands() == COMMANDS, commands()\n"
        "assert main(['methods']) == 0\n"
        "try:\n"
        "    main(['bench', '--help'])\n"
        "except SystemExit as stop:\n"
        "    assert stop.code == 2, stop.code\n"
        "else:\n"
        "    raise AssertionError('f2tta bench ran without the lab')\n"
    )
    done = _fresh_python(code)
    assert "invalid choice: 'bench'" in done.stderr
    from engine.cli import COMMANDS, commands

    assert {"synth", "bench", "bench-suite"} <= set(commands()) - set(COMMANDS)
