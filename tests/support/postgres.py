"""A real PostgreSQL server for the tests, the benchmark and `make postgres`: Debian's
binaries (installed by .ci/setup-postgres), a cluster made with `initdb` in a folder of
its own, started with `pg_ctl` on a free loopback port, stopped by its own pid.

PostgreSQL refuses to run as root: as root, the server's commands run as the system user
`postgres` (Debian's package makes it) or, where there is none, `todoflow-pg`, made here.

    python -m tests.support.postgres start build/postgres   # starts it (or finds it running), prints the URL
    python -m tests.support.postgres stop build/postgres
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

USER = "todoflow"  # the database role the cluster is made with (trust authentication, loopback only)
SYSTEM_USERS = ("postgres", "todoflow-pg")  # who runs the server when we are root
REQUIRED = "TODOFLOW_REQUIRE_POSTGRES"  # set by .ci/run: a missing PostgreSQL fails instead of skipping


class Unavailable(Exception):
    """PostgreSQL cannot be run here, and why."""


def binaries() -> Path:
    """The folder of Debian's PostgreSQL binaries, the newest version installed."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=_version)
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("pg_ctl")
    if on_path:
        return Path(on_path).resolve().parent
    raise Unavailable(
        "PostgreSQL's server binaries are not installed (no /usr/lib/postgresql/*/bin/pg_ctl); "
        "`bash .ci/setup-postgres` installs Debian's `postgresql` package"
    )


def _version(path: str) -> int:
    part = Path(path).parent.parent.name
    return int(part) if part.isdigit() else 0


