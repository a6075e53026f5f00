"""Parse stage, the fast path: an LALR loop over tables made from the grammar ahead of time.

`grammars/todoflow.tables.json` holds what Lark makes of `grammars/todoflow.lark` — its
LALR states, its rules with the children each keeps, the builder method each calls and
the lexer's terminals — written by `dsl.grammar` and held to the grammar by a test. A
process parses without importing Lark or building its tables: importing Lark cost a
cold `todoflow check` more than all the rest of its work. The loop is Lark's own
(`ParserState.feed_token`), running the same builder callbacks on the same children,
so both parsers build the same tree; on any error it stops (`Rejected`) and the
error-mode parse, Lark's, says what went wrong.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from todoflow import grammars

from .builder import Builder
from .lexer import Cursor, Lexicon, Scanner, Token, Unlexable

TABLES_PATH = Path(grammars.__file__).with_name("todoflow.tables.json")
Reducer = tuple[int, str, Callable[[list[Any]], Any]]  # children taken, the rule's name, its callback


class Rejected(Exception):
    """The text is not a workflow; the error-mode parse finds out why."""


class Parser:
    """The fast parser: `builder`'s callbacks build the tree, comments go to `comments`."""

    def __init__(self, builder: Builder, comments: list[Token]) -> None:
        tables = json.loads(TABLES_PATH.read_text(encoding="utf-8"))
        self.states: list[dict[str, int]] = tables["states"]
        self.start: int = tables["start"]
        self.end: int = tables["end"]
        self.scanner = Scanner(Lexicon(**tables["lexicon"]))
        self.reducers = [_reducer(builder, *rule) for rule in tables["rules"]]
        self.comments = comments

    def parse(self, text: str) -> Any:
        """The value of the start rule's callback; raises `Rejected`."""
        states, reducers = self.states, self.reducers
        stack: list[int] = [self.start]
        values: list[Any] = []
        tokens = self.scanner.tokens(text, Cursor(), lambda: states[stack[-1]], Token, self.comments.append)
        try:
            for token in tokens:
                while True:
                    action = states[stack[-1]].get(token.type)
                    if action is None:
                        raise Rejected
                    if action >= 0:
                        stack.append(action)
                        values.append(token)
                        break
                    _reduce(reducers[-1 - action], stack, values, states)
        except Unlexable:
            raise Rejected from None
        return self._finish(stack, values)

    def _finish(self, stack: list[int], values: list[Any]) -> Any:
        """Reduce at the end of the text until the start rule is complete."""
        while True:
            action = self.states[stack[-1]].get("$END")
            if action is None or action >= 0:
                raise Rejected
            _reduce(self.reducers[-1 - action], stack, values, self.states)
            if stack[-1] == self.end:
                return values[-1]


def _reduce(reducer: Reducer, stack: list[int], values: list[Any], states: list[dict[str, int]]) -> None:
    size, name, callback = reducer
    if size:
        children = values[-size:]
        del stack[-size:]
        del values[-size:]
    else:
        children = []
    values.append(callback(children))
    stack.append(states[stack[-1]][name])


def _reducer(
    builder: Builder, name: str, size: int, keep: list[list[int]] | None, method: str | None
) -> Reducer:
    """A rule's callback: the builder's method, or for an inlined rule (`_item`) the list
    of its children, which its parent takes in their place; `keep` leaves out the
    punctuation the builder never sees and splices inlined rules' lists."""
    build: Callable[[list[Any]], Any] = getattr(builder, method) if method else _children
    if keep is None:
        return size, name, build
    kept = [(index, bool(expand)) for index, expand in keep]

    def callback(children: list[Any]) -> Any:
        found: list[Any] = []
        for index, expand in kept:
            if not expand:
                found.append(children[index])
            elif found:
                found += children[index]
            else:  # the list an inlined rule built is taken over: a long `*` stays linear
                found = children[index]
        return build(found)

    return size, name, callback


def _children(children: list[Any]) -> list[Any]:
    return children
