"""The orchestrator at run time (seeds/todo-task-plan-step.md), through the passive engine:
delegation to routes and the generic agent, prevalidation, learnings, the todo tools,
the bound on turns, and the LLM each agent should use."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from todoflow.runtime import process
from todoflow.runtime.directive import TYPED
from todoflow.runtime.engine import Engine, Refusal
from todoflow.runtime.llm_choice import LlmChoices, select_llm
from todoflow.runtime.plan import AgentConfigs, Llm
from todoflow.runtime.store.folder import FolderLearnings

from ..support.runtime_helpers import confirm, events, intake, start

FLOW = """\
workflow w "W" {
    todo_task build "Build" {
        description "Build and document the thing."
        max_turns 8
        llm vertex "gemini-2.5-pro"
        route compile "Compile" when "To compile the sources" {
            regular compiler "Compiler" {
                description "Compile the sources into dist/."
                success "dist/app exists"
                output "dist/app"
                expect file "dist/app"
                llm openai "gpt-4.1-mini"
            }
        }
        route docs "Docs" when "To write the docs" {
            regular writer "Writer" {
                description "Write README.md."
                expect file "README.md"
            }
        }
    }
}
"""
NO_GENERIC = FLOW.replace("        max_turns 8\n", "        max_turns 8\n        generic off\n")


def _delegate(todo: str = "todo_1", route: str | None = "compile", **more: Any) -> dict[str, Any]:
    reply: dict[str, Any] = {
        "next_action": "delegate",
        "todo_id_to_execute": todo,
        "instructions_to_sub_agent": "Run make; put the binary in dist/app.",
        "success_criteria_for_sub_agent": "dist/app exists and runs",
        "selection_reasoning": "compiling is the compile route's job",
        "progress_summary": "0 of 2 done",
    }
    if route is None:
        reply["use_generic_agent"] = True
    else:
        reply["selected_route_id"] = route
    return reply | more


def _step(engine: Engine, reply: dict[str, Any]) -> Any:
    return engine.step(engine.directive().attempt_id, reply)


def _refused(engine: Engine, reply: dict[str, Any]) -> str:
    with pytest.raises(Refusal) as caught:
        _step(engine, reply)
    return caught.value.reason


def _started(tmp_path: Path, source: str = FLOW) -> Engine:
    engine, _ = start(tmp_path, source)
    _step(engine, intake("compile it", "document it"))
    return engine


def test_a_delegation_to_a_route_is_prevalidated_then_recorded_as_a_learning(tmp_path: Path) -> None:
    engine = _started(tmp_path)
    directive = _step(engine, _delegate())
    assert (directive.node, directive.role) == ("delegated", "Sub-agent compile · Task 1/2")
    # the sub-agent's small context: the instructions, its sub-step, nothing else of the turn
    context = directive.sub_agent_context()
    assert context["instructions"] == "Run make; put the binary in dist/app."
    assert context["step"]["id"] == "compiler" and context["step"]["expected_files"] == ["dist/app"]
    prompt = directive.prompt()
    assert "Run make" in prompt and "document it" not in prompt and "compile it" not in prompt
    assert directive.llm.rule == "step execution_llm" and str(directive.llm.llm) == "openai:gpt-4.1-mini"

    failed = _step(engine, confirm(1))  # dist/app is not there: the delegation failed
    assert (failed.node, failed.role) == ("work", "Task 1/2")
    assert failed.to_json()["last_delegation"] == {
        "todo_id": "todo_1",
        "agent": "compile",
        "passed": False,
        "reason": "prevalidation failed: `dist/app` does not exist in the workspace",
    }
    _step(engine, _delegate())
    (tmp_path / "workspace" / "dist").mkdir()
    (tmp_path / "workspace" / "dist" / "app").write_text("binary")
    passed = _step(engine, {"evidence": "make printed OK", "progress_execution_outcome": "built dist/app"})
    assert (passed.node, passed.role, passed.to_json()["last_delegation"]["passed"]) == (
        "work",
        "Task 2/2",
        True,
    )
    engine.close()

    (learning,) = FolderLearnings(tmp_path / "workspace" / "learnings").records("compiler")
    assert (learning.route_id, learning.todo_id, learning.status) == ("compile", "todo_1", "active")
    assert learning.instructions == "Run make; put the binary in dist/app."
    assert learning.evidence == "make printed OK" and learning.files[0].path == "dist/app"
    assert learning.id == f"p-1:{learning.seq}"
    folder = tmp_path / "runs" / "p-1"
    kinds = [e["event"] for e in events(folder)]
    assert kinds.count("TodoTaskRouteSelected") == 2
    validated = [e for e in events(folder) if e["event"] == "TodoTaskDelegationValidated"]
    assert [v["passed"] for v in validated] == [False, True]
    completed = next(e for e in events(folder) if e["event"] == "TodoTaskItemCompleted")
    assert (completed["completed_by"], completed["agent"]) == ("orchestrator", "compile")
    todos = json.loads((folder / "todos" / "build.json").read_text())
    assert todos["todos"][0]["assigned_agent"] == "compile" and todos["todos"][0]["status"] == "completed"


def test_each_reader_of_a_prompt_is_told_the_tool_it_has(tmp_path: Path) -> None:
    """Issue 26: the work and sub-agent prompts said `complete_todo` and `report_failure`
    to every reader; an MCP client confirms through `step` (a person by typing), so each
    is told its own way, and the LLM agent's prompt stays as it was."""
    engine = _started(tmp_path)
    work = engine.directive()
    assert "Confirm with `complete_todo`:\n`evidence` (concrete proof for this task) and `result`" in (
        work.prompt()
    )
    mcp = work.to_json()["prompt"]
    assert "Confirm with the `step` tool:\n`evidence` (concrete proof for this task) and " in mcp
    assert "`progress_execution_outcome` (a short display summary)" in mcp and "complete_todo" not in mcp
    delegated = _step(engine, _delegate())
    sub_mcp = delegated.to_json()["prompt"]
    assert "confirm with the `step` tool: `evidence`" in sub_mcp
    assert "call `step` with `failed`: the reason." in sub_mcp
    assert "complete_todo" not in sub_mcp and "report_failure" not in sub_mcp
    sub_llm = delegated.prompt()
    assert "confirm with `complete_todo`: `evidence`" in sub_llm
    assert "call `report_failure` with the reason." in sub_llm
    sub_person = delegated.prompt(TYPED)
    assert "confirm with what you type: the evidence (concrete proof" in sub_person
    assert "type `failed <reason>`." in sub_person and "`step`" not in sub_person
    assert "complete_todo" not in sub_person and "report_failure" not in sub_person
    engine.close()


