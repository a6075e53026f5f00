"""A cold `todoflow check` imports only what checking needs (issue 24: a cold check
within 3.5x `python -c pass`; bench.parse measures it): no Lark, which the fast parse
does without, and none of the libraries of compiling and running."""

from __future__ import annotations

import subprocess
import sys

from ..conftest import FIXTURES, ROOT

HEAVY = ("lark", "pydantic", "jinja2", "statemachine", "yaml")
SHOW_IMPORTS = """
import sys
from todoflow.cli import main
try:
    main(sys.argv[1:])
finally:
    sys.stdout.write("\\n".join(sys.modules))
"""


def _imported(*args: str) -> set[str]:
    result = subprocess.run(
        [sys.executable, "-c", SHOW_IMPORTS, *args], capture_output=True, text=True, cwd=ROOT, check=False
    )
    assert result.returncode in (0, 1), result.stderr
    return {name.split(".")[0] for name in result.stdout.split()}


def test_check_imports_no_parser_generator_nor_the_compiler_s_libraries() -> None:
    assert not _imported("check", "examples/release.todoflow") & set(HEAVY)


def test_a_syntax_error_is_found_by_lark_s_parser() -> None:
    """The error-mode parse is Lark's: imported only when a text has a syntax error."""
    assert "lark" in _imported("check", str(FIXTURES / "invalid" / "unclosed-and-misspelt.todoflow"))
