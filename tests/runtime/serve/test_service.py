"""The MCP protocol's service (`runtime.service`), called as its tools call it: bounded
inputs, strict types, expiring starts, confined workspaces, workflows that cannot be
served, and a bounded number of open runs (issues 11 and 12)."""

from __future__ import annotations

import errno
import os
import time
from pathlib import Path
from typing import Any

import pytest

from todoflow.dsl.diagnostics import TodoflowError
from todoflow.runtime.serve import service as service_module
from todoflow.runtime.serve.service import ServeError, TodoService, Workflows

FLOW = 'workflow w "W" {\n    todo_task t "T" {\n        description "Tidy up."\n    }\n}\n'


def _service(tmp_path: Path, folders: list[Path] | None = None) -> TodoService:
    workspace = tmp_path / "workspace"
    workspace.mkdir(exist_ok=True)
    return TodoService(Workflows(folders or []), tmp_path / "runs", workspace)


def _started(service: TodoService, **prepare: Any) -> dict[str, Any]:
    prepared = service.prepare("todo-list", "none", None, prepare.pop("goal", "Tidy"), **prepare)
    return service.execute(prepared["startAttemptId"])


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"goal": "g" * 10_000_000}, "goal is 10,000,000 characters; at most 4,000"),
        ({"parent": "p" * 1000}, "parentExecutionId is 1,000 characters; at most 200"),
        ({"workflow_id": 7}, "workflowId must be a string, not int"),
    ],
)
def test_prepare_bounds_every_string(tmp_path: Path, arguments: dict[str, Any], problem: str) -> None:
    service = _service(tmp_path)
    call = {"workflow_id": "todo-list", "parent": "none", "tasks": None, "goal": None} | arguments
    with pytest.raises(ServeError, match=problem):
        service.prepare(**call)
    assert not (tmp_path / "runs" / ".starts").exists() or not list((tmp_path / "runs" / ".starts").iterdir())


def test_types_are_strict_not_coerced(tmp_path: Path) -> None:
    service = _service(tmp_path)
    directive = _started(service)
    tasks = [{"action": "a", "expected_result": "a done"}]
    directive = service.step(
        directive["processId"], directive["attemptId"], {"tasks": tasks, "progress_checklist_outcome": "one"}
    )
    teleported = service.step(
        directive["processId"], directive["attemptId"], {"teleportTo": "teleport-revise-tasks"}
    )
    for bad in ("2", True):
        revision = {
            "tasks": tasks,
            "resume_from_task": bad,
            "progress_checklist_outcome": "x",
            "progress_execution_outcome": "y",
        }
        with pytest.raises(ServeError, match="resume_from_task must be a whole number"):
            service.step(teleported["processId"], teleported["attemptId"], revision)
    service.close()


def test_unexecuted_starts_expire(tmp_path: Path) -> None:
    service = _service(tmp_path)
    old = service.prepare("todo-list", "none", None, None)["startAttemptId"]
    stale = tmp_path / "runs" / ".starts" / f"{old}.json"
    past = time.time() - service_module.START_TTL - 10
    os.utime(stale, (past, past))
    service.prepare("todo-list", "none", None, None)
    assert not stale.exists()
    with pytest.raises(ServeError, match=f"unknown startAttemptId `{old}`"):
        service.execute(old)


def test_a_run_workspace_must_be_inside_the_servers(tmp_path: Path) -> None:
    service = _service(tmp_path)
    (tmp_path / "workspace" / "project").mkdir()
    prepared = service.prepare("todo-list", "none", None, "g", workspace="project")
    assert prepared["workspace"] == str((tmp_path / "workspace" / "project").resolve())
    os.symlink(tmp_path, tmp_path / "workspace" / "escape")
    for outside in ("..", "/etc", "escape"):
        with pytest.raises(ServeError, match="outside the server's workspace"):
            service.prepare("todo-list", "none", None, "g", workspace=outside)


def test_files_that_cannot_be_served_stop_nothing(tmp_path: Path) -> None:
    flows = tmp_path / "flows"
    flows.mkdir()
    (flows / "good.todoflow").write_text(FLOW.replace("workflow w", "workflow good"))
    (flows / "latin1.todoflow").write_bytes(b'workflow latin "\xe9t\xe9" {\n}\n')
    (flows / "folder.todoflow").mkdir()
    (flows / "one.todoflow").write_text(FLOW.replace("workflow w", "workflow twin"))
    (flows / "two.todoflow").write_text(FLOW.replace("workflow w", "workflow twin"))
    workflows = Workflows([flows])
    assert workflows.ids() == ["good", "todo-list"]
    assert "not UTF-8" in workflows.broken["latin"]
    assert "folder" in workflows.broken
    twin = workflows.broken["twin"]
    assert "one.todoflow" in twin and "two.todoflow" in twin and "rename one of them" in twin
    service = TodoService(workflows, tmp_path / "runs", tmp_path)
    assert any("twin" in problem for problem in service.status(None)["problems"])


