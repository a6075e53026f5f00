"""Syntax errors in words: terminal names and expected sets as an author reads them.

Lark reports what it expected as terminal names (`RBRACE`, `__ANON_0`); authors read
"expected a step: `regular` or `todo_task`". Keywords are found through the grammar's
own terminal table, so a keyword added to the grammar needs no change here.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Collection, Iterable
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:  # the fast parse imports this module, and never Lark
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
_KIND_NAMES = "`orchestrator_system`, `orchestrator_user`, `intake`, `work`, `revise` or `sub_agent`"

# (terminals, phrase): a group is named when all of its terminals are expected.
_GROUPS: tuple[tuple[frozenset[str], str, str], ...] = (
    (STEP_KINDS, "a step", "`regular` or `todo_task`"),
    (ITEMS, "a step item", "such as `description`, `success`, `needs`, `output` or `tasks`"),
    (DEFAULTS, "a workflow default", "`llm`, `conditional_llm`, `max_turns` or `prompt`"),
    (PROMPT_KINDS, "a prompt kind", _KIND_NAMES),
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


class Slot(NamedTuple):
    """One argument of a construct: the terminals that can stand there, and its name."""

    terminals: frozenset[str]
    phrase: str
    help: str | None = None  # said instead of the construct's usage when this slot is missing


class Form(NamedTuple):
    """What a keyword takes, for messages about a construct left incomplete: its
    arguments in order, the usage in words and an example; `more` names the last
    argument again when it repeats after each `,`."""

    usage: str
    example: str
    slots: tuple[Slot, ...]
    more: str | None = None


def _slot(terminals: str, phrase: str, help: str | None = None) -> Slot:
    return Slot(frozenset(terminals.split()), phrase, help)


_NAME, _TITLE, _OPEN = (
    _slot("ID", "an id (a name)"),
    _slot("STRING", "a title (a string)"),
    _slot("LBRACE", "`{`"),
)
_TEXT = _slot("STRING BLOCK_STRING", "a text (a string)")
_PATH = _slot("STRING", "a path (a string)")
_PROVIDER, _MODEL = _slot("ID", "a provider (a name)"), _slot("STRING", "a model id (a string)")
_LABEL = _slot("ID", "a task label")
_ONE_STEP = "a route holds exactly one step: give each further step a route of its own"

# Every keyword that takes arguments, by its terminal (the grammar's single source of
# what may follow is the parser; these give the arguments their names).
FORMS: dict[str, Form] = {
    "WORKFLOW": Form(
        "an id and a title, then its steps in braces",
        'workflow release "Release 2.0" { ... }',
        (_NAME, _TITLE, _OPEN),
    ),
    "REGULAR": Form(
        "an id and a title, then its items in braces",
        'regular prepare "Prepare the branch" { ... }',
        (_NAME, _TITLE, _OPEN),
    ),
    "TODO_TASK": Form(
        "an id and a title, then its items in braces",
        'todo_task ship "Ship it" { ... }',
        (_NAME, _TITLE, _OPEN),
    ),
    "DESCRIPTION": Form("a text", 'description "What the step does."', (_TEXT,)),
    "SUCCESS": Form("a text", 'success "How to tell the step is done."', (_TEXT,)),
    "NEEDS": Form(
        "one or more paths, separated by `,`",
        'needs "branch.json", "changelog.md"',
        (_PATH,),
        "another path (a string)",
    ),
    "OUTPUT": Form("a path", 'output "report.json"', (_PATH,)),
    "EXPECT": Form("`file` and a path", 'expect file "report.json"', (_slot("FILE", "`file`"), _PATH)),
    "NEXT": Form("a step id or `end`", "next publish", (_slot("ID END", "a step id or `end`"),)),
    "LLM": Form("a provider and a model id", 'llm vertex "gemini-2.5-pro"', (_PROVIDER, _MODEL)),
    "CONDITIONAL_LLM": Form(
        "a provider and a model id", 'conditional_llm openai "gpt-4.1-mini"', (_PROVIDER, _MODEL)
    ),
    "MAX_TURNS": Form("a whole number", "max_turns 60", (_slot("INT", "a whole number"),)),
    "MODE": Form("`learn_code`", "mode learn_code", (_slot("LEARN_CODE", "`learn_code`"),)),
    "PROMPT": Form(
        "a prompt kind, then a template or `from` and a file",
        'prompt work "Do {{ task.action }}"` or `prompt work from "prompts/work.j2"',
        (
            _slot(" ".join(PROMPT_KINDS), f"a prompt kind ({_KIND_NAMES})"),
            _slot("STRING BLOCK_STRING FROM", "a template (a string) or `from`"),
            _slot("STRING", "a file name (a string)"),
        ),
    ),
    "ROUTE": Form(
        "an id, a name, `when` and a condition, then exactly one step in braces",
        'route build "Build" when "To build the code" { regular build-it "Build it" { ... } }',
        (
            _NAME,
            _slot("STRING", "a name (a string)"),
            _slot("WHEN", "`when`"),
            _slot("STRING BLOCK_STRING", "a condition (a string)"),
            _OPEN,
            _slot("REGULAR TODO_TASK", "the route's step (`regular` or `todo_task`)"),
            _slot("RBRACE", "`}`", _ONE_STEP),
        ),
    ),
    "GENERIC": Form("`on` or `off`", "generic off", (_slot("ON OFF", "`on` or `off`"),)),
    "TASKS": Form("its tasks in braces", 'tasks { "Tag the release" => "git tag v2.0 exists" }', (_OPEN,)),
    "CONSTRAINT": Form(
        "a text, `on` and the labels of its tasks (or `all`)",
        'constraint "Never push to main" on build, tag',
        (_TEXT, _slot("ON", "`on`"), _slot("ID ALL", "a task label or `all`")),
        "another task label",
    ),
    "AFTER": Form(
        "task labels, separated by `,`",
        '"Tag" => "tagged" after build, notes',
        (_LABEL,),
        "another task label",
    ),
}


def missing_slot(form: Form, parts: list[str], expected: Collection[str]) -> Slot | None:
    """The argument missing after `parts` (the terminal names written so far, nodes as
    `""`), or None when the construct's arguments are complete (what went wrong lies
    elsewhere) or the parser does not expect that argument here."""
    if len(parts) < len(form.slots):
        slot = form.slots[len(parts)]
    elif form.more is not None and parts[-1] == "COMMA":
        slot = Slot(form.slots[-1].terminals, form.more)
    else:
        return None
    return slot if slot.terminals & set(expected) else None
