"""Every diagnostic code todoflow reports, with its title: the catalogue tools read.

The titles are the headings of the codes in the documentation (`docs/language.md`, and the
table of `docs/interop.md` for plans read from JSON); `tests/dsl/test_ci_formats.py` holds
them equal, so a code cannot be added, renamed or retitled on one side only. SARIF output
names each rule by its code with this title and a link to its section of the docs.
Imports nothing.
"""

from __future__ import annotations

DOCS = "https://github.com/todoflow/todoflow/blob/main/docs/"

LANGUAGE: dict[str, str] = {
    "E0001": "unexpected token",
    "E0002": "a `{` is never closed",
    "E0003": "a string is never closed on its line",
    "E0004": "a block string is never closed",
    "E0005": "a character or word that is not part of the language",
    "E0006": "a bad escape in a string",
    "E0007": "the file is not UTF-8 text",
    "E0008": "text that holds a lone surrogate",
    "E0009": "too many syntax errors",
    "E0010": "a number too large",
    "E0108": "routes nested too deep",
    "E0101": "duplicate step id",
    "E0102": "`next` names an unknown step",
    "E0103": "`next` on a sub-agent",
    "W0104": "a step that can never run",
    "E0105": "a `next` cycle that never reaches `end`",
    "E0106": "duplicate route id",
    "E0107": "a workflow without steps",
    "E0201": "an item written twice",
    "E0202": "a `todo_task` item on a `regular` step",
    "E0203": "`max_turns` below 1",
    "W0204": "`mode learn_code` without a route",
    "E0301": "a dependency cycle between tasks",
    "E0302": "an unknown task label",
    "E0303": "a task label used twice",
    "E0304": "no tasks, or more than 100",
    "E0305": "an empty action, expected result or constraint",
    "E0306": "an action or expected result over 1,000 characters",
    "E0307": "`all` as a task label",
    "E0401": "a path outside the workspace",
    "E0402": "a prompt template that does not parse",
    "E0403": "a prompt variable the kind does not provide",
    "E0404": "a prompt file that cannot be read",
    "E0406": "a prompt template that cannot render",
    "W0405": "a prompt kind the step never uses",
    "N0301": "a task moved by its dependencies",
}

PLANS: dict[str, str] = {  # plans read from JSON: decompile, migrate, runs of a plan.json
    "E0501": "the file is not valid JSON (with line:column)",
    "E0502": "a value has the wrong type or a required field is missing (with its JSON path)",
    "E0503": "a step id is used twice (at any depth)",
    "W0504": "something the format or the language cannot express: left out, and named",
    "E0505": "a plan that cannot be written as todoflow (an id that is not a todoflow name, no steps)",
    "E0506": "a key written twice in one JSON object (with its JSON path)",
    "E0507": "a value beyond what todoflow reads: nesting deeper than 128 levels, routes deeper than 32, "
    "a number of more than 4,300 digits, a lone surrogate (with its JSON path)",
    "E0508": "a step id that is not a plain name, "
    "or a learnings folder that links out of the learnings folder (`migrate`)",
}


def title(code: str) -> str | None:
    return LANGUAGE.get(code) or PLANS.get(code)


def help_uri(code: str) -> str | None:
    """The code's section of the docs (GitHub's anchor for its heading), if it has one."""
    if code in LANGUAGE:
        return f"{DOCS}language.md#{anchor(f'{code} — {LANGUAGE[code]}')}"
    return f"{DOCS}interop.md#diagnostics" if code in PLANS else None


def anchor(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading: lower case, punctuation dropped,
    each space a hyphen."""
    kept = "".join(c for c in heading.lower() if c.isalnum() or c in " -_")
    return kept.replace(" ", "-")
