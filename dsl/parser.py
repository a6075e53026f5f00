"""Parse stage: source text -> `ast.Workflow`, or diagnostics.

The fast path is one LALR pass whose callbacks build the AST directly. Only when it
fails does `dsl.recovery` parse again, in error mode, to report every syntax error.
The parser is built once per process and shared; parses are serialised by a lock
because the callbacks write their positions and problems onto one builder.
"""

from __future__ import annotations

import threading
from typing import NamedTuple, cast

from lark import Lark, Token
from lark.exceptions import UnexpectedInput

from . import ast
from .builder import Builder
from .diagnostics import Diagnostic, SourceError, has_errors, sort_key
from .grammar import load_parser
from .nodes import replace
from .recovery import Recovery
from .spans import Span

_LOCK = threading.Lock()
_BUILDER = Builder()
_COMMENTS: list[Token] = []
_PARSER: list[Lark] = []


class ParseResult(NamedTuple):
    """The workflow (None when there is any error) and every diagnostic, in file order."""

    workflow: ast.Workflow | None
    diagnostics: tuple[Diagnostic, ...]


def _parser() -> Lark:
    if not _PARSER:
        _PARSER.append(load_parser(_BUILDER, _COMMENTS))
    return _PARSER[0]


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
    with _LOCK:
        parser = _parser()
        _BUILDER.reset(path)
        _COMMENTS.clear()
        workflow: ast.Workflow | None
        try:
            workflow = cast(ast.Workflow, parser.parse(text))  # built by the callbacks
            syntax: list[Diagnostic] = []
        except UnexpectedInput:
            _BUILDER.reset(path)
            workflow = None
            syntax = Recovery(parser, text, path).run()
        problems = list(dict.fromkeys(_BUILDER.problems))
        comments = list(_COMMENTS)
    diagnostics = tuple(sorted([*syntax, *problems], key=sort_key))
    if workflow is None or has_errors(diagnostics):
        return ParseResult(None, diagnostics)
    return ParseResult(_with_comments(workflow, comments, text, path), diagnostics)


def parse(text: str, path: str | None = None) -> ast.Workflow:
    """Parse a `.todoflow` source, raising `TodoflowError` with every diagnostic on error."""
    result = try_parse(text, path)
    if result.workflow is None:
        raise SourceError(result.diagnostics, {path or "<string>": normalize(text)})
    return result.workflow


def _with_comments(workflow: ast.Workflow, tokens: list[Token], text: str, path: str) -> ast.Workflow:
    comments = tuple(_comment(token, text, path) for token in tokens)
    return replace(workflow, comments=comments)


def _comment(token: Token, text: str, path: str) -> ast.Comment:
    start = token.start_pos or 0
    line_start = text.rfind("\n", 0, start) + 1
    line, column = token.line or 1, token.column or 1
    span = Span(path, line, column, line, column + len(token))
    return ast.Comment(str(token), span, trailing=bool(text[line_start:start].strip()))
