"""What an agent may send at each node, as pydantic models, and refusals in words.

The same models validate replies here and give the MCP tools their input schemas.
A refusal names the field and the rule ("evidence is 612 characters; at most 500")
and never changes anything: validation happens before the journal is touched.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, TypeAdapter, ValidationError

from todoflow.compiler.checklist import MAX_TASKS, MAX_TEXT
from todoflow.dsl.diagnostics import TodoflowError

MAX_OUTCOME = 500
TELEPORT = "teleport-revise-tasks"

Text = Annotated[str, StringConstraints(min_length=1, max_length=MAX_TEXT, pattern=r"\S")]
Outcome = Annotated[str, StringConstraints(min_length=1, max_length=MAX_OUTCOME, pattern=r"\S")]


class _Reply(BaseModel):
    """Strict: a reply's types are what it says (`"2"` is not a position, `true` is not one)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class TaskItem(_Reply):
    """One checklist item: its position in the list is its identity."""

    action: Text = Field(description="Self-contained work to perform (1-1,000 characters).")
    expected_result: Text = Field(description="An observable completion condition (1-1,000 characters).")
    constraints: list[Text] | None = Field(
        default=None,
        description="The task's constraints as the directive handed them out, unchanged (leaving them "
        "out keeps them too); an agent never writes its own.",
    )


class IntakeReply(_Reply):
    """At intake: the checklist, ready or composed once from the goal."""

    tasks: list[TaskItem] = Field(min_length=1, max_length=MAX_TASKS, description="1 to 100 tasks, in order.")
    progress_checklist_outcome: Outcome = Field(description="A short summary of the checklist, for display.")


class WorkReply(_Reply):
    """At work: the confirmation of the current task, after doing and checking it."""

    evidence: Outcome = Field(description="Concrete proof that the current task is done (1-500 characters).")
    progress_execution_outcome: Outcome = Field(description="A short display summary of the result (1-500).")


class TeleportReply(_Reply):
    """At work: go to the revision node because the checklist itself is wrong."""

    teleportTo: Literal["teleport-revise-tasks"] = Field(  # noqa: N815 - the protocol's name
        description="Revise the checklist instead of finishing a list known to be wrong."
    )


class RevisionReply(_Reply):
    """At revise: the full corrected checklist and where to resume."""

    tasks: list[TaskItem] = Field(min_length=1, max_length=MAX_TASKS)
    resume_from_task: int = Field(
        ge=1, description="The position to continue from; everything before it counts as done."
    )
    progress_checklist_outcome: Outcome
    progress_execution_outcome: Outcome


MAX_INSTRUCTIONS = 4_000
MAX_REASONING = 2_000
Instructions = Annotated[str, StringConstraints(min_length=1, max_length=MAX_INSTRUCTIONS, pattern=r"\S")]
Note = Annotated[str, StringConstraints(max_length=MAX_REASONING)]
TodoId = Annotated[str, StringConstraints(pattern=r"^todo_[1-9][0-9]{0,2}$")]


class _Decision(_Reply):
    """The seed's TodoTaskResponse: every field may be sent with every action (a model
    fills them all); what an action needs is checked by the member of the union."""

    next_action: str
    selected_route_id: str | None = Field(
        default=None,
        description="delegate: the route whose sub-agent does the todo (one of the step's routes).",
    )
    use_generic_agent: bool = Field(
        default=False, description="delegate: true to give the todo to the generic agent instead of a route."
    )
    todo_id_to_execute: TodoId | None = Field(
        default=None, description="delegate: the current todo, `todo_<N>` for task N."
    )
    instructions_to_sub_agent: str | None = Field(
        default=None,
        max_length=MAX_INSTRUCTIONS,
        description="delegate: everything the sub-agent needs; it sees nothing else of this turn.",
    )
    success_criteria_for_sub_agent: Note | None = Field(
        default=None, description="delegate: how the sub-agent knows it is done (measurable)."
    )
    all_tasks_complete: bool = Field(default=False, description="Whether every todo is done (display only).")
    progress_summary: Outcome | None = Field(
        default=None, description="A short progress summary, for the log."
    )
    completion_reason: Outcome | None = Field(default=None, description="complete: why the step is done.")
    selection_reasoning: Note | None = Field(
        default=None, description="Why this action (and route), for the log."
    )


class DelegateReply(_Decision):
    """At work: give the current todo to a route's sub-agent or to the generic agent."""

    next_action: Literal["delegate"]
    todo_id_to_execute: TodoId = Field(description="The current todo, `todo_<N>` for task N.")
    instructions_to_sub_agent: Instructions = Field(
        description="Everything the sub-agent needs (1-4,000 characters); it sees nothing else of this turn."
    )


