"""What an agent may send at each node, as pydantic models, and refusals in words.

The same models validate replies here and give the MCP tools their input schemas.
A refusal names the field and the rule ("evidence is 612 characters; at most 500")
and never changes anything: validation happens before the journal is touched.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from todoflow.compiler.checklist import MAX_TASKS, MAX_TEXT
from todoflow.dsl.diagnostics import TodoflowError

MAX_OUTCOME = 500
TELEPORT = "teleport-revise-tasks"

Text = Annotated[str, StringConstraints(min_length=1, max_length=MAX_TEXT, pattern=r"\S")]
Outcome = Annotated[str, StringConstraints(min_length=1, max_length=MAX_OUTCOME, pattern=r"\S")]


class _Reply(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TaskItem(_Reply):
    """One checklist item: its position in the list is its identity."""

    action: Text = Field(description="Self-contained work to perform (1-1,000 characters).")
    expected_result: Text = Field(description="An observable completion condition (1-1,000 characters).")


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


Reply = IntakeReply | WorkReply | TeleportReply | RevisionReply


class InvalidReply(TodoflowError):
    """A reply the engine will not apply; `reason` says which field breaks which rule."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def parse_reply(node: str, data: Any) -> Reply:
    """The reply for `node` (`intake`, `work` or `revise`), or `InvalidReply`."""
    if not isinstance(data, dict):
        raise InvalidReply("a reply is an object")
    model: type[_Reply]
    if node == "intake":
        if "teleportTo" in data:
            raise InvalidReply(
                "teleportTo is only possible while working on a task; the checklist does not exist yet"
            )
        model = IntakeReply
    elif node == "work":
        model = TeleportReply if "teleportTo" in data else WorkReply
    elif node == "revise":
        model = RevisionReply
    else:
        raise InvalidReply("the run is complete; there is nothing to reply to")
    try:
        reply = model.model_validate(data)
    except ValidationError as error:
        raise InvalidReply(_reason(error, node)) from None
    if isinstance(reply, RevisionReply) and reply.resume_from_task > len(reply.tasks) + 1:
        limit = len(reply.tasks) + 1
        raise InvalidReply(
            f"resume_from_task is {reply.resume_from_task}; at most {limit} (one past the last task)"
        )
    return reply


_TAKES = {
    "intake": "`tasks` and `progress_checklist_outcome`",
    "work": "`evidence` and `progress_execution_outcome`, or `teleportTo`",
    "revise": "`tasks`, `resume_from_task`, `progress_checklist_outcome` and `progress_execution_outcome`",
}


def _reason(error: ValidationError, node: str) -> str:
    errors = error.errors(include_url=False)
    strays = [e for e in errors if e["type"] == "extra_forbidden" and len(e["loc"]) == 1]
    if strays:  # a reply meant for another node: say what this one takes
        names = ", ".join(f"`{e['loc'][0]}`" for e in strays)
        return f"{names} is not part of a reply at {node}: it takes {_TAKES[node]}"
    return "; ".join(_one(e) for e in errors[:3])


def _one(error: Any) -> str:
    field = _path(error["loc"])
    kind, ctx, value = error["type"], error.get("ctx") or {}, error.get("input")
    if kind == "missing":
        return f"{field} is missing"
    if kind == "extra_forbidden":
        return f"`{field}` is not part of this reply"
    if kind == "string_too_long":
        return f"{field} is {len(value):,} characters; at most {ctx['max_length']:,}"
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
