"""Journal entries: the closed set of what can happen to a process, as frozen values.

The engine builds one entry from each accepted reply; `state.settle` folds it into the
process state and `events.entry_events` derives the seed's events from it, both by
matching on its type, so mypy sees every kind handled. Each kind has one JSON form, a
line of journal.jsonl (`to_json`, `entry_from_json`). A field keeps the name it has in
the reply (`progress_execution_outcome`, not `outcome`) from the MCP tool to the journal;
the seed's event formats rename it where they name it otherwise (`result`).

Journals written before entries were typed still load: their outcome fields were named
`outcome` (confirm), `checklist_outcome` (submit_tasks, revise) and `work_outcome`
(revise). To add a kind: a class here with its `TYPE`, its JSON form in `to_json` and
`entry_from_json`, a case in `state.settle` and in `events.entry_events` (mypy's
exhaustiveness check on `Entry` points at each), and a section in docs/architecture.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, TypeAlias, TypedDict, TypeVar

import pydantic_core

from todoflow.dsl.diagnostics import TodoflowError
from todoflow.dsl.nodes import node, replace

from .plan import Task

By: TypeAlias = str  # who gave the reply: `agent`, or `caller` (a ready checklist passed on for it)


class Head(TypedDict):
    """The fields every entry begins with: entries are built by keyword, `Kind(**head, ...)`."""

    seq: int
    at: str
    by: By
    step: str


@node
class SubmitTasks:
    """Intake: the step's checklist. `tasks` is None when the step's ready checklist was
    passed on unchanged (the run's plan holds it, so the entry need not copy it)."""

    TYPE: ClassVar[str] = "submit_tasks"
    seq: int
    at: str
    by: By
    step: str
    tasks: tuple[Task, ...] | None
    progress_checklist_outcome: str


@node
class Confirm:
    """The current task (position) done, with its evidence."""

    TYPE: ClassVar[str] = "confirm"
    seq: int
    at: str
    by: By
    step: str
    position: int
    evidence: str
    progress_execution_outcome: str


@node
class Teleport:
    """From work to revise: the checklist itself is wrong."""

    TYPE: ClassVar[str] = "teleport"
    seq: int
    at: str
    by: By
    step: str
    position: int


@node
class Revise:
    """The full corrected checklist, and where to resume."""

    TYPE: ClassVar[str] = "revise"
    seq: int
    at: str
    by: By
    step: str
    tasks: tuple[Task, ...]
    resume_from_task: int
    progress_checklist_outcome: str
    progress_execution_outcome: str


@node
class Delegate:
    """The orchestrator gives the current todo (position) to a route's sub-agent
    (`selected_route_id`) or to the generic agent: the step's node becomes `delegated`."""

    TYPE: ClassVar[str] = "delegate"
    seq: int
    at: str
    by: By
    step: str
    position: int
    selected_route_id: str | None
    use_generic_agent: bool
    instructions_to_sub_agent: str
    success_criteria_for_sub_agent: str | None
    selection_reasoning: str | None
    progress_summary: str | None
    all_tasks_complete: bool

    @property
    def agent(self) -> str:
        return self.selected_route_id or GENERIC


@node
class Continue:
    """The orchestrator worked on its own and takes another turn; no todo changes."""

    TYPE: ClassVar[str] = "continue"
    seq: int
    at: str
    by: By
    step: str
    position: int
    selection_reasoning: str | None
    progress_summary: str | None
    all_tasks_complete: bool


@node
class SubAgentDone:
    """The delegated sub-agent says the todo is done, with its evidence. A route's reply
    is prevalidated first: `passed` (every expected file there, with its sha256 in
    `files`) confirms the todo; otherwise `reason` says what failed and the todo goes
    back to the orchestrator. The generic agent's reply is not prevalidated."""

    TYPE: ClassVar[str] = "sub_agent_done"
    seq: int
    at: str
    by: By
    step: str
    position: int
    agent: str  # the route id, or `generic`
    evidence: str
    progress_execution_outcome: str
    passed: bool
    reason: str | None
    files: tuple[tuple[str, str], ...]  # (workspace path, sha256) of the validated files


@node
class SubAgentFailed:
    """The delegated sub-agent gives the todo back, undone."""

    TYPE: ClassVar[str] = "sub_agent_failed"
    seq: int
    at: str
    by: By
    step: str
    position: int
    agent: str
    failed: str


@node
class CreateTodo:
    """`create_todo`: a task appended at the end of the checklist."""

    TYPE: ClassVar[str] = "create_todo"
    seq: int
    at: str
    by: By
    step: str
    title: str
    description: str
    priority: str


@node
class UpdateTodo:
    """`update_todo`: a todo's status (`in_progress`, `blocked`) and notes, by the
    orchestrator or by the sub-agent the todo is delegated to (`agent`)."""

    TYPE: ClassVar[str] = "update_todo"
    seq: int
    at: str
    by: By
    step: str
    position: int
    status: str | None
    notes: str | None
    agent: str


@node
class RaiseTurns:
    """The step's bound on orchestrator turns, raised by the caller to let a run go on."""

    TYPE: ClassVar[str] = "raise_turns"
    seq: int
    at: str
    by: By
    step: str
    execution_max_turns: int


@node
class LlmCall:
    """One call of a model by the LLM agent (the driver's record): who asked, which model
    the selection rules chose and by which rule, and what it cost. No node moves."""

    TYPE: ClassVar[str] = "llm_call"
    seq: int
    at: str
    by: By
    step: str
    agent: str  # `orchestrator`, a route id, or `generic`
    provider: str
    model_id: str
    rule: str
    prompt_tokens: int
    completion_tokens: int
    latency_ms: int


@node
class ToolCalled:
    """One tool call of an agent beside its decisions (a workspace tool, an MCP server's):
    the driver's audit record. The arguments as a digest and a size; a written file and
    its new sha256; a command line and its exit code. No node moves."""

    TYPE: ClassVar[str] = "tool_called"
    seq: int
    at: str
    by: By
    step: str
    agent: str  # `orchestrator`, a route id, or `generic`
    todo: str | None  # the todo worked on, `todo_<N>`
    tool: str
    arguments_sha256: str
    arguments_bytes: int
    result_bytes: int
    duration_ms: int
    refused: bool
    file: str | None = None  # write_file, edit_file
    file_sha256: str | None = None
    command: str | None = None  # run_command
    exit_code: int | None = None


def tool_detail(entry: ToolCalled) -> dict[str, str | int]:
    """What a toolset said of a call beyond its sizes (`toolbox.ToolOutcome.detail`), back
    from the entry that recorded it."""
    found = {
        "file": entry.file,
        "sha256": entry.file_sha256,
        "command": entry.command,
        "exit_code": entry.exit_code,
    }
    return {key: value for key, value in found.items() if value is not None}


@node
class FastPathStarted:
    """learn_code: the step's `main.py` (its sha256) started, before any model is asked, by
    `runner` (host and process id) in the process group `group`."""

    TYPE: ClassVar[str] = "fast_path_started"
    seq: int
    at: str
    by: By
    step: str
    script_sha256: str
    runner: str | None = None  # `<host>:<pid>` of the process running the script (None: older runs)
    group: int | None = None  # the script's process group, killed when its attempt ends (None: older runs)
    leader: str | None = None  # its leader's start, told from a later process given its id (None: unknown)


@node
class CommandStarted:
    """`run_command`: an agent's shell command started, journaled as it starts (its
    `ToolCalled` comes when the call has ended), by `runner` (host and process id) in the
    process group `group`, whose leader's start is `leader` (None: unknown). A run resumed
    after its runner was killed kills what is left of that group. No node moves."""

    TYPE: ClassVar[str] = "command_started"
    seq: int
    at: str
    by: By
    step: str
    agent: str  # `orchestrator`, a route id, or `generic`
    todo: str | None  # the todo worked on, `todo_<N>`
    command: str
    runner: str
    group: int
    leader: str | None


@node
class FastPathFailed:
    """learn_code: the script's attempt failed; the step starts afresh (the journal keeps
    the attempt, for the log)."""

    TYPE: ClassVar[str] = "fast_path_failed"
    seq: int
    at: str
    by: By
    step: str
    reason: str


GENERIC = "generic"  # the agent of a delegation without a route
ORCHESTRATOR = "orchestrator"

Entry: TypeAlias = (
    SubmitTasks
    | Confirm
    | Teleport
    | Revise
    | Delegate
    | Continue
    | SubAgentDone
    | SubAgentFailed
    | CreateTodo
    | UpdateTodo
    | RaiseTurns
    | LlmCall
    | ToolCalled
    | CommandStarted
    | FastPathStarted
    | FastPathFailed
)
KINDS: dict[str, type[Any]] = {
    kind.TYPE: kind
    for kind in (
        SubmitTasks,
        Confirm,
        Teleport,
        Revise,
        Delegate,
        Continue,
        SubAgentDone,
        SubAgentFailed,
        CreateTodo,
        UpdateTodo,
        RaiseTurns,
        LlmCall,
        ToolCalled,
        CommandStarted,
        FastPathStarted,
        FastPathFailed,
    )
}


_HEAD = ("seq", "at", "by", "step")


def to_json(entry: Entry) -> dict[str, Any]:
    """The entry as its journal line holds it: `seq`, `at`, `by`, `step`, `type`, then the
    entry's own fields in their declared order (a ready checklist passed on unchanged is
    `"ready": true`; tasks and file pairs as JSON lists)."""
    out: dict[str, Any] = {
        "seq": entry.seq,
        "at": entry.at,
        "by": entry.by,
        "step": entry.step,
        "type": entry.TYPE,
    }
    match entry:
        case Confirm():  # the common step: spelled out
            out["position"] = entry.position
            out["evidence"] = entry.evidence
            out["progress_execution_outcome"] = entry.progress_execution_outcome
            return out
        case SubmitTasks():
            if entry.tasks is None:
                out["ready"] = True
            else:
                out["tasks"] = [t.as_dict() for t in entry.tasks]
            out["progress_checklist_outcome"] = entry.progress_checklist_outcome
            return out
    for name in type(entry)._node_fields[len(_HEAD) :]:  # type: ignore[union-attr]
        value = getattr(entry, name)
        if name == "tasks":
            value = [t.as_dict() for t in value]
        elif name == "files":
            value = [list(pair) for pair in value]
        out[name] = value
    return out


class EntryFormatError(TodoflowError):
    """A journal line that is JSON but not an entry of a known kind."""


def entry_from_json(data: Mapping[str, Any]) -> Entry:
    """The entry a journal line holds, in today's form or the one before entries were typed."""
    try:
        kind = data["type"]
        if kind == Confirm.TYPE:  # the common entry: read without a head of its own
            outcome = data.get("progress_execution_outcome", data.get("outcome"))
            by = data.get("by", "agent")
            return Confirm(
                data["seq"], data["at"], by, data["step"], data["position"], data["evidence"], outcome
            )
        head = Head(seq=data["seq"], at=data["at"], by=data.get("by", "agent"), step=data["step"])
        if kind == SubmitTasks.TYPE:
            tasks = None if data.get("ready") else tuple(map(Task.from_dict, data["tasks"]))
            summary = data.get("progress_checklist_outcome", data.get("checklist_outcome"))
            return SubmitTasks(**head, tasks=tasks, progress_checklist_outcome=summary)
        if kind == Revise.TYPE:
            return Revise(
                **head,
                tasks=tuple(map(Task.from_dict, data["tasks"])),
                resume_from_task=data["resume_from_task"],
                progress_checklist_outcome=data.get(
                    "progress_checklist_outcome", data.get("checklist_outcome")
                ),
                progress_execution_outcome=data.get("progress_execution_outcome", data.get("work_outcome")),
            )
        cls = KINDS.get(kind)
        if cls is None:
            raise EntryFormatError(f"an entry of unknown type {kind!r}")
        names = cls._node_fields[len(_HEAD) :]
        optional = names[len(names) - len(cls.__init__.__defaults__ or ()) :]  # added later: may be absent
        fields = {name: data[name] for name in names if name in data or name not in optional}
        if "files" in fields:
            fields["files"] = tuple((str(path), str(digest)) for path, digest in fields["files"])
        return cls(**head, **fields)  # type: ignore[no-any-return]
    except (KeyError, TypeError, ValueError) as error:
        raise EntryFormatError(f"an entry without its field {error}") from None


def json_line(record: Mapping[str, Any]) -> bytes:
    """One compact JSON line, UTF-8 as it is: what `json.dumps(record, ensure_ascii=False,
    separators=(",", ":"))` writes, at a quarter of its cost (a journal line, an event)."""
    return pydantic_core.to_json(record) + b"\n"


# -- secrets: what no entry may hold ----------------------------------------------------
# The configured secrets of this program, and what an agent hands in with them taken out.
#
# A model, a tool or a script may echo what it was given: a provider's key, the learn_code
# token, a store's password. Each place that reads such a value keeps it here (`keep`), and
# the engine passes every entry through `redacted` before it settles it, so the journal and
# everything derived from it (events, todos, learnings, the log, the report, status) hold
# `MARKER` where the secret was. Redaction covers exact occurrences: a secret encoded,
# split or transformed on the way is not recognised. A value shorter than `SHORTEST` is
# not taken for a secret (it would match ordinary words of the journal).
#
# Secrets live as long as the program (a set of a few strings); the core imports nothing
# for this but the node helpers.

MARKER = "[redacted]"
SHORTEST = 4
_T = TypeVar("_T")

_SECRETS: list[tuple[str, ...]] = [()]  # longest first: a secret inside another goes after it


def keep(*values: str | None) -> None:
    """Remember secrets to redact from now on (empty and short values are not secrets)."""
    known = set(_SECRETS[0])
    new = {value for value in values if value and len(value) >= SHORTEST and value not in known}
    if new:
        _SECRETS[0] = tuple(sorted(known | new, key=lambda value: (-len(value), value)))


def redact(text: str) -> str:
    """`text` with every kept secret replaced by `MARKER`."""
    for secret in _SECRETS[0]:
        if secret in text:
            text = text.replace(secret, MARKER)
    return text


def redacted(value: _T) -> _T:
    """`value` (text, a container, a frozen node such as an entry) with every kept secret
    in its text replaced by `MARKER`; the very same object when nothing changed."""
    if not _SECRETS[0]:
        return value
    return _walk(value)  # type: ignore[no-any-return]


_PLAIN = (int, float, bool, type(None))  # values that hold no text


def _walk(value: Any) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, _PLAIN):
        return value
    if isinstance(value, (tuple, list)):
        items = [_walk(item) for item in value]
        if all(new is old for new, old in zip(items, value, strict=True)):
            return value
        return type(value)(items)
    if isinstance(value, dict):
        pairs = {_walk(key): _walk(item) for key, item in value.items()}
        same = all(k in value and pairs[k] is value[k] for k in pairs) and len(pairs) == len(value)
        return value if same else pairs
    fields = getattr(type(value), "_node_fields", None)
    return value if fields is None else _node(value, fields)


def _node(value: Any, fields: tuple[str, ...]) -> Any:
    changes = {}
    for name in fields:
        old = getattr(value, name)
        if not isinstance(old, _PLAIN) and (new := _walk(old)) is not old:
            changes[name] = new
    return replace(value, **changes) if changes else value
