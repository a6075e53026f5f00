"""Migrate a legacy plan: the seed's manual steps, done safely.

plan.json is rewritten exactly as the seed's script would write it. Beyond the script:
step_config.json entries under an old inner step id are moved to the outer id (merged
field by field into an existing entry; a value set differently in both is reported and
both entries are left as they are, not guessed), and learnings folders are renamed from
the inner id to the outer id (never over an existing folder). What is left for a
person (a conflict, an entry or folder named after no step of the plan) is listed on
every run, the first and the later ones alike. Step ids that would name paths are
refused, and every rename is checked to stay inside the learnings folder with links
resolved. `apply` renames first and writes each file atomically with a `.bak` beside
it; if anything fails, what it did is undone.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from todoflow.dsl.diagnostics import Diagnostic, TodoflowError
from todoflow.dsl.spans import whole_file

from .files import write_atomically
from .legacy import INNER, Flattened, is_legacy, migrate_plan
from .planfile import load_json, read_plan, read_step_config
from .sources import decode

CONFIG_FIELDS = ("execution_max_turns", "execution_llm", "conditional_llm")


class MigrationError(TodoflowError):
    """`apply` stopped; what it had done is undone."""


class Migration(NamedTuple):
    changes: list[str]  # what would change (or changed), one line each
    conflicts: list[str]  # what was left for a person to decide
    warnings: list[str]  # what migrate leaves as the seed's script does
    files: dict[Path, str]  # file -> new content
    renames: list[tuple[Path, Path]]  # learnings folders: from -> to

    @property
    def nothing_to_do(self) -> bool:
        return not self.files and not self.renames


def plan_migration(
    plan_path: Path, config_path: Path | None, learnings: Path | None
) -> tuple[Migration | None, list[Diagnostic]]:
    """What migrating would do, or the diagnostics that forbid it (nothing is written)."""
    text, problem = decode(plan_path.read_bytes(), str(plan_path))
    if problem is not None:
        return None, [problem]
    checked = read_plan(text, str(plan_path))
    found = [d for d in checked.diagnostics if d.is_error]
    data = checked.data
    config = None
    if config_path is not None:
        config_text, problem = decode(config_path.read_bytes(), str(config_path))
        if problem is not None:
            return None, [problem]
        _, problems = read_step_config(config_text, str(config_path))  # its shape, checked first
        found += [d for d in problems if d.is_error]
        config, _ = load_json(config_text, str(config_path))
    if found:
        return None, found
    found = _path_ids(data, str(plan_path))
    if found:
        return None, found
    migration = Migration([], [], [], {}, [])
    migrated, flattened = migrate_plan(data) if is_legacy(data) else (data, [])
    if flattened:
        migration.files[plan_path] = json.dumps(migrated, indent=2, ensure_ascii=False) + "\n"
    for step in flattened:
        moved = ", ".join(step.promoted) or "no field (the outer step had them all)"
        migration.changes.append(
            f"{plan_path}: {step.path} (`{step.outer_id}`): "
            f"flattened todo_task_step `{step.inner_id}`; promoted {moved}"
        )
    migration.warnings.extend(_still_nested(migrated, plan_path))
    pairs = [s for s in flattened if s.inner_id and s.inner_id != s.outer_id]
    steps = _step_ids(migrated)
    if config_path is not None and config is not None:
        left = _migrate_config(config, config_path, pairs, migration)
        for entry in config["steps"]:
            if entry["id"] not in steps and entry["id"] not in left:
                migration.conflicts.append(
                    f"{config_path}: the entry `{entry['id']}` is for no step of the plan "
                    "(an old inner id left by a conflict?): resolve it by hand"
                )
    if learnings is not None and learnings.is_dir():
        found, left = _rename_learnings(learnings, pairs, migration)
        if found:
            return None, found
        _leftover_learnings(learnings, steps, left, migration)
    return migration, []


def _step_ids(plan: Any) -> set[str]:
    """The ids of the steps readers see: an inner step's id is gone once it is flattened."""
    return {
        step["id"]
        for step, where in _walk(plan)
        if isinstance(step.get("id"), str) and not where.endswith(INNER)
    }


