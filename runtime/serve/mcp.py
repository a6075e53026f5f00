"""`todoflow serve`: the protocol of `runtime.service` as MCP tools, for any MCP client.

Tools: `start` (prepare, then execute once), `step` (one reply to the current node: a
confirmation, a teleport, a revision, an orchestrator's decision, a sub-agent's answer),
the seed's todo tools `create_todo`, `update_todo`, `complete_todo` (which take the
current `attemptId`: each is one journaled step) and `list_todos`, `get_todo` (which
read), and `status`. The external agent is the driver: each call is one engine step.

Input schemas are generated from the reply models (`runtime.replies`), every accepted
field with its description on the property. Arguments reach the engine as sent, so a
reply is validated — strictly, unknown fields refused, in the same words — exactly as
from the CLI or a script. Only this module imports the `mcp` SDK (the `mcp` extra).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING, Any, NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from todoflow.dsl.diagnostics import TodoflowError

from ..replies import (
    CompleteTodoReply,
    ContinueReply,
    CreateTodoReply,
    DelegateReply,
    IntakeReply,
    RevisionReply,
    SubAgentFailedReply,
    TeleportReply,
    UpdateTodoReply,
    WorkReply,
    model_properties,
)
from . import pipes, resources
from .http import HttpOptions, serve_http
from .resources import INSTRUCTIONS
from .service import ALIASES, LIMITS, OUT_OF_FILES, ServeError, TodoService, out_of_files
from .turns import Turns

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

Handler = Callable[[dict[str, Any]], dict[str, Any]]


class ReadyTask(BaseModel):
    """One item of a ready checklist given at `prepare`."""

    model_config = ConfigDict(extra="forbid")

    action: str = Field(description="Self-contained work to perform (1-1,000 characters).")
    expected_result: str = Field(description="An observable completion condition (1-1,000 characters).")
    constraints: list[str] | None = Field(
        default=None, description="Remarks that govern this task (kept with it, not run as tasks)."
    )
    label: str | None = Field(default=None, description="A name other items' `after` can refer to.")
    after: list[str] | None = Field(
        default=None, description="Labels of the items this one needs done first: it is ordered after them."
    )


def _text(description: str, limit: int) -> dict[str, Any]:
    return {"type": "string", "maxLength": limit, "description": description}


PROCESS = {
    "processId": _text("The process, from start execute.", LIMITS["processId"]),
    "attemptId": _text("The attemptId of the current directive.", LIMITS["attemptId"]),
}
STEP_REPLIES: list[tuple[str, type[BaseModel]]] = [
    ("intake", IntakeReply),
    ("work", WorkReply),
    ("work", TeleportReply),
    ("revise", RevisionReply),
    ("work, as the orchestrator", DelegateReply),
    ("work, as the orchestrator", ContinueReply),
    ("delegated, as the sub-agent", SubAgentFailedReply),
]


def step_schema() -> dict[str, Any]:
    """Every field a `step` may carry, from the reply models, each saying where it belongs."""
    properties: dict[str, Any] = dict(PROCESS)
    used: dict[str, list[str]] = {}
    for node, model in STEP_REPLIES:
        fields, _ = model_properties(model)
        for name, schema in fields.items():
            if name not in properties:
                properties[name] = copy.deepcopy(schema)
            if node not in used.setdefault(name, []):
                used[name].append(node)
    for name, nodes in used.items():
        text = properties[name].get("description", "")
        properties[name]["description"] = f"[{'; '.join(nodes)}] {text}".strip()
    properties["next_action"] = {
        "type": "string",
        "enum": ["delegate", "continue", "complete"],
        "description": "[work, as the orchestrator] `delegate` the current todo to a route's sub-agent or "
        "the generic agent; `continue` (you worked on your own, another turn); `complete` (accepted only "
        "when every todo is confirmed).",
    }
    return {
        "type": "object",
        "properties": properties,
        "required": ["processId", "attemptId"],
        "additionalProperties": False,
    }


def tool_schema(model: type[BaseModel] | None, process_only: bool = False) -> dict[str, Any]:
    properties: dict[str, Any] = {"processId": PROCESS["processId"]}
    required = ["processId"]
    if not process_only:
        properties["attemptId"] = PROCESS["attemptId"]
        required.append("attemptId")
    if model is not None:
        fields, needed = model_properties(model)
        properties |= fields
        required += needed
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


def start_schema(workflow_ids: list[str] | None = None) -> dict[str, Any]:
    ready, _ = model_properties(ReadyTask)
    return {
        "type": "object",
        "properties": {
            "action": {
                "type": "string",
                "enum": ["prepare", "execute"],
                "description": "`prepare` first, then `execute`.",
            },
            "workflowId": _text("For prepare: the workflow, e.g. `todo-list`.", LIMITS["workflowId"])
            | ({"enum": workflow_ids} if workflow_ids else {}),
            "parentExecutionId": _text(
                "For prepare: the caller's execution id, or `none`.", LIMITS["parentExecutionId"]
            ),
            "tasks": {
                "type": "array",
                "minItems": 1,
                "maxItems": 100,
                "items": {
                    "type": "object",
                    "properties": ready,
                    "required": ["action", "expected_result"],
                    "additionalProperties": False,
                },
                "description": "For prepare: a ready checklist for the first todo_task step, "
                "passed on unchanged "
                "and ordered by `after`.",
            },
            "goal": _text("For prepare: the goal to compose a checklist from.", LIMITS["goal"]),
            "workspace": _text(
                "For prepare: the run's workspace, a folder inside the server's (default: the server's).",
                LIMITS["workspace"],
            ),
            "fastPathOnly": {
                "type": "boolean",
                "description": "For prepare: learn_code steps run their learnings/<step-id>/main.py only; "
                "a missing or failing script is an error, never handed to an orchestrator (default false).",
            },
            "startAttemptId": _text("For execute: the id prepare returned.", LIMITS["startAttemptId"]),
        },
        "required": ["action"],
        "additionalProperties": False,
    }


class ToolDef(NamedTuple):
    """One MCP tool: its name, description, input schema and the handler of its arguments
    as sent."""

    name: str
    description: str
    schema: dict[str, Any]
    handler: Handler


def start_tool(service: TodoService) -> ToolDef:
    def start(a: dict[str, Any]) -> dict[str, Any]:
        _known(a, start_schema())
        if a.get("action") == "prepare":
            return service.prepare(
                a.get("workflowId"),
                a.get("parentExecutionId"),
                a.get("tasks"),
                a.get("goal"),
                a.get("workspace"),
                a.get("fastPathOnly"),
            )
        if a.get("action") == "execute":
            return service.execute(a.get("startAttemptId"))
        raise ServeError("action must be `prepare` or `execute`")

    served = [*service.workflows.ids(), *(a for a, to in ALIASES.items() if to in service.workflows.sources)]
    description = "Start a workflow: `prepare` it (returns a startAttemptId), then `execute` it once."
    return ToolDef("start", description, start_schema(sorted(served)), start)


STEP = (
    "Apply one reply to the current node of a process. "
    "intake: `tasks` + `progress_checklist_outcome`. "
    "work: `evidence` + `progress_execution_outcome` after doing and checking the task yourself; "
    "or, as the orchestrator of a todo_task step, a decision (`next_action`: delegate to a route or the "
    "generic agent with complete instructions, or continue); or `teleportTo: teleport-revise-tasks` when "
    "the checklist is wrong. "
    "delegated (the sub-agent's turn): `evidence` + `progress_execution_outcome`, or `failed`. "
    "revise: `tasks`, `resume_from_task`, `progress_checklist_outcome`, `progress_execution_outcome`. "
    "Returns the next directive, or {completed: true, result: {}}."
)


def step_tool(service: TodoService) -> ToolDef:
    def step(a: dict[str, Any]) -> dict[str, Any]:
        reply = {k: v for k, v in a.items() if k not in PROCESS and v is not None}
        return service.step(a.get("processId"), a.get("attemptId"), reply)

    return ToolDef("step", STEP, step_schema(), step)


TODO_TOOLS: list[tuple[str, type[BaseModel], str]] = [
    (
        "create_todo",
        CreateTodoReply,
        "Append a todo at the end of the current checklist (positions stay as they are).",
    ),
    (
        "update_todo",
        UpdateTodoReply,
        "Set a todo's status (in_progress or blocked) and notes. "
        "A delegated sub-agent may update only its own todo.",
    ),
    (
        "complete_todo",
        CompleteTodoReply,
        "Confirm the current todo with evidence (`result` is the outcome shown). A delegated sub-agent "
        "completes its own todo this way; a route's answer is prevalidated first.",
    ),
]


def todo_tool(service: TodoService, name: str, model: type[BaseModel], description: str) -> ToolDef:
    """A todo tool that writes: one journaled step, `{name: arguments}` as the reply."""

    def call(a: dict[str, Any]) -> dict[str, Any]:
        arguments = {k: v for k, v in a.items() if k not in PROCESS}
        return service.step(a.get("processId"), a.get("attemptId"), {name: arguments})

    return ToolDef(name, description, tool_schema(model), call)


def list_todos_tool(service: TodoService) -> ToolDef:
    schema = tool_schema(None, process_only=True)

    def list_todos(a: dict[str, Any]) -> dict[str, Any]:
        _known(a, schema)
        return service.todos(a.get("processId"))

    return ToolDef("list_todos", "The current step's todos, in the todos.json format.", schema, list_todos)


def get_todo_tool(service: TodoService) -> ToolDef:
    schema = tool_schema(None, process_only=True)
    schema["properties"]["todo_id"] = {
        "type": "string",
        "pattern": "^todo_[1-9][0-9]{0,2}$",
        "description": "The todo, `todo_<N>`.",
    }
    schema["required"].append("todo_id")

    def get_todo(a: dict[str, Any]) -> dict[str, Any]:
        _known(a, schema)
        return service.todos(a.get("processId"), a.get("todo_id") or "")

    return ToolDef("get_todo", "One todo of the current step, in the todos.json format.", schema, get_todo)


def status_tool(service: TodoService) -> ToolDef:
    schema = {
        "type": "object",
        "properties": {
            "processId": {**PROCESS["processId"], "description": "A process id; omit to list runs."}
        },
        "additionalProperties": False,
    }

    def status(a: dict[str, Any]) -> dict[str, Any]:
        _known(a, schema)
        card = service.status(a.get("processId"))
        if "process_id" in card:  # the card's own spelling; every tool says processId
            card = {"processId": card.pop("process_id"), **card}
        return card

    description = "The run card of a process (Checklist -> Prepare -> Work), or every run."
    return ToolDef("status", description, schema, status)


def tools(service: TodoService) -> list[ToolDef]:
    """Every tool the server offers, in the order a client lists them."""
    todo_tools = [todo_tool(service, *spec) for spec in TODO_TOOLS]
    return [
        start_tool(service),
        step_tool(service),
        *todo_tools,
        list_todos_tool(service),
        get_todo_tool(service),
        status_tool(service),
    ]


def _known(arguments: dict[str, Any], schema: dict[str, Any]) -> None:
    unknown = sorted(set(arguments) - set(schema["properties"]))
    if unknown:
        names = ", ".join(f"`{name}`" for name in unknown)
        raise ServeError(
            f"{names} is not an argument of this tool: it takes "
            + ", ".join(f"`{p}`" for p in schema["properties"])
        )


TITLES = {  # what a client shows for each tool
    "start": "Start a workflow",
    "step": "Reply to the current directive",
    "create_todo": "Create a todo",
    "update_todo": "Update a todo",
    "complete_todo": "Complete the current todo",
    "list_todos": "List the todos",
    "get_todo": "Get one todo",
    "status": "Run status",
}
READ_ONLY = ("status", "list_todos", "get_todo")  # the tools that change nothing


def build_server(service: TodoService) -> Any:
    from importlib.metadata import version

    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.server.mcpserver.tools import Tool
    from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase
    from mcp_types import ToolAnnotations

    class Arguments(ArgModelBase):
        """The arguments as sent, for the engine to validate (the published schema says
        what is accepted; the engine refuses the rest, in its own words)."""

        model_config = ConfigDict(extra="allow", arbitrary_types_allowed=True)

        def model_dump_one_level(self) -> dict[str, Any]:
            return {"arguments": _json_strings(dict(self.__pydantic_extra__ or {}))}

    turns = Turns()

    def tool(name: str, description: str, schema: dict[str, Any], handler: Handler) -> Any:
        def answer(arguments: dict[str, Any]) -> dict[str, Any]:
            try:
                return handler(arguments)
            except TodoflowError as error:  # a refusal, a database out of reach: said, not a crash
                raise ToolError(str(error)) from None
            except OSError as error:  # out of descriptors mid-step: said, and the server goes on
                if error.errno not in OUT_OF_FILES:
                    raise
                raise ToolError(str(out_of_files(error, len(service.engines)))) from None

        async def run(arguments: dict[str, Any]) -> dict[str, Any]:
            # async, so the run's turn is taken on the event loop in arrival order
            return await turns.run(arguments.get("processId"), lambda: answer(arguments))

        made = Tool.from_function(
            run,
            name=name,
            title=TITLES[name],
            description=description,
            annotations=ToolAnnotations(title=TITLES[name], read_only_hint=name in READ_ONLY),
        )
        made.fn_metadata = _answering()(arg_model=Arguments, output_schema=made.fn_metadata.output_schema)
        made.parameters = schema
        return made

    made = [tool(*spec) for spec in tools(service)]
    # warnings and errors only: stderr carries the access log, not the SDK's info lines
    server = MCPServer(
        "todoflow", version=version("todoflow"), instructions=INSTRUCTIONS, tools=made, log_level="WARNING"
    )
    add_resources(server, service)
    add_prompts(server, service)
    return server


@cache
def _answering() -> type[Any]:
    """The SDK's `FuncMetadata`, answering as the SDK would (the same structured content, and
    its JSON as the text block, for clients that read only text) minus its work that changes
    nothing here: validating and copying a dict as a dict, and indenting its text (a
    directive of ~3.7 kB, twice on the wire)."""
    import pydantic_core
    from mcp.server.mcpserver.utilities.func_metadata import FuncMetadata
    from mcp_types import CallToolResult, TextContent

    class Answering(FuncMetadata):
        def convert_result(self, result: Any) -> Any:
            text = pydantic_core.to_json(result, fallback=str).decode()
            return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=result)

    return Answering


def _said(read: Callable[[], str]) -> str:
    """`read()`, a todoflow error turned into the SDK's resource error (its words kept)."""
    from mcp.server.mcpserver.exceptions import ResourceError

    try:
        return read()
    except TodoflowError as error:
        raise ResourceError(str(error)) from None


