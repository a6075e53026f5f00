"""`todoflow plan FLOW [run options]`: what `run` would do, step by step, creating nothing;
and the pre-flight it shares with `todoflow run`, which stops a run before it is made."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jsonschema
import pytest
from syrupy.assertion import SnapshotAssertion

from todoflow.cli import main
from todoflow.compiler.formats import schema

from ..conftest import EXAMPLES, ROOT
from ..support.fake_model import FakeModel

KEYS = ("GEMINI_API_KEY", "OPENAI_API_KEY", "TODOFLOW_LLM", "TODOFLOW_PRESET_LLM", "TODOFLOW_STORE")


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The examples in a folder of their own, which is the working folder; a workspace
    `ws` holding the release example's branch.json; no model configured anywhere."""
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "branch.json").write_text("{}")
    (tmp_path / "broken.yaml").write_text("replies: [\n")  # a replies file that does not parse
    monkeypatch.chdir(tmp_path)
    for key in KEYS:
        monkeypatch.delenv(key, raising=False)
    return tmp_path


def _plan(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main(["plan", *args])
    out, err = capsys.readouterr()
    return status, out, err


def _tree(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file and folder below `folder`, with its size and mtime."""
    found = sorted(folder.rglob("*"))
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns) for p in found}


@pytest.mark.parametrize("name", [path.stem for path in EXAMPLES])  # every step kind, routes, learn_code
def test_plan_of_each_example_as_text_and_json(
    name: str, project: Path, capsys: pytest.CaptureFixture[str], snapshot: SnapshotAssertion
) -> None:
    flow = f"examples/{name}.todoflow"
    options = ["--workspace", "ws", "--learnings", "examples/learnings"]
    status, out, err = _plan(capsys, flow, *options)
    assert (status, err) == (0, "")
    assert out == snapshot(name="text")
    status, data, _ = _plan(capsys, flow, *options, "--format", "json")
    jsonschema.validate(json.loads(data), json.loads(schema("dry-run")))
    assert json.loads(data) == snapshot(name="json")


def test_show_prompts_renders_each_agent_s_prompt(
    project: Path, capsys: pytest.CaptureFixture[str], snapshot: SnapshotAssertion
) -> None:
    status, out, _ = _plan(capsys, "examples/orchestrated.todoflow", "--show-prompts")
    assert status == 0
    assert "prompt of route `check`'s sub-agent at delegated (sub_agent):" in out
    assert out == snapshot


def test_the_plan_names_models_rules_tools_and_what_the_workspace_holds(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, data, _ = _plan(
        capsys, "examples/release.todoflow", "--workspace", "ws", "--allow-shell", "--format", "json"
    )
    assert status == 0
    plan = json.loads(data)
    prepare, ship = plan["steps"]
    assert prepare["agents"] == [
        {
            "role": "agent",
            "provider": "vertex",
            "model_id": "gemini-2.5-pro",
            "rule": "step execution_llm",
            "tools": {"work": ["complete_todo", "update_todo", *plan["tools"]]},
        }
    ]
    assert plan["tools"][-1] == "run_command"  # --allow-shell
    assert prepare["expected_files"] == [{"path": "branch.json", "owner": "prepare", "exists": True}]
    assert [a["role"] for a in ship["agents"]] == ["orchestrator", "sub-agent", "generic"]
    assert ship["max_turns"] == 100
    assert ship["learn_code"]["eligible"] and not ship["learn_code"]["present"]
    assert ship["checklist"]["moves"] == ["task `tag` moved after `notes`: it needs `notes`"]
    assert ship["checklist"]["tasks"][0]["constraints"] == ["Never push to main directly"]


def test_a_given_checklist_replaces_the_step_s_own_with_its_moves(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    given = [
        {"label": "b", "action": "Announce", "expected_result": "Sent", "after": ["a"]},
        {"label": "a", "action": "Tag", "expected_result": "Tagged"},
    ]
    Path("tasks.json").write_text(json.dumps(given))
    status, data, _ = _plan(capsys, "examples/release.todoflow", "--tasks", "tasks.json", "--format", "json")
    assert status == 0
    checklist = json.loads(data)["steps"][1]["checklist"]
    assert checklist["source"] == "given"
    assert [t["action"] for t in checklist["tasks"]] == ["Tag", "Announce"]
    assert checklist["moves"] == [
        "the given checklist (2 tasks) replaces the step's own `tasks` block (4 tasks)",
        "task `b` moved after task `a`: it needs task `a`",
    ]


def test_plan_creates_nothing(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """No run folder, no store location, nothing in the workspace or beside the source."""
    (project / "runs").mkdir()
    before = _tree(project)
    for agent in ("human", "scripted:examples/replies/release.yaml"):
        status, _, _ = _plan(
            capsys, "examples/release.todoflow", "--agent", agent, "--run-dir", "runs", "--workspace", "ws"
        )
        assert status == 0
    status, _, _ = _plan(capsys, "examples/release.todoflow", "--run-dir", "elsewhere", "--show-prompts")
    assert status == 0
    assert _tree(project) == before
    assert not (project / ".todoflow").exists()


def test_plan_calls_no_model(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeModel([]) as model:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.setenv("OPENAI_BASE_URL", model.url)
        status, out, _ = _plan(
            capsys, "examples/fast-path.todoflow", "--agent", "llm", "--llm", "openai:gpt-test"
        )
    assert status == 0, out
    assert "openai:gpt-test (default)" in out
    assert model.requests == []


PREFLIGHT = {
    "key": (
        ["examples/release.todoflow", "--agent", "llm"],
        "models: the LLM agent cannot run this workflow:",
        "provider `vertex` needs its key in $GEMINI_API_KEY",
    ),
    "provider": (
        ["examples/fast-path.todoflow", "--agent", "llm", "--llm", "nowhere:model"],
        "models: the LLM agent cannot run this workflow:",
        "no provider `nowhere` (for model `nowhere:model`)",
    ),
    "replies": (
        ["examples/release.todoflow", "--agent", "scripted:broken.yaml"],
        "replies: ",
        "broken.yaml is not YAML",
    ),
    "workspace": (
        ["examples/release.todoflow", "--workspace", "nowhere"],
        "workspace: the workspace nowhere does not exist",
        "",
    ),
}


@pytest.mark.parametrize("case", sorted(PREFLIGHT))
def test_plan_lists_a_preflight_failure_and_exits_1(
    case: str, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args, check, naming = PREFLIGHT[case]
    status, out, _ = _plan(capsys, *args)
    assert status == 1
    verdict = out[out.index("pre-flight: 1 problem") :]
    assert check in verdict and naming in verdict
    status, data, _ = _plan(capsys, *args, "--format", "json")
    found = json.loads(data)
    assert status == 1 and found["ready"] is False
    assert [p["check"] for p in found["preflight"]] == [check.split(":")[0]]


@pytest.mark.parametrize("case", sorted(PREFLIGHT))
def test_run_stops_at_the_same_preflight_before_it_creates_anything(
    case: str, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args, check, naming = PREFLIGHT[case]
    before = _tree(project)
    status = main(["run", *args, "--run-dir", "runs"])
    err = capsys.readouterr().err
    assert status == 1
    assert "the run cannot start (nothing was created):" in err
    assert check in err and naming in err
    assert _tree(project) == before


def test_every_problem_is_listed_at_once(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = _plan(capsys, "examples/release.todoflow", "--agent", "llm", "--workspace", "nowhere")
    assert status == 1
    assert "pre-flight: 2 problems" in out
    assert "workspace: the workspace nowhere does not exist" in out
    assert "$GEMINI_API_KEY" in out


def test_check_mcp_lists_the_servers_tools(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = _plan(capsys, "examples/release.todoflow", "--check-mcp")
    assert status == 0
    assert "MCP tools: none" in out
    status, out, _ = _plan(capsys, "examples/release.todoflow")
    assert "MCP servers: not checked" in out


def test_an_unknown_agent_is_a_usage_error(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = _plan(capsys, "examples/release.todoflow", "--agent", "robot")
    assert status == 2
    assert "unknown agent `robot`" in err


def test_a_source_with_errors_exits_1_with_its_diagnostics(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    Path("broken.todoflow").write_text('workflow w "W" {\n')
    status, out, err = _plan(capsys, "broken.todoflow")
    assert (status, out) == (1, "")
    assert "error[" in err
