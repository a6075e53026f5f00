"""The sdist builds the package and holds no tests: the suite tests the repository
(examples, docs, fixtures, snapshots, CI setup), so it runs from a clone (`make test`),
and an sdist with tests but without what they need could only fail (MANIFEST.in)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

from .conftest import ROOT

PACKAGES = ("todoflow", "dsl", "compiler", "runtime", "grammars")
BUILD = "import sys; from setuptools import build_meta; print(build_meta.build_{}(sys.argv[1]))"


def _tracked(tmp_path: Path) -> Path:
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
    return out / result.stdout.strip().splitlines()[-1]


def test_the_sdist_holds_the_package_and_no_tests(tmp_path: Path) -> None:
    source = _tracked(tmp_path)
    sdist = _build("sdist", source, tmp_path / "dist")
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    assert not [n for n in names if n.startswith(("tests/", "bench/"))]
    package = {
        p.relative_to(source).as_posix()
        for folder in PACKAGES
        for p in (source / folder).rglob("*")
        if p.is_file() and p.suffix in {".py", ".lark", ".j2", ".todoflow", ".typed"}
    }
    assert package <= names, sorted(package - names)


def test_the_unpacked_sdist_builds_a_complete_wheel(tmp_path: Path) -> None:
    sdist = _build("sdist", _tracked(tmp_path), tmp_path / "dist")
    with tarfile.open(sdist) as archive:
        archive.extractall(tmp_path / "unpacked", filter="data")
    (unpacked,) = (tmp_path / "unpacked").iterdir()
    wheel = _build("wheel", unpacked, tmp_path / "wheels")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    for needed in (
        "todoflow/grammars/todoflow.lark",
        "todoflow/compiler/templates/work.j2",
        "todoflow/runtime/serve/flows/todo-list.todoflow",
        "todoflow/runtime/store/sql/001_schema.sql",
        "todoflow/pytest_plugin.py",
        "todoflow/py.typed",
    ):
        assert needed in names
