"""The LLM agent against a fake OpenAI-compatible server on loopback (a real HTTP server;
the agent talks to it through the official `openai` package): its conversations, its
tools, refusals going back to the model, the model each agent is given, the quirks of
local servers, and that no key is ever written down."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from todoflow.runtime.agents.driver import drive
from todoflow.runtime.agents.llm import LlmAgent
from todoflow.runtime.agents.llm_config import LlmConfig, LlmConfigError, Provider, check_plan
from todoflow.runtime.llm_choice import LlmChoices
from todoflow.runtime.plan import Llm

from ...conftest import ROOT, run_cli
from ...support.fake_model import FakeModel
from ...support.runtime_helpers import events, read_journal, start

SECRET = "sk-test-0123456789-do-not-write-me"
FLOW = """\
workflow w "W" {
    llm fake "orchestrator-model"
    todo_task build "Build" {
        description "Build and document the app."
        route compile "Compile" when "To compile the sources" {
            regular compiler "Compiler" {
                description "Compile the sources into dist/app."
                expect file "dist/app"
                llm fake "compiler-model"
            }
        }
        tasks {
            "Compile it" => "dist/app exists"
            "Document it" => "README.md says how to run the app"
        }
    }
}
"""
TIDY = 'workflow w "W" {\n    llm fake "m"\n    todo_task t "T" {\n        description "Tidy."\n    }\n}\n'


def _call(tool: str, **arguments: Any) -> dict[str, Any]:
    return {"tool": tool, "arguments": arguments}


def _agent(fake: FakeModel, monkeypatch: pytest.MonkeyPatch, default: Llm | None = None) -> LlmAgent:
    monkeypatch.setenv("FAKE_KEY", SECRET)
    return LlmAgent(LlmConfig({"fake": Provider("fake", fake.url, "FAKE_KEY")}, LlmChoices(None, default)))


def _delegate() -> dict[str, Any]:
    return _call(
        "submit_todo_task_result",
        next_action="delegate",
        selected_route_id="compile",
        todo_id_to_execute="todo_1",
        instructions_to_sub_agent="Run make and put the binary in dist/app.",
        success_criteria_for_sub_agent="dist/app exists",
    )


def test_an_orchestration_driven_by_a_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    workspace = tmp_path / "workspace"

    def build(request: dict[str, Any]) -> dict[str, Any]:
        (workspace / "dist").mkdir(exist_ok=True)
        (workspace / "dist" / "app").write_text("binary")
        return _call(
            "complete_todo", result="built dist/app", evidence="make printed OK; dist/app is 6 bytes"
        )

    def document(request: dict[str, Any]) -> dict[str, Any]:
        (workspace / "README.md").write_text("run dist/app")
        return _call(
            "complete_todo",
            todo_id="todo_2",
            result="README written",
            evidence="README.md says: run dist/app",
        )

    script = [
        _call("submit_todo_task_result", next_action="complete", completion_reason="looks done"),  # refused
        _delegate(),
        _call("complete_todo", result="built", evidence="make ran"),  # prevalidation fails: no dist/app
        _delegate(),
        build,
        document,
    ]
    engine, store = start(tmp_path, FLOW)
    with FakeModel(script) as fake:
        outcome = drive(engine, _agent(fake, monkeypatch), io.StringIO())
    tokens = engine.directive().state.tokens
    engine.close()
    assert outcome == "complete" and fake.unused() == 0 and not fake.unexpected
    models = [request["body"]["model"] for request in fake.requests]
    assert models == [
        "orchestrator-model",
        "orchestrator-model",
        "compiler-model",
        "orchestrator-model",
        "compiler-model",
        "orchestrator-model",
    ]
    # the engine's refusal reached the model, word for word, as the tool's result
    assert "refused: next_action `complete` is refused: 2 of 2 todos are not confirmed yet" in fake.texts(1)
    # a sub-agent's conversation holds its small context only
    sub = fake.requests[2]["body"]["messages"]
    assert "Run make and put the binary in dist/app." in fake.texts(2)
    assert "Document it" not in fake.texts(2) and "orchestrator" not in json.dumps(sub).lower()
    assert [t["function"]["name"] for t in fake.requests[2]["body"]["tools"]] == [
        "complete_todo",
        "update_todo",
        "report_failure",
    ]
    # the orchestrator is told what failed
    assert "prevalidation failed: `dist/app` does not exist in the workspace" in fake.texts(3)
    # the calls are journaled with their model and rule; tokens add up in the state
    calls = [e for e in read_journal(store.folder) if e["type"] == "llm_call"]
    assert [(c["agent"], c["model_id"], c["rule"]) for c in calls][:3] == [
        ("orchestrator", "orchestrator-model", "step execution_llm"),
        ("orchestrator", "orchestrator-model", "step execution_llm"),
        ("compile", "compiler-model", "step execution_llm"),
    ]
    assert tokens[0] == sum(c["prompt_tokens"] for c in calls) > 0
    assert [e["event"] for e in events(store.folder)].count("LLMCallCompleted") == len(calls) == 6
    # the key went in the Authorization header, and nowhere else
    assert all(r["authorization"] == f"Bearer {SECRET}" for r in fake.requests)
    assert not [p for p in tmp_path.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]


@pytest.mark.parametrize("quirks", ["openai", "llamacpp", "ollama", "vllm"])
def test_the_quirks_of_local_servers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, quirks: str) -> None:
    script = [
        _call(
            "submit_tasks",
            tasks=[{"action": "sweep", "expected_result": "clean"}],
            progress_checklist_outcome="one",
        ),
        _call("complete_todo", todo_id="todo_1", result="swept", evidence="the floor is clean"),
    ]
    engine, _ = start(tmp_path, TIDY)
    with FakeModel(script, quirks) as fake:
        outcome = drive(engine, _agent(fake, monkeypatch), io.StringIO())
        engine.close()
    assert outcome == "complete" and fake.unused() == 0 and not fake.unexpected
    if quirks == "ollama":  # it "said" it would act: it was told to call a tool
        assert "Do not describe it: call one of the tools" in fake.texts(1)
    if quirks == "vllm":  # a read and an action in each message: both answered, one request each
        assert len(fake.requests) == 2


def test_a_long_run_sends_the_model_a_bounded_conversation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tasks = [{"action": f"sweep room {n}", "expected_result": "clean"} for n in range(1, 13)]
    script = [_call("submit_tasks", tasks=tasks, progress_checklist_outcome="twelve rooms")]
    script += [
        _call("complete_todo", todo_id=f"todo_{n}", result="swept", evidence=f"room {n} is clean")
        for n in range(1, 13)
    ]
    engine, _ = start(tmp_path, TIDY)
    with FakeModel(script) as fake:
        assert drive(engine, _agent(fake, monkeypatch), io.StringIO()) == "complete"
        engine.close()
    sizes = []
    for request in fake.requests:
        messages = request["body"]["messages"]
        roles = [m["role"] for m in messages]
        assert roles[0] == "system" and roles[1] == "user"  # a cut never orphans a tool result
        assert roles.count("user") <= 4
        sizes.append(len(messages))
    assert sizes[3:] == [sizes[3]] * (len(sizes) - 3)  # flat once four directives are kept
    last = fake.requests[-1]["body"]["messages"]
    assert "room 12" in json.dumps(last) and "room 1 is clean" not in json.dumps(last)


def test_refused_answers_in_a_row_stop_the_run_resumably(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    flow = 'workflow w "W" {\n    llm fake "m"\n    regular a "A" {\n    }\n}\n'
    bad = _call("complete_todo", todo_id="todo_1", result="done", evidence=" ")
    engine, store = start(tmp_path, flow)
    with FakeModel([bad] * 6) as fake:
        out = io.StringIO()
        outcome = drive(engine, _agent(fake, monkeypatch), out)
    assert outcome == "refused"
    assert out.getvalue().count("refused: evidence is empty") == 6
    assert [e["type"] for e in read_journal(store.folder)] == ["llm_call"] * 6  # what was spent was spent
    with FakeModel([_call("complete_todo", todo_id="todo_1", result="done", evidence="checked")]) as fake:
        assert drive(engine, _agent(fake, monkeypatch), io.StringIO()) == "complete"
    engine.close()


def test_every_agent_needs_a_model_and_a_known_provider(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine, _ = start(tmp_path, FLOW.replace('llm fake "orchestrator-model"', ""))
    config = LlmConfig({"fake": Provider("fake", "http://127.0.0.1:9/v1", None)}, LlmChoices())
    with pytest.raises(LlmConfigError, match="the orchestrator has no model"):
        check_plan(engine.plan, config)
    unknown = LlmConfig({}, LlmChoices(None, Llm("nowhere", "m")))
    with pytest.raises(LlmConfigError, match="no provider `nowhere`"):
        check_plan(engine.plan, unknown)
    far = LlmConfig({"fake": Provider("fake", "https://api.example.com/v1", None)}, LlmChoices())
    with pytest.raises(LlmConfigError, match="TODOFLOW_LLM_LOOPBACK_ONLY is set"):
        check_plan(start(tmp_path / "two", FLOW)[0].plan, far)
    engine.close()


def test_the_llm_agent_from_the_command_line(tmp_path: Path) -> None:
    """`todoflow run --agent llm`: providers from todoflow.toml, the key from the
    environment, an unknown provider refused before anything starts; status and log
    show the tokens."""
    flow = 'workflow w "W" {\n    regular a "A" {\n        description "Say hello."\n    }\n}\n'
    (tmp_path / "flow.todoflow").write_text(flow)
    env_key = {"FAKE_KEY": SECRET}
    missing = run_cli("run", "flow.todoflow", "--agent", "llm", "--llm", "nowhere:m", cwd=tmp_path)
    assert missing.returncode == 1 and "no provider `nowhere`" in missing.stderr
    assert not (tmp_path / ".todoflow").exists()
    script = [_call("complete_todo", todo_id="todo_1", result="said hello", evidence="printed hello")]
    with FakeModel(script) as fake:
        (tmp_path / "todoflow.toml").write_text(
            f'[llm]\ndefault = "fake:tiny"\n[llm.providers.fake]\nbase_url = "{fake.url}"\n'
            'api_key_env = "FAKE_KEY"\n'
        )
        done = run_cli("run", "flow.todoflow", "--agent", "llm", cwd=tmp_path, env=env_key)
    assert done.returncode == 0, done.stdout + done.stderr
    assert SECRET not in done.stdout + done.stderr
    (run,) = (tmp_path / ".todoflow" / "runs").iterdir()
    rows = json.loads(run_cli("status", "--json", cwd=tmp_path).stdout)
    assert rows[0]["tokens"]["prompt"] > 0 and rows[0]["tokens"]["completion"] == 15
    assert "model: orchestrator asked fake:tiny (default)" in run_cli("log", run.name, cwd=tmp_path).stdout
    assert json.loads((run / "run.json").read_text())["llm"] == "fake:tiny"
    assert not [p for p in tmp_path.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]


def test_the_example_workflows_name_models_the_agent_can_reach_only_through_providers(tmp_path: Path) -> None:
    """The orchestrated example's models go to `vertex` and `openai`: without their keys
    (and with the loopback switch on) the agent refuses before the run starts."""
    example = ROOT / "examples" / "orchestrated.todoflow"
    result = run_cli(
        "run", str(example), "--agent", "llm", cwd=tmp_path, env={"GEMINI_API_KEY": "", "OPENAI_API_KEY": ""}
    )
    assert result.returncode == 1 and "the LLM agent cannot run this workflow" in result.stderr
    assert "needs its key in $GEMINI_API_KEY" in result.stderr
