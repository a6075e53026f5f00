"""What each keyword means and what it becomes in the compiled files, for hover and
completion. The rows of the item tables are those of docs/language.md (a test holds
them equal); the other keywords are described in the words of the same page.
"""

from __future__ import annotations

from typing import NamedTuple


class Keyword(NamedTuple):
    form: str  # as docs/language.md writes it
    meaning: str
    emitted: str  # what it becomes, as docs/language.md's "emitted as" column says
    file: str  # where that is: plan.json, step_config.json, prompts/, or "" for none


_STEP_CONFIG = "step_config.json"
_PLAN = "plan.json"

# The "Defaults" and "Steps" tables of docs/language.md, row by row.
TABLE: dict[str, Keyword] = {
    "llm": Keyword(
        '`llm PROVIDER "model"`',
        "execution LLM",
        "`agent_configs.execution_llm {provider, model_id}`",
        _STEP_CONFIG,
    ),
    "conditional_llm": Keyword(
        '`conditional_llm PROVIDER "model"`',
        "LLM of conditional agents",
        "`agent_configs.conditional_llm`",
        _STEP_CONFIG,
    ),
    "max_turns": Keyword(
        "`max_turns N`", "orchestrator turns per step", "`agent_configs.execution_max_turns`", _STEP_CONFIG
    ),
    "prompt": Keyword(
        '`prompt KIND TEXT` / `prompt KIND from "file"`', "a prompt template", "`prompts/`", "prompts/"
    ),
    "description": Keyword("`description TEXT`", "what the step does", "`description`", _PLAN),
    "success": Keyword("`success TEXT`", "how success is judged", "`success_criteria`", _PLAN),
    "needs": Keyword(
        '`needs "a", "b"`', "files the step reads (repeatable, appends)", "`context_dependencies`", _PLAN
    ),
    "output": Keyword('`output "file"`', "the file the step writes", "`context_output`", _PLAN),
    "expect": Keyword(
        '`expect file "f"`',
        "a file that must exist afterwards",
        "`validation_schema.files[] {file_name, must_exist: true}`",
        _PLAN,
    ),
    "next": Keyword("`next ID` / `next end`", "the following step", "`next_step_id`", _PLAN),
    "mode": Keyword(
        "`mode learn_code`",
        "the scripted fast path (step_config.json)",
        "`declared_execution_mode`",
        _STEP_CONFIG,
    ),
    "route": Keyword(
        '`route ID "Name" when TEXT { step }`',
        "a sub-agent (todo_task only)",
        "`predefined_routes[]`",
        _PLAN,
    ),
    "generic": Keyword(
        "`generic on` / `generic off`",
        "may the generic sub-agent be used (default on)",
        "`generic_agent: false` when off",
        _PLAN,
    ),
    "tasks": Keyword("`tasks { ... }`", "a ready checklist (todo_task only)", "`tasks`", _PLAN),
}

_KINDS = {
    "orchestrator_system": "the orchestrator's standing instructions (`todo_task` steps)",
    "orchestrator_user": "the checklist as the orchestrator sees it each turn (`todo_task` steps)",
    "intake": "the first node, receiving or composing the checklist (`todo_task` steps)",
    "work": "one task (every step; a `regular` step is one task)",
    "revise": "the revision node, reached by the teleport (`todo_task` steps)",
    "sub_agent": "the instructions a sub-agent receives (steps inside a `route`)",
}

OTHERS: dict[str, Keyword] = {
    "workflow": Keyword(
        '`workflow ID "Title" { ... }`',
        "one per file: the workflow-level defaults and the steps, which run from the first one",
        '`{"steps": [...]}`',
        _PLAN,
    ),
    "regular": Keyword('`regular ID "Title" { ... }`', "a step that is one unit of work", "a step", _PLAN),
    "todo_task": Keyword(
        '`todo_task ID "Title" { ... }`',
        "an orchestrator step that walks a checklist one task at a time",
        "a step with `predefined_routes` and `tasks`",
        _PLAN,
    ),
    "file": TABLE["expect"],
    "end": Keyword("`next end`", "the end of the workflow; never a step id", '`next_step_id: "end"`', _PLAN),
    "from": Keyword(
        '`prompt KIND from "file"`', "a template read from a file beside this one", "`prompts/`", "prompts/"
    ),
    "when": Keyword(
        '`route ID "Name" when TEXT { step }`',
        "when the orchestrator should delegate to this route",
        "`predefined_routes[].condition`",
        _PLAN,
    ),
    "off": TABLE["generic"],
    "learn_code": TABLE["mode"],
    "after": Keyword(
        "`after ID, ...`",
        "the tasks this one needs; the compiler orders the checklist so they come first",
        "the order of `tasks`",
        _PLAN,
    ),
    "constraint": Keyword(
        "`constraint TEXT on ID, ... | all`",
        "a rule attached to the tasks it names, shown with them; never a task",
        "`tasks[].constraints`",
        _PLAN,
    ),
    "all": Keyword("`on all`", "every task of the block", "`tasks[].constraints` of every task", _PLAN),
    **{
        kind: Keyword(
            f"`prompt {kind} ...`", f"the `{kind}` prompt: {what}", f"`prompts/<step>/{kind}.j2`", "prompts/"
        )
        for kind, what in _KINDS.items()
    },
}


def describe(word: str, after: str | None = None) -> Keyword | None:
    """The entry of a keyword; `on` reads differently after `generic` and in a constraint."""
    if word == "on":
        return TABLE["generic"] if after == "GENERIC" else OTHERS["constraint"]
    return TABLE.get(word) or OTHERS.get(word)


def markdown(entry: Keyword) -> str:
    where = f" in {entry.file}" if entry.file else ""
    return f"{entry.form} — {entry.meaning}\n\nemitted as {entry.emitted}{where}"
