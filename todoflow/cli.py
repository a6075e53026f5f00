"""The `todoflow` command line: the facade that does the I/O around the pure stages.

Exit status: 0 clean, 1 when a source has errors (or `fmt --check` finds work, or
`diff` a difference), 2 for usage errors and files that cannot be read. Diagnostics go
to stderr as text, or to stdout as a JSON array (`--format json`), a SARIF log (`sarif`)
or GitHub annotations (`github`); text is coloured on a terminal, and `-q` on any verb
keeps stderr to errors (`terminal.py`). Heavy modules are imported inside the commands
that need them, so a cold `todoflow check` stays fast.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, cast

from todoflow import runs
from todoflow.compiler.sources import STDIN, UnreadableError, display_name, read_source
from todoflow.dsl.diagnostics import Diagnostic, TodoflowError, render_all
from todoflow.runtime import RUN_DIR

if TYPE_CHECKING:
    from todoflow.compiler.analysis import Analysis
    from todoflow.compiler.diff import Side
    from todoflow.runtime.definition import RunDefinition

EXIT_OK, EXIT_ERRORS, EXIT_USAGE = 0, 1, 2
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: what a shell reports for a program its pipe closed on
QUIET = "print errors only: no warnings, notes, summaries or progress (a verb's output on stdout stays)"
HELPER = "__complete"  # the hidden verb a completion script runs at a TAB (`completion.helper`)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        print(f"todoflow: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


class _Unread(_Parser):
    """The parser of a verb the command line does not name: `todoflow --help` lists it,
    and nothing reads its options, so they are not built (~2.5 ms of a cold start)."""

    def add_argument(self, *args: Any, **kwargs: Any) -> Any:
        return None

    def add_subparsers(self, *args: Any, **kwargs: Any) -> Any:
        return self

    def add_parser(self, *args: Any, **kwargs: Any) -> Any:
        return self


class _Version(argparse.Action):
    """`--version`, read from the installed package's metadata when asked (not at start-up)."""

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> None:
        from importlib.metadata import version

        print(f"todoflow {version('todoflow')}")
        parser.exit()


def build_parser(verb: str | None = None) -> argparse.ArgumentParser:
    """The command line; given `verb`, the options of the other verbs are left out (their
    parsers stay, so the top-level help and usage errors are the same)."""
    parser = _Parser(prog="todoflow", description="Check, format, compile and draw .todoflow workflows.")
    parser.add_argument("--version", action=_Version, nargs=0, help="print the version and exit")
    parser.add_argument("-q", "--quiet", action="store_true", help=QUIET)

    def verb_parser(**options: Any) -> _Parser:
        named = verb is None or options["prog"] == f"todoflow {verb}"
        return _Parser(**options) if named else _Unread(**options)

    # argparse only calls `parser_class(**options)`: a function choosing the class will do
    verb_class = cast(type[_Parser], verb_parser)
    commands = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=verb_class
    )

    _source_verbs(commands)
    _analysis_verbs(commands)
    _plan_verbs(commands)
    runs.add_parsers(commands)
    commands.add_parser("lsp", help="run the language server for editors (stdio)")
    completion = commands.add_parser("completion", help="print the shell completion script of a shell")
    completion.add_argument("shell", choices=["bash", "zsh", "fish"])
    for each in commands.choices.values():  # given after the verb too; unset there, the global value holds
        each.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS, help=QUIET)
    return parser


