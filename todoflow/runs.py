"""The command line's verbs over runs: `run`, `status`, `log`, `report`, `learnings`, `serve`
and `db` (the PostgreSQL store's schema, and moving runs between stores).

Each reads its options (parsed in `todoflow.cli`) and calls the runtime's one start
path (`process.start`) or open path (`process.open_process`) at the store location the
options name (`--run-dir DIR`, the default, or `--store URL` / `$TODOFLOW_STORE`); errors are
`TodoflowError`s, which `cli.main` prints. Exit status: 0 done, 1 errors (a refused
scripted reply, a source that does not compile, a damaged run), 2 usage, 3 a run that
stopped or is blocked and can be resumed (the command to do it is printed).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shlex
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TextIO

from todoflow.compiler.sources import UnreadableError, display_name
from todoflow.dsl.diagnostics import TodoflowError, render_all
from todoflow.runtime import RUN_DIR

if TYPE_CHECKING:
    from todoflow.runtime.agents.base import Agent
    from todoflow.runtime.agents.mcp_servers import McpToolset
    from todoflow.runtime.agents.preflight import Preflight
    from todoflow.runtime.agents.spec import AgentSpec
    from todoflow.runtime.agents.toolbox import Toolset
    from todoflow.runtime.agents.tracing import LiveTrace
    from todoflow.runtime.definition import RunDefinition
    from todoflow.runtime.directive import Directive
    from todoflow.runtime.engine import Engine
    from todoflow.runtime.llm_choice import LlmChoices
    from todoflow.runtime.plan import RunPlan, Task
    from todoflow.runtime.store.base import FinalChecklist, RunMeta, Runs

EXIT_OK, EXIT_ERRORS, EXIT_USAGE, EXIT_RESUMABLE = 0, 1, 2, 3
STORE = "TODOFLOW_STORE"  # the store location when neither --store nor --run-dir is given


def add_parsers(commands: Any) -> None:
    """The verbs over runs, on the CLI's subcommand parser."""
    verbs = [_run_parser(commands), _plan_parser(commands), _serve_parser(commands), *_view_parsers(commands)]
    for verb in verbs:
        verb.add_argument(
            "--store", metavar="URL", help=f"runs in a PostgreSQL database, postgresql://… (or ${STORE})"
        )

    _runs_parser(commands)
    db = commands.add_parser(
        "db", help="the PostgreSQL store: its schema; moving runs to and from run folders"
    )
    db.add_argument("action", choices=["init", "migrate", "export", "import"])
    db.add_argument("process_id", nargs="?", metavar="RUN", help="for export and import: the run")
    db.add_argument("--store", metavar="URL", help=f"the database, postgresql://… (or ${STORE})")
    db.add_argument("--run-dir", metavar="DIR", help=f"the run folders' folder (default {RUN_DIR})")
    json_option(db, "what was done (the schema's versions, or the run moved and where), on stdout")


def _run_options(verb: argparse.ArgumentParser) -> None:
    """The options `run` starts a run with, which `plan` takes too."""
    verb.add_argument(
        "--agent",
        metavar="AGENT",
        help="`human` (default), `scripted:REPLIES.yaml` or `llm`; a resumed run keeps its own unless given",
    )
    verb.add_argument("--tasks", metavar="TASKS.json", help="a ready checklist for the first todo_task step")
    verb.add_argument("--run-dir", metavar="DIR", help=f"where runs live (default {RUN_DIR})")
    verb.add_argument("--workspace", default=".", metavar="DIR", help="where steps read and write files")
    verb.add_argument(
        "--learnings",
        metavar="DIR",
        help="the learnings folder, where learn_code's main.py is read (default: beside the source)",
    )
    verb.add_argument("--llm", metavar="PROVIDER:MODEL", help="the runtime default model (or $TODOFLOW_LLM)")
    verb.add_argument(
        "--preset-llm", metavar="PROVIDER:MODEL", help="the preset's model (or $TODOFLOW_PRESET_LLM)"
    )
    verb.add_argument(
        "--fast-path-only",
        action="store_true",
        help="learn_code: a missing or failing main.py is an error, with no fallback to the orchestrator",
    )
    verb.add_argument("--show-prompts", action="store_true", help="print each directive's rendered prompt")
    verb.add_argument(
        "--config",
        metavar="FILE",
        help="the configuration file (default: todoflow.toml found from the workflow's folder up)",
    )
    verb.add_argument(
        "--allow-shell",
        action="store_true",
        help="--agent llm: offer the model `run_command` (as `[tools] shell = true` does)",
    )


def json_option(verb: argparse.ArgumentParser, what: str, others: Sequence[str] = ()) -> None:
    """One spelling of JSON output on every verb: `--format json`, with `--json` kept as
    its alias (`others`: the verb's further formats, said in `what`)."""
    verb.add_argument(
        "--format", choices=["text", "json", *others], default="text", help=f"`json`: {what} (default text)"
    )
    verb.add_argument("--json", dest="format", action="store_const", const="json", help="--format json")


def _runs_parser(commands: Any) -> None:
    """`runs rm RUN...`, `runs prune --older-than AGE [--state ...]`: a dry run unless --yes."""
    verb = commands.add_parser("runs", help="remove runs: named ones, or old ones (a dry run unless --yes)")
    actions = verb.add_subparsers(dest="runs_action", required=True, metavar="ACTION")
    rm = actions.add_parser("rm", help="remove the runs named (never one a program drives)")
    rm.add_argument("process_ids", nargs="+", metavar="RUN")
    prune = actions.add_parser("prune", help="remove runs older than AGE (never one a program drives)")
    prune.add_argument("--older-than", required=True, type=_age, metavar="AGE", help="e.g. 30d, 12h, 2w")
    prune.add_argument(
        "--state", choices=["stopped", "complete", "blocked", "damaged"], help="only runs in this state"
    )
    for action in (rm, prune):
        action.add_argument("--yes", action="store_true", help="remove them (without it: say what would go)")
        action.add_argument("--run-dir", metavar="DIR", help=f"where runs live (default {RUN_DIR})")
        action.add_argument(
            "--store", metavar="URL", help=f"runs in a PostgreSQL database, postgresql://… (or ${STORE})"
        )


