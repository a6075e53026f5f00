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
import json
import os
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from todoflow.compiler.sources import UnreadableError, display_name
from todoflow.dsl.diagnostics import render_all
from todoflow.runtime import RUN_DIR

if TYPE_CHECKING:
    from todoflow.runtime.agents.base import Agent
    from todoflow.runtime.agents.spec import AgentSpec
    from todoflow.runtime.agents.tracing import LiveTrace
    from todoflow.runtime.engine import Engine
    from todoflow.runtime.llm_choice import LlmChoices
    from todoflow.runtime.plan import RunPlan
    from todoflow.runtime.store.base import Runs

EXIT_OK, EXIT_ERRORS, EXIT_USAGE, EXIT_RESUMABLE = 0, 1, 2, 3
STORE = "TODOFLOW_STORE"  # the store location when neither --store nor --run-dir is given


def add_parsers(commands: Any) -> None:
    """The verbs over runs, on the CLI's subcommand parser."""
    verbs = [_run_parser(commands), _serve_parser(commands), *_view_parsers(commands)]
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


def json_option(verb: argparse.ArgumentParser, what: str) -> None:
    """One spelling of JSON output on every verb: `--format json`, with `--json` kept as
    its alias."""
    verb.add_argument(
        "--format", choices=["text", "json"], default="text", help=f"`json`: {what} (default text)"
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
    run.add_argument(
        "--agent",
        metavar="AGENT",
        help="`human` (default) or `scripted:REPLIES.yaml`; a resumed run keeps its own unless given",
    )
    run.add_argument("--tasks", metavar="TASKS.json", help="a ready checklist for the first todo_task step")
    run.add_argument("--run-dir", metavar="DIR", help=f"where runs live (default {RUN_DIR})")
    run.add_argument("--workspace", default=".", metavar="DIR", help="where steps read and write files")
    run.add_argument("--learnings", metavar="DIR", help="the learnings folder (default: beside the source)")
    run.add_argument("--llm", metavar="PROVIDER:MODEL", help="the runtime default model (or $TODOFLOW_LLM)")
    run.add_argument(
        "--preset-llm", metavar="PROVIDER:MODEL", help="the preset's model (or $TODOFLOW_PRESET_LLM)"
    )
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
        "--fast-path-only",
        action="store_true",
        help="learn_code: a missing or failing main.py is an error, with no fallback to the orchestrator",
    )
    run.add_argument("--show-prompts", action="store_true", help="print each directive's rendered prompt")
    run.add_argument(
        "--trace",
        choices=["otlp"],
        help="export the run's spans over OTLP/HTTP as they end (so does $OTEL_EXPORTER_OTLP_ENDPOINT)",
    )
    run.add_argument(
        "--trace-content", action="store_true", help="with tracing: the prompts and replies in the spans too"
    )
    return run  # type: ignore[no-any-return]