def _source_verbs(commands: Any) -> None:
    """`check`, `fmt`, `compile`, `graph`: the verbs over a workflow's source."""
    check = commands.add_parser("check", help="report every error and warning in .todoflow files")
    check.add_argument("files", nargs="+", metavar="FILE", help="files or folders to check (`-` for stdin)")
    runs.json_option(
        check,
        "the diagnostics as a JSON array on stdout; `sarif` (SARIF 2.1.0) and `github` (workflow "
        "annotations) on stdout too; `text` on stderr",
        ["sarif", "github"],
    )

    fmt = commands.add_parser("fmt", help="rewrite .todoflow files in canonical layout")
    fmt.add_argument(
        "files", nargs="+", metavar="FILE", help="files or folders to format (`-`: stdin to stdout)"
    )
    fmt.add_argument("--check", action="store_true", help="list unformatted files and exit 1; write nothing")

    compile_ = commands.add_parser(
        "compile", help="write plan.json, step_config.json, the machine and prompts"
    )
    compile_.add_argument("file", metavar="FILE", help="the workflow to compile")
    compile_.add_argument(
        "-o", "--output", required=True, metavar="DIR", help="output folder (`-`: plan.json to stdout)"
    )
    compile_.add_argument(
        "--force",
        action="store_true",
        help="write into a folder holding files todoflow did not write (they are left as they are)",
    )
    runs.json_option(compile_, "what was written (each file's path and sha256), on stdout")

    graph = commands.add_parser("graph", help="draw the workflow: its checklist machine, or its plan canvas")
    graph.add_argument("file", metavar="FILE", help="the workflow")
    graph.add_argument(
        "--view",
        choices=["machine", "plan"],
        default="machine",
        help="`machine`: the checklist state machine (default); `plan`: steps, routes and sub-agents",
    )
    graph.add_argument(
        "--format",
        choices=["mermaid", "md", "dot", "svg", "html"],
        default="mermaid",
        help="`html`: plan only",
    )
    graph.add_argument("--direction", choices=["LR", "TB"], default="LR")
    graph.add_argument("--step", metavar="ID", help="draw one step's own machine")
    graph.add_argument("--notes", action="store_true", help="print the notes too, as `check` does")


def _analysis_verbs(commands: Any) -> None:
    """`schema`, `diff`, `replay`, `paths`: formats, changes, runs under a change and the
    machine's paths."""
    schema = commands.add_parser("schema", help="print the JSON Schema of a file format")
    schema.add_argument("name", choices=["plan", "step-config", "todos", "diff", "replay", "dry-run"])

    diff = commands.add_parser(
        "diff", help="what NEW changes of OLD: steps, fields, routes, prompts, checklists by position"
    )
    diff.add_argument("old", metavar="OLD", help="a .todoflow file, a compiled folder or a plan.json")
    diff.add_argument("new", metavar="NEW", help="the same kinds as OLD")
    runs.json_option(diff, "the change set as one object (`todoflow schema diff`)")
    diff.add_argument(
        "--runs", action="store_true", help="every run of OLD, and what NEW would make of it (`replay`)"
    )
    _run_options(diff, "with --runs: ")

    replay = commands.add_parser(
        "replay", help="a run's journal through the engine with another definition: what still holds"
    )
    replay.add_argument("process_id", metavar="RUN", help="the run's process id")
    replay.add_argument(
        "--against", required=True, metavar="NEW", help="a .todoflow file, a compiled folder or a plan.json"
    )
    runs.json_option(replay, "the report as one object (`todoflow schema replay`)")
    _run_options(replay, "")

    paths = commands.add_parser("paths", help="the paths through each step's machine, for tests")
    paths.add_argument("file", metavar="FLOW", help="the workflow")
    paths.add_argument("--step", metavar="ID", help="one step's paths")
    paths.add_argument(
        "--max-revisions",
        type=_count,
        default=1,
        metavar="K",
        help="revise teleports a path takes at most (default 1)",
    )
    runs.json_option(paths, "each step's states, transitions and paths as one object")


def _plan_verbs(commands: Any) -> None:
    """`decompile`, `migrate`: plans made elsewhere."""
    decompile = commands.add_parser("decompile", help="write the .todoflow source of a plan.json")
    decompile.add_argument("plan", metavar="PLAN.json")
    decompile.add_argument(
        "--step-config", metavar="FILE", help="step_config.json (default: beside the plan)"
    )
    decompile.add_argument("-o", "--output", metavar="FILE", help="write the source here (default: stdout)")
    decompile.add_argument(
        "--id",
        metavar="ID",
        help="the workflow id (default: from todoflow-manifest.json beside the plan, "
        "else the file's name, or for plan.json its folder's)",
    )
    decompile.add_argument(
        "--title", metavar="TITLE", help="the workflow title (default: from todoflow-manifest.json)"
    )

    migrate = commands.add_parser("migrate", help="migrate a legacy nested plan to the flat format")
    migrate.add_argument("plan", metavar="PLAN.json")
    migrate.add_argument("--step-config", metavar="FILE", help="step_config.json (default: beside the plan)")
    migrate.add_argument(
        "--learnings", metavar="DIR", help="the learnings folder, to rename inner-id folders"
    )
    migrate.add_argument("--write", action="store_true", help="apply the changes (default: only list them)")


