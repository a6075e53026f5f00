"""A cold `todoflow check` imports only what checking needs (issue 24: a cold check
within 3.5x `python -c pass`; bench.parse measures it): no Lark, which the fast parse
does without, and none of the libraries of compiling and running."""

from __future__ import annotations

import argparse
import subprocess
import sys

from todoflow.cli import build_parser

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


def _verbs(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    found = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(found[0].choices) if found else {}


def _helps(parser: argparse.ArgumentParser, only: str | None = None) -> dict[str, str]:
    """The help of a parser and of each of its verbs (of `only`, if given), nested."""
    helps = {parser.prog: parser.format_help()}
    for name, verb in _verbs(parser).items():
        if only in (None, name):
            helps |= _helps(verb)
    return helps


def test_a_parser_built_for_one_verb_says_what_the_whole_parser_says_of_it() -> None:
    """`main` builds the options of the verb its command line names, and no other's."""
    whole = _helps(build_parser())
    for name in _verbs(build_parser()):
        alone = _helps(build_parser(name), only=name)
        assert alone == {prog: text for prog, text in whole.items() if prog in alone}
        assert {"todoflow", f"todoflow {name}"} <= set(alone)
