"""Plan interop: legacy plans migrated exactly as the seed's script does (and safely),
read wherever a plan is read, and decompiled to source that compiles back to the plan."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from syrupy.assertion import SnapshotAssertion

import todoflow
from todoflow.compiler.decompile import decompile_text

from ..conftest import EXAMPLES, FIXTURES, ROOT, run_cli
from ..support.runtime_helpers import folder_digest

LEGACY = FIXTURES / "legacy"
CASES = ["nested-deep", "partial-outer", "already-flat", "mixed"]
BAD = sorted((LEGACY / "bad").glob("*.json"))


def _copy(case: str, tmp: Path) -> Path:
    target = tmp / case
    shutil.copytree(LEGACY / case, target)
    return target


@pytest.mark.parametrize("case", CASES)
def test_migrated_plan_is_what_the_seed_script_writes(case: str, tmp_path: Path) -> None:
    ours, theirs = _copy(case, tmp_path / "ours"), _copy(case, tmp_path / "theirs")
    script = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "support" / "seed_migrate_plan.py"), str(theirs / "plan.json")],
        capture_output=True,
        text=True,
        check=True,
    )
    result = run_cli("migrate", str(ours / "plan.json"), "--write", cwd=tmp_path)
    assert result.returncode == (1 if "conflict: " in result.stdout else 0), result.stderr
    assert (ours / "plan.json").read_bytes() == (theirs / "plan.json").read_bytes()
    if "already in flat format" in script.stdout:
        assert "already in flat format" in result.stdout


@pytest.mark.parametrize("case", CASES)
def test_dry_run_report_and_migrated_files(case: str, tmp_path: Path, snapshot: SnapshotAssertion) -> None:
    folder = _copy(case, tmp_path)
    before = folder_digest(folder)
    learnings = ["--learnings", "learnings"] if (folder / "learnings").exists() else []
    dry = run_cli("migrate", "plan.json", *learnings, cwd=folder)
    assert dry.returncode == (1 if "conflict: " in dry.stdout else 0), dry.stderr  # left for a person
    assert folder_digest(folder) == before  # a dry run writes nothing
    written = run_cli("migrate", "plan.json", *learnings, "--write", cwd=folder)
    assert written.returncode == dry.returncode
    files = {
        p.relative_to(folder).as_posix(): p.read_text() for p in sorted(folder.rglob("*")) if p.is_file()
    }
    assert {"report": dry.stdout, "files": files} == snapshot
    for name in ("plan.json", "step_config.json"):
        if (folder / f"{name}.bak").exists():
            assert (folder / f"{name}.bak").read_bytes() == (LEGACY / case / name).read_bytes()
    after = folder_digest(folder)
    again = run_cli("migrate", "plan.json", *learnings, "--write", cwd=folder)
    assert again.stdout.startswith("plan.json already in flat format\n")
    assert again.returncode == dry.returncode  # a conflict is listed again, every time
    assert folder_digest(folder) == after


def test_a_learnings_rename_never_overwrites(tmp_path: Path) -> None:
    folder = _copy("nested-deep", tmp_path)
    run_cli("migrate", "plan.json", "--learnings", "learnings", "--write", cwd=folder)
    assert (folder / "learnings" / "orchestrate" / "main.py").exists()
    assert (folder / "learnings" / "cleaner" / "notes.md").read_text() == "already here\n"
    assert (folder / "learnings" / "cleaner-inner" / "notes.md").read_text() == "cleaning notes\n"


def test_a_conflicting_config_value_is_reported_not_guessed(tmp_path: Path) -> None:
    folder = _copy("partial-outer", tmp_path)
    result = run_cli("migrate", "plan.json", "--write", cwd=folder)
    assert "conflict:" in result.stdout and "resolve it by hand" in result.stdout
    config = json.loads((folder / "step_config.json").read_text())
    assert [e["id"] for e in config["steps"]] == ["my-task", "my-orchestrator"]


@pytest.mark.parametrize("path", BAD, ids=lambda p: p.name)
def test_bad_input_is_diagnosed_and_nothing_is_written(
    path: Path, tmp_path: Path, snapshot: SnapshotAssertion
) -> None:
    target = tmp_path / path.name
    shutil.copy(path, target)
    before = folder_digest(tmp_path)
    result = run_cli("migrate", path.name, "--write", cwd=tmp_path)
    assert result.returncode == 1
    assert "nothing written" in result.stderr and "Traceback" not in result.stderr
    assert folder_digest(tmp_path) == before
    decompiled = run_cli("decompile", path.name, cwd=tmp_path)
    assert decompiled.returncode == 1
    assert {"migrate": result.stderr, "decompile": decompiled.stderr} == snapshot


@pytest.mark.parametrize("case", CASES)
def test_decompile_reads_legacy_plans(case: str, snapshot: SnapshotAssertion) -> None:
    result = run_cli("decompile", "plan.json", cwd=LEGACY / case)
    assert result.returncode == 0, result.stderr
    assert {"source": result.stdout, "warnings": result.stderr} == snapshot


def _round_trip(compiled: todoflow.Compiled) -> tuple[dict[str, object], dict[str, object], str]:
    files = dict(compiled.artifacts.files)
    result = decompile_text(
        files["plan.json"], "plan.json", files["step_config.json"], "step_config.json", "w", "W"
    )
    assert result.source is not None, [d.message for d in result.diagnostics]
    again = todoflow.compile(result.source)
    assert again.ok, [d.message for d in again.diagnostics]
    plan, config = again.plan, again.step_config
    return {**plan, "source_sha256": None}, {**config, "source_sha256": None}, result.source


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_decompiled_examples_compile_back_to_the_same_plan(path: Path) -> None:
    compiled = todoflow.compile(path)
    plan, config, _ = _round_trip(compiled)
    assert plan == {**compiled.plan, "source_sha256": None}
    assert config == {**compiled.step_config, "source_sha256": None}


NAMES = st.from_regex(r"[a-z][a-z0-9-]{0,5}", fullmatch=True).filter(lambda n: n != "end")
TEXTS = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=20).filter(str.strip)


@st.composite
def workflows(draw: st.DrawFn) -> str:
    """Random valid workflows: the plans the format defines are the ones they compile to."""
    ids = draw(st.lists(NAMES, min_size=1, max_size=6, unique=True))
    lines = ['workflow w "W" {']
    if draw(st.booleans()):
        lines.append(f"    llm vertex {json.dumps(draw(TEXTS))}")
    for index, step_id in enumerate(ids):
        nested = index > 0 and draw(st.booleans())
        kind = "todo_task" if nested or draw(st.booleans()) else "regular"
        lines.append(f"    {kind} {step_id}-s {json.dumps(draw(TEXTS))} {{")
        for keyword in ("description", "success", "output"):
            if draw(st.booleans()):
                lines.append(f"        {keyword} {json.dumps(draw(TEXTS).replace(chr(92), '/'))}")
        if draw(st.booleans()):
            lines.append(f"        max_turns {draw(st.integers(1, 200))}")
        if kind == "todo_task":
            if nested:
                lines += [
                    f"        route r{index} {json.dumps(draw(TEXTS))} when {json.dumps(draw(TEXTS))} {{",
                    f'            regular {step_id}-sub "Sub" {{',
                    f"                success {json.dumps(draw(TEXTS))}",
                    "            }",
                    "        }",
                ]
                if draw(st.booleans()):
                    lines.append("        mode learn_code")
            if draw(st.booleans()):
                lines.append("        generic off")
            count = draw(st.integers(0, 3))
            if count:
                lines.append("        tasks {")
                lines += [
                    f"            t{i}: {json.dumps(draw(TEXTS))} => {json.dumps(draw(TEXTS))}"
                    for i in range(count)
                ]
                if draw(st.booleans()):
                    lines.append(f"            constraint {json.dumps(draw(TEXTS))} on t0")
                lines.append("        }")
        if draw(st.booleans()) and index + 2 < len(ids):
            lines.append(f"        next {ids[index + 2]}-s")
        lines.append("    }")
    lines.append("}")
    return "\n".join(lines) + "\n"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workflows())
def test_random_plans_decompile_and_compile_back(source: str) -> None:
    compiled = todoflow.compile(source)
    if not compiled.ok:  # e.g. a generated `next` that skips a step forever: not a valid plan
        return
    plan, config, _ = _round_trip(compiled)
    assert plan == {**compiled.plan, "source_sha256": None}
    assert config == {**compiled.step_config, "source_sha256": None}


def test_a_legacy_plan_runs(tmp_path: Path) -> None:
    folder = _copy("mixed", tmp_path)
    replies = tmp_path / "replies.yaml"
    replies.write_text(
        "- tasks: [{action: one, expected_result: done}]\n  progress_checklist_outcome: one\n"
        "- {evidence: did one, progress_execution_outcome: ok}\n"
        "- tasks: [{action: two, expected_result: done}]\n  progress_checklist_outcome: two\n"
        "- {evidence: did two, progress_execution_outcome: ok}\n"
    )
    result = run_cli("run", str(folder / "plan.json"), "--agent", f"scripted:{replies}", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Nested B." in result.stdout or "plan-b" in result.stdout


JSON_LEAF = st.one_of(
    st.none(), st.booleans(), st.integers(), st.text(max_size=6), st.sampled_from(["regular", "todo_task"])
)
JSON_KEYS = st.sampled_from(
    [
        "type",
        "id",
        "title",
        "description",
        "predefined_routes",
        "tasks",
        "next_step_id",
        "todo_task_step",
        "route_id",
        "sub_agent_step",
        "validation_schema",
        "files",
        "steps",
        "x",
    ]
)
JSON = st.recursive(
    JSON_LEAF,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(JSON_KEYS, inner, max_size=6)),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(JSON, st.builds(lambda steps: {"steps": steps}, st.lists(JSON, max_size=3))))
def test_any_json_gets_diagnostics_never_a_traceback(data: object) -> None:
    result = decompile_text(json.dumps(data), "plan.json", None, "step_config.json", "w", "W")
    for diagnostic in result.diagnostics:
        assert diagnostic.render()


def test_malformed_routes_are_diagnosed() -> None:
    plan = json.dumps({"steps": [{"type": "todo_task", "id": "a", "title": "A", "predefined_routes": True}]})
    result = decompile_text(plan, "plan.json", None, "step_config.json", "w", "W")
    assert result.source is None
    assert [d.message for d in result.diagnostics] == [
        "steps[0].predefined_routes: input should be a valid list"
    ]


def test_a_malformed_step_config_is_diagnosed_and_nothing_is_written(tmp_path: Path) -> None:
    folder = _copy("mixed", tmp_path)
    (folder / "step_config.json").write_text('{"steps": [{"id": "plan-b-inner", "agent_configs": true}]}\n')
    before = folder_digest(folder)
    result = run_cli("migrate", "plan.json", "--write", cwd=folder)
    assert result.returncode == 1
    assert "steps[0].agent_configs" in result.stderr and "nothing written" in result.stderr
    assert folder_digest(folder) == before
