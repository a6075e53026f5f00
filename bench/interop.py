"""Decompile and migrate of a 100-step legacy plan, against `json.loads` of the same file.

.venv/bin/python -m bench.interop
"""

from __future__ import annotations

import json
from pathlib import Path

from bench.measure import Figure, report
from bench.parse import best_of
from bench.scratch import scratch
from todoflow.compiler.decompile import decompile_text
from todoflow.compiler.migrate import plan_migration


def legacy_plan(steps: int) -> dict[str, object]:
    out = []
    for s in range(steps):
        inner = {
            "type": "regular",
            "id": f"step-{s}-inner",
            "description": f"Orchestrate part {s}: fetch, clean and publish the data of region {s}.",
            "success_criteria": f"report-{s}.json exists and lists every record.",
            "context_dependencies": [f"input-{s}.json"],
            "context_output": f"report-{s}.json",
            "validation_schema": {"files": [{"file_name": f"report-{s}.json", "must_exist": True}]},
        }
        route = {
            "route_id": f"fetch-{s}",
            "route_name": "Fetch",
            "condition": "To fetch the data",
            "sub_agent_step": {
                "type": "regular",
                "id": f"fetcher-{s}",
                "title": "Fetcher",
                "context_output": f"raw-{s}.json",
            },
        }
        out.append(
            {
                "type": "todo_task",
                "id": f"step-{s}",
                "title": f"Step {s}",
                "todo_task_step": inner,
                "predefined_routes": [route],
                "next_step_id": f"step-{s + 1}" if s + 1 < steps else "end",
            }
        )
    return {"steps": out}


ROUNDS = 5


def main() -> list[Figure]:
    text = json.dumps(legacy_plan(100), indent=2) + "\n"
    config = json.dumps(
        {
            "steps": [
                {"id": f"step-{s}-inner", "agent_configs": {"execution_max_turns": 50}} for s in range(100)
            ]
        },
        indent=2,
    )
    print(f"plan: 100 legacy steps, {len(text) / 1000:.0f} kB")
    decompiling = Figure(
        "decompile (read, check, write the source, compile it back)", "json.loads", unit="ms"
    )
    migrating = Figure("migrate (dry run: read, check, migrate, encode)", "json.loads", unit="ms")
    with scratch() as folder:
        plan_path, config_path = Path(folder) / "plan.json", Path(folder) / "step_config.json"
        plan_path.write_text(text)
        config_path.write_text(config)
        for _ in range(ROUNDS):
            baseline = best_of(5, lambda: json.loads(text))
            decompile = best_of(
                1, lambda: decompile_text(text, "plan.json", config, "step_config.json", "w", "W")
            )
            decompiling.add(decompile, baseline)
            migrating.add(best_of(1, lambda: plan_migration(plan_path, config_path, None)), baseline)
    report("interop", [decompiling, migrating], ROUNDS)
    return [decompiling, migrating]


if __name__ == "__main__":
    main()
