"""Syntax errors in words: terminal names and expected sets as an author reads them.

Lark reports what it expected as terminal names (`RBRACE`, `__ANON_0`); authors read
"expected a step: `regular` or `todo_task`". Keywords are found through the grammar's
own terminal table, so a keyword added to the grammar needs no change here.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Collection, Iterable

from lark import Lark
from lark.lexer import TerminalDef

STEP_KINDS = frozenset({"REGULAR", "TODO_TASK"})
DEFAULTS = frozenset({"LLM", "CONDITIONAL_LLM", "MAX_TURNS", "PROMPT"})
ITEMS = frozenset(
    {"DESCRIPTION", "SUCCESS", "NEEDS", "OUTPUT", "EXPECT", "NEXT", "MODE", "ROUTE", "GENERIC", "TASKS"}
    | DEFAULTS
)
PROMPT_KINDS = frozenset(
    {"ORCHESTRATOR_SYSTEM", "ORCHESTRATOR_USER", "INTAKE", "WORK", "REVISE", "SUB_AGENT"}
)
TEXTS = frozenset({"STRING", "BLOCK_STRING"})

# (terminals, phrase): a group is named when all of its terminals are expected.
_GROUPS: tuple[tuple[frozenset[str], str, str], ...] = (
    (STEP_KINDS, "a step", "`regular` or `todo_task`"),
    (ITEMS, "a step item", "such as `description`, `success`, `needs`, `output` or `tasks`"),
    (DEFAULTS, "a workflow default", "`llm`, `conditional_llm`, `max_turns` or `prompt`"),
    (
        PROMPT_KINDS,
        "a prompt kind",
        "`orchestrator_system`, `orchestrator_user`, `intake`, `work`, `revise` or `sub_agent`",
    ),
    (TEXTS, "a string", ""),
)
_KEYWORD = re.compile(r"([a-z_]+)\(\?!\[a-z0-9_-\]\)")
_WORDS = {
    "$END": "end of file",
    "<END-OF-FILE>": "end of file",
    "ID": "a name",
    "INT": "a whole number",
    "STRING": "a string",
    "BLOCK_STRING": "a block string",
}

Literal = Callable[[str], "str | None"]


def or_list(parts: list[str]) -> str:
    if len(parts) <= 1:
        return "".join(parts)
    return ", ".join(parts[:-1]) + " or " + parts[-1]


def describe_expected(expected: Collection[str], literal: Literal) -> str:
    """`expected` terminal names as one phrase: groups first, then single terminals."""
    left = set(expected)
    phrases: list[tuple[str, str]] = []
    for members, name, detail in _GROUPS:
        if members <= left:
            phrases.append((name, detail))
            left -= members
    singles = sorted(left, key=lambda n: (n == "$END", n == "RBRACE", describe_terminal(n, literal)))
    words = [describe_terminal(n, literal) for n in singles]
    if len(phrases) == 1 and not words:
        name, detail = phrases[0]
        separator = " " if detail.startswith("such") else ": "
        return name + separator + detail if detail else name
    parts = [f"{name} ({detail})" if detail else name for name, detail in phrases] + words
    return or_list(parts)


def describe_terminal(name: str, literal: Literal) -> str:
    if name in _WORDS:
        return _WORDS[name]
    value = literal(name)
    return f"`{value}`" if value is not None else name.lower()


def describe_found(token_type: str, value: str, literal: Literal) -> str:
    """The token the parser met, as an author would name it."""
    if token_type == "ID" or (literal(token_type) is not None and value.isidentifier()):
        return f"`{value}`"
    if token_type == "INT":
        return f"the number `{value}`"
    return describe_terminal(token_type, literal)


def suggest_keyword(word: str, expected: Collection[str], literal: Literal) -> str | None:
    """The expected keyword nearest to a misspelt `word`, if one is close."""
    keywords = [v for v in (literal(n) for n in expected) if v and v.isidentifier()]
    matches = difflib.get_close_matches(word, keywords, n=1, cutoff=0.7)
    return matches[0] if matches else None


def terminal_literals(parser: Lark) -> dict[str, str]:
    """Terminal name -> the exact text it stands for, for keywords and punctuation."""
    literals = {t.name: str(t.pattern.value) for t in parser.terminals if t.pattern.type == "str"}
    return literals | keyword_literals(parser.terminals)


def keyword_literals(terminals: Iterable[TerminalDef]) -> dict[str, str]:
    """Keyword terminal name -> its word (keywords are whole-word regexes in the grammar)."""
    literals = {}
    for terminal in terminals:
        keyword = _KEYWORD.fullmatch(str(terminal.pattern.value))
        if terminal.pattern.type == "re" and keyword:
            literals[terminal.name] = keyword.group(1)
    return literals
