"""Parse stage, part two: Lark callbacks that build frozen AST nodes from tokens.

It runs inside the LALR parser (no intermediate tree): every rule's children are
tokens, which carry their own positions, and nodes built by earlier callbacks,
which carry spans. A span runs from a node's first token to its last. Value
problems the grammar cannot see (bad escapes) are collected, never raised.
Imports `dsl.ast`, `dsl.strings`, `dsl.diagnostics`, and no Lark: the fast parse hands
it `lexer.Token`s, the error-mode parse Lark's, which read alike.
"""

from __future__ import annotations

from typing import Any, TypeAlias

from . import ast
from .diagnostics import Diagnostic
from .lexer import Token
from .spans import Span
from .strings import decode_block, decode_plain

# Children are positional: keyword and value tokens, then nodes built by earlier rules.
Children: TypeAlias = list[Any]
MAX_NUMBER = 2**31 - 1


class Builder:
    """The rule callbacks; `path` and `problems` are set afresh for every parse."""

    def __init__(self) -> None:
        self.path = "<string>"
        self.problems: list[Diagnostic] = []
        self.names: dict[str, str] = {}

    def reset(self, path: str) -> None:
        self.path = path
        self.problems = []
        self.names = {}

    # -- helpers ---------------------------------------------------------------

    def _span(self, first: Token, last: Token) -> Span:
        return Span(self.path, first.line, first.column, last.end_line, last.end_column)

    def _name_of(self, token: Token) -> ast.Name:
        # one string object per distinct name: labels and ids repeat across a workflow
        value = self.names.setdefault(token, str(token))
        return ast.Name(value, self.path, token.line, token.column, token.end_line, token.end_column)

    def _text_of(self, token: Token) -> ast.Text:
        path, line, column = self.path, token.line, token.column
        end_line, end_column = token.end_line, token.end_column
        if token.type == "BLOCK_STRING":
            value = decode_block(token, path, line, column, self.problems)
            return ast.Text(value, path, line, column, end_line, end_column, True)
        value = token[1:-1]
        if "\\" in value:
            value = decode_plain(token, path, line, column, self.problems)
        return ast.Text(value, path, line, column, end_line, end_column)

    # -- rules -----------------------------------------------------------------

    def start(self, c: Children) -> ast.Workflow:
        return c[0]  # type: ignore[no-any-return]

    def workflow(self, c: Children) -> ast.Workflow:
        name, title = self._name_of(c[1]), self._text_of(c[2])
        return ast.Workflow(name, title, tuple(c[4:-1]), self._span(c[0], c[-1]))

    def step(self, c: Children) -> ast.Step:
        name, title = self._name_of(c[1]), self._text_of(c[2])
        return ast.Step(str(c[0]), name, title, tuple(c[4:-1]), self._span(c[0], c[-1]))  # type: ignore[arg-type]

    def description(self, c: Children) -> ast.Description:
        return ast.Description(self._text_of(c[1]), self._span(c[0], c[-1]))

    def success(self, c: Children) -> ast.Success:
        return ast.Success(self._text_of(c[1]), self._span(c[0], c[-1]))

    def needs(self, c: Children) -> ast.Needs:
        return ast.Needs(tuple(self._text_of(t) for t in c[1:]), self._span(c[0], c[-1]))

    def output(self, c: Children) -> ast.Output:
        return ast.Output(self._text_of(c[1]), self._span(c[0], c[-1]))

    def expect(self, c: Children) -> ast.Expect:
        return ast.Expect(self._text_of(c[2]), self._span(c[0], c[-1]))

    def next(self, c: Children) -> ast.Next:
        return ast.Next(self._name_of(c[1]), self._span(c[0], c[-1]))

    def llm(self, c: Children) -> ast.Llm:
        return ast.Llm(self._name_of(c[1]), self._text_of(c[2]), self._span(c[0], c[-1]))

    def conditional_llm(self, c: Children) -> ast.ConditionalLlm:
        return ast.ConditionalLlm(self._name_of(c[1]), self._text_of(c[2]), self._span(c[0], c[-1]))

    def max_turns(self, c: Children) -> ast.MaxTurns:
        return ast.MaxTurns(self._number(c[1]), self._span(c[0], c[-1]))

    def _number(self, token: Token) -> int:
        """The value of an INT token; one beyond `MAX_NUMBER` is a problem (and reads as 0)."""
        digits = str(token).lstrip("0") or "0"
        if len(digits) <= len(str(MAX_NUMBER)) and int(digits) <= MAX_NUMBER:
            return int(digits)
        span = Span(self.path, token.line, token.column, token.end_line, token.end_column)
        message = f"this number is too large: at most {MAX_NUMBER:,}"
        help = "the most a 32-bit integer holds, so that every reader of step_config.json can take it"
        self.problems.append(Diagnostic("E0010", "error", message, span, help))
        return 0

    def mode(self, c: Children) -> ast.Mode:
        return ast.Mode("learn_code", self._span(c[0], c[-1]))

    def prompt(self, c: Children) -> ast.Prompt:
        kind = self._name_of(c[1])
        if c[2].type == "FROM":
            return ast.Prompt(kind, None, self._text_of(c[3]), self._span(c[0], c[-1]))
        return ast.Prompt(kind, self._text_of(c[2]), None, self._span(c[0], c[-1]))

    def route(self, c: Children) -> ast.Route:
        name, title, condition = self._name_of(c[1]), self._text_of(c[2]), self._text_of(c[4])
        return ast.Route(name, title, condition, c[6], self._span(c[0], c[-1]))

    def generic(self, c: Children) -> ast.Generic:
        return ast.Generic(c[1].type == "ON", self._span(c[0], c[-1]))

    def tasks(self, c: Children) -> ast.Tasks:
        return ast.Tasks(tuple(c[2:-1]), self._span(c[0], c[-1]))

    def task(self, c: Children) -> ast.Task:
        if c[0].type == "ID":
            label, action, expected, after = self._name_of(c[0]), c[1], c[2], c[4:]
        else:
            label, action, expected, after = None, c[0], c[1], c[3:]
        names = tuple([self._name_of(t) for t in after])
        return ast.Task(label, self._text_of(action), self._text_of(expected), names)

    def constraint(self, c: Children) -> ast.Constraint:
        on_all = c[-1].type == "ALL"
        targets = () if on_all else tuple(self._name_of(t) for t in c[3:])
        return ast.Constraint(self._text_of(c[1]), targets, on_all, self._span(c[0], c[-1]))