_AGE_UNITS = {"m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def _age(text: str) -> float:
    """`30d`, `12h`, `2w`, `90m`: an age in seconds."""
    number, unit = text[:-1], text[-1:]
    if unit not in _AGE_UNITS or not number.isdigit():
        raise argparse.ArgumentTypeError(f"an age is a whole number and m, h, d or w (`30d`), not {text!r}")
    return int(number) * _AGE_UNITS[unit]


def remove(args: argparse.Namespace) -> int:
    """`runs rm` and `runs prune`: each run that would go (or went) on a line; a run a
    program drives now is never removed, and is named with who drives it."""
    from datetime import UTC, datetime

    from todoflow.runtime.store.base import runs_at

    runs = runs_at(where(args))
    rows = {pid: _row(runs, pid, meta) | {"meta": meta} for pid, meta in runs.metas()}
    if args.runs_action == "rm":
        unknown = [pid for pid in args.process_ids if pid not in rows]
        if unknown:
            print(f"todoflow: error: no run {', '.join(unknown)} in {runs.location}", file=sys.stderr)
            return EXIT_ERRORS
        chosen = list(dict.fromkeys(args.process_ids))
    else:
        now = datetime.now(UTC).timestamp()
        chosen = [pid for pid, row in rows.items() if _prunable(row, now, args.older_than, args.state)]
    failed = False
    for pid in chosen:
        driver = runs.driver(pid)
        if driver is not None:
            print(f"kept {pid}: it is driven by {driver}", file=sys.stderr)
            failed = True
            continue
        if args.yes:
            runs.remove(pid)
        print(f"{'removed' if args.yes else 'would remove'} {pid}  {rows[pid]['status']}")
    if not chosen:
        print(f"no runs to remove in {runs.location}", file=sys.stderr)
    elif not args.yes:
        print("a dry run: pass --yes to remove them", file=sys.stderr)
    return EXIT_ERRORS if failed and args.runs_action == "rm" else EXIT_OK


def _prunable(row: dict[str, Any], now: float, older_than: float, state: str | None) -> bool:
    """Older than the age given (a damaged run's age is its folder's or row's start, when
    it has one) and in the state asked for; never a running run."""
    from datetime import datetime

    if row["status"] == "running" or (state is not None and row["status"] != state):
        return False
    started = getattr(row["meta"], "started_at", None)
    if not started:
        return False
    return now - datetime.fromisoformat(started.replace("Z", "+00:00")).timestamp() > older_than


def _run_parser(commands: Any) -> argparse.ArgumentParser:
    run = commands.add_parser("run", help="run a workflow, or resume a run")
    run.add_argument("file", nargs="?", metavar="FILE", help="the workflow to run")
    _run_options(run)
    run.add_argument("--resume", metavar="PROCESS_ID", help="continue a stopped or killed run")
    run.add_argument(
        "--force",
        action="store_true",
        help="with --resume: drive the run even while another program drives it",
    )
    run.add_argument(
        "--accept-changed-definition",
        action="store_true",
        help="resume even if the source changed since the start",
    )
    run.add_argument(
        "--max-turns",
        type=_bound,
        metavar="N",
        help="every todo_task step's bound on orchestrator turns (recorded with the run); "
        "with --resume: raise the current step's",
    )
    run.add_argument(
        "--no-mcp", action="store_true", help="with --agent llm: run without the configured MCP servers"
    )
    run.add_argument(
        "--trace",
        choices=["otlp"],
        help="export the run's spans over OTLP/HTTP as they end (so does $OTEL_EXPORTER_OTLP_ENDPOINT)",
    )
    run.add_argument(
        "--trace-content", action="store_true", help="with tracing: the prompts and replies in the spans too"
    )
    json_option(run, "the run's state when it ends, as `status RUN --format json` shows it, on stdout")
    return run  # type: ignore[no-any-return]


def _plan_parser(commands: Any) -> argparse.ArgumentParser:
    plan = commands.add_parser(
        "plan", help="what `run` with the same options would do, step by step; creates nothing"
    )
    plan.add_argument("file", metavar="FILE", help="the workflow")
    _run_options(plan)
    plan.add_argument(
        "--check-mcp", action="store_true", help="start the MCP servers and list their tools (then stop them)"
    )
    json_option(plan, "the same as one object (`todoflow schema dry-run`)")
    return plan  # type: ignore[no-any-return]


def _serve_parser(commands: Any) -> argparse.ArgumentParser:
    serve = commands.add_parser("serve", help="serve workflows to MCP clients (stdio, or --http)")
    serve.add_argument("folders", nargs="*", metavar="FLOWS_DIR", help="folders of .todoflow workflows")
    serve.add_argument("--run-dir", metavar="DIR", help=f"where runs live (default {RUN_DIR})")
    serve.add_argument(
        "--learnings",
        metavar="DIR",
        help="the learnings folder, where learn_code's main.py is read (default: beside each source)",
    )
    serve.add_argument(
        "--workspace",
        default=".",
        metavar="DIR",
        help="where runs' steps read and write files (default: the working folder)",
    )
    serve.add_argument(
        "--llm", metavar="PROVIDER:MODEL", help="the runtime default model in directives (or $TODOFLOW_LLM)"
    )
    serve.add_argument(
        "--preset-llm",
        metavar="PROVIDER:MODEL",
        help="the preset's model in directives (or $TODOFLOW_PRESET_LLM)",
    )
    serve.add_argument(
        "--http", metavar="[HOST:]PORT", help="serve MCP over Streamable HTTP (default host 127.0.0.1)"
    )
    serve.add_argument("--path", default="/mcp", help="with --http: the MCP endpoint's path (default /mcp)")
    serve.add_argument(
        "--token-file",
        metavar="FILE",
        help="with --http: bearer tokens, one a line (or $TODOFLOW_SERVE_TOKEN)",
    )
    serve.add_argument(
        "--log-format", choices=["text", "json"], default="text", help="with --http: the access log's lines"
    )
    serve.add_argument(
        "--workers",
        type=_worker_count,
        metavar="N",
        help="with --http: worker processes answering on the address (default: one per core)",
    )
    return serve  # type: ignore[no-any-return]


def _view_parsers(commands: Any) -> list[argparse.ArgumentParser]:
    """`status`, `log`, `report`, `learnings`: the verbs that look at runs."""
    status = commands.add_parser("status", help="list runs, or show one run's card")
    status.add_argument("process_id", nargs="?", metavar="PROCESS_ID")
    status.add_argument("--run-dir", metavar="DIR")
    status.add_argument(
        "--follow", action="store_true", help="with PROCESS_ID: print each step as it happens, until complete"
    )
    json_option(status, "the card (or the listing) as JSON")
    status.add_argument("--svg", metavar="FILE", help="export the card as an SVG image")
    status.add_argument("--png", metavar="FILE", help="export the card as a PNG image (needs Chromium)")

    log = commands.add_parser("log", help="the execution log of a run, grouped by step and iteration")
    log.add_argument("process_id", metavar="PROCESS_ID")
    log.add_argument("--run-dir", metavar="DIR")
    json_option(log, "the log as JSON (docs/runtime.md)")
    log.add_argument("--journal", action="store_true", help="the journal's entries, one JSON line each")

    report = commands.add_parser("report", help="a run as one self-contained HTML page (docs/runtime.md)")
    report.add_argument("process_id", metavar="PROCESS_ID")
    report.add_argument(
        "-o",
        "--output",
        default="report.html",
        metavar="FILE",
        help="where to write it (default report.html; `-`: stdout)",
    )
    report.add_argument("--run-dir", metavar="DIR")

    learnings = commands.add_parser("learnings", help="list, show or retire the learnings of sub-agents")
    learnings.add_argument("action", choices=["list", "show", "retire"])
    learnings.add_argument("id", nargs="?", metavar="LEARNING_ID", help="for show and retire")
    learnings.add_argument(
        "--learnings", metavar="DIR", help="the learnings folder (default `learnings`, or the store's)"
    )
    learnings.add_argument("--step", metavar="SUB_STEP_ID", help="list one sub-step's learnings")
    json_option(learnings, "the learnings as JSON")
    trace = commands.add_parser("trace", help="a run's spans (OpenTelemetry), derived from its journal")
    trace.add_argument("process_id", metavar="PROCESS_ID")
    trace.add_argument("--format", choices=["otlp-json"], default="otlp-json", help="OTLP/JSON (the default)")
    trace.add_argument("--content", action="store_true", help="the prompts and replies in the spans too")
    trace.add_argument("--run-dir", metavar="DIR")
    return [status, log, report, learnings, trace]


def run(args: argparse.Namespace) -> int:
    from todoflow.runtime.agents.spec import AgentError, AgentSpec

    if bool(args.file) == bool(args.resume):
        print("todoflow: error: give a workflow FILE to run, or --resume PROCESS_ID", file=sys.stderr)
        return EXIT_USAGE
    try:
        spec = AgentSpec.parse(args.agent) if args.agent is not None else None
    except AgentError as error:
        print(f"todoflow: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    from todoflow.runtime.agents.driver import stopped_by_signals

    # SIGTERM stops it as Ctrl-C does; the MCP servers stop when the run does
    with stopped_by_signals(), contextlib.ExitStack() as closing:
        if args.resume:
            return _resume(args, spec, closing)
        return _start(args, spec or AgentSpec("human"), closing)


def _start(args: argparse.Namespace, spec: AgentSpec, closing: contextlib.ExitStack) -> int:
    from todoflow.runtime import process
    from todoflow.runtime.agents.preflight import PreflightError
    from todoflow.runtime.store.base import runs_at

    prepared = _prepare(args, notes=True)
    if prepared is None:
        return EXIT_ERRORS
    definition, ready, notes, _ = prepared
    for step_id, note in notes:
        print(f"note: step `{step_id}`: {note}", file=sys.stderr)
    servers = _mcp_servers(args, spec, Path(definition.source).parent, closing)
    checked = _preflight(args, spec, definition, servers)  # before anything is made
    if checked.problems:
        raise PreflightError(checked.problems)
    assert checked.agent is not None
    runs = runs_at(where(args))
    engine = process.start(
        definition,
        runs,
        workspace=Path(args.workspace),
        ready=ready or None,
        learnings=Path(args.learnings) if args.learnings else None,
        llms=checked.llms,
        agent=str(spec),
        fast_path_only=args.fast_path_only,
        config=checked.config,
        max_turns=args.max_turns,
    )
    print(f"started {engine.process_id} ({_shown(where(args), engine.process_id)})", file=sys.stderr)
    if args.max_turns is not None:
        print(f"note: each todo_task step may take {args.max_turns} orchestrator turns", file=sys.stderr)
    return _drive(args, runs, engine, checked.agent)


class Prepared(NamedTuple):
    """What `run` and `plan` read before anything else: the definition, the `--tasks`
    checklists, a (step id, note) for each of their moved tasks and each checklist that
    replaces a step's own, and the source's own moved tasks by step."""

    definition: RunDefinition
    ready: dict[str, tuple[Task, ...]]
    notes: list[tuple[str, str]]
    moved: tuple[tuple[str, str], ...]


def _prepare(args: argparse.Namespace, notes: bool) -> Prepared | None:
    """The definition (None: it has errors, printed) and the `--tasks` checklists. The
    source's diagnostics go to stderr (its notes only if `notes`)."""
    from todoflow.runtime.definition import read_definition, ready_checklists

    reading = read_definition(Path(args.file), display_name(args.file))
    shown = [d for d in reading.diagnostics if notes or d.severity != "note"]
    sys.stderr.write(render_all(shown, reading.sources))
    if reading.definition is None:
        return None
    if not args.tasks:
        return Prepared(reading.definition, {}, [], reading.moved)
    tasks = Path(args.tasks)
    ready, moved = ready_checklists(reading.definition, _read_json(tasks), tasks.name)
    return Prepared(reading.definition, ready, moved, reading.moved)


def _preflight(
    args: argparse.Namespace, spec: AgentSpec, definition: RunDefinition, servers: tuple[McpToolset, ...] = ()
) -> Preflight:
    """The checks `run` makes before it creates anything (`plan` lists them); `servers`
    are started there, their tools given to the agent."""
    from todoflow.runtime.agents.preflight import preflight

    return preflight(
        spec,
        definition.plan,
        workspace=Path(args.workspace),
        config=Path(definition.source).parent,
        llm=args.llm,
        preset_llm=args.preset_llm,
        terminal=(sys.stdin, _shown_to(args)),
        config_file=_config_file(args),
        allow_shell=args.allow_shell,
        servers=servers,
    )


def plan(args: argparse.Namespace) -> int:
    """`todoflow plan FLOW [run options]`: exit 0 when `run` would start, 1 when a
    pre-flight check (or the source) says it would not; nothing is created."""
    from todoflow.runtime.agents.dry_run import Setting, dry_run, text
    from todoflow.runtime.agents.preflight import mcp_tools
    from todoflow.runtime.agents.spec import AgentError, AgentSpec
    from todoflow.runtime.plan import with_ready_tasks
    from todoflow.runtime.process import default_learnings

    try:
        spec = AgentSpec.parse(args.agent or "human")
    except AgentError as error:
        print(f"todoflow: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    prepared = _prepare(args, notes=False)  # the plan shows the notes: the tasks moved
    if prepared is None:
        return EXIT_ERRORS
    definition, ready, notes, moved = prepared
    checked = _preflight(args, spec, definition)
    problems, mcp = list(checked.problems), None
    if args.check_mcp:
        mcp, failed = mcp_tools(Path(definition.source).parent, _config_file(args))
        problems += failed
    workspace = Path(args.workspace)
    learnings = default_learnings(definition, workspace)
    setting = Setting(
        args.agent or "human",
        workspace,
        _store_shown(where(args)),
        Path(args.learnings) if args.learnings else _as_typed(learnings, args.file),
        checked.llms,
        checked.shell,
        mcp,
        args.show_prompts,
        args.fast_path_only,
        frozenset(ready),
    )
    moves: dict[str, list[str]] = {}
    for step_id, note in [*((s, n) for s, n in moved if s not in ready), *notes]:
        moves.setdefault(step_id, []).append(note)
    found = dry_run(definition, args.file, with_ready_tasks(definition.plan, ready), setting, moves, problems)
    sys.stdout.write(found.to_json() if args.format == "json" else text(found))
    return EXIT_OK if found.ready else EXIT_ERRORS


def _resume(args: argparse.Namespace, given: AgentSpec | None, closing: contextlib.ExitStack) -> int:
    from todoflow.runtime import process
    from todoflow.runtime.agents.spec import AgentSpec
    from todoflow.runtime.store.base import runs_at

    runs = runs_at(where(args))
    meta = runs.read_meta(args.resume)
    driver = runs.driver(args.resume)
    if driver is not None and not args.force:
        print(
            f"todoflow: error: run {args.resume} is driven by {driver}; two drivers would answer the same "
            "directives: pass --force to drive it too",
            file=sys.stderr,
        )
        return EXIT_ERRORS
    changed = process.changed_definition(meta)
    if changed and not args.accept_changed_definition:
        print(
            f"todoflow: error: {changed}; the run continues only with the definition it started with: "
            "pass --accept-changed-definition to do that",
            file=sys.stderr,
        )
        return EXIT_ERRORS
    engine = process.open_process(runs, args.resume)[0]
    spec = given or AgentSpec.parse(meta.agent or "human")
    folder = Path(meta.source).parent if Path(meta.source).is_absolute() else Path(meta.workspace)
    args.config = args.config or meta.config  # the configuration the run started with
    _config_changed(meta, args.config)
    try:
        engine.directive()  # a damaged run is refused first, saying what is wrong
        servers = _mcp_servers(args, spec, folder, closing)
        agent = _agent(spec, engine.plan, engine.llms, engine.workspace, folder, args, servers)
        for each in servers:  # the pre-flight: one that does not start is an error
            each.start()
    except BaseException:
        engine.close()
        raise
    engine.repair()
    if args.max_turns is not None:
        directive = engine.directive()
        engine.raise_turns(directive.attempt_id, args.max_turns)
        print(
            f"note: step `{directive.state.step_id}` may take {args.max_turns} orchestrator turns",
            file=sys.stderr,
        )
    args.fast_path_only = args.fast_path_only or meta.fast_path_only
    return _drive(args, runs, engine, agent)


def _agent(
    spec: AgentSpec,
    plan: RunPlan,
    llms: LlmChoices,
    workspace: Path,
    folder: Path,
    args: argparse.Namespace,
    toolsets: tuple[Toolset, ...],
) -> Agent:
    """The agent, made before anything of the run is (every problem said first)."""
    from todoflow.runtime.agents.spec import make_agent

    return make_agent(
        spec,
        plan,
        llms,
        workspace=workspace,
        config=folder,
        terminal=(sys.stdin, _shown_to(args)),
        config_file=_config_file(args),
        allow_shell=args.allow_shell,
        toolsets=toolsets,
    )


def _config_file(args: argparse.Namespace) -> Path | None:
    return Path(args.config) if args.config else None


def _shown_to(args: argparse.Namespace) -> TextIO:
    """Where a run's progress, card and prompts go: stdout, or stderr when stdout is the
    run's JSON (`run --format json`), so that stdout parses."""
    return sys.stderr if args.format == "json" else sys.stdout


def _config_changed(meta: RunMeta, path: str | None) -> None:
    """A note when the configuration the run started with is gone or changed since."""
    if meta.config is None or path != meta.config:
        return
    try:
        now = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        now = None
    if now != meta.config_sha256:
        print(f"note: {path} changed since the run started (or is gone)", file=sys.stderr)


def _mcp_servers(
    args: argparse.Namespace, spec: AgentSpec, folder: Path, closing: contextlib.ExitStack
) -> tuple[McpToolset, ...]:
    """The LLM agent's MCP servers (none with --no-mcp), closed when the run stops. They
    are started before anything runs, so one that does not start is a pre-flight error."""
    if spec.kind != "llm" or args.no_mcp:
        return ()
    from todoflow.runtime.agents.mcp_servers import configured

    servers = configured(folder, _config_file(args))
    closing.callback(servers.close)
    return (servers,)


def _drive(args: argparse.Namespace, runs: Runs, engine: Engine, agent: Agent) -> int:
    from todoflow.runtime.agents.base import OffersTools
    from todoflow.runtime.agents.driver import drive
    from todoflow.runtime.agents.scripted import ScriptedAgent
    from todoflow.runtime.store.base import final_todos

    live = _live_trace(args, engine)
    with engine, runs.driving(engine.process_id):
        try:
            outcome = drive(
                engine,
                agent,
                _shown_to(args),
                args.show_prompts,
                args.fast_path_only,
                live.update if live else None,
            )
        finally:
            if live is not None:
                live.close()
            if isinstance(agent, OffersTools):  # its toolsets: a command still running is killed
                agent.close()
        left = (
            agent.unused(engine.directive())
            if isinstance(agent, ScriptedAgent) and outcome == "complete"
            else 0
        )
        if left:
            print(f"note: the run is complete with {left} replies of the script unused", file=sys.stderr)
        resume = _resume_command(args, engine) if outcome != "complete" else []
        if args.format == "json":
            directive = engine.directive()
            finished = final_todos(engine.store, directive.state.completed_steps)
            ended = run_json(where(args), directive, finished, driven=False)
            ended |= {"outcome": str(outcome), "reason": outcome.reason, "resume": shlex.join(resume) or None}
            print(json.dumps(ended, indent=2, ensure_ascii=False))
    if outcome == "complete":
        return EXIT_OK
    print(f"resume with: {shlex.join(resume)}", file=sys.stderr)
    return EXIT_ERRORS if outcome == "refused" else EXIT_RESUMABLE


def _resume_command(args: argparse.Namespace, engine: Engine) -> list[str]:
    """The command that continues the run when pasted: a step out of turns goes on with a
    raised bound, so the hint names one."""
    from todoflow.runtime.orchestrator import raised_bound

    command = ["todoflow", "run", "--resume", engine.process_id, *_location_options(args)]
    directive = engine.directive()
    if directive.step is not None and directive.step.kind == "todo_task":
        raised = raised_bound(directive.step, directive.state)
        if raised is not None:
            command += ["--max-turns", str(raised)]
    return command


def _bound(text: str) -> int:
    """`--max-turns N`: a whole number of at least one turn."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"a bound on turns is a whole number of at least 1, not {text!r}")
    return value


def _live_trace(args: argparse.Namespace, engine: Engine) -> LiveTrace | None:
    from todoflow.runtime.agents.tracing import LiveTrace, otlp_exporter, tracing_wanted

    if not tracing_wanted(args.trace):
        return None
    return LiveTrace(engine, otlp_exporter(), args.trace_content)


def trace(args: argparse.Namespace) -> int:
    """`todoflow trace RUN`: the run's spans as OTLP/JSON on stdout."""
    from todoflow.runtime import process
    from todoflow.runtime.views.trace import otlp_json, run_spans, trace_id

    with process.open_process(where(args), args.process_id)[0] as engine:
        engine.directive()  # a damaged run is refused here, with what is wrong
        spans = run_spans(
            engine.plan, engine.process_id, engine.store.started_at, engine.store.entries(), args.content
        )
    print(json.dumps(otlp_json(spans, trace_id(engine.process_id)), indent=2, ensure_ascii=False))
    return EXIT_OK


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise UnreadableError(f"cannot read {path}: {getattr(error, 'strerror', None) or error}") from None


def status(args: argparse.Namespace) -> int:
    from todoflow.runtime import process
    from todoflow.runtime.store.base import final_todos, runs_at
    from todoflow.runtime.views.card import card_png, card_svg, card_text

    runs = runs_at(where(args))
    if args.process_id is None:
        rows = [_row(runs, pid, meta) for pid, meta in runs.metas()]
        if args.format == "json":
            print(json.dumps(rows, indent=2, ensure_ascii=False))
        elif not rows:
            print(f"no runs in {runs.location}")
        for row in rows if args.format != "json" else []:
            spent = (
                f"  ({row['tokens']['prompt'] + row['tokens']['completion']:,} tokens)"
                if "tokens" in row
                else ""
            )
            print(f"{row['process_id']}  {row['status']:<9} {row['where']}{spent}")
        return EXIT_OK
    if args.follow:
        return _follow(runs, args.process_id)
    with process.open_process(runs, args.process_id)[0] as engine:
        directive = engine.directive()
        finished = final_todos(engine.store, directive.state.completed_steps)
        driven = runs.driven(args.process_id)
        shown = run_json(where(args), directive, finished, driven) if args.format == "json" else None
        note_gaps(runs, engine, args)
    if args.svg:
        Path(args.svg).write_text(card_svg(directive, finished), encoding="utf-8")
        print(f"wrote {args.svg}", file=sys.stderr)
    if args.png:
        card_png(card_svg(directive, finished), Path(args.png))
        print(f"wrote {args.png}", file=sys.stderr)
    if shown is not None:
        print(json.dumps(shown, indent=2, ensure_ascii=False))
    elif not (args.svg or args.png):
        sys.stdout.write(card_text(directive, finished))
    return EXIT_OK


def run_json(
    location: Path | str, directive: Directive, finished: Mapping[str, FinalChecklist], driven: bool
) -> dict[str, Any]:
    """One run as `status RUN --format json` shows it (and `run --format json` when the run
    ends): the card's values, where the run is kept, and why it is blocked (None: it is not)."""
    from todoflow.runtime.views.card import card_data

    return card_data(directive, finished, directive.status(driven)) | {
        "location": _kept_at(location, directive.process_id),
        "blocked": directive.blocked or directive.todo_blocked,
    }


def _row(runs: Runs, process_id: str, meta: Any) -> dict[str, Any]:
    """One run of the listing; a run that cannot be read is `damaged`, and the listing goes on."""
    from todoflow.dsl.diagnostics import TodoflowError
    from todoflow.runtime import process

    row: dict[str, Any] = {"process_id": process_id, "workflow": None}
    if isinstance(meta, TodoflowError):
        return row | {"status": "damaged", "where": str(meta)}
    row["workflow"] = meta.workflow_id
    try:
        with process.open_process(runs, process_id)[0] as engine:
            directive = engine.directive()  # a damaged run raises, saying what is wrong
            state = directive.status(runs.driven(process_id))
    except TodoflowError as error:
        return row | {"status": "damaged", "where": str(error)}
    prompt, completion = directive.state.tokens
    if prompt or completion:  # the models' work so far (the LLM agent's calls)
        row["tokens"] = {"prompt": prompt, "completion": completion}
    if directive.completed:
        return row | {"status": state, "where": "result {}"}
    step = directive.step.id if directive.step else ""
    return row | {"status": state, "where": f"{step}: {directive.role}"}


def log(args: argparse.Namespace) -> int:
    from todoflow.runtime import process
    from todoflow.runtime.entries import to_json
    from todoflow.runtime.store.base import runs_at
    from todoflow.runtime.views.log import log_json, log_text

    runs = runs_at(where(args))
    with process.open_process(runs, args.process_id)[0] as engine:
        engine.directive()  # a damaged run is refused here, with what is wrong
        note_gaps(runs, engine, args)
        journal = engine.store.entries()
        if args.journal:
            sys.stdout.write(
                "".join(json.dumps(to_json(entry), ensure_ascii=False) + "\n" for entry in journal)
            )
            return EXIT_OK
        data = log_json(engine.plan, engine.process_id, engine.store.started_at, journal)
    sys.stdout.write(
        json.dumps(data, indent=2, ensure_ascii=False) + "\n" if args.format == "json" else log_text(data)
    )
    return EXIT_OK


def note_gaps(runs: Runs, engine: Engine, args: argparse.Namespace) -> None:
    """Say on stderr what the run's derived files lack against its journal (a crash or a
    full disk since its last writer): what the reader shows comes from the journal. A
    run some program drives is left alone: its driver brings them up to date."""
    if not runs.driven(engine.process_id):
        _note_gaps(engine.process_id, engine.gaps(), _location_options(args))


FROM_JOURNAL = "what is shown is read from the journal"


def _note_gaps(process_id: str, gaps: Sequence[str], options: list[str], shown: str = FROM_JOURNAL) -> None:
    """The note of a run whose derived files lack what `gaps` says, and how to rebuild them."""
    if gaps:
        command = shlex.join(["todoflow", "run", "--resume", process_id, *options])
        print(
            f"note: run {process_id}: its files derived from the journal are behind it "
            f"({'; '.join(gaps)}); {shown}; `{command}` rebuilds them",
            file=sys.stderr,
        )


def _note_unlearned(folder: Path) -> None:
    """`learnings list` of a folder: the runs of the run folders here that record into it
    and whose derived files (its learnings among them) are behind their journal, said on
    stderr — a crash or a full disk can keep a record from the folder, never from the journal."""
    from todoflow.dsl.diagnostics import TodoflowError
    from todoflow.runtime import process
    from todoflow.runtime.store.base import runs_at

    runs, root = runs_at(Path(RUN_DIR)), folder.resolve()
    for process_id, meta in runs.metas():
        if isinstance(meta, TodoflowError) or not meta.learnings or Path(meta.learnings) != root:
            continue
        if runs.driven(process_id):
            continue
        try:
            with process.open_process(runs, process_id)[0] as engine:
                gaps = engine.gaps()
        except TodoflowError:
            continue  # a damaged run: `status` says what is wrong with it
        _note_gaps(process_id, gaps, [], "the list above lacks what they lack")


def report(args: argparse.Namespace) -> int:
    from todoflow.compiler.files import write_atomically
    from todoflow.runtime.views.report import ReportError, read_run, run_report
    from todoflow.runtime.views.report_html import render

    data = read_run(where(args), args.process_id)
    _note_gaps(data.meta.process_id, data.gaps, _location_options(args))
    page = render(run_report(data))
    if args.output == "-":
        sys.stdout.write(page)
        return EXIT_OK
    try:
        write_atomically(Path(args.output), page)
    except OSError as error:
        raise ReportError(f"cannot write the report to {args.output}: {error.strerror or error}") from None
    print(f"wrote {args.output}", file=sys.stderr)
    return EXIT_OK


def learnings(args: argparse.Namespace) -> int:
    from todoflow.runtime.engine import utc_now
    from todoflow.runtime.store.base import LearningStore, runs_at
    from todoflow.runtime.store.folder import FolderLearnings

    if args.learnings and args.store:
        raise UnreadableError("give --learnings (a folder) or --store (a database), not both")
    store = None if args.learnings else args.store or os.environ.get(STORE)
    place = args.learnings or "learnings"
    folder: LearningStore | None = FolderLearnings(Path(place))
    if store:
        runs = runs_at(_database(store))
        folder, place = runs.learnings(None), runs.location
    assert folder is not None  # a database keeps the learnings of all its runs
    if args.action == "list":
        records = folder.records(args.step)
        if args.format == "json":
            print(json.dumps([r.model_dump() for r in records], indent=2, ensure_ascii=False))
        elif not records:
            print(f"no learnings in {place}")
        for record in records if args.format != "json" else []:
            print(
                f"{record.id}  {record.status:<7} {record.sub_step_id:<16} {record.at}  {record.todo_title}"
            )
        if not store:
            _note_unlearned(Path(place))
        return EXIT_OK
    if not args.id:
        print(f"todoflow: error: `learnings {args.action}` needs a learning's id", file=sys.stderr)
        return EXIT_USAGE
    record = folder.find(args.id) if args.action == "show" else folder.retire(args.id, utc_now())
    if args.action == "retire":
        print(f"retired {record.id}", file=sys.stderr)
    print(json.dumps(record.model_dump(), indent=2, ensure_ascii=False))
    return EXIT_OK


def serve(args: argparse.Namespace) -> int:
    try:
        import mcp  # noqa: F401
    except ImportError:
        print(
            "todoflow: error: `todoflow serve` needs the MCP SDK: pip install 'todoflow[mcp]'",
            file=sys.stderr,
        )
        return EXIT_USAGE
    missing = [f for f in args.folders if not Path(f).is_dir()]
    if missing:
        print(f"todoflow: error: {missing[0]} is not a folder", file=sys.stderr)
        return EXIT_USAGE
    from todoflow.runtime.serve.mcp import serve as serve_mcp
    from todoflow.runtime.serve.service import TodoService, Workflows

    learnings = Path(args.learnings) if args.learnings else None  # with --store: the scripts' folder
    location = where(args)
    workspace = Path(args.workspace)
    if not workspace.is_dir():
        print(f"todoflow: error: the workspace {workspace} is not a folder", file=sys.stderr)
        return EXIT_USAGE
    http = _http_options(args)
    workflows = Workflows([Path(f) for f in args.folders])

    workers = _workers(args)

    def serving(fd: int | None = None) -> None:
        models = (args.llm, args.preset_llm)
        service = TodoService(workflows, location, workspace, learnings, models, peers=workers > 1)
        serve_mcp(service, http if fd is None else replace(http, fd=fd))

    if workers == 1:
        serving()
        return EXIT_OK
    return _supervised(http, workers, serving)


def _worker_count(text: str) -> int:
    from todoflow.runtime.serve import workers

    try:
        return workers.count(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _workers(args: argparse.Namespace) -> int:
    """How many processes serve: one over stdio, else `--workers` (default one per core)."""
    from todoflow.runtime.serve import workers

    if args.http is None:
        if args.workers is not None:
            raise UnreadableError("--workers goes with --http: stdio is one pipe, served by one process")
        return 1
    return workers.default_count() if args.workers is None else int(args.workers)


def _supervised(http: Any, count: int, serving: Callable[[int], None]) -> int:
    """`serving` in `count` worker processes on one socket the parent listens on."""
    from todoflow.runtime.serve import workers
    from todoflow.runtime.serve.http import url

    try:
        listener = workers.listen(http.host, http.port)
    except OSError as error:
        where = f"{http.host}:{http.port}"
        raise UnreadableError(f"cannot listen on {where}: {error.strerror or error}") from None

    def work(fd: int) -> None:
        try:
            serving(fd)
        except TodoflowError as error:
            print(f"todoflow: error: {error.render()}", file=sys.stderr, flush=True)
            raise workers.StartFailed from None

    with listener:
        host, port = listener.getsockname()[:2]  # each worker says the URL once it listens
        print(f"todoflow serve: starting {count} workers on {url(host, port, http)}", file=sys.stderr)
        return workers.Supervisor(count, listener, work).run()


def _http_options(args: argparse.Namespace) -> Any:
    """`--http` and its options, checked before anything is served (None: stdio)."""
    from todoflow.runtime.serve import http

    if args.http is None:
        if args.token_file or args.path != "/mcp":
            raise UnreadableError("--token-file and --path go with --http")
        return None
    host, port = http.parse_address(args.http)
    token_file = Path(args.token_file) if args.token_file else None
    tokens = http.read_tokens(token_file, os.environ.get(http.TOKEN_ENV))
    return http.checked(
        http.HttpOptions(host=host, port=port, path=args.path, tokens=tokens, log_format=args.log_format)
    )


def where(args: argparse.Namespace) -> Path | str:
    """The store location the options name: `--store URL`, `--run-dir DIR`, else
    `$TODOFLOW_STORE`, else the default run folders."""
    if args.store and args.run_dir:
        raise UnreadableError("give --store (a database) or --run-dir (run folders), not both")
    if args.run_dir:
        return Path(args.run_dir)
    store = args.store or os.environ.get(STORE)
    return _database(store) if store else Path(RUN_DIR)


def _database(store: str) -> str:
    """A `--store` URL whose scheme an adapter serves (a folder is `--run-dir`)."""
    from todoflow.runtime.store.base import known_schemes, scheme, without_password

    schemes = known_schemes()
    if scheme(store) not in schemes:
        others = ", ".join(f"{name}://" for name in schemes if name != "postgresql")
        raise UnreadableError(
            f"--store takes a postgresql:// URL (or {others}), not `{without_password(store)}`"
        )
    return store


def _location_options(args: argparse.Namespace) -> list[str]:
    """The options that name the run's store location again, as they were given."""
    if args.store:
        return ["--store", args.store]
    return ["--run-dir", args.run_dir or RUN_DIR] if args.run_dir or not os.environ.get(STORE) else []


def _shown(location: Path | str, process_id: str) -> str:
    kept = _kept_at(location, process_id)
    return f"run folder {kept}" if isinstance(location, Path) else f"in {kept}"


def _kept_at(location: Path | str, process_id: str) -> str:
    """Where a run is kept: its run folder, or the database (without its password)."""
    if isinstance(location, Path):
        return str(location / process_id)
    from todoflow.runtime.store.base import runs_at

    return runs_at(location).location


def _as_typed(learnings: Path, typed: str) -> Path:
    """The default learnings folder as a person would type it: beside the workflow as its
    path was given (`examples/learnings`), when that is where it is."""
    given = Path(typed)
    return given.parent / learnings.name if given.resolve().parent == learnings.parent else learnings


def _store_shown(location: Path | str) -> str:
    """Where runs would be created, as `plan` says it (a database without its password)."""
    if isinstance(location, Path):
        return f"run folders in {location}"
    from todoflow.runtime.store.base import scheme

    if scheme(location) != "postgresql":
        return location
    from todoflow.runtime.store.postgres import shown

    return shown(location)


def _follow(runs: Runs, process_id: str) -> int:
    """`status RUN --follow`: a line per journal entry as it is committed, read by sequence
    number whenever the store says something may have changed (a database notifies; a
    run folder is looked at a few times a second), until the run completes."""
    from todoflow.runtime import process

    with process.open_process(runs, process_id)[0] as engine:
        seen = 0
        for _ in runs.changes(process_id, seen):
            directive = engine.directive()
            for entry in engine.store.entries(seen):
                print(f"{entry.seq:>5}  {entry.at}  {entry.step}  {entry.TYPE}", flush=True)
            seen = directive.state.seq
            if directive.completed:
                print("complete: result {}", flush=True)
                return EXIT_OK
            if seen and directive.blocked is not None:
                print(f"blocked: {directive.blocked}", flush=True)
    return EXIT_OK


def db(args: argparse.Namespace) -> int:
    """`db init`, `db migrate`: the schema; `db export RUN`, `db import RUN`: a run moved
    from the database to a run folder, or back."""
    from todoflow.runtime import process
    from todoflow.runtime.store.base import runs_at

    try:
        from todoflow.runtime.store import postgres as pg_store
    except ImportError as error:
        raise UnreadableError(
            f"`todoflow db` needs {error.name or 'psycopg'}: pip install 'todoflow[postgres]'"
        ) from None

    store = args.store or os.environ.get(STORE)
    if not store:
        raise UnreadableError(f"`db {args.action}` needs --store postgresql://… (or ${STORE})")
    url = _database(store)
    said = sys.stderr if args.format == "json" else sys.stdout  # stdout holds the JSON
    if args.action in ("init", "migrate"):
        before, after = pg_store.migrate(url, create=args.action == "init")
        if before == after:
            print(f"{pg_store.shown(url)}: todoflow's schema is at version {after}", file=said)
        else:
            print(
                f"{pg_store.shown(url)}: todoflow's schema went from version {before} to {after}", file=said
            )
        done = {"store": pg_store.shown(url), "schema_version": after, "schema_version_before": before}
    else:
        if not args.process_id:
            print(f"todoflow: error: `db {args.action}` needs the RUN to move", file=sys.stderr)
            return EXIT_USAGE
        folders = runs_at(Path(args.run_dir or RUN_DIR))
        database = runs_at(url)
        source, target = (database, folders) if args.action == "export" else (folders, database)
        process.copy_run(args.process_id, source, target)
        print(
            f"{args.action}ed run {args.process_id}: from {source.location} to {target.location}",
            file=sys.stderr,
        )
        done = {"process_id": args.process_id, "from": source.location, "to": target.location}
    if args.format == "json":
        print(json.dumps({"action": args.action, **done}, indent=2, ensure_ascii=False))
    return EXIT_OK