def add_resources(server: MCPServer, service: TodoService) -> None:
    """The runs and workflows as resources: a list, and templates for one of each."""
    json_type, text, html = "application/json", "text/plain", "text/html"

    @server.resource(resources.RUNS, name="runs", description="Every run, its status.", mime_type=json_type)
    def runs() -> str:
        return _said(lambda: resources.runs(service))

    @server.resource(resources.RUN, name="run", description="A run's card, as `status`.", mime_type=json_type)
    def run(processId: str) -> str:  # noqa: N803 (the URI's own name)
        return _said(lambda: resources.run_card(service, processId))

    @server.resource(resources.RUN_LOG, name="run log", description="A run's execution log.", mime_type=text)
    def run_log(processId: str) -> str:  # noqa: N803
        return _said(lambda: resources.run_log(service, processId))

    @server.resource(resources.RUN_REPORT, name="run report", description="A run's report.", mime_type=html)
    def run_report(processId: str) -> str:  # noqa: N803
        return _said(lambda: resources.run_report_html(service, processId))

    @server.resource(
        resources.WORKFLOW,
        name="workflow",
        description="A workflow's source, its steps and its plan canvas as Mermaid.",
        mime_type=json_type,
    )
    def workflow(workflowId: str) -> str:  # noqa: N803
        return _said(lambda: resources.workflow(service, workflowId))


