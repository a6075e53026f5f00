"""The `todoflow` command line: the facade that does the I/O around the pure stages.

Exit status: 0 clean, 1 when a source has errors (or `fmt --check` finds work),
2 for usage errors and files that cannot be read. Diagnostics go to stderr as
text, or to stdout as a JSON array with `--format json`. Heavy modules are imported
inside the commands that need them, so a cold `todoflow check` stays fast.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Sequence

from todoflow.dsl.diagnostics import Diagnostic, render_all
from todoflow.sources import STDIN, UnreadableError, display_name, read_source

EXIT_OK, EXIT_ERRORS, EXIT_USAGE = 0, 1, 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        print(f"todoflow: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="todoflow", description="Check, format and compile .todoflow workflows.")
    parser.add_argument("--version", action="version", version="todoflow 0.1.0")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)

    check = commands.add_parser("check", help="report every error and warning in .todoflow files")
    check.add_argument("files", nargs="+", metavar="FILE", help="files to check (`-` for stdin)")
    check.add_argument("--format", choices=["text", "json"], default="text", help="output format")

    fmt = commands.add_parser("fmt", help="rewrite .todoflow files in canonical layout")
    fmt.add_argument("files", nargs="+", metavar="FILE", help="files to format (`-`: stdin to stdout)")
    fmt.add_argument("--check", action="store_true", help="list unformatted files and exit 1; write nothing")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "check":
            return _check(args.files, args.format)
        return _fmt(args.files, args.check)
    except UnreadableError as error:
        print(f"todoflow: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130


def _check(paths: list[str], output: str) -> int:
    from todoflow.dsl.parser import normalize, try_parse

    found: list[Diagnostic] = []
    sources: dict[str, str] = {}
    for path in paths:
        name = display_name(path)
        text, problem = read_source(path)
        sources[name] = normalize(text)
        if problem is not None:
            found.append(problem)
            continue
        found += try_parse(text, name).diagnostics
    if output == "json":
        print(json.dumps([d.to_json() for d in found], indent=2, ensure_ascii=False))
    else:
        sys.stderr.write(render_all(found, sources))
        print(_summary(found, len(paths)), file=sys.stderr)
    return EXIT_ERRORS if any(d.is_error for d in found) else EXIT_OK


def _summary(found: list[Diagnostic], files: int) -> str:
    checked = f"{files} file{'s' if files != 1 else ''} checked"
    errors = sum(d.severity == "error" for d in found)
    warnings = sum(d.severity == "warning" for d in found)
    if not errors and not warnings:
        return f"{checked}: no problems"
    counts = [
        f"{n} {word}{'s' if n != 1 else ''}" for n, word in ((errors, "error"), (warnings, "warning")) if n
    ]
    return f"{checked}: {', '.join(counts)}"


def _fmt(paths: list[str], check_only: bool) -> int:
    from todoflow.dsl.diagnostics import TodoflowError
    from todoflow.dsl.formatter import format_source

    status = EXIT_OK
    for path in paths:
        name = display_name(path)
        text, problem = read_source(path)
        if problem is not None:
            sys.stderr.write(render_all([problem], {name: text}))
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
                _write_atomically(path, formatted)
                print(f"formatted {name}", file=sys.stderr)
    return status


def _write_atomically(path: str, text: str) -> None:
    folder = os.path.dirname(os.path.abspath(path))
    mode = os.stat(path).st_mode & 0o7777
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=".todoflow-fmt-")
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="\n") as out:
            out.write(text)
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


if __name__ == "__main__":
    raise SystemExit(main())
