"""A Pygments lexer for `.todoflow`, its keywords read from the grammar.

Registered as the `todoflow` lexer (files `*.todoflow`) through the `pygments.lexers`
entry point, so Pygments-based tools (Sphinx, MkDocs, `pygmentize`) highlight the docs'
code blocks and authors' files. Keywords come from the keyword terminals of
`grammars/todoflow.lark` (through the cached parser), so a keyword added to the
grammar is highlighted with no change here. A regular-expression lexer cannot know
that keywords are contextual: `tasks` in `regular tasks "..."` is shown as a keyword,
as most editors would. The names a header or `next` introduces, and task labels, are
shown as names. The only module of the package that imports Pygments, which is not a
dependency of todoflow (it comes with the `lsp` extra).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, ClassVar, cast

from pygments.lexer import RegexLexer, bygroups, include, words
from pygments.token import (
    Comment,
    Error,
    Keyword,
    Name,
    Number,
    Operator,
    Punctuation,
    String,
    Whitespace,
)

from .builder import Builder
from .grammar import load_parser
from .wording import keyword_literals

_groups = cast(Callable[..., Any], bygroups)  # untyped in the stubs
_NAME = r"[a-z][a-z0-9_-]*"
_WORD_END = r"(?![a-z0-9_-])"
_ESCAPE = r'\\(?:["\\nt]|u[0-9a-fA-F]{4})'
CONSTANTS = frozenset({"end", "all", "on", "off", "learn_code"})
HEADERS = ("workflow", "regular", "todo_task", "route")


def grammar_keywords() -> frozenset[str]:
    """Every keyword of the grammar, as written."""
    return frozenset(keyword_literals(load_parser(Builder(), []).terminals).values())


_KEYWORDS = grammar_keywords()


class TodoflowLexer(RegexLexer):
    name = "todoflow"
    aliases: ClassVar[list[str]] = ["todoflow"]
    filenames: ClassVar[list[str]] = ["*.todoflow"]
    mimetypes: ClassVar[list[str]] = ["text/x-todoflow"]
    url = "https://pypi.org/project/todoflow/"
    flags = re.MULTILINE

    tokens: ClassVar[dict[str, list[object]]] = {
        "root": [
            (r"\s+", Whitespace),
            (r"#[^\n]*", Comment.Single),
            (r'"""', String.Doc, "block"),
            (r'"', String.Double, "string"),
            (
                rf"({'|'.join(HEADERS)})(\s+)({_NAME})",
                _groups(Keyword.Declaration, Whitespace, Name.Function),
            ),
            (rf"(next)(\s+)(?!end{_WORD_END})({_NAME})", _groups(Keyword, Whitespace, Name.Function)),
            (rf"({_NAME})(\s*)(:)", _groups(Name.Label, Whitespace, Punctuation)),
            (
                words(sorted(CONSTANTS & _KEYWORDS), prefix=r"(?<![a-z0-9_-])", suffix=_WORD_END),
                Keyword.Constant,
            ),
            (words(sorted(_KEYWORDS - CONSTANTS), prefix=r"(?<![a-z0-9_-])", suffix=_WORD_END), Keyword),
            (_NAME, Name),
            (r"[0-9]+", Number.Integer),
            (r"=>", Operator),
            (r"[{},]", Punctuation),
            (r".", Error),
        ],
        "escapes": [
            (_ESCAPE, String.Escape),
            (r"\\.", Error),
        ],
        "string": [
            include("escapes"),
            (r'"', String.Double, "#pop"),
            (r"\n", Error, "#pop"),  # a plain string stays on its line
            (r'[^"\\\n]+', String.Double),
        ],
        "block": [
            include("escapes"),
            (r'"""', String.Doc, "#pop"),
            (r'[^"\\]+|"', String.Doc),
        ],
    }