def _asked(make: Callable[[], str]) -> str:
    """`make()`, a todoflow error turned into a JSON-RPC error with its words (the SDK
    says only "Error rendering prompt" of any other)."""
    from mcp.shared.exceptions import MCPError
    from mcp_types import INVALID_PARAMS

    try:
        return make()
    except TodoflowError as error:
        raise MCPError(INVALID_PARAMS, str(error)) from None


def add_prompts(server: MCPServer, service: TodoService) -> None:
    @server.prompt(name="run_workflow", description="Run a workflow to its end with the todoflow tools.")
    def run_workflow(workflowId: str, goal: str | None = None) -> str:  # noqa: N803
        return _asked(lambda: resources.run_workflow(service, workflowId, goal))

    @server.prompt(name="review_run", description="Review a run from its card and execution log.")
    def review_run(processId: str) -> str:  # noqa: N803
        return _asked(lambda: resources.review_run(service, processId))


def _json_strings(arguments: dict[str, Any]) -> dict[str, Any]:
    """Some clients send a list or an object as a JSON string: read those back."""
    out = dict(arguments)
    for name, value in arguments.items():
        if isinstance(value, str) and value[:1] in "[{":
            try:
                parsed = json.loads(value)
            except ValueError:
                continue
            if isinstance(parsed, list | dict):
                out[name] = parsed
    return out