def test_the_generic_agent_has_no_prevalidation_and_no_learning(tmp_path: Path) -> None:
    engine = _started(tmp_path)
    directive = _step(engine, _delegate(route=None))
    assert directive.role == "Generic agent · Task 1/2"
    assert directive.sub_agent_context()["learnings"] == []
    done = _step(engine, confirm(1))
    assert done.role == "Task 2/2"
    engine.close()
    assert FolderLearnings(tmp_path / "workspace" / "learnings").records() == []
    assert "TodoTaskDelegationValidated" not in [e["event"] for e in events(tmp_path / "runs" / "p-1")]


def test_a_learning_is_written_once_whoever_else_appends_or_rewrites_the_file(tmp_path: Path) -> None:
    engine = _started(tmp_path)
    _step(engine, _delegate())
    (tmp_path / "workspace" / "dist").mkdir()
    (tmp_path / "workspace" / "dist" / "app").write_text("binary")
    _step(engine, {"evidence": "make printed OK", "progress_execution_outcome": "built dist/app"})
    engine.close()
    folder = FolderLearnings(tmp_path / "workspace" / "learnings")
    (learning,) = folder.records("compiler")
    mine, theirs = FolderLearnings(folder.root), FolderLearnings(folder.root)
    assert not mine.add(learning)  # already there
    other = learning.model_copy(update={"id": "p-2:7", "process_id": "p-2"})
    assert theirs.add(other)
    assert not mine.add(other)  # what another writer appended since is read
    path = folder.file("compiler")
    path.write_text(path.read_text().splitlines()[0] + "\n")  # shortened: read again from its start
    assert mine.add(other) and not theirs.add(other)
    path.unlink()  # replaced
    assert mine.add(learning)
    with path.open("a") as handle:
        handle.write('{"id": "p-3:1", "status": "act')  # a writer killed mid-line
    assert theirs.add(other)
    assert [r.id for r in folder.records("compiler")] == [learning.id, other.id]


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (_delegate(todo="todo_2"), "todo_id_to_execute is `todo_2`; the current todo is todo_1"),
        (
            _delegate(route="nope"),
            "selected_route_id `nope` is not a route of step `build` (routes: `compile`, `docs`)",
        ),
        (_delegate(use_generic_agent=True), "give selected_route_id or use_generic_agent: true, not both"),
        (
            _delegate(route=""),
            "a delegation needs selected_route_id (a route of this step) or use_generic_agent: true",
        ),
        (_delegate(instructions_to_sub_agent=" "), "instructions_to_sub_agent is empty"),
        (_delegate(todo="todo_9"), "there is no `todo_9`: the checklist holds todo_1 to todo_2"),
        (
            {"next_action": "complete", "completion_reason": "done"},
            "next_action `complete` is refused: 2 of 2 todos are not confirmed yet (todo_1 is current); "
            "confirm or delegate them, and the step completes by itself after the last",
        ),
        ({"next_action": "finish"}, "next_action must be `delegate`, `continue` or `complete`"),
    ],
)
def test_decisions_that_break_a_rule_are_refused_and_change_nothing(
    tmp_path: Path, reply: dict[str, Any], reason: str
) -> None:
    engine = _started(tmp_path)
    before = engine.directive()
    assert _refused(engine, reply) == reason
    assert engine.directive().attempt_id == before.attempt_id


