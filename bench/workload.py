"""Synthetic workflows for the benchmarks: realistic shape, chosen size."""

from __future__ import annotations


def big_source(steps: int = 100, tasks: int = 100) -> str:
    """A workflow of `steps` todo_task steps, each with a route and `tasks` tasks."""
    out = ['workflow bench "Benchmark workflow" {', '    llm vertex "gemini-2.5-pro"', "    max_turns 60"]
    for s in range(steps):
        out += [
            "",
            f'    todo_task step-{s} "Step {s}" {{',
            '        description """',
            f"            Work through checklist {s}, delegating builds to the builder",
            "            and checking every result before confirming it.",
            '            """',
            f'        success "Every task of step {s} is confirmed."',
            f'        needs "input-{s}.json", "config.json"',
            f'        output "output-{s}.json"',
            f'        expect file "output-{s}.json"',
            f'        route build-{s} "Build" when "To build the artifacts of step {s}" {{',
            f'            regular builder-{s} "Builder {s}" {{',
            '                description "Run the build and collect the artifacts."',
            f'                output "dist-{s}.json"',
            "            }",
            "        }",
            "        tasks {",
        ]
        for t in range(tasks):
            after = f" after t{t - 1}" if t else ""
            task = f'"Do task {t} of step {s} carefully" => "Task {t} has a checked result"'
            out.append(f"            t{t}: {task}{after}")
        out += ['            constraint "Never skip a check" on all', "        }", "    }"]
    out.append("}")
    return "\n".join(out) + "\n"