def serve(service: TodoService, http: HttpOptions | None = None) -> None:
    """Serve `service` over stdio, or over Streamable HTTP with `http`; the runs are closed
    when the server stops (SIGTERM, SIGINT, the client's end of stdio)."""
    import anyio

    server = build_server(service)
    try:
        if http is None:
            anyio.run(serve_stdio, server)
        else:
            anyio.run(serve_http, server, service, http)
    finally:
        service.close()
        service.runs.close()


async def serve_stdio(server: Any) -> None:
    """The SDK's stdio transport, with one change: a line that is not a JSON-RPC message
    (invalid JSON, a lone surrogate, a message without its fields) gets the JSON-RPC error
    it calls for, instead of no answer at all (the SDK drops it, so the client waits
    forever; docs/mcp.md, known issues). Where stdin and stdout are pipes, the server
    reads and answers them on the event loop itself (`pipes`)."""
    from mcp.server.stdio import stdio_server
    from mcp.shared.message import SessionMessage

    answers: list[Any] = []  # the stream a refusal is written on, once there is one

    async def refuse(error: Exception) -> None:
        await answers[0].send(SessionMessage(_error_for(error)))

    lowlevel = server._lowlevel_server  # what MCPServer.run_stdio_async runs, over these streams
    options = lowlevel.create_initialization_options()
    async with pipes.claimed(refuse) as wire:
        if wire is not None:
            answers.append(wire[1])
            await lowlevel.run(*wire, options)
            return
        async with stdio_server() as (read_stream, write_stream):
            answers.append(write_stream)
            await lowlevel.run(_Readable(read_stream, refuse), write_stream, options)