def test_the_generic_agent_is_refused_when_the_step_says_generic_off(tmp_path: Path) -> None:
    engine = _started(tmp_path, NO_GENERIC)
    reason = _refused(engine, _delegate(route=None))
    assert reason == "step `build` does not allow the generic agent (`generic off`); choose a route"


def test_a_sub_agent_that_gives_up_hands_the_todo_back(tmp_path: Path) -> None:
    engine = _started(tmp_path)
    _step(engine, _delegate(route="docs"))
    assert _refused(engine, _delegate()).startswith("`next_action`")  # not the orchestrator's turn
    back = _step(engine, {"failed": "the docs tool is down"})
    assert back.node == "work" and back.to_json()["last_delegation"]["reason"] == "the docs tool is down"
    failed = [e for e in events_after_close(engine) if e["event"] == "TodoTaskDelegationFailed"]
    assert failed[0]["reason"] == "the docs tool is down" and failed[0]["agent"] == "docs"


def events_after_close(engine: Engine) -> list[dict[str, Any]]:
    engine.close()
    return events(engine.store.folder)  # type: ignore[attr-defined]


def test_turns_are_bounded_and_the_bound_can_be_raised(tmp_path: Path) -> None:
    engine = _started(tmp_path)
    for _ in range(8):
        _step(engine, {"next_action": "continue", "selection_reasoning": "reading the sources"})
    directive = engine.directive()
    assert directive.blocked == (
        "step `build` has used all 8 of its orchestrator turns (execution_max_turns 8); "
        f"raise the bound to go on: `todoflow run --resume {engine.process_id} --max-turns 16`"
    )
    assert _refused(engine, confirm(1)) == directive.blocked
    raised = engine.raise_turns(directive.attempt_id, 10)
    assert raised.blocked is None and raised.to_json()["turns"] == {"used": 8, "allowed": 10}
    assert _step(engine, confirm(1)).role == "Task 2/2"


