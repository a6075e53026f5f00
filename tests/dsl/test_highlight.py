"""Highlighting: the Pygments lexer and the TextMate grammar know every keyword of the
Lark grammar, and lex every example and every docs block without an error token. (The
TextMate grammar's scopes are pinned by `vscode-tmgrammar-test`, run by `make test`, on
the annotated files in editors/vscode/tests/.)"""

from __future__ import annotations

import json
import re

import pytest
from pygments import lex
from pygments.lexers import get_lexer_by_name, get_lexer_for_filename
from pygments.token import Comment, Error, Keyword, Name, Number, Operator, String

from todoflow.dsl.highlight import TodoflowLexer

from ..cli.test_docs import DOCS, _blocks
from ..conftest import EXAMPLES, ROOT

GRAMMAR = (ROOT / "grammars" / "todoflow.lark").read_text(encoding="utf-8")
TEXTMATE = ROOT / "editors" / "vscode" / "syntaxes" / "todoflow.tmLanguage.json"


def _grammar_keywords() -> set[str]:
    """The keywords as the grammar file writes them: `NAME.2: /word(?![a-z0-9_-])/`."""
    found = set(re.findall(r"^[A-Z_]+\.2: /([a-z_]+)\(\?!\[a-z0-9_-\]\)/$", GRAMMAR, re.M))
    assert len(found) > 30
    return found


def test_the_lexer_is_registered_with_pygments() -> None:
    assert isinstance(get_lexer_by_name("todoflow"), TodoflowLexer)
    assert isinstance(get_lexer_for_filename("release.todoflow"), TodoflowLexer)


@pytest.mark.parametrize("word", sorted(_grammar_keywords()))
def test_the_lexer_highlights_every_keyword_of_the_grammar(word: str) -> None:
    tokens = [(kind, value) for kind, value in lex(word, TodoflowLexer()) if value.strip()]
    assert len(tokens) == 1
    assert tokens[0][0] in Keyword


def test_a_word_that_only_starts_with_a_keyword_is_a_name() -> None:
    tokens = [
        (kind, value) for kind, value in lex("worker tasks-2 endless", TodoflowLexer()) if value.strip()
    ]
    assert tokens == [(Name, "worker"), (Name, "tasks-2"), (Name, "endless")]


def test_the_lexer_tells_names_strings_escapes_comments_numbers_and_the_arrow() -> None:
    source = (
        'regular build "A \\"quoted\\" \\u00e9" {  # why\n'
        '    max_turns 3\n    next publish\n    tasks { tag: """\n  two\n""" => "x" after build }\n}\n'
    )
    tokens = [(kind, value) for kind, value in lex(source, TodoflowLexer()) if value.strip()]
    assert (Name.Function, "build") in tokens
    assert [v for k, v in tokens if k is String.Escape] == ['\\"', '\\"', "\\u00e9"]
    assert (Comment.Single, "# why") in tokens
    assert (Number.Integer, "3") in tokens
    assert (Name.Function, "publish") in tokens
    assert (Name.Label, "tag") in tokens
    assert (Operator, "=>") in tokens
    assert (String.Doc, "\n  two\n") in tokens
    assert (Name, "build") in tokens  # a label named in `after`


SOURCES = [(p.name, p.read_text(encoding="utf-8")) for p in EXAMPLES] + [
    (f"{path.name}#{i}", body)
    for path in DOCS
    for i, (info, body) in enumerate(_blocks(path))
    if info == "todoflow"
]


@pytest.mark.parametrize(("where", "source"), SOURCES, ids=[s[0] for s in SOURCES])
def test_every_example_and_docs_block_lexes_without_an_error(where: str, source: str) -> None:
    tokens = list(lex(source, TodoflowLexer()))
    assert [value for kind, value in tokens if kind in Error] == [], where
    assert "".join(value for _, value in tokens) == source


def test_the_textmate_grammar_has_the_keywords_of_the_grammar() -> None:
    repository = json.loads(TEXTMATE.read_text(encoding="utf-8"))["repository"]
    listed = set()
    for rule in ("keyword", "constant"):
        alternation = re.fullmatch(
            r"\(\?<!\[a-z0-9_-\]\)\(([a-z_|]+)\)\(\?!\[a-z0-9_-\]\)", repository[rule]["match"]
        )
        assert alternation is not None, rule
        listed |= set(alternation.group(1).split("|"))
    assert listed == _grammar_keywords()


def test_the_textmate_grammar_is_the_one_the_extension_contributes() -> None:
    manifest = json.loads((ROOT / "editors" / "vscode" / "package.json").read_text(encoding="utf-8"))
    (grammar,) = manifest["contributes"]["grammars"]
    assert (ROOT / "editors" / "vscode" / grammar["path"]).resolve() == TEXTMATE.resolve()
    assert grammar["scopeName"] == json.loads(TEXTMATE.read_text(encoding="utf-8"))["scopeName"]
    (language,) = manifest["contributes"]["languages"]
    assert language["extensions"] == [".todoflow"]
    assert (
        manifest["contributes"]["configuration"]["properties"]["todoflow.server.path"]["default"]
        == "todoflow"
    )