def _run_options(verb: argparse.ArgumentParser, lead: str) -> None:
    """Where the runs are, and how a replay treats the workspace (`replay`, `diff --runs`)."""
    verb.add_argument("--run-dir", metavar="DIR", help=f"{lead}where runs live (default {RUN_DIR})")
    verb.add_argument(
        "--store", metavar="URL", help=f"{lead}runs in a database, postgresql://… (or ${runs.STORE})"
    )
    verb.add_argument(
        "--check-workspace",
        action="store_true",
        help="look up the files NEW expects that a run never checked in its workspace, as it is now",
    )


def main(argv: Sequence[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    if words[:1] == [HELPER]:
        from todoflow import completion

        return completion.helper(words[1:])
    verb = next((word for word in words if not word.startswith("-")), None)  # no global option takes a value
    args = build_parser(verb).parse_args(words)
    if not args.quiet:
        return _piped(args)
    from todoflow.terminal import ErrorsOnly

    stderr, sys.stderr = sys.stderr, cast(TextIO, ErrorsOnly(sys.stderr))
    try:
        return _piped(args)
    finally:
        sys.stderr.flush()
        sys.stderr = stderr


def _piped(args: argparse.Namespace) -> int:
    """`_main`, quiet when the reader of standard output goes away (`... | head`): what
    is left unwritten is dropped, as a program killed by SIGPIPE drops it."""
    try:
        code = _main(args)
        if not sys.stdout.closed:  # the language server closes it when the editor says `exit`
            sys.stdout.flush()  # here, not at exit, where a closed pipe would print a traceback
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    return code


def _main(args: argparse.Namespace) -> int:
    commands: dict[str, Callable[[], int]] = {
        "check": lambda: _check(args.files, args.format),
        "fmt": lambda: _fmt(args.files, args.check),
        "compile": lambda: _compile(args.file, args.output, args.force, args.format),
        "graph": lambda: _graph(args),
        "schema": lambda: _schema(args.name),
        "diff": lambda: _diff(args),
        "replay": lambda: _replay(args),
        "paths": lambda: _paths(args.file, args.step, args.max_revisions, args.format),
        "run": lambda: runs.run(args),
        "plan": lambda: runs.plan(args),
        "status": lambda: runs.status(args),
        "serve": lambda: runs.serve(args),
        "log": lambda: runs.log(args),
        "report": lambda: runs.report(args),
        "trace": lambda: runs.trace(args),
        "learnings": lambda: runs.learnings(args),
        "db": lambda: runs.db(args),
        "runs": lambda: runs.remove(args),
        "lsp": _lsp,
        "completion": lambda: _completion(args.shell),
        "decompile": lambda: _decompile(args),
        "migrate": lambda: _migrate(args),
    }
    try:
        return commands[args.command]()
    except TodoflowError as error:  # every error raised on purpose; each renders itself
        print(f"todoflow: error: {error.render()}", file=sys.stderr)
        return EXIT_USAGE if isinstance(error, UnreadableError) else EXIT_ERRORS
    except KeyboardInterrupt:
        return 130


def _check(paths: list[str], output: str) -> int:
    from todoflow.folders import workflow_files

    found: list[Diagnostic] = []
    sources: dict[str, str] = {}
    paths = workflow_files(paths)
    for path in paths:
        analysis = _analyze(path)
        sources |= analysis.sources
        found += analysis.diagnostics
    if output == "json":
        print(json.dumps([d.to_json() for d in found], indent=2, ensure_ascii=False))
    elif output == "sarif":
        from importlib.metadata import version

        from todoflow.dsl.ci_formats import sarif_log

        print(json.dumps(sarif_log(found, version("todoflow")), indent=2, ensure_ascii=False))
    elif output == "github":
        from todoflow.dsl.ci_formats import github_annotations

        sys.stdout.write(github_annotations(found))
    else:
        sys.stderr.write(render_all(found, sources, _colour()))
        print(_summary(found, len(paths)), file=sys.stderr)
    return EXIT_ERRORS if any(d.is_error for d in found) else EXIT_OK


def _analyze(path: str) -> Analysis:
    """Read, parse and check one file (`-` is stdin); an unreadable one raises."""
    from todoflow.compiler.analysis import Analysis, analyze

    name = display_name(path)
    text, problem = read_source(path)
    if problem is not None:
        return Analysis(None, (problem,), {name: text})
    base = Path.cwd() if path == STDIN else Path(path).parent
    return analyze(text, name, base)


def _report(analysis: Analysis, notes: bool = True) -> bool:
    """Print the diagnostics to stderr (the notes only if asked); True when there is no error."""
    shown = [d for d in analysis.diagnostics if notes or d.severity != "note"]
    sys.stderr.write(render_all(shown, analysis.sources, _colour()))
    return analysis.workflow is not None


def _compile(path: str, output: str, force: bool, form: str) -> int:
    from todoflow.compiler.artifacts import emit
    from todoflow.compiler.output import write_folder

    if output == "-" and form == "json":
        print(
            "todoflow: error: `-o -` writes plan.json to stdout; --format json needs a folder",
            file=sys.stderr,
        )
        return EXIT_USAGE
    analysis = _analyze(path)
    if not _report(analysis):
        return EXIT_ERRORS
    assert analysis.workflow is not None
    artifacts = emit(analysis.workflow)
    if output == "-":
        sys.stdout.write(artifacts.file("plan.json"))
        return EXIT_OK
    written = write_folder(analysis.workflow, artifacts, Path(output), force)
    if form == "json":
        print(json.dumps(written.to_json(display_name(path), output), indent=2, ensure_ascii=False))
    for line in written.report(display_name(path), output):
        print(line, file=sys.stderr)
    return EXIT_OK


def _graph(args: argparse.Namespace) -> int:
    """`graph`: errors and warnings are printed, and the notes of a workflow that compiles
    (which `check` and `compile` show) only with `--notes`."""
    from todoflow.compiler.canvas import plan_canvas, renderers
    from todoflow.compiler.diagrams import RENDERERS
    from todoflow.compiler.machine import step_machine, workflow_machine

    path, view, output, direction, step_id = args.file, args.view, args.format, args.direction, args.step
    if view == "plan" and step_id is not None:
        print(
            "todoflow: error: --step draws one step's machine; the plan view shows every step",
            file=sys.stderr,
        )
        return EXIT_USAGE
    if view == "machine" and output not in RENDERERS:
        print(f"todoflow: error: --format {output} draws the plan canvas: add --view plan", file=sys.stderr)
        return EXIT_USAGE
    analysis = _analyze(path)
    if not _report(analysis, args.notes):
        return EXIT_ERRORS
    workflow = analysis.workflow
    assert workflow is not None
    if view == "plan":
        sys.stdout.write(renderers()[output](plan_canvas(workflow), direction))
        return EXIT_OK
    if step_id is None:
        machine = workflow_machine(workflow)
    else:
        ids = [s.id for s in workflow.all_steps()]
        if step_id not in ids:
            print(f"todoflow: error: no step `{step_id}`; the steps are {', '.join(ids)}", file=sys.stderr)
            return EXIT_USAGE
        machine = step_machine(workflow.step(step_id))
    sys.stdout.write(RENDERERS[output](machine, direction))
    return EXIT_OK


def _beside(plan: str, given: str | None, name: str) -> Path | None:
    """An explicitly given companion file, or the one of that name beside the plan."""
    if given:
        return Path(given)
    candidate = Path(plan).with_name(name)
    return candidate if candidate.is_file() else None


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise UnreadableError(f"cannot read {path}: {getattr(error, 'strerror', None) or error}") from error


def _decompile(args: argparse.Namespace) -> int:
    from todoflow.compiler.decompile import decompile_text, workflow_names
    from todoflow.compiler.files import write_atomically
    from todoflow.compiler.output import read_manifest
    from todoflow.compiler.prompt_files import read_prompt_files

    plan = Path(args.plan)
    plan_text = _read(plan)
    config_path = _beside(args.plan, args.step_config, "step_config.json")
    config_text = _read(config_path) if config_path else None
    named_by = "the folder's name" if plan.stem == "plan" else "the file's name"
    name = plan.resolve().parent.name if plan.stem == "plan" else plan.stem
    names = workflow_names(args.plan, name, named_by, read_manifest(plan.parent), args.id, args.title)
    shown = str(plan.parent) if str(plan.parent) != "." else ""
    prompts, unread = read_prompt_files(plan.parent, shown)
    result = decompile_text(
        plan_text,
        args.plan,
        config_text,
        str(config_path or "step_config.json"),
        names.workflow_id,
        names.title,
        prompts,
    )
    if result.source is None:
        sys.stderr.write(render_all(result.diagnostics, {args.plan: plan_text}, _colour()))
        return EXIT_ERRORS
    found = [*names.warnings, *unread, *result.diagnostics]
    sys.stderr.write(render_all(found, {args.plan: plan_text}, _colour()))
    if args.output:
        write_atomically(Path(args.output), result.source)
        print(f"wrote {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(result.source)
    return EXIT_OK


def _migrate(args: argparse.Namespace) -> int:
    from todoflow.compiler.migrate import apply, plan_migration

    plan = Path(args.plan)
    _read(plan)
    config = _beside(args.plan, args.step_config, "step_config.json")
    if config is not None:
        _read(config)
    migration, problems = plan_migration(plan, config, Path(args.learnings) if args.learnings else None)
    if migration is None:
        sys.stderr.write(render_all(problems, {}, _colour()))
        print("nothing written", file=sys.stderr)
        return EXIT_ERRORS
    if migration.nothing_to_do:
        print(f"{plan} already in flat format")
    for line in migration.changes:
        print(line)
    for line in migration.warnings:
        print(f"warning: {line}")
    for line in migration.conflicts:
        print(f"conflict: {line}")
    status = EXIT_ERRORS if migration.conflicts else EXIT_OK  # left for a person: on every run
    if migration.nothing_to_do:
        return status
    if not args.write:
        print("dry run: nothing written; run again with --write to apply (each file keeps a .bak)")
        return status
    apply(migration)
    print(f"migrated {plan}" + (f" and {config}" if config and config in migration.files else ""))
    return status


def _lsp() -> int:
    try:
        import pygls  # noqa: F401
    except ImportError:
        print("todoflow: error: `todoflow lsp` needs pygls: pip install 'todoflow[lsp]'", file=sys.stderr)
        return EXIT_USAGE
    from todoflow.lsp.server import serve

    serve()
    return EXIT_OK


def _count(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"a whole number from 0, not {text!r}")
    return int(text)


def _diff(args: argparse.Namespace) -> int:
    """Exit 0 when the two are equivalent, 1 when they differ, 2 when one cannot be read."""
    from todoflow.compiler.diff import compare, text

    if not args.runs and (args.run_dir or args.store or args.check_workspace):
        print("todoflow: error: --run-dir, --store and --check-workspace go with --runs", file=sys.stderr)
        return EXIT_USAGE
    old, new = _definition(args.old), _definition(args.new)
    if old is None or new is None:
        return EXIT_USAGE
    found = compare(_side(args.old, old), _side(args.new, new))
    if args.runs:
        from todoflow.runtime.store.base import runs_at
        from todoflow.runtime.views.replay import runs_of

        location = runs_at(runs.where(args))
        replays = runs_of(location, old.source_sha256, new, args.new, args.check_workspace)
        found = found.model_copy(update={"runs": list(replays)})
    sys.stdout.write(found.to_json() if args.format == "json" else text(found))
    return EXIT_OK if found.equivalent else EXIT_ERRORS


def _definition(path: str) -> RunDefinition | None:
    """A workflow read as a run reads it; None (diagnostics printed) if it cannot be."""
    from todoflow.runtime.definition import read_definition

    try:
        reading = read_definition(Path(path), path)
    except TodoflowError as error:  # a plan the runtime cannot walk
        print(f"todoflow: error: {error.render()}", file=sys.stderr)
        return None
    shown = [d for d in reading.diagnostics if d.severity != "note"]  # not a check: notes left out
    sys.stderr.write(render_all(shown, reading.sources))
    return reading.definition


def _side(path: str, definition: RunDefinition) -> Side:
    from todoflow.compiler.diff import Side

    named = Path(definition.source).suffix != ".json"  # a plan.json names no workflow
    return Side(
        path,
        definition.files,
        definition.source_sha256,
        definition.workflow_id if named else None,
        definition.title if named else None,
    )


def _replay(args: argparse.Namespace) -> int:
    """Exit 0 when every entry of the run holds under NEW, 1 when not, 2 when NEW cannot be read."""
    from todoflow.runtime.store.base import runs_at
    from todoflow.runtime.views.replay import replay, text

    new = _definition(args.against)
    if new is None:
        return EXIT_USAGE
    replayed = replay(runs_at(runs.where(args)), args.process_id, new, args.against, args.check_workspace)
    sys.stdout.write(replayed.report.to_json() if args.format == "json" else text(replayed, Path.cwd()))
    return EXIT_OK if replayed.report.verdict == "compatible" else EXIT_ERRORS


def _paths(path: str, step_id: str | None, max_revisions: int, output: str) -> int:
    from todoflow.compiler.machine import workflow_machine
    from todoflow.compiler.paths import flow_paths, text, to_json

    analysis = _analyze(path)
    if not _report(analysis):
        return EXIT_ERRORS
    assert analysis.workflow is not None
    found = flow_paths(analysis.workflow, workflow_machine(analysis.workflow), max_revisions)
    graphs = [g for g in found.graphs if step_id is None or g.step_id == step_id]
    if not graphs:
        steps = ", ".join(g.step_id for g in found.graphs)
        print(
            f"todoflow: error: no step `{step_id}` runs with paths; the steps that run: {steps}",
            file=sys.stderr,
        )
        return EXIT_USAGE
    if output == "json":
        print(json.dumps(to_json(found, graphs), indent=2, ensure_ascii=False))
    else:
        sys.stdout.write(text(found, graphs))
    return EXIT_OK


def _colour() -> bool:
    from todoflow.terminal import colour

    return colour(sys.stderr)


def _completion(shell: str) -> int:
    from todoflow.completion import script

    sys.stdout.write(script(shell, build_parser()))
    return EXIT_OK


def _schema(name: str) -> int:
    from todoflow.compiler.formats import schema

    sys.stdout.write(schema(name))
    return EXIT_OK


def _summary(found: list[Diagnostic], files: int) -> str:
    checked = f"{files} file{'s' if files != 1 else ''} checked"
    counts = [
        f"{n} {severity}{'s' if n != 1 else ''}"
        for severity in ("error", "warning", "note")
        if (n := sum(d.severity == severity for d in found))
    ]
    return f"{checked}: {', '.join(counts) or 'no problems'}"


def _fmt(paths: list[str], check_only: bool) -> int:
    from todoflow.compiler.files import write_atomically
    from todoflow.dsl.formatter import format_source
    from todoflow.folders import workflow_files

    status = EXIT_OK
    for path in workflow_files(paths):
        name = display_name(path)
        text, problem = read_source(path)
        if problem is not None:
            sys.stderr.write(render_all([problem], {name: text}, _colour()))
            status = EXIT_ERRORS
            continue
        try:
            formatted = format_source(text, name)
        except TodoflowError as error:
            sys.stderr.write(error.render() + "\n\n")
            status = EXIT_ERRORS
            continue
        if path == STDIN and not check_only:
            sys.stdout.write(formatted)
        elif formatted != text:
            if check_only:
                print(name)
                status = EXIT_ERRORS
            else:
                # a file rewritten in place keeps its permissions
                write_atomically(Path(path), formatted, mode=os.stat(path).st_mode & 0o7777)
                print(f"formatted {name}", file=sys.stderr)
    return status


if __name__ == "__main__":
    raise SystemExit(main())
