"""The LLM agent's own overhead per model turn, excluding the model's latency: an
orchestrated run driven by `--agent llm` (its workspace tools offered) against a fake
OpenAI-compatible server on loopback that answers at once; each of the agent's turns is
followed by a bare `openai` client sending the very request the agent just sent (as the
server recorded it: the same messages and tools) to the same server, so the two are
interleaved turn by turn in the same run.

A turn is the agent's `reply`: the directive told to the conversation, the tools'
schemas, the request on its own thread with its deadline, the answer read and its tool
call turned into the engine's reply. What the engine does with the reply (its checks,
the journal's synced write) is not the agent's and is not timed (bench.runtime has it).

    .venv/bin/python -m bench.llm
"""

from __future__ import annotations

import io
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from openai import OpenAI

from bench.measure import Figure, report
from bench.scratch import scratch
from tests.support.fake_model import FakeModel
from todoflow.runtime import process
from todoflow.runtime.agents.base import Answer
from todoflow.runtime.agents.driver import drive
from todoflow.runtime.agents.llm import LlmAgent
from todoflow.runtime.agents.llm_config import LlmConfig, Provider
from todoflow.runtime.agents.workspace_tools import WorkspaceTools
from todoflow.runtime.definition import from_source
from todoflow.runtime.directive import Directive
from todoflow.runtime.llm_choice import LlmChoices, Spent
from todoflow.runtime.plan import Llm

ROUNDS, TASKS = 7, 50
FLOW = (
    'workflow bench "LLM benchmark" {\n    todo_task work "Work" {\n'
    "        tasks {\n%s\n        }\n    }\n}\n"
)


def _confirm(number: int) -> dict[str, Any]:
    return {
        "tool": "complete_todo",
        "arguments": {"result": f"task {number} done", "evidence": f"checked task {number}"},
    }


class _Paired:
    """The run's agent; after each of its turns the bare client sends the same request,
    and both are timed. Each makes its client at its first turn (the agent once per run)."""

    def __init__(self, agent: LlmAgent, fake: FakeModel) -> None:
        self.agent, self.fake = agent, fake
        self.client: OpenAI | None = None
        self.ours = self.bare = 0.0

    def reply(self, directive: Directive) -> Answer:
        start = time.perf_counter()
        answer = self.agent.reply(directive)
        middle = time.perf_counter()
        if self.client is None:
            self.client = OpenAI(base_url=self.fake.url, api_key="bench", max_retries=0)
        self.client.chat.completions.create(**self.fake.requests[-1]["body"])
        self.ours, self.bare = self.ours + middle - start, self.bare + time.perf_counter() - middle
        return answer

    def refused(self, reason: str) -> bool:
        return self.agent.refused(reason)

    def applied(self) -> None:
        self.agent.applied()

    def spent(self) -> Sequence[Spent]:
        return self.agent.spent()


def one_round(folder: Path) -> tuple[float, float]:
    """Seconds per turn of the agent and of the bare client, over a run of TASKS
    confirmations (one model call each)."""
    lines = "\n".join(f'            "Task {t}" => "Task {t} is checked"' for t in range(TASKS))
    definition = from_source(FLOW % lines, "bench.todoflow").or_raise()
    llms = LlmChoices(None, Llm("fake", "bench"))
    folder.mkdir()
    engine = process.start(definition, folder / "runs", workspace=folder, llms=llms, process_id=folder.name)
    script = [_confirm(t // 2) for t in range(2 * TASKS)]  # the agent's answer, then the bare client's
    with FakeModel(script) as fake:
        config = LlmConfig({"fake": Provider("fake", fake.url, "BENCH_KEY")}, llms)
        agent = LlmAgent(config, toolsets=(WorkspaceTools(folder),))
        paired = _Paired(agent, fake)
        assert drive(engine, paired, io.StringIO()) == "complete"
        assert fake.unused() == 0 and not fake.unexpected
    engine.close()
    return paired.ours / TASKS, paired.bare / TASKS


def main() -> list[Figure]:
    os.environ["BENCH_KEY"] = "bench"
    figure = Figure(
        "LLM agent, one model turn",
        "bare openai client, the same request to the same server",
        target="<= 1.5",
        unit="ms",
    )
    with scratch() as folder:
        one_round(folder / "warm")  # imports and caches, as in a long run
        for round_ in range(ROUNDS):
            figure.add(*one_round(folder / f"run-{round_}"))
    report(f"llm ({TASKS} turns a round, interleaved)", [figure], ROUNDS)
    return [figure]


if __name__ == "__main__":
    main()