def _walk(plan: Any) -> Iterator[tuple[dict[str, Any], str]]:
    """Every step dict of a plan as read (inner steps included) with its JSON path."""
    steps = plan.get("steps") if isinstance(plan, dict) else None
    stack = [(s, f"steps[{i}]") for i, s in enumerate(steps if isinstance(steps, list) else [])]
    while stack:
        step, where = stack.pop()
        if not isinstance(step, dict):
            continue
        yield step, where
        stack.append((step.get(INNER), f"{where}.{INNER}"))
        routes = step.get("predefined_routes")
        for index, route in enumerate(routes if isinstance(routes, list) else []):
            if isinstance(route, dict):
                stack.append(
                    (route.get("sub_agent_step"), f"{where}.predefined_routes[{index}].sub_agent_step")
                )


MAX_NAME = 255  # bytes in a file name (NAME_MAX)


def _path_ids(plan: Any, path: str) -> list[Diagnostic]:
    """A step id names a learnings folder and a step config entry: it must be a plain name."""
    found = []
    for step, where in sorted(_walk(plan), key=lambda s: s[1]):
        value = step.get("id")
        if isinstance(value, str) and not _plain_name(value):
            shown = json.dumps(value, ensure_ascii=False)[1:-1]
            shown = shown if len(shown) <= 60 else shown[:59] + "…"
            message = (
                f"{where}.id: `{shown}` is not a plain name: a step id names a learnings folder, "
                f"so it holds no `/`, `\\` or NUL, is not `.` or `..`, and is at most {MAX_NAME} bytes"
            )
            found.append(Diagnostic("E0508", "error", message, whole_file(path)))
    return found


def _plain_name(value: str) -> bool:
    return (
        value not in ("", ".", "..")
        and not any(c in value for c in "/\\\0")
        and len(value.encode("utf-8", "surrogatepass")) <= MAX_NAME
    )


def _still_nested(plan: Any, path: Path) -> Iterator[str]:
    for step, where in sorted(_walk(plan), key=lambda s: s[1]):
        if step.get("type") == "todo_task" and INNER in step:
            yield (
                f"{path}: {where} (`{step.get('id')}`) still holds a todo_task_step: the seed's script "
                "leaves the routes of a flat step as they are, and so does migrate (every reader "
                "flattens it on the way in)"
            )


def _migrate_config(config: Any, path: Path, pairs: list[Flattened], migration: Migration) -> set[str]:
    """Move or merge each old inner id's entry; returns the inner ids left by a conflict."""
    entries: list[dict[str, Any]] = config["steps"]
    changed = False
    left = set()
    for pair in pairs:
        inner = next((e for e in entries if e["id"] == pair.inner_id), None)
        if inner is None:
            continue
        outer = next((e for e in entries if e["id"] == pair.outer_id), None)
        if outer is None:
            inner["id"] = pair.outer_id
            migration.changes.append(
                f"{path}: the entry `{pair.inner_id}` (the old inner id) becomes `{pair.outer_id}`"
            )
            changed = True
            continue
        clashes = _clashes(inner, outer)
        if clashes:
            for field, mine, theirs in clashes:
                migration.conflicts.append(
                    f"{path}: `{pair.outer_id}` and the old inner id `{pair.inner_id}` "
                    f"set {field} differently "
                    f"({json.dumps(theirs)} and {json.dumps(mine)}); both entries are left as they are: "
                    "resolve it by hand"
                )
            left.add(str(pair.inner_id))
            continue
        merged = _merge(inner, outer)
        entries.remove(inner)
        fields = ", ".join(merged) or "nothing new"
        migration.changes.append(
            f"{path}: the entry `{pair.inner_id}` is merged into `{pair.outer_id}` ({fields})"
        )
        changed = True
    if changed:
        migration.files[path] = json.dumps(config, indent=2, ensure_ascii=False) + "\n"
    return left