class ContinueReply(_Decision):
    """At work: the orchestrator worked on its own (gathered context, used its tools) and
    takes another turn; no todo changes."""

    next_action: Literal["continue"]


class CompleteReply(_Decision):
    """At work: the orchestrator says the step is done (accepted only when it is)."""

    next_action: Literal["complete"]


Decision = Annotated[DelegateReply | ContinueReply | CompleteReply, Field(discriminator="next_action")]


class SubAgentFailedReply(_Reply):
    """At delegated: the sub-agent gives the todo back, undone."""

    failed: Outcome = Field(description="Why the todo could not be done (1-500 characters).")


class CreateTodoReply(_Reply):
    """create_todo: a new task at the end of the checklist (positions stay as they are)."""

    title: Text = Field(description="The work to do (the task's action, 1-1,000 characters).")
    description: Text = Field(description="How to tell it is done (its expected result, 1-1,000 characters).")
    priority: Literal["high", "medium", "low"] = Field(default="medium", description="Display only.")


class UpdateTodoReply(_Reply):
    """update_todo: a todo's status (in_progress or blocked) and notes; nothing else."""

    todo_id: TodoId = Field(description="The todo, `todo_<N>`.")
    status: Literal["in_progress", "blocked"] | None = Field(default=None, description="The new status.")
    notes: Outcome | None = Field(default=None, description="Why (1-500 characters).")


class CompleteTodoReply(_Reply):
    """complete_todo: the evidence-gated confirmation of the current todo."""

    todo_id: TodoId = Field(description="The current todo, `todo_<N>`.")
    result: Outcome = Field(description="The outcome, for display (1-500 characters).")
    evidence: Outcome = Field(description="Concrete proof that the todo is done (1-500 characters).")


TOOLS: dict[str, type[_Reply]] = {
    "create_todo": CreateTodoReply,
    "update_todo": UpdateTodoReply,
    "complete_todo": CompleteTodoReply,
}


class ListTodosCall(_Reply):
    """list_todos: the current step's todos (a read: nothing is journaled)."""


class GetTodoCall(_Reply):
    """get_todo: one todo of the current step (a read: nothing is journaled)."""

    todo_id: TodoId = Field(description="The todo, `todo_<N>`.")


READS: dict[str, type[_Reply]] = {"list_todos": ListTodosCall, "get_todo": GetTodoCall}
TOOL_NAMES = ", ".join(f"`{name}`" for name in (*TOOLS, *READS))

Reply = (
    IntakeReply
    | WorkReply
    | TeleportReply
    | RevisionReply
    | DelegateReply
    | ContinueReply
    | CompleteReply
    | SubAgentFailedReply
    | CreateTodoReply
    | UpdateTodoReply
    | CompleteTodoReply
)


