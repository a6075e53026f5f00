"""The `.todoflow` front end: source text -> typed AST with spans, diagnostics, formatter.

Depends on nothing else in todoflow but the grammar package data.
"""

from .diagnostics import Diagnostic, Note, TodoflowError
from .parser import ParseResult, parse, try_parse
from .spans import Span

__all__ = ["Diagnostic", "Note", "ParseResult", "Span", "TodoflowError", "parse", "try_parse"]
