"""Loading the Lark parser for `grammars/todoflow.lark`, with its tables cached on disk.

A cold `todoflow check` must not rebuild the LALR tables: the first load writes them
to the user's cache folder, keyed by the grammar's hash and Lark's version, and later
processes load that file (~10x faster). An unwritable cache folder only costs speed.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import lark

from todoflow import grammars

from .builder import Builder
from .lexer import ContextualLexer

GRAMMAR_PATH = Path(grammars.__file__).with_name("todoflow.lark")


def _cache_file(grammar: str) -> str | bool:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    folder = Path(base) / "todoflow"
    digest = hashlib.sha256(grammar.encode()).hexdigest()[:16]
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return str(folder / f"grammar-{digest}-lark-{lark.__version__}.pickle")


def load_parser(builder: Builder, comments: list[lark.Token]) -> lark.Lark:
    """A parser whose rule callbacks are `builder`'s and whose comments go to `comments`."""
    grammar = GRAMMAR_PATH.read_text(encoding="utf-8")
    return lark.Lark(
        grammar,
        parser="lalr",
        lexer=ContextualLexer,
        transformer=builder,
        lexer_callbacks={"COMMENT": comments.append},
        maybe_placeholders=False,
        cache=_cache_file(grammar),
    )


def bare_parser() -> lark.Lark:
    """The same grammar building a plain tree with positions (a benchmark baseline)."""
    return lark.Lark(
        GRAMMAR_PATH.read_text(encoding="utf-8"),
        parser="lalr",
        lexer="contextual",
        propagate_positions=True,
        maybe_placeholders=False,
    )
