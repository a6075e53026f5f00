"""The compiler's artifacts: fidelity to the seed, determinism, schemas, the machine."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

import todoflow
from todoflow.compiler.files import write_atomically
from todoflow.compiler.formats import SCHEMAS, schema
from todoflow.compiler.machine import Machine, MachineState, MachineTransition, structure_problems

from ..conftest import EXAMPLES, FIXTURES, ROOT, relative, run_cli
from ..support.runtime_helpers import ChecklistModel

SEED = FIXTURES / "seed"


def _compiled(path: Path) -> todoflow.Compiled:
    compiled = todoflow.compile(path, path=relative(path))
    compiled.raise_for_errors()
    return compiled


def test_seed_plan_and_step_config_come_out_of_the_equivalent_source() -> None:
    compiled = _compiled(ROOT / "examples" / "seed-orchestrator.todoflow")
    (step,) = compiled.plan["steps"]
    expected = json.loads((SEED / "plan-step.json").read_text())
    assert set(step) == set(expected)
    for key, value in expected.items():
        assert step[key] == value, key
    config = compiled.step_config
    assert config["steps"] == json.loads((SEED / "step-config.json").read_text())["steps"]
    assert "next_step_id" not in step["predefined_routes"][0]["sub_agent_step"]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_output_is_deterministic(path: Path) -> None:
    first, second = _compiled(path).artifacts.files, _compiled(path).artifacts.files
    assert first == second


def test_compiled_folder_is_byte_identical_across_runs(tmp_path: Path) -> None:
    example = relative(ROOT / "examples" / "release.todoflow")
    for name in ("one", "two"):
        assert run_cli("compile", example, "-o", str(tmp_path / name)).returncode == 0
    one = {
        p.relative_to(tmp_path / "one"): p.read_bytes() for p in (tmp_path / "one").rglob("*") if p.is_file()
    }
    two = {
        p.relative_to(tmp_path / "two"): p.read_bytes() for p in (tmp_path / "two").rglob("*") if p.is_file()
    }
    assert one == two
    assert Path("plan.json") in one and Path("machines/release.py") in one


def _tree(folder: Path) -> dict[Path, bytes]:
    return {p.relative_to(folder): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_output_does_not_depend_on_the_working_folder_or_the_spelling_of_the_path(tmp_path: Path) -> None:
    spellings = [
        ("examples/release.todoflow", ROOT),
        ("release.todoflow", ROOT / "examples"),
        ("./examples/../examples/release.todoflow", ROOT),
        (str(ROOT / "examples" / "release.todoflow"), tmp_path),
    ]
    trees = []
    for index, (path, folder) in enumerate(spellings):
        out = tmp_path / f"out{index}"
        assert run_cli("compile", path, "-o", str(out), cwd=folder).returncode == 0
        trees.append(_tree(out))
    assert all(tree == trees[0] for tree in trees[1:])
    assert b"from release.todoflow " in trees[0][Path("machines/release.py")]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_emitted_files_validate_against_their_schemas(path: Path) -> None:
    artifacts = _compiled(path).artifacts
    for name, file in (("plan", "plan.json"), ("step-config", "step_config.json")):
        jsonschema.validate(json.loads(artifacts.file(file)), json.loads(schema(name)))


def test_todos_schema_accepts_the_seed_example() -> None:
    todos = {
        "step_id": "step-3",
        "objective": "Process all customer data",
        "todos": [
            {
                "id": "todo_1",
                "title": "Fetch customer list from API",
                "status": "completed",
                "result": "Fetched 150 customers",
                "created_at": "2024-01-25T10:00:00Z",
                "updated_at": "2024-01-25T10:05:00Z",
            }
        ],
        "summary": {"total": 1, "completed": 1, "in_progress": 0, "open": 0},
    }
    jsonschema.validate(todos, json.loads(schema("todos")))
    assert set(SCHEMAS) == {"plan", "step-config", "todos", "diff", "replay", "dry-run"}


def test_empty_optional_fields_are_omitted_never_null() -> None:
    plan = _compiled(FIXTURES / "valid" / "minimal.todoflow").plan
    assert plan["steps"] == [
        {"type": "regular", "id": "only", "title": "The only step", "next_step_id": "end"}
    ]
    for path in EXAMPLES:
        assert "null" not in _compiled(path).artifacts.file("plan.json")


def test_defaults_apply_to_every_step_and_tasks_come_in_final_order() -> None:
    compiled = _compiled(ROOT / "examples" / "release.todoflow")
    configs = {entry["id"]: entry for entry in compiled.step_config["steps"]}
    assert configs["prepare"]["agent_configs"]["execution_max_turns"] == 60
    assert configs["build-artifacts"]["agent_configs"]["execution_llm"]["model_id"] == "gemini-2.5-pro"
    assert configs["ship"]["agent_configs"]["execution_max_turns"] == 100
    assert configs["ship"]["declared_execution_mode"] == "learn_code"
    ship = compiled.plan["steps"][1]
    assert [t["action"] for t in ship["tasks"]] == [
        "Build wheels and sdist",
        "Write release notes",
        "Tag the release",
        "Announce on the mailing list",
    ]
    assert ship["tasks"][0]["constraints"] == ["Never push to main directly"]
    assert "constraints" not in ship["tasks"][1]
    assert "generic_agent" not in ship
    pipeline = _compiled(ROOT / "examples" / "data-pipeline.todoflow").plan
    assert pipeline["steps"][1]["generic_agent"] is False


def _graph(cls: Any) -> tuple[list[str], list[tuple[str, str, str, str]]]:
    states = list(cls.states_map)
    transitions = []
    for state in cls.states_map.values():
        for transition in state.transitions:
            events = " ".join(sorted(e for e in str(transition.event).split() if "." not in e))
            conditions = " ".join(str(c) for c in transition.cond.list) if transition.cond else ""
            transitions.append((state.id, transition.target.id, events, conditions))
    return states, sorted(transitions)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_generated_module_is_the_graph_the_runtime_uses(path: Path, tmp_path: Path) -> None:
    compiled = _compiled(path)
    target = tmp_path / "machine_module.py"
    target.write_text(compiled.machine_source)
    spec = importlib.util.spec_from_file_location("machine_module", target)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    generated = getattr(module, compiled.artifacts.machine.class_name)
    assert _graph(generated) == _graph(compiled.machine_class)
    assert structure_problems(compiled.artifacts.machine) == []


def test_the_machine_walks_the_release_flow() -> None:
    machine = _compiled(ROOT / "examples" / "release.todoflow").machine_class
    model = ChecklistModel(remaining=2)
    chart = machine(model=model)
    assert set(chart.configuration_values) == {"s1_prepare", "s1_prepare_work"}
    chart.send("confirm")
    assert set(chart.configuration_values) == {"s2_ship", "s2_ship_intake"}
    chart.send("submit_tasks")
    assert "s2_ship_work" in chart.configuration_values
    assert "teleport_revise_tasks" in {e.id for e in chart.enabled_events()}
    chart.send("teleport_revise_tasks")
    assert "s2_ship_revise" in chart.configuration_values
    chart.send("submit_revision")
    model.remaining = 0
    chart.send("confirm")
    assert set(chart.configuration_values) == {"end"}


def test_revise_is_reached_only_by_the_teleport() -> None:
    machine = _compiled(ROOT / "examples" / "release.todoflow").artifacts.machine
    into_revise = [t for t in machine.transitions if t.target.endswith("_revise")]
    assert [t.event for t in into_revise] == ["teleport_revise_tasks"]


def test_unreachable_steps_are_left_out_of_the_machine() -> None:
    compiled = _compiled(FIXTURES / "warning" / "unreachable-step.todoflow")
    assert [s.id for s in compiled.artifacts.machine.states] == ["s1_a", "end"]
    assert [s["id"] for s in compiled.plan["steps"]] == ["a", "orphan"]


def test_structure_checks_find_broken_machines() -> None:
    work = MachineState("work", "Work", initial=True)
    trap = MachineState("trap", "Trap")
    lonely = MachineState("lonely", "Lonely")
    end = MachineState("end", "End", final=True)
    machine = Machine(
        "Broken",
        "Broken",
        (work, trap, lonely, end),
        (MachineTransition("work", "trap", "go"), MachineTransition("work", "end", "work")),
    )
    assert structure_problems(machine) == [
        "event `work` has the same name as a state",
        "state `lonely` is unreachable",
        "state `lonely` is a trap: no transition leaves it",
        "state `trap` is a trap: no transition leaves it",
        "state `lonely` has no path to `end`",
        "state `trap` has no path to `end`",
    ]


def test_compiled_reports_errors_instead_of_artifacts() -> None:
    compiled = todoflow.compile(FIXTURES / "invalid" / "task-cycles.todoflow")
    assert not compiled.ok
    assert [d.code for d in compiled.diagnostics] == ["E0301", "E0301", "E0301"]
    with pytest.raises(todoflow.TodoflowError, match="need each other's result"):
        _ = compiled.plan


def test_compile_accepts_source_text() -> None:
    compiled = todoflow.compile('workflow w "W" {\n    regular a "A" {\n    }\n}\n', path="inline.todoflow")
    assert compiled.ok and compiled.plan["steps"][0]["id"] == "a"
    assert "class WWorkflow(StateChart):" in compiled.machine_source
    assert compiled.mermaid.startswith("stateDiagram-v2\n")


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_plan_json_built_step_by_step_is_the_models_own_dump(path: Path) -> None:
    from todoflow.compiler.artifacts import plan_model

    compiled = _compiled(path)
    assert compiled.workflow is not None
    assert compiled.artifacts.file("plan.json") == plan_model(compiled.workflow).to_json()


def test_write_atomically_fills_a_spare_or_makes_a_temporary(tmp_path: Path) -> None:
    target, spare = tmp_path / "out" / "a.json", tmp_path / "out" / ".spare-a"
    write_atomically(target, "first\n", spare)  # no spare yet: the folder and a temporary are made
    assert target.read_text() == "first\n"
    spare.write_text("stale bytes, longer than what replaces them")
    write_atomically(target, "second\n", spare)
    assert target.read_text() == "second\n"
    assert sorted(p.name for p in target.parent.iterdir()) == ["a.json"]


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_each_schema_says_its_dialect_and_identity(name: str) -> None:
    published = json.loads(schema(name))
    assert list(published)[:2] == ["$schema", "$id"]
    assert published["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert published["$id"] == f"urn:todoflow:schema:{name}"
    jsonschema.Draft202012Validator.check_schema(published)


def test_todo_times_are_date_times_that_a_validator_checks() -> None:
    published = json.loads(schema("todos"))
    item = published["$defs"]["TodoItem"]["properties"]["created_at"]
    assert item["format"] == "date-time"
    todo = {"id": "todo_1", "title": "T", "status": "pending", "created_at": "yesterday"}
    todos = {
        "step_id": "s",
        "objective": "o",
        "todos": [{**todo, "updated_at": "2024-01-25T10:05:00Z"}],
        "summary": {"total": 1, "completed": 0, "in_progress": 0, "open": 1},
    }
    with pytest.raises(jsonschema.ValidationError, match="yesterday"):
        jsonschema.validate(todos, published)
    todos["todos"][0]["created_at"] = "2024-01-25T10:00:00.125+02:00"
    jsonschema.validate(todos, published)