def _serve_parser(commands: Any) -> argparse.ArgumentParser:
    serve = commands.add_parser("serve", help="serve workflows to MCP clients over stdio")
    serve.add_argument("folders", nargs="*", metavar="FLOWS_DIR", help="folders of .todoflow workflows")
    serve.add_argument("--run-dir", metavar="DIR", help=f"where runs live (default {RUN_DIR})")
    serve.add_argument(
        "--learnings", metavar="DIR", help="the learnings folder (default: beside each source)"
    )
    serve.add_argument(
        "--workspace",
        metavar="DIR",
        help="where runs' steps read and write files (default: the working folder)",
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
    return _resume(args, spec) if args.resume else _start(args, spec or AgentSpec("human"))


def _start(args: argparse.Namespace, spec: AgentSpec) -> int:
    from todoflow.runtime import process
    from todoflow.runtime.definition import read_definition, ready_checklists
    from todoflow.runtime.llm_choice import choices_from
    from todoflow.runtime.store.base import runs_at

    reading = read_definition(Path(args.file), display_name(args.file))
    sys.stderr.write(render_all(reading.diagnostics, reading.sources))
    if reading.definition is None:
        return EXIT_ERRORS
    definition = reading.definition
    ready = None
    if args.tasks:
        tasks = Path(args.tasks)
        ready, notes = ready_checklists(definition, _read_json(tasks), tasks.name)
        for step_id, note in notes:
            print(f"note: step `{step_id}`: {note}", file=sys.stderr)
    llms = choices_from(args.preset_llm, args.llm)
    folder = Path(definition.source).parent
    if spec.kind == "llm":  # the models of the options, the environment, then the configuration
        from todoflow.runtime.agents.llm_config import load_config

        llms = load_config(folder, args.llm, args.preset_llm).choices
    agent = _agent(spec, definition.plan, llms, Path(args.workspace), folder)  # before anything is made
    runs = runs_at(where(args))
    engine = process.start(
        definition,
        runs,
        workspace=Path(args.workspace),
        ready=ready,
        learnings=Path(args.learnings) if args.learnings else None,
        llms=llms,
        agent=str(spec),
        fast_path_only=args.fast_path_only,
        max_turns=args.max_turns,
    )
    print(f"started {engine.process_id} ({_shown(where(args), engine.process_id)})", file=sys.stderr)
    if args.max_turns is not None:
        print(f"note: each todo_task step may take {args.max_turns} orchestrator turns", file=sys.stderr)
    return _drive(args, runs, engine, agent)


def _resume(args: argparse.Namespace, given: AgentSpec | None) -> int:
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
    try:
        engine.directive()  # a damaged run is refused first, saying what is wrong
        agent = _agent(spec, engine.plan, engine.llms, engine.workspace, folder)
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


def _agent(spec: AgentSpec, plan: RunPlan, llms: LlmChoices, workspace: Path, folder: Path) -> Agent:
    from todoflow.runtime.agents.spec import make_agent

    return make_agent(spec, plan, llms, workspace=workspace, config=folder, terminal=(sys.stdin, sys.stdout))


def _drive(args: argparse.Namespace, runs: Runs, engine: Engine, agent: Agent) -> int:
    from todoflow.runtime.agents.driver import drive
    from todoflow.runtime.agents.scripted import ScriptedAgent

    live = _live_trace(args, engine)
    with engine, runs.driving(engine.process_id):
        try:
            outcome = drive(
                engine,
                agent,
                sys.stdout,
                args.show_prompts,
                args.fast_path_only,
                live.update if live else None,
            )
        finally:
            if live is not None:
                live.close()
        left = (
            agent.unused(engine.directive())
            if isinstance(agent, ScriptedAgent) and outcome == "complete"
            else 0
        )
        if left:
            print(f"note: the run is complete with {left} replies of the script unused", file=sys.stderr)
        resume = _resume_command(args, engine) if outcome != "complete" else []
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
    from todoflow.runtime.views.card import card_data, card_png, card_svg, card_text

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
        state = directive.status(runs.driven(args.process_id))
        finished = final_todos(engine.store, directive.state.completed_steps)
    if args.svg:
        Path(args.svg).write_text(card_svg(directive, finished), encoding="utf-8")
        print(f"wrote {args.svg}", file=sys.stderr)
    if args.png:
        card_png(card_svg(directive, finished), Path(args.png))
        print(f"wrote {args.png}", file=sys.stderr)
    if args.format == "json":
        print(json.dumps(card_data(directive, finished, state), indent=2, ensure_ascii=False))
    elif not (args.svg or args.png):
        sys.stdout.write(card_text(directive, finished))
    return EXIT_OK


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
    from todoflow.runtime.views.log import log_json, log_text

    with process.open_process(where(args), args.process_id)[0] as engine:
        engine.directive()  # a damaged run is refused here, with what is wrong
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


def report(args: argparse.Namespace) -> int:
    from todoflow.compiler.files import write_atomically
    from todoflow.runtime.views.report import ReportError, read_run, run_report
    from todoflow.runtime.views.report_html import render

    page = render(run_report(read_run(where(args), args.process_id)))
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

    learnings = Path(args.learnings) if args.learnings else None
    location = where(args)
    if learnings is not None and isinstance(location, str):
        raise UnreadableError("--learnings names a folder; with --store the learnings live in the database")
    workspace = Path(args.workspace) if args.workspace else None
    if workspace is not None and not workspace.is_dir():
        print(f"todoflow: error: the workspace {workspace} is not a folder", file=sys.stderr)
        return EXIT_USAGE
    serve_mcp([Path(f) for f in args.folders], location, learnings, workspace)
    return EXIT_OK


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
    from todoflow.runtime.store.base import known_schemes, scheme

    schemes = known_schemes()
    if scheme(store) not in schemes:
        others = ", ".join(f"{name}://" for name in schemes if name != "postgresql")
        raise UnreadableError(f"--store takes a postgresql:// URL (or {others}), not `{store}`")
    return store


def _location_options(args: argparse.Namespace) -> list[str]:
    """The options that name the run's store location again, as they were given."""
    if args.store:
        return ["--store", args.store]
    return ["--run-dir", args.run_dir or RUN_DIR] if args.run_dir or not os.environ.get(STORE) else []


def _shown(location: Path | str, process_id: str) -> str:
    if isinstance(location, Path):
        return f"run folder {location / process_id}"
    from todoflow.runtime.store.postgres import shown

    return f"in {shown(location)}"


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
    from todoflow.runtime.store import postgres as pg_store
    from todoflow.runtime.store.base import runs_at

    store = args.store or os.environ.get(STORE)
    if not store:
        raise UnreadableError(f"`db {args.action}` needs --store postgresql://… (or ${STORE})")
    url = _database(store)
    if args.action in ("init", "migrate"):
        before, after = pg_store.migrate(url, create=args.action == "init")
        if before == after:
            print(f"{pg_store.shown(url)}: todoflow's schema is at version {after}")
        else:
            print(f"{pg_store.shown(url)}: todoflow's schema went from version {before} to {after}")
        return EXIT_OK
    if not args.process_id:
        print(f"todoflow: error: `db {args.action}` needs the RUN to move", file=sys.stderr)
        return EXIT_USAGE
    folders = runs_at(Path(args.run_dir or RUN_DIR))
    database = runs_at(url)
    source, target = (database, folders) if args.action == "export" else (folders, database)
    process.copy_run(args.process_id, source, target)
    print(
        f"{args.action}ed run {args.process_id}: from {source.location} to {target.location}", file=sys.stderr
    )
    return EXIT_OK