def test_a_server_keeps_a_bounded_number_of_runs_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(service_module, "OPEN_ENGINES", 8)
    service = _service(tmp_path)
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(500):
        directive = _started(service)
        service.status(directive["processId"])
        service.status(directive["processId"].upper().lower())  # one engine per canonical id
    grown = len(os.listdir("/proc/self/fd")) - before
    assert grown <= 8 * 4 + 8, f"{grown} more file handles after 500 runs"
    with pytest.raises(ServeError, match="a process id is a plain name"):
        service.status("../runs/x")
    service.close()


@pytest.mark.parametrize("field", ["workspace", "goal", "workflow_id", "parent"])
def test_a_nul_in_any_string_is_refused_by_name(tmp_path: Path, field: str) -> None:
    service = _service(tmp_path)
    call = {"workflow_id": "todo-list", "parent": "none", "tasks": None, "goal": "g"}
    call[field] = "a\0b"
    name = {"workflow_id": "workflowId", "parent": "parentExecutionId"}.get(field, field)
    with pytest.raises(ServeError, match=rf"{name} contains a NUL character"):
        service.prepare(**call)
    with pytest.raises(ServeError, match="processId contains a NUL character"):
        service.step("p\0", "1-x", {})


def test_out_of_descriptors_the_idle_runs_are_closed_or_the_call_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 21 item 7: when opening a run finds no descriptor left, the server closes its
    idle runs and tries again; if there is still none, the call is refused in words and the
    server goes on."""
    service = _service(tmp_path)
    runs = [_started(service)["processId"] for _ in range(3)]
    service.engines.close()
    opened = service_module.process.open_process
    failures = {"left": 1}

    def scarce(*arguments: Any, **options: Any) -> Any:
        if failures["left"]:
            failures["left"] -= 1
            raise OSError(errno.EMFILE, "Too many open files")
        return opened(*arguments, **options)

    monkeypatch.setattr(service_module.process, "open_process", scarce)
    service.status(runs[0])
    service.status(runs[1])
    failures["left"] = 1
    assert service.status(runs[2])["directive"]["node"] == "intake"  # idle runs closed, then opened
    assert len(service.engines) == 1
    service.engines.close()
    failures["left"] = 2
    with pytest.raises(ServeError, match=r"^the server has run out of open files \(Too many open files; "):
        service.status(runs[0])
    assert service.status(runs[0])["directive"]["node"] == "intake"  # and it goes on
    service.close()


def test_a_low_descriptor_limit_keeps_fewer_runs_open(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(service_module.resource, "getrlimit", lambda _: (64, 4096))
    assert service_module.open_limit() == (64 - service_module.FDS_KEPT) // service_module.FDS_PER_RUN
    monkeypatch.setattr(service_module.resource, "getrlimit", lambda _: (1 << 20, 1 << 20))
    assert service_module.open_limit() == service_module.OPEN_ENGINES


def test_directives_name_the_preset_and_default_models_as_run_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 22: the seed's tiers 2 and 3 reach MCP directives: the server's `--preset-llm`
    and `--llm`, else the environment, else the workflow's own todoflow.toml."""
    monkeypatch.delenv("TODOFLOW_LLM", raising=False)
    monkeypatch.delenv("TODOFLOW_PRESET_LLM", raising=False)
    flows = tmp_path / "flows"
    flows.mkdir()
    (flows / "w.todoflow").write_text(FLOW)
    (flows / "todoflow.toml").write_text('[llm]\ndefault = "ollama:qwen3:8b"\n')
    workspace = tmp_path / "workspace"
    workspace.mkdir()

    def llm(models: tuple[str | None, str | None], workflow: str = "w") -> Any:
        service = TodoService(Workflows([flows]), tmp_path / "runs", workspace, None, models)
        prepared = service.prepare(workflow, "none", None, "Tidy")
        directive = service.execute(prepared["startAttemptId"])
        service.close()
        return directive["llm"]

    assert llm((None, "openai:gpt-4.1")) == {"provider": "openai", "model_id": "gpt-4.1", "rule": "preset"}
    assert llm(("openai:gpt-4.1-mini", None), "todo-list")["rule"] == "default"
    assert llm((None, None)) == {"provider": "ollama", "model_id": "qwen3:8b", "rule": "default"}
    assert llm((None, None), "todo-list")["rule"] == "none"  # the built-in flow has no configuration
    monkeypatch.setenv("TODOFLOW_PRESET_LLM", "anthropic:claude-sonnet-4")
    assert llm((None, None), "todo-list")["model_id"] == "claude-sonnet-4"
    with pytest.raises(TodoflowError, match="PROVIDER:MODEL"):
        TodoService(Workflows([]), tmp_path / "runs", workspace, None, ("gpt", None))
