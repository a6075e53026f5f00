"""Lark over `grammars/todoflow.lark`: the parser of the error-mode parse and the
language server, with its tables cached on disk, and the tables of the fast parse.

Lark is imported only here and by the modules that work in error mode (`recovery`,
`wording`'s callers, the language server): importing it costs a cold `todoflow check`
more than everything else it does. The fast parse (`dsl.lalr`) reads the LALR tables
this module writes to `grammars/todoflow.tables.json` (`python -m todoflow.dsl.grammar`);
a test holds that file to what Lark makes of the grammar.

The Lark parser's tables are cached in the user's cache folder, keyed by the grammar's
hash and Lark's version, so a process does not rebuild them (~10x faster); an
unwritable cache folder only costs speed.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import lark
from lark.common import LexerConf
from lark.exceptions import UnexpectedCharacters
from lark.lexer import Lexer, LexerState, TerminalDef
from lark.parse_tree_builder import ChildFilterLALR_NoPlaceholders
from lark.parsers.lalr_analysis import Shift

from todoflow import grammars

from .builder import Builder
from .lalr import TABLES_PATH
from .lexer import Lexicon, Scanner, Unlexable
from .wording import keyword_literals

GRAMMAR_PATH = Path(grammars.__file__).with_name("todoflow.lark")


def lexicon(terminals: Iterable[TerminalDef]) -> Lexicon:
    """The lexer's view of the grammar's terminal definitions."""
    terminals = list(terminals)
    by_name = {t.name: t for t in terminals}
    keywords = {word: name for name, word in keyword_literals(terminals).items()}
    punctuation = {str(t.pattern.value): t.name for t in terminals if t.pattern.type == "str"}
    patterns = {n: str(by_name[n].pattern.to_regexp()) for n in ("COMMENT", "BLOCK_STRING", "STRING", "INT")}
    return Lexicon(keywords, punctuation, patterns)


class ContextualLexer(Lexer):
    """`lexer.Scanner` as a Lark lexer: Lark's tokens, its line counter and its errors."""

    __future_interface__ = 2

    def __init__(self, conf: LexerConf) -> None:
        self.scanner = Scanner(lexicon(conf.terminals))
        self.on_comment = conf.callbacks.get("COMMENT")

    def lex(self, lexer_state: LexerState, parser_state: Any) -> Iterator[lark.Token]:
        states = parser_state.parse_conf.states
        text = lexer_state.text
        counter = lexer_state.line_ctr
        tokens = self.scanner.tokens(
            text.text, counter, lambda: states[parser_state.position], lark.Token, self.on_comment, text.end
        )
        try:
            for token in tokens:
                lexer_state.last_token = token
                yield token
        except Unlexable:
            allowed = {n for n in states[parser_state.position] if n.isupper()}
            raise UnexpectedCharacters(  # type: ignore[no-untyped-call]
                text.text, counter.char_pos, counter.line, counter.column, allowed=allowed, state=parser_state
            ) from None


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


def lalr_tables() -> dict[str, Any]:
    """What Lark makes of the grammar, as `dsl.lalr` reads it: the states numbered in the
    order a walk from the start meets them (Lark's own numbering differs from process to
    process), the rules with the children each keeps and the builder method it calls."""
    built = lark.Lark(
        GRAMMAR_PATH.read_text(encoding="utf-8"),
        parser="lalr",
        lexer=ContextualLexer,
        transformer=Builder(),
        maybe_placeholders=False,
    )
    table = built.parser.parser._parse_table
    callbacks = built.parser.parser.parser.callbacks
    rules = sorted(callbacks, key=lambda r: (r.origin.name, [s.name for s in r.expansion]))
    number = {rule: i for i, rule in enumerate(rules)}
    order = _walk(table.states, table.start_states["start"])
    states = [
        {
            symbol: order[arg] if action is Shift else -1 - number[arg]
            for symbol, (action, arg) in sorted(table.states[state].items())
        }
        for state in sorted(order, key=order.__getitem__)
    ]
    return {
        "states": states,
        "rules": [_rule(rule, callbacks[rule]) for rule in rules],
        "start": order[table.start_states["start"]],
        "end": order[table.end_states["start"]],
        "lexicon": lexicon(built.terminals)._asdict(),
    }


def _walk(states: dict[Any, dict[str, tuple[Any, Any]]], start: Any) -> dict[Any, int]:
    order = {start: 0}
    queue = [start]
    for state in queue:
        for _, (action, arg) in sorted(states[state].items()):
            if action is Shift and arg not in order:
                order[arg] = len(order)
                queue.append(arg)
    return order


def _rule(rule: Any, callback: Any) -> list[Any]:
    """[origin, children taken off the stack, kept children as [index, expand] or None
    when all are kept as they are, builder method or None for a list of the children]."""
    keep = None
    if isinstance(callback, ChildFilterLALR_NoPlaceholders):
        keep = [[i, int(expand)] for i, expand in callback.to_include]
        callback = callback.node_builder
    method = getattr(callback, "__self__", None)
    if isinstance(method, Builder):
        name: str | None = callback.__name__
    elif isinstance(callback, functools.partial) and rule.origin.name.startswith("_"):
        name = None  # an inlined rule: its children go into its parent's
    else:
        raise ValueError(f"rule {rule} has a callback the fast parse cannot run: {callback!r}")
    return [rule.origin.name, len(rule.expansion), keep, name]


def tables_text() -> str:
    return json.dumps(lalr_tables(), indent=1, sort_keys=True) + "\n"


if __name__ == "__main__":
    TABLES_PATH.write_text(tables_text(), encoding="utf-8")
