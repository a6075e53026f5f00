"""learn_code, the fast path: a step's `learnings/<step-id>/main.py` orchestrates it
deterministically, with no orchestrator model, before (or instead of) the orchestrator.

Eligible, checked mechanically when the step starts: `declared_execution_mode` is
`learn_code` in step_config.json and the step has at least one route. The script runs in
the workspace as a subprocess in its own process group, with a clean environment
(`PATH`, `HOME`, `LANG` and the three variables below: no provider key, no store URL):
`MCP_API_URL` pointing at an HTTP endpoint on 127.0.0.1 (a random port) and a per-run
token in `MCP_API_TOKEN`, sent back as `Authorization: Bearer <token>`. The group is
journaled with the attempt (`FastPathStarted.group`, and its leader's start) and killed
whole when the attempt ends, whatever ended it (success too), so nothing the script
started outlives it; a run resumed after its runner was killed kills what is left of the
group before it fails the interrupted attempt (`process_groups.kill_left`: only while it
is still the group recorded).

    POST ${MCP_API_URL}/tools/custom/call_sub_agent {"route_id", "todo_id", "instructions"}

runs that route's sub-agent through the same engine: a journaled delegation (by the
`script`), the sub-agent's answer from the run's agent, prevalidation and the learning,
exactly as if the orchestrator had delegated; it answers with the result (`gave_up`: the
sub-agent stopped without an answer, and the todo is still delegated). A request
without the token, for an unknown route, or not from loopback is refused. Success needs
exit 0 **and** the step completed by the engine (every todo confirmed, its expected
files there); any failure is journaled and the step starts afresh with the orchestrator
(`FastPathFailed`): nothing of the script's attempt carries over. `fast_path_only` makes
a missing or failing script an error instead. The runtime never writes `main.py`; its
sha256 is journaled.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import secrets
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TextIO

from todoflow.dsl.diagnostics import TodoflowError

from ..directive import Directive
from ..engine import Engine, Refusal
from ..entries import FastPathFailed, FastPathStarted, keep
from ..orchestrator import learn_code
from ..plan import RunStep
from . import process_groups
from .process_groups import kill, kill_left, leader, starting, this_runner

SCRIPT = "main.py"
TIMEOUT = 600.0  # seconds the script may run
ENDPOINT = "/tools/custom/call_sub_agent"
KEPT = ("PATH", "HOME", "LANG")  # what the script keeps of the runner's environment

SubAgent = Callable[[Engine, Directive], Directive]  # answers a delegated directive; the one after it


class FastPathError(TodoflowError):
    """`fast_path_only`: the script is missing or failed, and there is no fallback."""


class GaveUp(TodoflowError):
    """The sub-agent of a script's delegation gave no answer (it stopped, was blocked, or
    its answers were refused until it stopped): the script is told so, `gave_up`."""


class FastPathRunning(FastPathError):
    """The step's fast path runs in another process: it is not taken from it."""


def due(engine: Engine, directive: Directive, fast_path_only: bool) -> tuple[RunStep | None, Directive]:
    """The step whose fast path is to run now, with its intake passed on for the caller
    (the ready checklist, or a todo per route), and the directive that then stands; no
    step when none is due. An attempt the journal says is running and nobody runs any
    more is failed first (the step starts afresh); one running elsewhere is left alone."""
    step, state = directive.step, directive.state
    if step is None or not learn_code(step):
        return None, directive
    if state.fast_path == "running":
        if not abandoned(engine, here=False):
            raise FastPathRunning(
                f"the fast path of step `{step.id}` is running in another process (a server, or "
                "another `todoflow run`); resume the run once it has ended"
            )
        interrupted(engine, step)
        directive = engine.directive()
    if fast_path_only and directive.node != "intake":  # not running (failed above, if it was)
        return step, directive  # its intake passed on (again, after a failure), its script never started
    if (directive.state.fast_path == "failed" and not fast_path_only) or directive.node != "intake":
        return None, directive
    if directive.state.fast_path == "failed" and script_of(engine, step) is None:  # nothing new to try
        raise FastPathError(f"fast_path_only: no {SCRIPT} for step `{step.id}` in the learnings folder")
    intake = directive.ready_reply() or planned(step)
    return step, engine.step(directive.attempt_id, intake, "caller")