class InvalidReply(TodoflowError):
    """A reply the engine will not apply; `reason` says which field breaks which rule."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def parse_reply(node: str, data: Any, orchestrated: bool = True) -> Reply:
    """The reply for `node` (`intake`, `work`, `delegated` or `revise`), or `InvalidReply`.
    `orchestrated`: the step is a todo_task step, whose work node is an orchestrator turn.
    A todo tool call is `{"<tool>": {arguments}}` (`create_todo`, `update_todo`,
    `complete_todo`)."""
    if not isinstance(data, dict):
        raise InvalidReply("a reply is an object")
    tool = next((name for name in TOOLS if name in data), None)
    if tool is not None:
        return _tool_call(node, tool, data)
    read = next((name for name in READS if name in data), None)
    if read is not None:  # answered by whoever drives the run: nothing to journal
        raise InvalidReply(
            f"{read} reads the todos and changes nothing: it is a tool of its own, not a reply"
        )
    model: Any
    if node == "intake":
        if "teleportTo" in data:
            raise InvalidReply(
                "teleportTo is only possible while working on a task; the checklist does not exist yet"
            )
        model = IntakeReply
    elif node == "work":
        if "next_action" in data:
            if not orchestrated:
                raise InvalidReply(
                    "next_action is an orchestrator's decision; a regular step has no orchestrator"
                )
            model = Decision
        else:
            model = TeleportReply if "teleportTo" in data else WorkReply
    elif node == "delegated":
        model = SubAgentFailedReply if "failed" in data else WorkReply
    elif node == "revise":
        model = RevisionReply
    else:
        raise InvalidReply("the run is complete; there is nothing to reply to")
    reply: Reply = _validate(model, data, node)
    if isinstance(reply, RevisionReply) and reply.resume_from_task > len(reply.tasks) + 1:
        limit = len(reply.tasks) + 1
        raise InvalidReply(
            f"resume_from_task is {reply.resume_from_task}; at most {limit} (one past the last task)"
        )
    return reply


def _tool_call(node: str, tool: str, data: dict[str, Any]) -> Reply:
    if len(data) != 1:
        others = ", ".join(f"`{k}`" for k in sorted(data) if k != tool)
        raise InvalidReply(f"a {tool} call is `{{{tool}: {{...}}}}` alone; {others} cannot come with it")
    allowed = {"work": tuple(TOOLS), "delegated": ("update_todo", "complete_todo")}.get(node, ())
    if tool not in allowed:
        where = (
            "a delegated sub-agent may use update_todo and complete_todo only"
            if node == "delegated"
            else (f"the todo tools are used while working on a task, not at {node}")
        )
        raise InvalidReply(f"{tool} is not possible here: {where}")
    arguments = data[tool]
    if not isinstance(arguments, dict):
        raise InvalidReply(f"{tool} takes an object of arguments")
    reply: Reply = _validate(TOOLS[tool], arguments, tool)
    return reply


_DECISION = TypeAdapter(Decision)


def _validate(model: Any, data: dict[str, Any], where: str) -> Any:
    try:
        if model is Decision:
            return _DECISION.validate_python(data)
        return model.model_validate(data)
    except ValidationError as error:
        raise InvalidReply(_reason(error, where, tagged=model is Decision)) from None


_TAKES = {
    "intake": "`tasks` and `progress_checklist_outcome`",
    "work": "`evidence` and `progress_execution_outcome`, or `teleportTo`, or a decision (`next_action`), "
    f"or a todo tool ({TOOL_NAMES})",
    "delegated": "`evidence` and `progress_execution_outcome`, or `failed`, or `update_todo` or "
    "`complete_todo` on its own todo",
    "revise": "`tasks`, `resume_from_task`, `progress_checklist_outcome` and `progress_execution_outcome`",
    **{
        tool: ", ".join(f"`{f}`" for f in model.model_fields) or "no arguments"
        for tool, model in (TOOLS | READS).items()
    },
}


# -- a script's replies, checked when the file is read (its node is not known then) ------

FORMS = (
    "`tasks` + `progress_checklist_outcome` (intake)",
    "`evidence` + `progress_execution_outcome` (work; a delegated sub-agent)",
    "`teleportTo: teleport-revise-tasks` (work)",
    "`tasks` + `resume_from_task` + `progress_checklist_outcome` + `progress_execution_outcome` (revise)",
    "`next_action` `delegate` | `continue` | `complete` with the decision's fields (work, orchestrator)",
    "`failed` (a delegated sub-agent)",
    f"a todo tool alone, `{{tool: {{arguments}}}}`: {TOOL_NAMES}",
)


def check_reply(data: dict[str, Any]) -> None:
    """A reply meant for some node, checked as far as it can be without the run: the form
    its fields choose and that form's rules; `InvalidReply` lists every accepted form."""
    tool = next((name for name in (*TOOLS, *READS) if name in data), None)
    if tool is not None:
        _tool_call("work", tool, data) if tool in TOOLS else _read_call(tool, data)
        return
    model = _form(data)
    if model is None:
        raise InvalidReply(
            f"{_keys(data)} is no reply todoflow takes; a reply is one of: " + "; ".join(FORMS)
        )
    _validate(model, data, "the reply")


def _form(data: dict[str, Any]) -> Any:
    keys = set(data)
    for key, model in (
        ("next_action", Decision),
        ("teleportTo", TeleportReply),
        ("failed", SubAgentFailedReply),
        ("resume_from_task", RevisionReply),
        ("tasks", IntakeReply),
        ("evidence", WorkReply),
        ("progress_execution_outcome", WorkReply),
    ):
        if key in keys:
            return model
    return None


def read_call(data: Any) -> tuple[str, str | None] | None:
    """A `list_todos`/`get_todo` call's tool and todo id, checked; None: not a read."""
    if not isinstance(data, dict):
        return None
    tool = next((name for name in READS if name in data), None)
    if tool is None:
        return None
    call = _read_call(tool, data)
    return tool, call.todo_id if isinstance(call, GetTodoCall) else None


