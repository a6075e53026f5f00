"""Parse stage: source text -> `ast.Workflow`, or diagnostics.

The fast path is one LALR pass (`dsl.lalr`, over tables made ahead of time, without
Lark) whose callbacks build the AST directly. Only when it fails does `dsl.recovery`
parse again with Lark, in error mode, to report every syntax error; Lark is imported
then and not before. Each parser is built once per process and shared; parses are
serialised by a lock because the callbacks write their positions and problems onto
one builder.
Text holding a lone surrogate is refused before parsing, and a tree whose routes
nest deeper than `MAX_ROUTE_DEPTH` after it: every later stage may then recurse
over routes without meeting Python's recursion limit.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, NamedTuple, cast

from . import ast
from .builder import Builder
from .diagnostics import Diagnostic, SourceError, has_errors, sort_key
from .encoding import lone_surrogate
from .lalr import Parser, Rejected
from .lexer import Token
from .nodes import replace
from .spans import Span

if TYPE_CHECKING:
    import lark

_LOCK = threading.Lock()
_BUILDER = Builder()
_COMMENTS: list[Token] = []
_PARSER: list[Parser] = []
_RECOVERING: list[lark.Lark] = []  # Lark's parser, built at the first syntax error
MAX_ROUTE_DEPTH = 32  # routes inside routes; real workflows nest two or three


class ParseResult(NamedTuple):
    """The workflow (None when there is any error) and every diagnostic, in file order."""

    workflow: ast.Workflow | None
    diagnostics: tuple[Diagnostic, ...]


def _parser() -> Parser:
    if not _PARSER:
        _PARSER.append(Parser(_BUILDER, _COMMENTS))
    return _PARSER[0]


def _syntax_errors(text: str, path: str) -> list[Diagnostic]:
    """Every syntax error of a text the fast parse rejected, found by Lark's parser."""
    from .grammar import load_parser
    from .recovery import Recovery

    if not _RECOVERING:
        _RECOVERING.append(load_parser(_BUILDER, []))
    _BUILDER.reset(path)
    return Recovery(_RECOVERING[0], text, path).run()


def normalize(text: str) -> str:
    """Drop a byte-order mark and turn CRLF line ends into LF."""
    if text.startswith("\ufeff"):
        text = text[1:]
    return text.replace("\r\n", "\n") if "\r" in text else text


def source_sha256(text: str) -> str:
    """The digest a compiled workflow carries: of the source text as the parser reads it."""
    import hashlib

    return hashlib.sha256(normalize(text).encode("utf-8")).hexdigest()


def try_parse(text: str, path: str | None = None) -> ParseResult:
    """Parse without raising: for tools that show diagnostics themselves."""
    path = path or "<string>"
    text = normalize(text)
    surrogate = lone_surrogate(text, path)
    if surrogate is not None:
        return ParseResult(None, (surrogate,))
    with _LOCK:
        parser = _parser()
        _BUILDER.reset(path)
        _COMMENTS.clear()
        workflow: ast.Workflow | None
        try:
            workflow = cast(ast.Workflow, parser.parse(text))  # built by the callbacks
            syntax: list[Diagnostic] = []
        except Rejected:
            workflow = None
            syntax = _syntax_errors(text, path)
        problems = list(dict.fromkeys(_BUILDER.problems))
        comments = list(_COMMENTS)
    too_deep = route_depth_problem(workflow) if workflow is not None else None
    diagnostics = tuple(sorted([*syntax, *problems, *filter(None, [too_deep])], key=sort_key))
    if workflow is None or has_errors(diagnostics):
        return ParseResult(None, diagnostics)
    return ParseResult(_with_comments(workflow, comments, text, path), diagnostics)


def parse(text: str, path: str | None = None) -> ast.Workflow:
    """Parse a `.todoflow` source, raising `TodoflowError` with every diagnostic on error."""
    result = try_parse(text, path)
    if result.workflow is None:
        raise SourceError(result.diagnostics, {path or "<string>": normalize(text)})
    return result.workflow


def route_depth_problem(workflow: ast.Workflow) -> Diagnostic | None:
    """An error at the first route nested deeper than `MAX_ROUTE_DEPTH`, if any (iterative:
    the tree may be far deeper than Python's recursion limit)."""
    for top in workflow.steps:
        deepest, first = 0, None
        stack = [(top, 0)]
        while stack:
            step, depth = stack.pop()
            for item in reversed(step.items):
                if isinstance(item, ast.Route):
                    deepest = max(deepest, depth + 1)
                    if depth == MAX_ROUTE_DEPTH and first is None:
                        first = item
                    stack.append((item.step, depth + 1))
        if first is not None:
            message = f"routes nest {deepest} deep here; at most {MAX_ROUTE_DEPTH}"
            help = "a route's step may have routes of its own, but not this many levels deep"
            return Diagnostic("E0108", "error", message, first.span.to(first.id.span), help)
    return None


def _with_comments(workflow: ast.Workflow, tokens: list[Token], text: str, path: str) -> ast.Workflow:
    comments = tuple(_comment(token, text, path) for token in tokens)
    return replace(workflow, comments=comments)


def _comment(token: Token, text: str, path: str) -> ast.Comment:
    start = token.start_pos or 0
    line_start = text.rfind("\n", 0, start) + 1
    line, column = token.line or 1, token.column or 1
    span = Span(path, line, column, line, column + len(token))
    return ast.Comment(str(token), span, trailing=bool(text[line_start:start].strip()))