def script_of(engine: Engine, step: RunStep) -> Path | None:
    """`learnings/<step-id>/main.py`, if the run has a learnings folder and it is there."""
    if engine.scripts is None:
        return None
    path = engine.scripts / step.id / SCRIPT
    return path if path.is_file() else None


def planned(step: RunStep) -> dict[str, Any]:
    """The checklist of a fast path without a ready one: a todo per route, in route order
    (the script calls them by todo id)."""
    tasks = [
        {
            "action": f"{route.name}: {route.condition}",
            "expected_result": route.step.success_criteria
            or f"the `{route.id}` route's work passes its checks",
        }
        for route in step.routes
    ]
    return {"tasks": tasks, "progress_checklist_outcome": f"{len(tasks)} todos, one per route (learn_code)"}


def interrupted(engine: Engine, step: RunStep) -> None:
    """A run resumed in the middle of a fast path: the attempt was cut short, so it failed
    (the script is not run twice into one checklist)."""
    started = _started(engine)
    if started is not None and started.group is not None and process_groups.here(started.runner):
        kill_left(started.group, started.leader)  # what is left of the script must not act beside the step
    directive = engine.directive()
    reason = "the fast path was interrupted (the run stopped while it ran)"
    engine.journal(
        directive.attempt_id,
        lambda seq, at: FastPathFailed(seq=seq, at=at, by="driver", step=step.id, reason=reason),
    )


def abandoned(engine: Engine, here: bool) -> bool:
    """Whether the fast path the run's journal says is running has nobody running it: it
    was started by this process and is not `here` (running on one of its threads), by a
    program whose lease on a shared store has ended (its database presence), by a
    process of this machine that has ended, or elsewhere longer ago than a script may run."""
    started = _started(engine)
    if started is None or started.runner is None:
        return True  # a run of a version that did not say who runs it: as before, interrupted
    if started.runner == this_runner():
        return not here
    running = process_groups.alive(engine.store, started.runner)
    if running is not None:
        return not running
    try:
        age = time.time() - datetime.fromisoformat(started.at).timestamp()
    except ValueError:
        return True
    return age > TIMEOUT + 60  # by then the script was stopped, wherever it ran


def only_failed(step_id: str, reason: str) -> FastPathError:
    """`fast_path_only`: the error of an attempt that failed."""
    return FastPathError(f"fast_path_only: the fast path of step `{step_id}` failed: {reason}")


def last_failure(engine: Engine) -> FastPathError | None:
    """`fast_path_only`: the error of the attempt the journal failed last, if any."""
    failed = next((e for e in reversed(engine.store.entries()) if isinstance(e, FastPathFailed)), None)
    return None if failed is None else only_failed(failed.step, failed.reason)


def _started(engine: Engine) -> FastPathStarted | None:
    """The journal's last start of a fast path."""
    return next((e for e in reversed(engine.store.entries()) if isinstance(e, FastPathStarted)), None)


