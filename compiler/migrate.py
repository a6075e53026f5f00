"""Migrate a legacy plan: the seed's manual steps, done safely.

plan.json is rewritten exactly as the seed's script would write it. Beyond the script:
step_config.json entries under an old inner step id are moved to the outer id (merged
field by field into an existing entry; a value set differently in both is reported and
both entries are left as they are, not guessed), and learnings folders are renamed from
the inner id to the outer id (never over an existing folder). Nothing is written
without `write=True`; then each file is replaced atomically with a `.bak` beside it.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, NamedTuple

from todoflow.dsl.diagnostics import Diagnostic

from .legacy import Flattened, is_legacy, migrate_plan
from .planfile import load_json, read_plan, read_step_config

CONFIG_FIELDS = ("execution_max_turns", "execution_llm", "conditional_llm")


class Migration(NamedTuple):
    changes: list[str]  # what would change (or changed), one line each
    conflicts: list[str]  # what was left for a person to decide
    files: dict[Path, str]  # file -> new content
    renames: list[tuple[Path, Path]]  # learnings folders: from -> to

    @property
    def nothing_to_do(self) -> bool:
        return not self.files and not self.renames


def plan_migration(
    plan_path: Path, config_path: Path | None, learnings: Path | None
) -> tuple[Migration | None, list[Diagnostic]]:
    """What migrating would do, or the diagnostics that forbid it (nothing is written)."""
    text = plan_path.read_text(encoding="utf-8")
    checked = read_plan(text, str(plan_path))
    found = [d for d in checked.diagnostics if d.is_error]
    data, _ = load_json(text, str(plan_path))
    config = None
    if config_path is not None:
        config_text = config_path.read_text(encoding="utf-8")
        _, problems = read_step_config(config_text, str(config_path))  # its shape, checked first
        found += [d for d in problems if d.is_error]
        config, _ = load_json(config_text, str(config_path))
    if found or data is None:
        return None, found
    migration = Migration([], [], {}, [])
    if not is_legacy(data):
        return migration, []
    migrated, flattened = migrate_plan(data)
    migration.files[plan_path] = json.dumps(migrated, indent=2, ensure_ascii=False) + "\n"
    for step in flattened:
        moved = ", ".join(step.promoted) or "no field (the outer step had them all)"
        migration.changes.append(
            f"{plan_path}: {step.path} (`{step.outer_id}`): "
            f"flattened todo_task_step `{step.inner_id}`; promoted {moved}"
        )
    pairs = [s for s in flattened if s.inner_id and s.inner_id != s.outer_id]
    if config_path is not None and config is not None:
        _migrate_config(config, config_path, pairs, migration)
    if learnings is not None:
        _rename_learnings(learnings, pairs, migration)
    return migration, []


def _migrate_config(config: Any, path: Path, pairs: list[Flattened], migration: Migration) -> None:
    entries: list[dict[str, Any]] = config["steps"]
    changed = False
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


def _rename_learnings(folder: Path, pairs: list[Flattened], migration: Migration) -> None:
    for pair in pairs:
        source, target = folder / str(pair.inner_id), folder / pair.outer_id
        if not source.is_dir():
            continue
        if target.exists():
            migration.conflicts.append(
                f"{target} exists already: {source} is left as it is (merge the two learnings by hand)"
            )
        else:
            migration.renames.append((source, target))
            migration.changes.append(f"{source} -> {target}")


def apply(migration: Migration) -> None:
    """Write every file (atomically, after a `.bak` copy) and rename the learnings folders."""
    for path, text in migration.files.items():
        shutil.copy2(path, path.with_name(path.name + ".bak"))
        temporary = path.with_name(f".{path.name}.migrating")
        temporary.write_text(text, encoding="utf-8")
        os.replace(temporary, path)
    for source, target in migration.renames:
        if target.exists():  # appeared since the plan was made: still never overwritten
            continue
        os.rename(source, target)