def test_todo_tools_create_update_and_complete(tmp_path: Path) -> None:
    engine = _started(tmp_path)
    _step(engine, {"create_todo": {"title": "release it", "description": "v1 is tagged", "priority": "high"}})
    assert engine.directive().state.total == 3
    _step(engine, {"update_todo": {"todo_id": "todo_1", "status": "blocked", "notes": "waiting for the CI"}})
    listed = json.loads(engine.todos())
    assert [t["status"] for t in listed["todos"]] == ["blocked", "pending", "pending"]
    assert listed["todos"][0]["notes"] == "waiting for the CI" and listed["todos"][2]["priority"] == "high"
    assert _refused(engine, {"complete_todo": {"todo_id": "todo_2", "result": "r", "evidence": "e"}}) == (
        "todo_id is `todo_2`; the current todo is todo_1"
    )
    done = _step(
        engine, {"complete_todo": {"todo_id": "todo_1", "result": "compiled", "evidence": "make ok"}}
    )
    assert done.role == "Task 2/3"
    assert _refused(engine, {"update_todo": {"todo_id": "todo_1", "notes": "x"}}) == (
        "todo_id `todo_1` is completed; update_todo changes open todos only"
    )
    _step(engine, _delegate(todo="todo_2", route="docs"))
    assert _refused(engine, {"update_todo": {"todo_id": "todo_3", "notes": "x"}}).startswith(
        "todo_id `todo_3` is not yours"
    )
    assert _refused(engine, {"create_todo": {"title": "a", "description": "b"}}).startswith(
        "create_todo is not possible here"
    )
    _step(engine, {"update_todo": {"todo_id": "todo_2", "notes": "writing"}})
    updated = [e for e in events_after_close(engine) if e["event"] == "TodoTaskItemUpdated" and e["notes"]]
    assert [(e["todo_id"], e["agent"]) for e in updated] == [("todo_1", "orchestrator"), ("todo_2", "docs")]
    created = [e for e in events(engine.store.folder) if e["event"] == "TodoTaskItemCreated"]  # type: ignore[attr-defined]
    assert created[-1]["todo_id"] == "todo_3" and created[-1]["priority"] == "high"


def test_a_run_reopened_mid_delegation_is_the_same_run(tmp_path: Path) -> None:
    engine = _started(tmp_path)
    live = _step(engine, _delegate())
    engine.close()
    reopened, _ = process.open_process(tmp_path / "runs", "p-1")
    again = reopened.directive()
    assert again.state == live.state and again.prompt() == live.prompt()
    reopened.close()


def test_the_orchestrator_turn_carries_the_routes_the_todo_and_the_turns(tmp_path: Path) -> None:
    engine = _started(tmp_path)
    data = engine.directive().to_json()
    assert data["todo_id"] == "todo_1" and data["generic_agent"] is True
    assert [r["route_id"] for r in data["routes"]] == ["compile", "docs"]
    assert data["routes"][0]["sub_step"]["expected_files"] == ["dist/app"]
    assert data["turns"] == {"used": 0, "allowed": 8} and data["last_delegation"] is None
    assert data["llm"] == {"provider": "vertex", "model_id": "gemini-2.5-pro", "rule": "step execution_llm"}
    assert data["prompt"].startswith("You are the orchestrator of step `build`")


STEP = Llm("vertex", "step-model")
CONDITIONAL = Llm("vertex", "conditional-model")
PRESET = Llm("openai", "preset-model")
DEFAULT = Llm("ollama", "default-model")


@pytest.mark.parametrize(
    ("kind", "configs", "choices", "rule"),
    [
        # standard agents (orchestrator, route sub-agent, generic): step > preset > default
        ("standard", AgentConfigs(execution_llm=STEP), LlmChoices(PRESET, DEFAULT), "step execution_llm"),
        ("standard", AgentConfigs(conditional_llm=CONDITIONAL), LlmChoices(PRESET, DEFAULT), "preset"),
        ("standard", AgentConfigs(), LlmChoices(None, DEFAULT), "default"),
        ("standard", AgentConfigs(), LlmChoices(), "none"),
        # conditional agents: conditional > step execution > preset > default
        (
            "conditional",
            AgentConfigs(execution_llm=STEP, conditional_llm=CONDITIONAL),
            LlmChoices(PRESET, DEFAULT),
            "step conditional_llm",
        ),
        ("conditional", AgentConfigs(execution_llm=STEP), LlmChoices(PRESET, DEFAULT), "step execution_llm"),
        ("conditional", AgentConfigs(), LlmChoices(PRESET, DEFAULT), "preset"),
        ("conditional", AgentConfigs(), LlmChoices(None, DEFAULT), "default"),
    ],
)
def test_llm_selection_follows_the_seeds_priority(
    kind: Any, configs: AgentConfigs, choices: LlmChoices, rule: str
) -> None:
    chosen = {
        "step execution_llm": STEP,
        "step conditional_llm": CONDITIONAL,
        "preset": PRESET,
        "default": DEFAULT,
        "none": None,
    }
    selection = select_llm(kind, configs, choices)
    assert (selection.rule, selection.llm) == (rule, chosen[rule])