def run(
    engine: Engine,
    step: RunStep,
    sub_agent: SubAgent,
    out: TextIO,
    fast_path_only: bool = False,
    timeout: float = TIMEOUT,
    cancel: threading.Event | None = None,
) -> bool:
    """Try the fast path of `step` (its intake done); True when it completed the step.
    False means the step starts afresh with the orchestrator (the failure journaled).
    `cancel` set stops the script as the time limit does (a server shutting down)."""
    script = script_of(engine, step)
    directive = engine.directive()
    if script is None:
        problem = f"no {SCRIPT} for step `{step.id}` in the learnings folder"
        if fast_path_only:  # journaled, so the step starts afresh and a resume tries again
            engine.journal(
                directive.attempt_id,
                lambda seq, at: FastPathFailed(seq=seq, at=at, by="driver", step=step.id, reason=problem),
            )
            raise FastPathError(f"fast_path_only: {problem}")
        out.write(f"[{step.id}] learn_code: {problem}; the orchestrator runs the step\n")
        return False
    digest = hashlib.sha256(script.read_bytes()).hexdigest()
    out.write(f"[{step.id}] learn_code: running {script.name} (sha256 {digest[:12]}…)\n")
    if not step.expected_files:
        out.write(f"[{step.id}] learn_code: the step has no validation_schema; exit 0 and its todos decide\n")
    reason = _attempt(engine, step, script, digest, sub_agent, timeout, cancel or threading.Event())
    if reason is None:
        out.write(
            f"[{step.id}] learn_code: the step completed by the fast path, with no orchestrator model\n"
        )
        return True
    current = engine.directive()
    if step.id in current.state.completed_steps:  # the engine confirmed every todo: that stands
        out.write(f"[{step.id}] learn_code: {reason}, after the engine completed the step; it stands\n")
        return True
    engine.journal(
        current.attempt_id,
        lambda seq, at: FastPathFailed(seq=seq, at=at, by="driver", step=step.id, reason=reason),
    )
    if fast_path_only:
        raise only_failed(step.id, reason)
    out.write(f"[{step.id}] learn_code failed ({reason}); the orchestrator starts the step afresh\n")
    return False


def _attempt(
    engine: Engine,
    step: RunStep,
    script: Path,
    digest: str,
    sub_agent: SubAgent,
    timeout: float,
    cancel: threading.Event,
) -> str | None:
    """Run the script against the endpoint; None when it succeeded, else why not. The
    start is journaled with the script's process group once it runs (the endpoint answers
    nothing before), and the group is killed when the attempt ends, however it ends."""
    token = secrets.token_urlsafe(24)
    keep(token)  # a script that prints its environment must not put the token in the journal
    gate = _Gate()
    with _endpoint(engine, step, token, sub_agent, gate) as url:
        child: subprocess.Popen[bytes] | str = f"{SCRIPT} did not start"
        try:
            with starting():  # a stop signal meanwhile waits until `finally` can kill it
                child = _spawn(script, engine.workspace, _environment(url, token, step.id))
            engine.journal(
                engine.directive().attempt_id,
                lambda seq, at: FastPathStarted(
                    seq=seq,
                    at=at,
                    by="driver",
                    step=step.id,
                    script_sha256=digest,
                    runner=this_runner(),
                    group=child.pid if isinstance(child, subprocess.Popen) else None,
                    leader=leader(child.pid) if isinstance(child, subprocess.Popen) else None,
                ),
            )
            if isinstance(child, str):
                return child
            gate.open()
            code = _wait(child, timeout, cancel)
        finally:
            gate.shut()
            if isinstance(child, subprocess.Popen):
                kill(child)  # the script and whatever it started, success or not
    if code is None:
        if cancel.is_set():
            return f"{SCRIPT} was stopped: its runner is shutting down"
        return f"{SCRIPT} ran longer than {timeout:g} s and was stopped"
    if code != 0:
        return f"{SCRIPT} exited with {code}"
    if step.id not in engine.directive().state.completed_steps:
        return f"{SCRIPT} exited 0, but the step is not complete (todos left, or its expected files missing)"
    return None


def _environment(url: str, token: str, step_id: str) -> dict[str, str]:
    """The script's environment: nothing of the runner's but `KEPT` (no provider key, no
    store URL), and the endpoint's."""
    kept = {name: os.environ[name] for name in KEPT if name in os.environ}
    return kept | {"MCP_API_URL": url, "MCP_API_TOKEN": token, "TODOFLOW_STEP_ID": step_id}


def _spawn(script: Path, workspace: Path, env: dict[str, str]) -> subprocess.Popen[bytes] | str:
    """The script started in its own process group (its id is the child's), or why not."""
    try:
        return subprocess.Popen([sys.executable, str(script)], cwd=workspace, env=env, start_new_session=True)
    except OSError as error:
        return f"{SCRIPT} could not start: {error.strerror or error}"


