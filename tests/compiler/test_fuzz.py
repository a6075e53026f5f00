"""The fuzzer: mutated sources through the whole compiler, mutated plans through
decompile and migrate. Nothing may raise but a diagnostic, every diagnostic renders,
and a source that checks clean compiles (`check` once said "no problems" for a file
`compile` crashed on). A few seconds in the suite; `make fuzz` runs it long
(`TODOFLOW_FUZZ_EXAMPLES`, default 40,000)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import todoflow
from todoflow.compiler.analysis import analyze
from todoflow.compiler.decompile import decompile_text
from todoflow.compiler.migrate import plan_migration
from todoflow.compiler.planfile import read_plan
from todoflow.dsl.diagnostics import Diagnostic

from ..conftest import EXAMPLES, FIXTURES, VALID

pytestmark = pytest.mark.slow
EXAMPLES_PER_TEST = int(os.environ.get("TODOFLOW_FUZZ_EXAMPLES", "60"))
FUZZ = settings(
    max_examples=EXAMPLES_PER_TEST,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
SOURCES = [p.read_text(encoding="utf-8") for p in EXAMPLES + VALID]
PLANS = [dict(todoflow.compile(p).artifacts.files)["plan.json"] for p in EXAMPLES] + [
    p.read_text(encoding="utf-8") for p in sorted((FIXTURES / "legacy").glob("*/plan.json"))
]
NOISE = st.text(max_size=12) | st.sampled_from(
    ["{", "}", 'route r "R" when "c" {', "\ud800", "\x00", "9" * 5000, "{% include 'x' %}", '"', "\\u"]
)


def mutate(draw: st.DrawFn, text: str) -> str:
    """`text` with up to five cuts, copies, swaps, insertions of noise or repetitions."""
    for _ in range(draw(st.integers(1, 5))):
        cut = draw(st.integers(0, len(text)))
        size = draw(st.integers(0, 60))
        action = draw(st.sampled_from(["delete", "duplicate", "swap", "insert", "truncate", "repeat"]))
        if action == "delete":
            text = text[:cut] + text[cut + size :]
        elif action == "duplicate":
            text = text[:cut] + text[cut : cut + size] + text[cut:]
        elif action == "swap":
            other = draw(st.integers(0, len(text)))
            a, b = sorted((cut, other))
            text = text[:a] + text[b : b + size] + text[a + size : b] + text[a : a + size] + text[b + size :]
        elif action == "insert":
            text = text[:cut] + draw(NOISE) + text[cut:]
        elif action == "truncate":
            text = text[:cut]
        else:  # one piece many times over: nesting, floods
            text = text[:cut] + text[cut : cut + size] * draw(st.integers(2, 400)) + text[cut:]
    return text


@st.composite
def mutated_sources(draw: st.DrawFn) -> str:
    return mutate(draw, draw(st.sampled_from(SOURCES)))


@st.composite
def mutated_plans(draw: st.DrawFn) -> str:
    text = draw(st.sampled_from(PLANS))
    if draw(st.booleans()):
        return mutate(draw, text)
    data = json.loads(text)
    for _ in range(draw(st.integers(1, 4))):
        data = _mutate_value(draw, data, 0)
    return json.dumps(data)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8) | st.just("../../x"),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)


def _mutate_value(draw: st.DrawFn, value: Any, depth: int) -> Any:
    """Replace, drop or wrap one value somewhere in a JSON document."""
    if isinstance(value, dict) and value and draw(st.booleans()) and depth < 30:
        key = draw(st.sampled_from(sorted(value)))
        return {**value, key: _mutate_value(draw, value[key], depth + 1)}
    if isinstance(value, list) and value and draw(st.booleans()) and depth < 30:
        index = draw(st.integers(0, len(value) - 1))
        return [*value[:index], _mutate_value(draw, value[index], depth + 1), *value[index + 1 :]]
    choice = draw(st.sampled_from(["replace", "wrap", "drop"]))
    if choice == "replace":
        return draw(JSON)
    if choice == "wrap":
        return [value] if draw(st.booleans()) else {"todo_task_step": value, "type": "todo_task", "id": "x"}
    return None


def _renders(diagnostics: Any) -> None:
    for diagnostic in diagnostics:
        assert isinstance(diagnostic, Diagnostic)
        diagnostic.render().encode("utf-8")


@FUZZ
@given(text=mutated_sources())
def test_a_mutated_source_checks_and_compiles_without_raising(text: str) -> None:
    result = analyze(text, "fuzz.todoflow", Path(FIXTURES / "valid"))
    for diagnostic in result.diagnostics:
        diagnostic.render(result.sources.get(diagnostic.span.path)).encode("utf-8")
    compiled = todoflow.compile(text, path="fuzz.todoflow")
    if compiled.ok:  # what checks clean compiles: every artifact is emitted
        assert compiled.artifacts.files


@FUZZ
@given(text=mutated_plans())
def test_a_mutated_plan_decompiles_and_migrates_without_raising(text: str, tmp_path_factory: Any) -> None:
    _renders(read_plan(text, "plan.json").diagnostics)
    result = decompile_text(text, "plan.json", None, "step_config.json", "w", "W")
    _renders(result.diagnostics)
    if result.source is not None:
        assert todoflow.compile(result.source).ok
    folder = tmp_path_factory.mktemp("plan")
    (folder / "plan.json").write_bytes(text.encode("utf-8", "surrogatepass"))
    migration, problems = plan_migration(folder / "plan.json", None, folder)
    _renders(problems)
    assert (migration is None) == bool(problems)