def _clashes(inner: dict[str, Any], outer: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    found = []
    if inner.get("declared_execution_mode") and outer.get("declared_execution_mode") not in (
        None,
        inner["declared_execution_mode"],
    ):
        found.append(
            ("declared_execution_mode", inner["declared_execution_mode"], outer["declared_execution_mode"])
        )
    mine, theirs = inner.get("agent_configs") or {}, outer.get("agent_configs") or {}
    for field in sorted(set(mine) & set(theirs)):
        if mine[field] != theirs[field]:
            found.append((f"agent_configs.{field}", mine[field], theirs[field]))
    return found


def _merge(inner: dict[str, Any], outer: dict[str, Any]) -> list[str]:
    merged = []
    if inner.get("declared_execution_mode") and not outer.get("declared_execution_mode"):
        outer["declared_execution_mode"] = inner["declared_execution_mode"]
        merged.append("declared_execution_mode")
    configs = outer.setdefault("agent_configs", {})
    for field, value in (inner.get("agent_configs") or {}).items():
        if field not in configs:
            configs[field] = value
            merged.append(f"agent_configs.{field}")
    return merged


def _rename_learnings(
    folder: Path, pairs: list[Flattened], migration: Migration
) -> tuple[list[Diagnostic], set[str]]:
    """Plan each rename inside `folder` (links resolved): an error for any that would leave
    it, and the folders left as they are by a conflict."""
    root, found, left = folder.resolve(), [], set()
    for pair in pairs:
        source, target = folder / str(pair.inner_id), folder / pair.outer_id
        if not (source.exists() or source.is_symlink()):
            continue
        for path in (source, target):
            if (path.exists() or path.is_symlink()) and not path.resolve().is_relative_to(root):
                message = f"{path} leads out of {folder} (a symbolic link): nothing is renamed"
                found.append(Diagnostic("E0508", "error", message, whole_file(str(path))))
        if not source.is_dir():
            continue
        if target.exists() or target.is_symlink():
            migration.conflicts.append(
                f"{target} exists already: {source} is left as it is (merge the two learnings by hand)"
            )
            left.add(source.name)
        else:
            migration.renames.append((source, target))
            migration.changes.append(f"{source} -> {target}")
    return found, left


def _leftover_learnings(folder: Path, steps: set[str], left: set[str], migration: Migration) -> None:
    """Learnings folders named after no step of the plan, once the renames are done
    (`left`: those a conflict already names)."""
    renamed = {name for rename in migration.renames for name in (rename[0].name, rename[1].name)}
    for entry in sorted(folder.iterdir()):
        if entry.is_dir() and entry.name not in renamed | steps | left:
            migration.conflicts.append(
                f"{entry} is for no step of the plan (an old inner id left by a conflict?): merge it by hand"
            )


def apply(migration: Migration) -> None:
    """Rename the learnings folders, then write every file (atomically, after a `.bak`
    copy). If anything fails, what was done is undone and `MigrationError` says why."""
    renamed: list[tuple[Path, Path]] = []
    backups: list[tuple[Path, bytes | None]] = []  # `.bak` files made, and what they held before
    replaced: list[Path] = []
    try:
        for source, target in migration.renames:
            if target.exists() or target.is_symlink():  # appeared since the plan was made
                raise FileExistsError(errno.EEXIST, f"{target} exists already")
            os.rename(source, target)
            renamed.append((source, target))
        for path, text in migration.files.items():
            backup = path.with_name(path.name + ".bak")
            backups.append((backup, backup.read_bytes() if backup.exists() else None))
            shutil.copy2(path, backup)
            write_atomically(path, text)
            replaced.append(path)
    except OSError as error:
        _undo(renamed, backups, replaced)
        reason = error.strerror or str(error)
        raise MigrationError(f"migrate stopped: {reason}; nothing was changed") from None


def _undo(
    renamed: list[tuple[Path, Path]], backups: list[tuple[Path, bytes | None]], replaced: list[Path]
) -> None:
    for path in reversed(replaced):
        write_atomically(path, path.with_name(path.name + ".bak").read_text(encoding="utf-8"))
    for backup, before in reversed(backups):
        if before is None:
            backup.unlink(missing_ok=True)
        else:
            backup.write_bytes(before)
    for source, target in reversed(renamed):
        os.rename(target, source)
