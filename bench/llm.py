"""The LLM agent's own overhead per orchestrator turn, excluding the model's latency: an
orchestrated run driven by `--agent llm` against a fake OpenAI-compatible server that
answers at once, against bare `openai` client calls to the same server sending the very
requests the agent sent (recorded by the server), in the same run.

A turn here is one model call and what the agent and the engine do with its answer:
the conversation, the tools' schemas, the tool call read back into a reply, the engine's
checks, the journal (the call's entry and the reply's, one synced write) and the next
directive with its rendered prompt.

    .venv/bin/python -m bench.llm
"""

from __future__ import annotations

import io
import os
import time
from pathlib import Path
from typing import Any

from openai import OpenAI

from bench.measure import Figure, report
from bench.scratch import scratch
from tests.fake_model import FakeModel
from todoflow.runtime import process
from todoflow.runtime.agents.driver import drive
from todoflow.runtime.agents.llm import LlmAgent
from todoflow.runtime.agents.llm_config import LlmConfig, Provider
from todoflow.runtime.definition import from_source
from todoflow.runtime.llm_choice import LlmChoices
from todoflow.runtime.plan import Llm

ROUNDS, TASKS = 7, 100
FLOW = (
    'workflow bench "LLM benchmark" {\n    todo_task work "Work" {\n'
    "        tasks {\n%s\n        }\n    }\n}\n"
)


def _confirm(number: int) -> dict[str, Any]:
    return {
        "tool": "complete_todo",
        "arguments": {"result": f"task {number} done", "evidence": f"checked task {number}"},
    }


def agent_turns(folder: Path) -> tuple[float, list[dict[str, Any]]]:
    """Per orchestrator turn: a run of TASKS confirmations, each one model call; and the
    requests the agent sent."""
    lines = "\n".join(f'            "Task {t}" => "Task {t} is checked"' for t in range(TASKS))
    definition = from_source(FLOW % lines, "bench.todoflow").or_raise()
    llms = LlmChoices(None, Llm("fake", "bench"))
    engine = process.start(definition, folder / "runs", workspace=folder, llms=llms, process_id=folder.name)
    with FakeModel([_confirm(t) for t in range(TASKS)]) as fake:
        agent = LlmAgent(LlmConfig({"fake": Provider("fake", fake.url, "BENCH_KEY")}, llms))
        start = time.perf_counter()
        assert drive(engine, agent, io.StringIO()) == "complete"
        elapsed = time.perf_counter() - start
    engine.close()
    return elapsed / TASKS, [request["body"] for request in fake.requests]


def bare_calls(requests: list[dict[str, Any]]) -> float:
    """Per call: the `openai` client sending the same requests to the same kind of server."""
    with FakeModel([_confirm(t) for t in range(len(requests))]) as fake:
        client = OpenAI(base_url=fake.url, api_key="bench", max_retries=0)
        start = time.perf_counter()
        for body in requests:
            client.chat.completions.create(**body)
        return (time.perf_counter() - start) / len(requests)


def main() -> list[Figure]:
    os.environ["BENCH_KEY"] = "bench"
    figure = Figure(
        "LLM agent, per orchestrator turn",
        "bare openai client call, same fake server",
        target="<= 1.5",
        unit="ms",
    )
    with scratch() as folder:
        _, requests = agent_turns(folder / "warm")  # imports and caches, as in a long run
        for round_ in range(ROUNDS):
            before = bare_calls(requests)
            turn, requests = agent_turns(folder / f"run-{round_}")
            after = bare_calls(requests)
            figure.add(turn, (before + after) / 2)
    report(f"llm ({TASKS} turns a round)", [figure], ROUNDS)
    return [figure]


if __name__ == "__main__":
    main()
