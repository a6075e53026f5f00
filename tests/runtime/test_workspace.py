"""The workspace's confinement and prevalidation: hard links out refused like symbolic
links out, files hashed a piece at a time, a size limit for the files whose content is checked."""

from __future__ import annotations

import errno
import hashlib
import os
import tracemalloc
from pathlib import Path

import pytest

from todoflow.runtime import workspace
from todoflow.runtime.workspace import (
    CHECKED_LIMIT,
    Folder,
    Located,
    confined,
    file_digest,
    missing,
    prevalidate,
)


@pytest.fixture
def room(tmp_path: Path) -> Path:
    (tmp_path / "ws").mkdir()
    (tmp_path / "secret.txt").write_text("outside\n")
    return tmp_path / "ws"


def test_a_hard_link_to_a_file_outside_the_workspace_is_refused_like_a_symlink_out(room: Path) -> None:
    os.link(room.parent / "secret.txt", room / "out.txt")
    reason = "`out.txt` is a hard link to a file outside the workspace"
    assert confined(room, "out.txt") == reason
    assert missing(room, "out.txt") == reason
    assert prevalidate(room, ["out.txt"]).reason == f"prevalidation failed: {reason}"
    assert file_digest(room, "./out.txt") == "`./out.txt` is a hard link to a file outside the workspace"


def test_a_hard_link_whose_links_are_all_inside_the_workspace_is_the_workspaces(room: Path) -> None:
    (room / "sub").mkdir()
    (room / "a.txt").write_text("mine\n")
    os.link(room / "a.txt", room / "sub" / "b.txt")
    found = prevalidate(room, ["a.txt", "sub/b.txt"])
    digest = hashlib.sha256(b"mine\n").hexdigest()
    assert found.passed and found.files == (("a.txt", digest), ("sub/b.txt", digest))


def test_a_file_is_hashed_a_piece_at_a_time(room: Path) -> None:
    size = 64 << 20  # sparse: no disk, but reading it whole would take 64 MiB
    with open(room / "big.bin", "wb") as handle:
        handle.truncate(size)
    tracemalloc.start()
    try:
        found = file_digest(room, "big.bin")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    expected = hashlib.sha256()
    for _ in range(size // workspace.PIECE):
        expected.update(bytes(workspace.PIECE))
    assert found == ("big.bin", expected.hexdigest())
    assert peak < 4 * workspace.PIECE


def test_a_file_larger_than_the_limit_is_refused_unread(room: Path) -> None:
    with open(room / "huge.bin", "wb") as handle:
        handle.truncate(CHECKED_LIMIT + 1)
    found = prevalidate(room, ["huge.bin"])
    assert not found.passed
    assert found.reason == (
        f"prevalidation failed: `huge.bin` holds {CHECKED_LIMIT + 1:,} bytes, "
        f"more than the {CHECKED_LIMIT:,} a prevalidation checks"
    )


def test_links_out_fail_the_prevalidation_of_a_folder_asked_before_they_were_made(room: Path) -> None:
    files = Folder(room)  # the engine's: the workspace is resolved at its first question
    (room / "ok.txt").write_text("mine\n")
    assert files.prevalidate(["ok.txt"]).passed
    (room / "out.txt").symlink_to(room.parent / "secret.txt")
    (room / "up").symlink_to(room.parent)
    found = files.prevalidate(["out.txt", "up/secret.txt", "../secret.txt"])
    assert not found.passed and found.files == ()
    assert found.reason == (
        "prevalidation failed: `out.txt` resolves outside the workspace; "
        "`up/secret.txt` resolves outside the workspace; `../secret.txt` resolves outside the workspace"
    )
    assert files.missing("out.txt") == "`out.txt` resolves outside the workspace"


def test_a_name_swapped_for_a_link_after_it_was_found_is_not_followed(
    room: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (room / "out.txt").write_text("mine\n")
    located = Located(str(room / "out.txt"), "out.txt", os.lstat(room / "out.txt"))
    (room / "out.txt").unlink()  # between the look and the open, a link out takes its place
    (room / "out.txt").symlink_to(room.parent / "secret.txt")
    monkeypatch.setattr(workspace, "_located", lambda root, name: located)
    found = prevalidate(room, ["out.txt"])
    assert not found.passed and found.files == ()
    refused = os.strerror(errno.ELOOP)  # opened without following a link
    assert found.reason == f"prevalidation failed: `out.txt` cannot be read: {refused}"


def test_a_small_file_is_hashed_without_a_whole_piece(room: Path) -> None:
    (room / "out.txt").write_text("built")
    tracemalloc.start()
    try:
        found = file_digest(room, "out.txt")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert found == ("out.txt", hashlib.sha256(b"built").hexdigest())
    assert peak < workspace.PIECE // 8
