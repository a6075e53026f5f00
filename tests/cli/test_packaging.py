"""The sdist builds the package and holds no tests: the suite tests the repository
(examples, docs, fixtures, snapshots, CI setup), so it runs from a clone (`make test`),
and an sdist with tests but without what they need could only fail (MANIFEST.in)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

from ..conftest import ROOT

PACKAGES = ("todoflow", "dsl", "compiler", "runtime", "grammars")
SHIPPED = {".py", ".lark", ".json", ".j2", ".todoflow", ".typed", ".sql"}  # what the package folders ship
BUILD = "import sys; from setuptools import build_meta; print(build_meta.build_{}(sys.argv[1]))"
REPOSITORY = "https://github.com/todoflow/todoflow/"


def tracked_copy(tmp_path: Path) -> Path:
    """A copy of the files git tracks: a build must not depend on what lies around."""
    names = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    source = tmp_path / "source"
    for name in filter(None, names.decode().split("\0")):
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    return source


def _build(kind: str, source: Path, out: Path) -> Path:
    out.mkdir(exist_ok=True)
    result = subprocess.run(
        [sys.executable, "-c", BUILD.format(kind), str(out)],
        cwd=source,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    # setuptools warns about a folder Python would import that the configuration leaves out
    assert "would be ignored" not in result.stdout + result.stderr, result.stdout + result.stderr
    return out / result.stdout.strip().splitlines()[-1]


def _installed_name(path: Path, source: Path) -> str:
    """Where a file of a package folder lands in the wheel (`dsl/x.py` -> `todoflow/dsl/x.py`)."""
    relative = path.relative_to(source).as_posix()
    return relative if relative.startswith("todoflow/") else f"todoflow/{relative}"


def test_the_sdist_holds_the_package_and_no_tests(tmp_path: Path) -> None:
    source = tracked_copy(tmp_path)
    sdist = _build("sdist", source, tmp_path / "dist")
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    assert not [n for n in names if n.startswith(("tests/", "bench/"))]
    package = {
        p.relative_to(source).as_posix()
        for folder in PACKAGES
        for p in (source / folder).rglob("*")
        if p.is_file() and p.suffix in {".py", ".lark", ".json", ".j2", ".todoflow", ".typed"}
    }
    assert package <= names, sorted(package - names)


def test_the_unpacked_sdist_builds_a_complete_wheel(tmp_path: Path) -> None:
    sdist = _build("sdist", tracked_copy(tmp_path), tmp_path / "dist")
    with tarfile.open(sdist) as archive:
        archive.extractall(tmp_path / "unpacked", filter="data")
    (unpacked,) = (tmp_path / "unpacked").iterdir()
    wheel = _build("wheel", unpacked, tmp_path / "wheels")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    shipped = {
        _installed_name(p, unpacked)
        for folder in PACKAGES
        for p in (unpacked / folder).rglob("*")
        if p.is_file() and p.suffix in SHIPPED
    }
    assert "todoflow/runtime/store/sql/001_schema.sql" in shipped
    assert "todoflow/runtime/serve/flows/todo-list.todoflow" in shipped
    assert "todoflow/grammars/todoflow.tables.json" in shipped  # the fast parse's tables
    assert shipped <= names, sorted(shipped - names)


def _names(requirements: list[str]) -> list[str]:
    return sorted(re.split(r"[<>=!~\[ ;]", r)[0] for r in requirements)


def test_developer_tools_are_a_dependency_group_and_the_plugin_an_extra() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    extras = project["project"]["optional-dependencies"]
    tools = ["mypy", "ruff", "vulture"]
    assert not [(extra, t) for extra, reqs in extras.items() for t in tools if t in _names(reqs)]
    assert _names(project["dependency-groups"]["dev"]) == tools
    assert _names(extras["pytest"]) == ["pytest", "syrupy"]
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert "--group dev" in makefile
    assert "'pip>=25.1'" in makefile  # the first pip with `--group`


def test_the_readme_links_work_on_the_package_index() -> None:
    """PyPI shows the README without the repository: a link is absolute (to a file that
    exists here) or an anchor of the README itself."""
    links = re.findall(r"\]\(([^)\s]+)\)", (ROOT / "README.md").read_text(encoding="utf-8"))
    assert links
    for link in links:
        if link.startswith("#"):
            continue
        assert link.startswith(REPOSITORY), link
        path = re.sub(r"^(blob|tree)/main/", "", link.removeprefix(REPOSITORY)).split("#")[0]
        assert (ROOT / path).exists(), link
