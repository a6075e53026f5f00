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
event or an error. Every provider's key found in the environment is kept as a secret
(`runtime.entries`), so what a model echoes of it is redacted before it is journaled.
With `TODOFLOW_LLM_LOOPBACK_ONLY` set (the test suite sets it), an endpoint that is not
on this machine's loopback is refused.
"""

from __future__ import annotations

import hashlib
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any
from urllib.parse import urlparse

from todoflow.dsl.diagnostics import TodoflowError
from todoflow.dsl.nodes import node

from ..entries import keep
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
class ToolsConfig:
    """`[tools]`: the workspace tools' switches (docs/llm.md)."""

    shell: bool = False  # run_command offered (or `--allow-shell`)
    shell_timeout_s: int = 120  # run_command's default timeout, at most 600


@node
class ConfigFile:
    """The configuration a run was started with: its file (None: none was found), its
    sha256, and its todoflow table (`llm`, `tools`, `mcp`), checked for unknown keys."""

    path: Path | None = None
    sha256: str | None = None
    table: Mapping[str, Any] = MappingProxyType({})


@node
class LlmConfig:
    providers: Mapping[str, Provider]
    choices: LlmChoices
    tools: ToolsConfig = ToolsConfig()
    mcp: Mapping[str, Any] = MappingProxyType({})  # `[mcp]` as written: mcp_servers.py reads it
    source: ConfigFile = ConfigFile()

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
    folder: Path,
    default: str | None,
    preset: str | None,
    environ: Mapping[str, str] = os.environ,
    file: Path | None = None,
) -> LlmConfig:
    """The providers, the run's models and the tools' switches: options, then the
    environment, then the configuration (`file`, or the one found from `folder`, the
    workflow's)."""
    source = read_config(file) if file is not None else find_config(folder)
    section = source.table.get("llm", {})
    providers = dict(BUILT_IN)
    for name, fields in (section.get("providers") or {}).items():
        if not isinstance(fields, dict):
            raise LlmConfigError(f"[llm.providers.{name}] is a table with `base_url` and `api_key_env`")
        _known(fields, ("base_url", "api_key_env"), f"[llm.providers.{name}]", source)
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
    keep(*(environ.get(p.api_key_env) for p in providers.values() if p.api_key_env))
    tools = _tools(source.table.get("tools", {}), source)
    return LlmConfig(providers, choices, tools, source.table.get("mcp", {}), source)


KNOWN = {"llm": ("default", "preset", "providers"), "tools": ("shell", "shell_timeout_s"), "mcp": None}
# the tables todoflow.toml may hold and their keys (None: the table's own reader checks it)


def find_config(folder: Path) -> ConfigFile:
    """The configuration found from `folder` upwards (`config_folder`), or none."""
    found = config_folder(folder)
    own = found / "todoflow.toml"
    if own.is_file():
        return read_config(own)
    if _declares_todoflow(found / "pyproject.toml"):
        return read_config(found / "pyproject.toml")
    return ConfigFile()


def read_config(path: Path) -> ConfigFile:
    """A todoflow.toml, or a pyproject.toml's `[tool.todoflow]`: its tables checked."""
    try:
        data = path.read_bytes()
        parsed: Any = tomllib.loads(data.decode("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise LlmConfigError(f"cannot read {path}: {error}") from None
    if path.name == "pyproject.toml":
        parsed = parsed.get("tool", {}).get("todoflow", {})
    source = ConfigFile(path.resolve(), hashlib.sha256(data).hexdigest(), parsed)
    _known(parsed, tuple(KNOWN), "the configuration", source)
    for table, keys in KNOWN.items():
        if table in parsed and not isinstance(parsed[table], dict):
            raise LlmConfigError(f"{path}: `{table}` is a table")
        if keys is not None:
            _known(parsed.get(table, {}), keys, f"[{table}]", source)
    return source


def _known(table: Mapping[str, Any], keys: tuple[str, ...], where: str, source: ConfigFile) -> None:
    unknown = [key for key in table if key not in keys]
    if unknown:
        names = ", ".join(f"`{key}`" for key in unknown)
        known = ", ".join(f"`{key}`" for key in keys)
        raise LlmConfigError(f"{source.path}: {where} has no {names}; it knows {known}")


def _tools(table: Mapping[str, Any], source: ConfigFile) -> ToolsConfig:
    shell = table.get("shell", False)
    timeout = table.get("shell_timeout_s", 120)
    if not isinstance(shell, bool):
        raise LlmConfigError(f"{source.path}: [tools] shell is true or false")
    if isinstance(timeout, bool) or not isinstance(timeout, int) or not 1 <= timeout <= 600:
        raise LlmConfigError(f"{source.path}: [tools] shell_timeout_s is a whole number of seconds, 1 to 600")
    return ToolsConfig(shell, timeout)


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
    keep(key)
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