def _wait(child: subprocess.Popen[bytes], timeout: float, cancel: threading.Event) -> int | None:
    """The script's exit code; None when the time limit or `cancel` came first."""
    deadline = time.monotonic() + timeout
    code = None
    while code is None and not cancel.is_set() and time.monotonic() < deadline:
        with contextlib.suppress(subprocess.TimeoutExpired):
            code = child.wait(timeout=min(0.2, max(0.0, deadline - time.monotonic())))
    return code


class _Gate:
    """Whether the endpoint answers: only while its attempt is journaled as running. A
    request that comes before the start is journaled waits for it."""

    def __init__(self) -> None:
        self._decided = threading.Event()
        self._open = False

    def open(self) -> None:
        self._open = True
        self._decided.set()

    def shut(self) -> None:
        self._open = False
        self._decided.set()

    def wait(self) -> bool:
        self._decided.wait()
        return self._open


@contextlib.contextmanager
def _endpoint(engine: Engine, step: RunStep, token: str, sub_agent: SubAgent, gate: _Gate) -> Iterator[str]:
    lock = threading.Lock()  # one delegation at a time: the run has one cursor
    expected = f"Bearer {token}".encode()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            try:
                status, answer = self.answer()
                data = json.dumps(answer, ensure_ascii=False).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except ConnectionError:  # a broken pipe, a reset
                self.close_connection = True  # the client went away: nobody to answer

        def answer(self) -> tuple[int, dict[str, Any]]:
            if self.client_address[0] not in ("127.0.0.1", "::1"):
                return 403, {"error": "only this machine may call the fast path's endpoint"}
            given = self.headers.get("Authorization", "").encode("utf-8", "surrogateescape")
            if not hmac.compare_digest(given, expected):  # in constant time: the token is a secret
                return 401, {
                    "error": "the request needs the run's token: Authorization: Bearer $MCP_API_TOKEN"
                }
            if self.path != ENDPOINT:
                return 404, {"error": f"no {self.path}; the endpoint is POST {ENDPOINT}"}
            try:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            except ValueError:
                return 400, {"error": "the body is a JSON object {route_id, todo_id, instructions}"}
            if not isinstance(body, dict) or not all(
                isinstance(body.get(k), str) for k in ("route_id", "todo_id", "instructions")
            ):
                return 400, {
                    "error": "the body is a JSON object {route_id, todo_id, instructions}, each a string"
                }
            if not gate.wait():
                return 410, {"error": "the fast path's attempt has ended"}
            if step.route(body["route_id"]) is None:
                known = ", ".join(r.id for r in step.routes)
                return 404, {"error": f"step `{step.id}` has no route `{body['route_id']}` (routes: {known})"}
            with lock:
                return _call(engine, body, sub_agent)

        def log_message(self, *args: Any) -> None:
            """Quiet: the run's own output says what happens."""

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _call(engine: Engine, body: dict[str, Any], sub_agent: SubAgent) -> tuple[int, dict[str, Any]]:
    """A delegation by the script, answered by the route's sub-agent: the result."""
    decision = {
        "next_action": "delegate",
        "selected_route_id": body["route_id"],
        "todo_id_to_execute": body["todo_id"],
        "instructions_to_sub_agent": body["instructions"],
        "selection_reasoning": f"learn_code: {SCRIPT}",
    }
    try:
        directive = engine.step(engine.directive().attempt_id, decision, by="script")
    except Refusal as refusal:
        return 409, {"error": refusal.reason}
    answer = {"todo_id": body["todo_id"], "route_id": body["route_id"]}
    try:
        after = sub_agent(engine, directive)
    except GaveUp as error:  # the todo stays delegated: the script decides what follows
        return 200, answer | {"passed": False, "reason": str(error), "next": directive.role, "gave_up": True}
    except TodoflowError as error:
        return 500, {"error": str(error)}
    finished = after.completed or after.state.step_id != directive.state.step_id  # the step is done
    returned = None if finished else after.state.returned
    passed = finished or bool(returned and returned.passed)
    return 200, answer | {
        "passed": passed,
        "reason": None if passed or returned is None else returned.reason,
        "next": "complete" if finished else after.role,
        "gave_up": False,
    }
