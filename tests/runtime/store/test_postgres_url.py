"""A PostgreSQL store URL is read once, before anything connects: shown everywhere without
its password, a malformed part named, never a traceback and never the secret (issue 21,
items 2 and 8). No server is needed: each URL is refused before a connection is tried."""

from __future__ import annotations

import subprocess
import sys

import pytest

from todoflow.runtime import entries as redaction  # the secrets no entry may hold
from todoflow.runtime.store import postgres as pg_store
from todoflow.runtime.store.base import without_password

from ...conftest import run_cli

PASSWORD = "S3cr3t"


@pytest.mark.parametrize(
    ("url", "shown", "problem"),
    [
        (
            f"postgresql://u:{PASSWORD} Pg@127.0.0.1/db",
            "postgresql://u@127.0.0.1/db",
            "the user name or password holds a space: write it %20",
        ),
        (
            f"postgresql://u:{PASSWORD}@word@127.0.0.1/db",
            "postgresql://u@127.0.0.1/db",
            "the user name or password holds an unencoded `@`: write it %40",
        ),
        (
            f"postgresql://u:{PASSWORD}@127.0.0.1:99999/db",
            "postgresql://u@127.0.0.1:99999/db",
            "the port `99999` is not a number from 1 to 65535",
        ),
        (
            f"postgresql://u:{PASSWORD}@127.0.0.1:abc/db",
            "postgresql://u@127.0.0.1:abc/db",
            "the port `abc` is not a number from 1 to 65535",
        ),
        (
            f"postgresql://u:{PASSWORD}@[::1/db",
            "postgresql://u@[::1/db",
            "the host `[::1` has no closing `]`",
        ),
        (
            f"postgresql://u:{PASSWORD}@[zz::1]:5432/db",
            "postgresql://u@[zz::1]:5432/db",
            "the host `[zz::1]` is not an IPv6 address",
        ),
        (
            f"postgresql://h/db?password={PASSWORD}&port=0",
            "postgresql://h/db?port=0",
            "the port `0` is not a number from 1 to 65535",
        ),
        (
            f"postgresql://u:{PASSWORD}@h/db?colour=red",
            "postgresql://u@h/db?colour=red",
            'invalid URI query parameter: "colour"',
        ),
    ],
)
def test_a_malformed_url_names_its_part_without_the_password(url: str, shown: str, problem: str) -> None:
    with pytest.raises(pg_store.DatabaseError) as refused:
        pg_store.checked(url)
    assert str(refused.value) == f"malformed PostgreSQL URL {shown}: {problem}"
    assert PASSWORD not in str(refused.value)


def test_the_password_is_kept_as_a_secret_and_never_shown() -> None:
    url = f"postgresql://u:{PASSWORD}%20Pg@127.0.0.1:5432/db?sslmode=disable"
    assert pg_store.checked(url) == url
    assert without_password(url) == "postgresql://u@127.0.0.1:5432/db?sslmode=disable"
    assert redaction.redact(f"a {PASSWORD} Pg and {PASSWORD}%20Pg") == "a [redacted] and [redacted]"


def test_the_command_line_shows_a_store_url_without_its_password() -> None:
    broken = run_cli("status", "--store", f"postgresql://u:{PASSWORD} Pg@127.0.0.1:1/db")
    assert broken.returncode == 1 and "Traceback" not in broken.stderr
    assert broken.stderr.startswith(
        "todoflow: error: malformed PostgreSQL URL postgresql://u@127.0.0.1:1/db:"
    )
    typo = run_cli("status", "--store", f"postgresq://u:{PASSWORD}@h/db")
    assert typo.returncode == 2 and "not `postgresq://u@h/db`" in typo.stderr
    assert PASSWORD not in broken.stdout + broken.stderr + typo.stdout + typo.stderr


@pytest.mark.parametrize("verb", [["status"], ["db", "init"]])
def test_a_database_without_the_postgres_extra_says_which_extra_to_install(verb: list[str]) -> None:
    code = (
        "import sys; sys.modules['psycopg'] = None; sys.modules['psycopg_pool'] = None; "
        "from todoflow.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    url = f"postgresql://u:{PASSWORD}@127.0.0.1:1/db"
    done = subprocess.run(
        [sys.executable, "-c", code, *verb, "--store", url], capture_output=True, text=True, check=False
    )
    assert done.returncode in (1, 2) and "Traceback" not in done.stderr
    assert "pip install 'todoflow[postgres]'" in done.stderr and PASSWORD not in done.stderr