class _Readable(pipes.Receiving):
    """The SDK's read stream without what it could not read: each such line goes to
    `refuse` and the next message is read."""

    def __init__(self, stream: Any, refuse: pipes.Refuse) -> None:
        self._stream, self._refuse = stream, refuse

    @property
    def last_context(self) -> Any:
        return getattr(self._stream, "last_context", None)

    async def receive(self) -> Any:
        while isinstance(item := await self._stream.receive(), Exception):
            await self._refuse(item)
        return item

    async def aclose(self) -> None:
        await self._stream.aclose()


def _error_for(error: Exception) -> Any:
    """The JSON-RPC error for a line that could not be read: -32700 (parse error) with a
    null id, or -32600 (invalid request) with the request's id when it has one."""
    import mcp_types as types
    from pydantic import ValidationError

    problem = error.errors()[0] if isinstance(error, ValidationError) and error.errors() else None
    given = problem.get("input") if problem else None
    if isinstance(given, str):
        try:
            given = json.loads(given)  # Python reads what pydantic refused (a lone surrogate)
        except ValueError:
            given = None
    request_id = given["id"] if isinstance(given, dict) and isinstance(given.get("id"), int | str) else None
    if problem is not None and problem["type"] == "json_invalid":
        code, message = -32700, f"Parse error: {problem['msg']}"
    else:
        code, message = -32600, f"Invalid request: {problem['msg'] if problem else error}"
    return types.JSONRPCError(jsonrpc="2.0", id=request_id, error=types.ErrorData(code=code, message=message))