def server_user() -> pwd.struct_passwd | None:
    """The user the server runs as: None (ourselves) unless we are root."""
    if os.geteuid() != 0:
        return None
    for name in SYSTEM_USERS:
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    try:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", SYSTEM_USERS[-1]],
            check=True,
            capture_output=True,
        )
    except (OSError, subprocess.CalledProcessError) as error:
        raise Unavailable(f"running as root and cannot make a user for PostgreSQL: {error}") from None
    return pwd.getpwnam(SYSTEM_USERS[-1])


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Cluster:
    """One PostgreSQL cluster in `folder` (its data in `folder/data`)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder.resolve()
        self.data = self.folder / "data"
        self.bin = binaries()
        self.user = server_user()
        self.port = 0

    @property
    def url(self) -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{USER}"

    def database_url(self, name: str) -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{name}"

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        user = self.user
        return subprocess.run(
            [str(self.bin / args[0]), *args[1:]],
            capture_output=True,
            text=True,
            check=check,
            user=user.pw_uid if user else None,
            group=user.pw_gid if user else None,
            extra_groups=[] if user else None,
            cwd=self.folder,
            timeout=120,
        )

    def init(self) -> None:
        """The cluster's files, once (a folder that holds one already is kept)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        if (self.data / "PG_VERSION").is_file():
            return
        if self.user is not None:
            os.chown(self.folder, self.user.pw_uid, self.user.pw_gid)
            os.chmod(self.folder, 0o700)
        result = self._run(
            "initdb",
            "-D",
            str(self.data),
            "-U",
            USER,
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-locale",
            check=False,
        )
        if result.returncode != 0:
            raise Unavailable(f"initdb failed: {result.stderr.strip() or result.stdout.strip()}")

    def start(self, port: int | None = None) -> str:
        """Start the server on a loopback port (a free one unless given); its URL."""
        self.init()
        self.port = port or free_port()
        options = f"-p {self.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={self.folder}"
        result = self._run(
            "pg_ctl", "start", "-w", "-t", "60", "-D", str(self.data), "-l", str(self.folder / "log"),
            "-o", options, check=False,
        )  # fmt: skip
        if result.returncode != 0:
            log = (
                (self.folder / "log").read_text(errors="replace")[-2000:]
                if (self.folder / "log").exists()
                else ""
            )
            raise Unavailable(f"pg_ctl start failed: {result.stderr.strip()}\n{log}")
        self._create_database(USER)
        return self.url

    def running_port(self) -> int | None:
        """The port of the server running on this cluster, if one is."""
        pid = self.pid()
        if pid is None:
            return None
        lines = (self.data / "postmaster.pid").read_text().splitlines()
        return int(lines[3]) if len(lines) > 3 and lines[3].isdigit() else None

    def pid(self) -> int | None:
        try:
            pid = int((self.data / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        return pid

    def crash(self) -> None:
        """Stop the server the way a power cut would look to it: immediate mode, no checkpoint."""
        self._run("pg_ctl", "stop", "-m", "immediate", "-w", "-D", str(self.data))

    def restart(self) -> None:
        """Start it again on the same port (after `crash`): recovery replays its WAL."""
        self.start(self.port)

    def stop(self) -> None:
        """Stop the server by its own pid (SIGINT: PostgreSQL's fast shutdown) and wait."""
        pid = self.pid()
        if pid is None:
            return
        os.kill(pid, signal.SIGINT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.05)
        os.kill(pid, signal.SIGKILL)

    def _create_database(self, name: str) -> None:
        import psycopg

        with psycopg.connect(self.database_url("postgres"), autocommit=True) as connection:
            exists = connection.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
            if not exists:
                connection.execute(f'CREATE DATABASE "{name}"')

    def fresh_database(self, name: str) -> str:
        """A new, empty database (dropped first if it exists); its URL."""
        import psycopg

        with psycopg.connect(self.database_url("postgres"), autocommit=True) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            connection.execute(f'CREATE DATABASE "{name}"')
        return self.database_url(name)


@contextlib.contextmanager
def cluster(folder: Path) -> Iterator[Cluster]:
    """A started cluster in `folder`, stopped (and the folder removed) afterwards."""
    made = Cluster(folder)
    try:
        made.start()
        yield made
    finally:
        made.stop()
        shutil.rmtree(folder, ignore_errors=True)


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("start", "stop"):
        print("usage: python -m tests.support.postgres start|stop FOLDER", file=sys.stderr)
        return 2
    try:
        made = Cluster(Path(argv[1]))
        if argv[0] == "stop":
            made.stop()
            print(f"stopped the PostgreSQL server of {argv[1]}")
            return 0
        port = made.running_port()
        if port is None:
            made.start()
        else:
            made.port = port
    except Unavailable as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(f"PostgreSQL runs in {argv[1]} (stop it with `python -m tests.support.postgres stop {argv[1]}`):")
    print(f"export TODOFLOW_STORE={made.url}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


# -- the pytest fixtures (tests/test_postgres*.py import them) ---------------------------

_shared: list[Cluster | str] = []  # the session's cluster, or why there is none


def _session_cluster(config: pytest.Config) -> Cluster:
    """One cluster for the whole session, in a temporary folder of its own (the server's
    user must reach it), stopped by its pid when the session ends."""
    if not _shared:
        folder = Path(tempfile.mkdtemp(prefix="todoflow-pg-"))
        try:
            made = Cluster(folder)
            made.start()
        except Unavailable as error:
            shutil.rmtree(folder, ignore_errors=True)
            _shared.append(str(error))
        else:
            _shared.append(made)

            def stop() -> None:
                made.stop()
                shutil.rmtree(folder, ignore_errors=True)

            config.add_cleanup(stop)
    found = _shared[0]
    if isinstance(found, str):
        if os.environ.get(REQUIRED):
            pytest.fail(f"PostgreSQL is required here (${REQUIRED}) and cannot run: {found}", pytrace=False)
        pytest.skip(f"PostgreSQL TESTS SKIPPED: PostgreSQL cannot run here: {found}")
    return found


@pytest.fixture(scope="session")
def pg_cluster(request: pytest.FixtureRequest) -> Cluster:
    return _session_cluster(request.config)


@pytest.fixture
def pg_url(pg_cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh database with todoflow's schema, for one test; its pools closed after it."""
    from todoflow.runtime.store import postgres as pg_store
    from todoflow.runtime.store.base import runs_at

    name = "t_" + hashlib.sha256(request.node.nodeid.encode()).hexdigest()[:16]
    url = pg_cluster.fresh_database(name)
    pg_store.migrate(url, create=True)
    yield url
    runs_at(url).close()  # the program's pool of this database
