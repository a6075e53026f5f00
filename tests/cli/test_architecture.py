"""docs/architecture.md says what the code is: its module map names every module and
folder of the packages (and nothing that is not there), and its table of the journal's
entry kinds is the one `entries.KINDS` gives."""

from __future__ import annotations

import ast
import re

from todoflow.runtime.entries import KINDS

from ..conftest import ROOT

DOC = ROOT / "docs" / "architecture.md"
PACKAGES = ("grammars", "dsl", "compiler", "runtime", "todoflow")


def entry_table() -> str:
    """The entry kinds as docs/architecture.md tabulates them: class, JSON type, the fields
    besides the head, and the first line of the class's docstring."""
    rows = [
        "| entry | JSON `type` | fields besides `seq`, `at`, `by`, `step` | what it records |",
        "|---|---|---|---|",
    ]
    for kind, cls in KINDS.items():
        fields = ", ".join(f"`{name}`" for name in cls._node_fields[4:])
        said = " ".join((cls.__doc__ or "").split("\n\n")[0].split())
        rows.append(f"| `{cls.__name__}` | `{kind}` | {fields} | {said} |")
    return "\n".join(rows) + "\n"


def test_the_entry_table_is_the_code_s() -> None:
    text = DOC.read_text(encoding="utf-8")
    start = text.index("| entry | JSON `type` |")
    end = text.index("\n\n", start) + 1
    assert text[start:end] == entry_table(), (
        "docs/architecture.md's entry table should read:\n" + entry_table()
    )


def _map() -> dict[str, set[str]]:
    """The module map's rows: package folder -> the names its rows list."""
    text = DOC.read_text(encoding="utf-8")
    start = text.index("| package | module | holds |")
    table = text[start : text.index("\n\n", start)].splitlines()[2:]
    found: dict[str, set[str]] = {}
    folder = ""
    for line in table:
        first, names, _ = (cell.strip() for cell in line.strip().strip("|").split("|", 2))
        if first:
            folder = re.findall(r"`([^`]+)/`", first)[0]
        found.setdefault(folder, set()).update(re.findall(r"`([^`]+)`", names))
    return found


def test_the_module_map_names_every_module_and_nothing_else() -> None:
    """Each folder of the map lists its modules and the folders within it that have no
    rows of their own (data: `sql/`, `flows/`, `templates/`)."""
    listed = _map()
    problems = []
    for folder, named in listed.items():
        path = ROOT / folder
        expected = {
            p.name for p in path.iterdir() if p.suffix in (".py", ".lark") and p.name != "__init__.py"
        }
        expected |= {
            f"{p.name}/"
            for p in path.iterdir()
            if p.is_dir() and not p.name.startswith((".", "__")) and f"{folder}/{p.name}" not in listed
        }
        missing, extra = sorted(expected - named), sorted(named - expected)
        if missing or extra:
            problems.append(f"{folder}/: not in the map {missing}; not in the folder {extra}")
    unmapped = [
        p.relative_to(ROOT).as_posix()
        for top in PACKAGES
        for p in (ROOT / top).rglob("*.py")
        if p.parent.relative_to(ROOT).as_posix() not in listed
        and not any(p.parent.relative_to(ROOT).as_posix().startswith(f"{folder}/") for folder in listed)
    ]
    assert not problems and not unmapped, "\n".join([*problems, f"no rows for {unmapped}"])


# The packages, held to the style's bound on a function's length (issue 20).
SHORT = ("todoflow", "dsl", "compiler", "runtime", "grammars")


def test_no_function_is_over_sixty_lines() -> None:
    long = []
    for folder in SHORT:
        for file in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    lines = (node.end_lineno or node.lineno) - node.lineno + 1
                    if lines > 60:
                        long.append(f"{file.relative_to(ROOT)}: {node.name} is {lines} lines")
    assert not long, "\n".join(long)


def test_the_server_never_guesses_its_working_folder() -> None:
    """`serve`'s workspace comes from the command line, never from where the process runs."""
    used = [
        str(file.relative_to(ROOT))
        for file in sorted((ROOT / "runtime" / "serve").rglob("*.py"))
        if "Path.cwd()" in file.read_text(encoding="utf-8")
    ]
    assert not used
