"""The Dockerfile and compose.yaml of docs/deploy.md, checked without a container
runtime: what they run is a command line todoflow accepts, as a user that is not root,
with the token from a file and the store's password out of every URL (issue 23)."""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

import yaml

from todoflow.cli import build_parser
from todoflow.runtime.serve.http import HttpOptions, checked, parse_address

from ..conftest import ROOT


def _instructions() -> list[tuple[str, str]]:
    text = (ROOT / "Dockerfile").read_text(encoding="utf-8").replace("\\\n", " ")
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in lines]


def _exec_form(value: str) -> list[str]:
    parsed = json.loads(value)
    assert isinstance(parsed, list), f"{value}: the exec form, so signals reach todoflow (SIGTERM drains)"
    return [str(part) for part in parsed]


def test_the_image_runs_serve_over_http_as_a_user_with_a_token_file() -> None:
    steps = _instructions()
    stages = [i for i, (kind, _) in enumerate(steps) if kind == "FROM"]
    final = steps[stages[-1] :]
    assert re.fullmatch(r"python:3\.\d+-slim", final[0][1]), final[0]
    users = [value for kind, value in final if kind == "USER"]
    assert users and users[-1] not in ("root", "0")
    assert any(kind == "RUN" and "[mcp,postgres,llm]" in value for kind, value in final)
    command = _exec_form(dict(final)["ENTRYPOINT"]) + _exec_form(dict(final)["CMD"])
    assert command[:2] == ["todoflow", "serve"]
    args = build_parser().parse_args(command[1:])
    assert args.token_file and args.token_file.startswith("/run/secrets/")
    host, port = parse_address(args.http)
    assert checked(HttpOptions(host=host, port=port, tokens=("from-the-file",))).port == 8000
    assert "EXPOSE 8000" in {f"{kind} {value}" for kind, value in final}


def test_compose_runs_the_database_the_schema_and_two_instances() -> None:
    compose: dict[str, Any] = yaml.safe_load((ROOT / "compose.yaml").read_text(encoding="utf-8"))
    services = compose["services"]
    instances = [name for name, service in services.items() if service.get("build") and name != "migrate"]
    assert len(instances) == 2 and "db" in services
    migrate = services["migrate"]
    assert migrate["entrypoint"] == ["todoflow", "db", "init"]
    assert build_parser().parse_args(migrate["entrypoint"][1:]).action == "init"
    for name in instances:
        service = services[name]
        store = service["environment"]["TODOFLOW_STORE"]
        assert store.startswith("postgresql://todoflow@db") and ":" not in store.split("@")[0][13:]
        assert service["secrets"] == ["todoflow_token"]
        assert service["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
        published = [shlex.split(port)[0] for port in service["ports"]]
        assert all(port.startswith("127.0.0.1:") for port in published)  # TLS and the world: the proxy's
    assert compose["secrets"]["todoflow_token"]["file"]
