"""Which endpoint serves a provider's models, and with which key: the LLM agent's
configuration, read once before a run starts.

A provider is an OpenAI-compatible Chat Completions endpoint: a base URL and the
environment variable that holds its key. Built in: `openai` (the `openai` package's own
`OPENAI_BASE_URL` and `OPENAI_API_KEY`), `vertex` and `gemini` (Gemini's OpenAI-compatible
endpoint, `GEMINI_API_KEY`), `anthropic` (`ANTHROPIC_API_KEY`), and the local servers
`ollama`, `llamacpp`, `vllm` (no key needed). `todoflow.toml` (or `[tool.todoflow]` in a
pyproject.toml), found from the workflow's own folder upwards (`config_folder`; never
the working folder), may add providers or change these, and name the run's default and
preset models:

    [llm]
    default = "ollama:qwen3:8b"
    preset = "openai:gpt-4.1-mini"
    [llm.providers.ollama]
    base_url = "http://127.0.0.1:11434/v1"

Options (`--llm`, `--preset-llm`) win over the environment (`TODOFLOW_LLM`,
`TODOFLOW_PRESET_LLM`), which wins over the file. A key is read from the environment
when a client is made and never written anywhere: not in run.json, the journal, an
event or an error (`redact`). With `TODOFLOW_LLM_LOOPBACK_ONLY` set (the test suite sets
it), an endpoint that is not on this machine's loopback is refused.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from todoflow.dsl.diagnostics import TodoflowError
from todoflow.dsl.nodes import node

from ..llm_choice import DEFAULT_VARIABLE, PRESET_VARIABLE, LlmChoices, parse_llm, select_llm
from ..plan import Llm, RunPlan

LOOPBACK_ONLY = "TODOFLOW_LLM_LOOPBACK_ONLY"
LOOPBACK = {"127.0.0.1", "localhost", "::1"}


class LlmConfigError(TodoflowError):
    """A provider or model that cannot be used, said before the run starts."""


@node
class Provider:
    name: str
    base_url: str | None  # None: the `openai` package's own default (or OPENAI_BASE_URL)
    api_key_env: str | None  # None: the server needs no key


BUILT_IN: dict[str, Provider] = {
    "openai": Provider("openai", None, "OPENAI_API_KEY"),
    "vertex": Provider(
        "vertex", "https://generativelanguage.googleapis.com/v1beta/openai/", "GEMINI_API_KEY"
    ),
    "gemini": Provider(
        "gemini", "https://generativelanguage.googleapis.com/v1beta/openai/", "GEMINI_API_KEY"
    ),
    "anthropic": Provider("anthropic", "https://api.anthropic.com/v1/", "ANTHROPIC_API_KEY"),
    "ollama": Provider("ollama", "http://127.0.0.1:11434/v1", None),
    "llamacpp": Provider("llamacpp", "http://127.0.0.1:8080/v1", None),
    "vllm": Provider("vllm", "http://127.0.0.1:8000/v1", None),
}


@node
class LlmConfig:
    providers: Mapping[str, Provider]
    choices: LlmChoices

    def provider(self, llm: Llm) -> Provider:
        found = self.providers.get(llm.provider)
        if found is None:
            known = ", ".join(f"`{name}`" for name in sorted(self.providers))
            raise LlmConfigError(
                f"no provider `{llm.provider}` (for model `{llm}`): the providers are {known}; "
                "add one under [llm.providers] in todoflow.toml"
            )
        return found


def load_config(
    folder: Path, default: str | None, preset: str | None, environ: Mapping[str, str] = os.environ
) -> LlmConfig:
    """The providers and the run's models: options, then the environment, then the
    configuration found from `folder` (the workflow's)."""
    section = _section(config_folder(folder))
    providers = dict(BUILT_IN)
    for name, fields in (section.get("providers") or {}).items():
        if not isinstance(fields, dict):
            raise LlmConfigError(f"[llm.providers.{name}] is a table with `base_url` and `api_key_env`")
        base = providers.get(name)
        providers[name] = Provider(
            name,
            _text(fields, "base_url", name) or (base.base_url if base else None),
            _text(fields, "api_key_env", name)
            if "api_key_env" in fields
            else (base.api_key_env if base else None),
        )
    default = default or environ.get(DEFAULT_VARIABLE) or _text(section, "default", "llm")
    preset = preset or environ.get(PRESET_VARIABLE) or _text(section, "preset", "llm")
    choices = LlmChoices(
        parse_llm(preset, "the preset model") if preset else None,
        parse_llm(default, "the default model") if default else None,
    )
    return LlmConfig(providers, choices)


def config_folder(start: Path) -> Path:
    """The folder whose todoflow.toml (or pyproject.toml with `[tool.todoflow]`) configures
    a workflow in `start`: `start` or the nearest folder above it that has one (else `start`)."""
    start = start.resolve()
    for folder in (start, *start.parents):
        if (folder / "todoflow.toml").is_file() or _declares_todoflow(folder / "pyproject.toml"):
            return folder
    return start


def _declares_todoflow(pyproject: Path) -> bool:
    try:
        return "[tool.todoflow" in pyproject.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False


def _section(folder: Path) -> dict[str, Any]:
    return config_table(folder, "llm")[0]


def config_table(folder: Path, name: str) -> tuple[dict[str, Any], Path]:
    """The table `name` of the configuration in `folder` (todoflow.toml's `[name]`, else
    pyproject.toml's `[tool.todoflow.name]`; empty if neither has it) and the file it is in."""
    own = folder / "todoflow.toml"
    project = folder / "pyproject.toml"
    for path, keys in ((own, (name,)), (project, ("tool", "todoflow", name))):
        if not path.is_file():
            continue
        try:
            data: Any = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
            raise LlmConfigError(f"cannot read {path}: {error}") from None
        for key in keys:
            data = data.get(key, {}) if isinstance(data, dict) else {}
        if data:
            if not isinstance(data, dict):
                raise LlmConfigError(f"{path}: `{'.'.join(keys)}` is a table")
            return data, path
    return {}, own


def _text(table: Mapping[str, Any], key: str, where: str) -> str | None:
    value = table.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise LlmConfigError(f"[{where}] {key} is a string")
    return value


def endpoint(provider: Provider, environ: Mapping[str, str] = os.environ) -> tuple[str | None, str]:
    """The base URL (None: the `openai` package's default) and the key of a provider; for
    `openai`, the package's own OPENAI_BASE_URL is honoured. Refused when the key is
    missing, or when the loopback switch is on and the endpoint is elsewhere."""
    base_url = provider.base_url
    if provider.name == "openai" and provider.base_url is None:
        base_url = environ.get("OPENAI_BASE_URL") or None
    key = environ.get(provider.api_key_env, "") if provider.api_key_env else ""
    if provider.api_key_env and not key:
        raise LlmConfigError(f"provider `{provider.name}` needs its key in ${provider.api_key_env}")
    if environ.get(LOOPBACK_ONLY):
        host = urlparse(base_url or "https://api.openai.com/v1").hostname or ""
        if host not in LOOPBACK:
            raise LlmConfigError(
                f"provider `{provider.name}` would reach {host}: {LOOPBACK_ONLY} is set, "
                "so only a server on this machine's loopback may be asked"
            )
    return base_url, key or "not-needed"


def redact(text: str, secrets: list[str]) -> str:
    """`text` with every key in `secrets` replaced (a server may echo what it was sent)."""
    for secret in secrets:
        if secret and secret != "not-needed":
            text = text.replace(secret, "***")
    return text


def check_plan(plan: RunPlan, config: LlmConfig) -> None:
    """Before a run starts: every agent of every step has a model, each model's provider
    is known, and its endpoint may be used (its key is there; loopback when required)."""
    problems = []
    for step in plan.steps:
        agents = [("the orchestrator" if step.kind == "todo_task" else "the agent", step.configs)]
        agents += [(f"the sub-agent of route `{r.id}`", r.step.configs) for r in step.routes]
        for who, configs in agents:
            chosen = select_llm("standard", configs, config.choices).llm
            if chosen is None:
                problems.append(
                    f"step `{step.id}`: {who} has no model: give `llm` in the workflow, "
                    "--llm PROVIDER:MODEL, $TODOFLOW_LLM or `default` in todoflow.toml"
                )
                continue
            try:
                endpoint(config.provider(chosen))
            except LlmConfigError as error:
                problems.append(f"step `{step.id}`: {who}: {error}")
    if problems:
        raise LlmConfigError(
            "the LLM agent cannot run this workflow:\n  " + "\n  ".join(dict.fromkeys(problems))
        )
