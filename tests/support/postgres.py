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
import threading
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
        """Start the server on a loopback port (a free one unless given); its URL. A free
        port another process took before the server bound it (tests run in parallel) is
        traded for another."""
        self.init()
        tries = 1 if port else 5
        for attempt in range(1, tries + 1):
            self.port = port or free_port()
            failed = self._start_server()
            if failed is None:
                break
            if attempt == tries or "already in use" not in failed:
                raise Unavailable(failed)
        self._create_database(USER)
        return self.url

    def _start_server(self) -> str | None:
        """`pg_ctl start` on `self.port`: None, or why it failed (with the log's end)."""
        log = self.folder / "log"
        options = f"-p {self.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={self.folder}"
        result = self._run(
            "pg_ctl", "start", "-w", "-t", "60", "-D", str(self.data), "-l", str(log), "-o", options,
            check=False,
        )  # fmt: skip
        if result.returncode == 0:
            return None
        tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
        return f"pg_ctl start failed: {result.stderr.strip()}\n{tail}"

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


class Relay:
    """A loopback TCP relay to a server that can lose one statement's answer, as a crash or
    a network cut in the middle of a commit does: after `cut(marker, delivered, after)`,
    the next message a client sends holding `marker` (on a connection that sent `after`
    first, if given) reaches the server (`delivered`) or not, and the client's connection
    closes before any answer reaches it."""

    def __init__(self, port: int) -> None:
        self.target = port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self.cuts = 0  # messages cut so far
        self._armed: tuple[bytes, bool, bytes | None] | None = None
        self._lock = threading.Lock()
        self._links: list[_Link] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, direct: str) -> str:
        """The URL `direct` (a URL of the relayed server) through this relay."""
        return direct.replace(f"@127.0.0.1:{self.target}/", f"@127.0.0.1:{self.port}/")

    def cut(self, marker: bytes, delivered: bool, after: bytes | None = None) -> None:
        with self._lock:
            self._armed = (marker, delivered, after)

    def close(self) -> None:
        """Down, as the server looks from behind a cut network: every connection through
        the relay closed, new ones refused."""
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes `accept`, which `close` alone does not
        self.listener.close()
        with self._lock:
            for link in self._links:
                link.close()

    def _take(self, data: bytes, link: _Link) -> bool | None:
        """Whether this message is the one to cut and reaches the server; None: not it."""
        with self._lock:
            if self._armed is None:
                return None
            marker, delivered, after = self._armed
            if after is not None and not link.primed:
                link.primed = after in data
                return None
            if marker not in data:
                return None
            self._armed = None
            self.cuts += 1
            return delivered

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:  # closed
                return
            link = _Link(client, socket.create_connection(("127.0.0.1", self.target)))
            with self._lock:
                self._links.append(link)
            threading.Thread(target=self._up, args=(link,), daemon=True).start()
            threading.Thread(target=self._down, args=(link,), daemon=True).start()

    def _up(self, link: _Link) -> None:
        with contextlib.suppress(OSError):
            while data := link.client.recv(65536):
                delivered = self._take(data, link)
                if delivered is not None:
                    link.cutting.set()
                    if not delivered:
                        break
                link.server.sendall(data)  # a delivered cut ends when its answer comes (`_down`)
        link.close()

    def _down(self, link: _Link) -> None:
        with contextlib.suppress(OSError):
            while data := link.server.recv(65536):
                if link.cutting.is_set():  # the answer to the message cut: it never arrives
                    break
                link.client.sendall(data)
        link.close()


class _Link:
    """One client's connection through the relay, and the server's end of it."""

    def __init__(self, client: socket.socket, server: socket.socket) -> None:
        self.client, self.server = client, server
        self.primed = False  # sent the message a cut waits for
        self.cutting = threading.Event()

    def close(self) -> None:
        for end in (self.client, self.server):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)
            end.close()


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