def _read_call(tool: str, data: dict[str, Any]) -> _Reply:
    if len(data) != 1:
        others = ", ".join(f"`{k}`" for k in sorted(data) if k != tool)
        raise InvalidReply(f"a {tool} call is `{{{tool}: {{...}}}}` alone; {others} cannot come with it")
    arguments = data[tool] if data[tool] is not None else {}
    if not isinstance(arguments, dict):
        raise InvalidReply(f"{tool} takes an object of arguments")
    read: _Reply = _validate(READS[tool], arguments, tool)
    return read


def _keys(data: dict[str, Any]) -> str:
    return ", ".join(f"`{key}`" for key in data) or "an empty object"


def _reason(error: ValidationError, node: str, tagged: bool = False) -> str:
    errors = error.errors(include_url=False)
    if tagged:  # a decision: the union's tag leads every location
        tags = [e for e in errors if e["type"] == "union_tag_invalid"]
        if tags:
            return "next_action must be `delegate`, `continue` or `complete`"
        errors = [{**e, "loc": e["loc"][1:]} for e in errors]
    strays = [e for e in errors if e["type"] == "extra_forbidden" and len(e["loc"]) == 1]
    if strays:  # a reply meant for another node: say what this one takes
        names = ", ".join(f"`{e['loc'][0]}`" for e in strays)
        return f"{names} is not part of a reply at {node}: it takes {_TAKES[node]}"
    return "; ".join(_grouped(errors))


def _grouped(errors: list[Any]) -> list[str]:
    """Every offending item, named once: fields missing or out of place in one sentence
    each, the others one by one (a list of 100 tasks is refused in full, not its first three)."""
    out: list[str] = []
    for kind, verb in (("missing", "{} missing"), ("extra_forbidden", "{} not part of this reply")):
        fields = [_path(e["loc"]) for e in errors if e["type"] == kind]
        if fields:
            names = ", ".join(f"`{f}`" if kind == "extra_forbidden" else f for f in fields)
            out.append(verb.format(f"{names} {'is' if len(fields) == 1 else 'are'}"))
    return out + [_one(e) for e in errors if e["type"] not in ("missing", "extra_forbidden")]


def _one(error: Any) -> str:
    field = _path(error["loc"])
    kind, ctx, value = error["type"], error.get("ctx") or {}, error.get("input")
    if kind == "string_too_long":
        return f"{field} is {len(value):,} characters; at most {ctx['max_length']:,}"
    if kind == "string_pattern_mismatch" and "todo_id" in field and str(value).strip():
        return f"{field} is `{value}`; a todo id is `todo_<N>` for task N"
    if kind in ("string_too_short", "string_pattern_mismatch"):
        return f"{field} is empty"
    if kind == "too_long":
        return f"{field} holds {len(value)} {_noun(field)}; at most {ctx['max_length']}"
    if kind == "too_short":
        return f"{field} is empty; at least {ctx['min_length']} item is needed"
    if kind == "greater_than_equal":
        return f"{field} is {value}; at least {ctx['ge']}"
    if kind == "literal_error":
        return f"{field} must be {ctx.get('expected', 'one of the allowed values')}"
    if kind.endswith("_type") or kind.endswith("_parsing"):
        wanted = {"string_type": "a string", "list_type": "a list", "int_type": "a whole number"}
        return f"{field} must be {wanted.get(kind, kind.removesuffix('_type'))}"
    return f"{field}: {error['msg']}"


def _noun(field: str) -> str:
    return "tasks" if field.endswith("tasks") else "items"


def _path(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "reply"


# -- the replies' JSON Schemas, as tools show them to a model (the MCP server's tools and
# the LLM agent's are generated from the very models the engine validates with) ----------


def model_properties(model: type[BaseModel]) -> tuple[dict[str, Any], list[str]]:
    """A model's properties as a tool's input schema shows them: references inlined, no
    titles, a description on the property itself (not inside an `anyOf` branch)."""
    schema = model.model_json_schema()
    definitions = schema.get("$defs", {})
    found = {name: clean(value, definitions) for name, value in schema["properties"].items()}
    return found, list(schema.get("required", []))


def clean(value: Any, definitions: dict[str, Any]) -> Any:
    if isinstance(value, dict):
        if "$ref" in value:
            value = {
                **definitions[value["$ref"].rsplit("/", 1)[-1]],
                **{k: v for k, v in value.items() if k != "$ref"},
            }
        out = {k: clean(v, definitions) for k, v in value.items() if k not in ("title", "$defs")}
        for branch in out.get("anyOf", []):  # hoist a branch's description to the property
            if isinstance(branch, dict) and "description" in branch:
                out.setdefault("description", branch.pop("description"))
        return out
    if isinstance(value, list):
        return [clean(item, definitions) for item in value]
    return value
