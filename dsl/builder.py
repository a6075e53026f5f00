"""Parse stage, part two: Lark callbacks that build frozen AST nodes from tokens.

It runs inside the LALR parser (no intermediate tree): every rule's children are
tokens, which carry their own positions, and nodes built by earlier callbacks,
which carry spans. A span runs from a node's first token to its last. Value
problems the grammar cannot see (bad escapes) are collected, never raised.
Imports `dsl.ast`, `dsl.strings`, `dsl.diagnostics`; lark only for the Token type.
"""

from __future__ import annotations

from typing import TypeAlias, cast

from lark import Token

from . import ast
from .diagnostics import Diagnostic
from .spans import Span
from .strings import decode_block, decode_plain

Child: TypeAlias = "Token | ast.Name | ast.Text | ast.Item | ast.Step | ast.Task | ast.Constraint"


class Builder:
    """The rule callbacks; `path` and `problems` are set afresh for every parse."""

    def __init__(self) -> None:
        self.path = "<string>"
        self.problems: list[Diagnostic] = []

    def reset(self, path: str) -> None:
        self.path = path
        self.problems = []

    # -- helpers ---------------------------------------------------------------

    def _span(self, first: Child, last: Child) -> Span:
        start = self._token_span(first) if isinstance(first, Token) else first.span
        end = self._token_span(last) if isinstance(last, Token) else last.span
        return start.to(end)

    def _token_span(self, token: Token) -> Span:
        return Span(
            self.path,
            cast(int, token.line),
            cast(int, token.column),
            cast(int, token.end_line),
            cast(int, token.end_column),
        )

    def _name_of(self, token: Token) -> ast.Name:
        return ast.Name(str(token), self._token_span(token))

    def _text_of(self, token: Token) -> ast.Text:
        line, column = cast(int, token.line), cast(int, token.column)
        if token.type == "BLOCK_STRING":
            value = decode_block(str(token), self.path, line, column, self.problems)
            return ast.Text(value, self._token_span(token), block=True)
        value = decode_plain(str(token), self.path, line, column, self.problems)
        return ast.Text(value, self._token_span(token))

    # -- rules -----------------------------------------------------------------

    def start(self, children: list[ast.Workflow]) -> ast.Workflow:
        return children[0]

    def workflow(self, c: list[Child]) -> ast.Workflow:
        members = cast("tuple[ast.Default | ast.Step, ...]", tuple(c[4:-1]))
        wid, title = cast(Token, c[1]), cast(Token, c[2])
        return ast.Workflow(self._name_of(wid), self._text_of(title), members, self._span(c[0], c[-1]))

    def step(self, c: list[Child]) -> ast.Step:
        kind = cast(ast.StepKind, str(c[0]))
        sid, title = cast(Token, c[1]), cast(Token, c[2])
        items = cast("tuple[ast.Item, ...]", tuple(c[4:-1]))
        return ast.Step(kind, self._name_of(sid), self._text_of(title), items, self._span(c[0], c[-1]))

    def description(self, c: list[Token]) -> ast.Description:
        return ast.Description(self._text_of(c[1]), self._span(c[0], c[-1]))

    def success(self, c: list[Token]) -> ast.Success:
        return ast.Success(self._text_of(c[1]), self._span(c[0], c[-1]))

    def needs(self, c: list[Token]) -> ast.Needs:
        return ast.Needs(tuple(self._text_of(t) for t in c[1:]), self._span(c[0], c[-1]))

    def output(self, c: list[Token]) -> ast.Output:
        return ast.Output(self._text_of(c[1]), self._span(c[0], c[-1]))

    def expect(self, c: list[Token]) -> ast.Expect:
        return ast.Expect(self._text_of(c[2]), self._span(c[0], c[-1]))

    def next(self, c: list[Token]) -> ast.Next:
        return ast.Next(self._name_of(c[1]), self._span(c[0], c[-1]))

    def llm(self, c: list[Token]) -> ast.Llm:
        return ast.Llm(self._name_of(c[1]), self._text_of(c[2]), self._span(c[0], c[-1]))

    def conditional_llm(self, c: list[Token]) -> ast.ConditionalLlm:
        return ast.ConditionalLlm(self._name_of(c[1]), self._text_of(c[2]), self._span(c[0], c[-1]))

    def max_turns(self, c: list[Token]) -> ast.MaxTurns:
        return ast.MaxTurns(int(c[1]), self._span(c[0], c[-1]))

    def mode(self, c: list[Token]) -> ast.Mode:
        return ast.Mode("learn_code", self._span(c[0], c[-1]))

    def prompt(self, c: list[Token]) -> ast.Prompt:
        kind = self._name_of(c[1])
        if c[2].type == "FROM":
            return ast.Prompt(kind, None, self._text_of(c[3]), self._span(c[0], c[-1]))
        return ast.Prompt(kind, self._text_of(c[2]), None, self._span(c[0], c[-1]))

    def route(self, c: list[Child]) -> ast.Route:
        rid, name, condition = cast(Token, c[1]), cast(Token, c[2]), cast(Token, c[4])
        step = cast(ast.Step, c[6])
        return ast.Route(
            self._name_of(rid),
            self._text_of(name),
            self._text_of(condition),
            step,
            self._span(c[0], c[-1]),
        )

    def generic(self, c: list[Token]) -> ast.Generic:
        return ast.Generic(c[1].type == "ON", self._span(c[0], c[-1]))

    def tasks(self, c: list[Child]) -> ast.Tasks:
        entries = cast("tuple[ast.Task | ast.Constraint, ...]", tuple(c[2:-1]))
        return ast.Tasks(entries, self._span(c[0], c[-1]))

    def task(self, c: list[Token]) -> ast.Task:
        label = self._name_of(c[0]) if c[0].type == "ID" else None
        rest = c[1:] if label else c
        after = tuple(self._name_of(t) for t in rest[3:])
        return ast.Task(label, self._text_of(rest[0]), self._text_of(rest[1]), after, self._span(c[0], c[-1]))

    def constraint(self, c: list[Token]) -> ast.Constraint:
        on_all = c[-1].type == "ALL"
        targets = () if on_all else tuple(self._name_of(t) for t in c[3:])
        return ast.Constraint(self._text_of(c[1]), targets, on_all, self._span(c[0], c[-1]))
