"""The Python API of the runtime: start a run, step it, resume it elsewhere."""

from __future__ import annotations

from pathlib import Path

import pytest

import todoflow
from todoflow.runtime.engine import Refusal
from todoflow.runtime.plan import PlanError

from ..conftest import FIXTURES, ROOT

FLOW = 'workflow w "W" {\n    todo_task t "T" {\n        description "Tidy up."\n    }\n}\n'


def test_start_step_and_resume(tmp_path: Path) -> None:
    with todoflow.start(FLOW, run_dir=tmp_path / "runs", workspace=tmp_path) as engine:
        directive = engine.directive()
        assert directive.node == "intake"
        tasks = [
            {"action": "sweep", "expected_result": "clean"},
            {"action": "mop", "expected_result": "shiny"},
        ]
        directive = engine.step(directive.attempt_id, {"tasks": tasks, "progress_checklist_outcome": "two"})
        process_id = engine.process_id
    with todoflow.resume(process_id, run_dir=tmp_path / "runs") as again:
        assert again.directive().role == "Task 1/2"
        with pytest.raises(Refusal, match="evidence is empty"):
            again.step(directive.attempt_id, {"evidence": " ", "progress_execution_outcome": "ok"})
        for n in range(2):
            directive = again.step(
                again.directive().attempt_id, {"evidence": f"e{n}", "progress_execution_outcome": "ok"}
            )
        assert directive.completed


def test_start_with_a_ready_list_and_from_a_legacy_plan(tmp_path: Path) -> None:
    ready = [{"action": "Test", "expected_result": "green"}]
    with todoflow.start(FLOW, run_dir=tmp_path / "runs", tasks=ready) as engine:
        assert [t.action for t in engine.directive().ready_tasks or ()] == ["Test"]
    with todoflow.start(FIXTURES / "legacy" / "mixed" / "plan.json", run_dir=tmp_path / "runs") as engine:
        assert engine.directive().step is not None


def test_start_refuses_what_cannot_run(tmp_path: Path) -> None:
    with pytest.raises(todoflow.TodoflowError, match="need each other's result"):
        todoflow.start(FIXTURES / "invalid" / "task-cycles.todoflow", run_dir=tmp_path)
    with pytest.raises(PlanError, match="no todo_task step"):
        todoflow.start(ROOT / "tests" / "fixtures" / "valid" / "minimal.todoflow", run_dir=tmp_path, tasks=[])


def test_a_program_drives_a_run_with_a_model_through_the_api(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`todoflow.run(..., agent="llm")`: the models and providers of the options and
    todoflow.toml, as `todoflow run --agent llm` reads them; `todoflow.start` records the
    agent and the models with the run, so a resume drives it the same way."""
    import io
    import json

    from ..support.fake_model import FakeModel

    (tmp_path / "flow.todoflow").write_text(
        'workflow w "W" {\n    regular a "A" {\n        description "Say hello."\n    }\n}\n'
    )
    monkeypatch.setenv("FAKE_KEY", "k")
    answer = {
        "tool": "complete_todo",
        "arguments": {"todo_id": "todo_1", "result": "hi", "evidence": "said hi"},
    }
    with FakeModel([answer]) as fake:
        (tmp_path / "todoflow.toml").write_text(
            f'[llm.providers.fake]\nbase_url = "{fake.url}"\napi_key_env = "FAKE_KEY"\n'
        )
        out = io.StringIO()
        done = todoflow.run(
            tmp_path / "flow.todoflow",
            run_dir=tmp_path / "runs",
            workspace=tmp_path,
            llm="fake:tiny",
            out=out,
        )
    assert done.outcome == "complete" and fake.unused() == 0 and "-> complete" in out.getvalue()
    assert fake.requests[0]["body"]["model"] == "tiny"
    meta = json.loads((tmp_path / "runs" / done.process_id / "run.json").read_text())
    assert (meta["agent"], meta["llm"]) == ("llm", "fake:tiny")
    with todoflow.start(
        tmp_path / "flow.todoflow",
        run_dir=tmp_path / "runs",
        agent="llm",
        llm="fake:tiny",
        preset_llm="fake:big",
    ) as engine:
        started = json.loads((tmp_path / "runs" / engine.process_id / "run.json").read_text())
        assert engine.directive().llm is not None and engine.directive().llm.llm is not None
    assert (started["agent"], started["llm"], started["preset_llm"]) == ("llm", "fake:tiny", "fake:big")
    with pytest.raises(todoflow.TodoflowError, match="unknown agent `robot`"):
        todoflow.run(tmp_path / "flow.todoflow", agent="robot", run_dir=tmp_path / "runs")
