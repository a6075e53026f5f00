"""The PostgreSQL store: runs in a database, shared by any number of programs on any number
of machines (`--store postgresql://…`, docs/postgres.md). The only module that imports
psycopg (the `postgres` extra).

A run is a row of `todoflow_processes` (its meta, run.json's text, and `seq`, the
journal's last entry), its plan files, and an append-only `todoflow_journal` whose rows
hold exactly the JSON lines a run folder's journal.jsonl holds. Learnings and MCP starts
live in the database too, so a program needs nothing but the connection string.

**A step is one transaction**, one statement in autocommit: the guarded update of the
process row (`seq` from N to N+k only if it is still N), the journal rows (unique on
process and sequence, and on process and attempt id), the learnings the step proves,
every 1,000 entries a snapshot of the state, and a notification if someone follows the
run, all or none, under
READ COMMITTED. A store reads the rows after the entry it knows when a step takes the
process (`locked`), and commits on that state; if another program committed first, the
guard matches no row and `commit` raises `Moved`: the engine takes the step again from
the current state, where its attempt id is stale (or `Replayed`, for this very reply).
Nothing is held between steps, so any program serves any process.

The attempt id and a digest of the reply (`store.Request`) are kept with the step's
last journal row: a reply sent again after its step committed (the answer was lost)
is recognised and answered `Replayed`, not refused. A connection lost during the
commit leaves its outcome unknown to us: the store forgets its state and raises
`Moved`, so the step is looked at again from what the database holds.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from importlib import resources
from typing import Any, TypeVar
from urllib.parse import unquote

import psycopg
import pydantic_core
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool, PoolTimeout
from pydantic import ValidationError

from ..entries import Entry, json_line, keep, redact, to_json
from ..learnings import Learning, LearningError, learned
from ..plan import PlanError, RunPlan, Task, kept_plan, plan_from_files, run_plan
from ..state import Applied, ProcessState, from_json, initial_state, replayed
from ..state import to_json as state_json
from .base import (
    READY,
    DamagedRun,
    Moved,
    OpenRun,
    Request,
    RunMeta,
    RunRecord,
    StartRecord,
    StoreError,
    forget,
    in_order,
    program_named,
    ready_text,
    register,
    snapshot_due,
    this_program,
    without_password,
)

T = TypeVar("T")
POOL_SIZE = 4  # connections a program keeps to one database
CHANNEL = "todoflow_journal"  # NOTIFY channel: `<process id> <seq>` after each step
DRIVER_LOCKS = 0x746F646F  # advisory-lock namespace of the instances that drive runs
FOLLOW_WAKE = 5.0  # seconds a follower waits for a notification before looking anyway
CONNECT_TIMEOUT = 10
# The server's TCP keepalive on an instance's presence connection: a machine that vanished
# without closing it loses its presence (and the lease of a script it ran) within
# idle + interval x count seconds, 25 here, instead of the system's two hours.
KEEPALIVE = "-c tcp_keepalives_idle=10 -c tcp_keepalives_interval=5 -c tcp_keepalives_count=3"


class DatabaseError(StoreError):
    """A database that cannot be used, with the reason."""


def shown(url: str) -> str:
    """The URL without its password, as messages name it."""
    return without_password(url)


def checked(url: str) -> str:
    """`url`, read once by libpq's own rules (`conninfo_to_dict`) before anything connects:
    its password kept as a secret (`runtime.entries`), a malformed part named in a
    `DatabaseError` that shows the URL without its password."""
    userinfo = _authority(url).rpartition("@")[0]
    password = userinfo.partition(":")[2]
    keep(password, unquote(password))
    problem = _malformed(url)
    if problem is None:
        try:
            params = conninfo_to_dict(url)
        except psycopg.ProgrammingError as error:
            problem = _reason(error)
        else:
            keep(str(params.get("password") or ""))
            problem = _bad_port(str(params.get("port") or ""))
    if problem is not None:
        raise DatabaseError(f"malformed PostgreSQL URL {shown(url)}: {problem}")
    return url


def _authority(url: str) -> str:
    rest = url.partition("://")[2]
    return re.split(r"[/?]", rest, maxsplit=1)[0]


def _malformed(url: str) -> str | None:
    """What libpq would misread or report with the secret in it: a space or a second `@`
    in the user part, a host in brackets that is not an IPv6 address."""
    userinfo, at, hosts = _authority(url).rpartition("@")
    if at and "@" in userinfo:
        return "the user name or password holds an unencoded `@`: write it %40"
    if at and any(c.isspace() for c in userinfo):
        return "the user name or password holds a space: write it %20"
    if any(c.isspace() for c in hosts):
        return f"the host `{hosts}` holds a space"
    for host in re.split(r",(?![^\[]*\])", hosts):
        if host.startswith("["):
            address, closed, _ = host[1:].partition("]")
            if not closed:
                return f"the host `{host}` has no closing `]`"
            try:
                ipaddress.IPv6Address(address)
            except ValueError:
                return f"the host `[{address}]` is not an IPv6 address"
    return None


def _bad_port(ports: str) -> str | None:
    for port in filter(None, ports.split(",")):
        if not (port.isascii() and port.isdigit() and 0 < int(port) < 65536):
            return f"the port `{port}` is not a number from 1 to 65535"
    return None


# -- the schema --------------------------------------------------------------------


def migrations() -> list[tuple[int, str, str]]:
    """(version, file name, SQL) of the schema's versioned files, in order."""
    folder = resources.files("todoflow.runtime.store") / "sql"
    found = []
    for item in folder.iterdir():
        if item.name.endswith(".sql") and item.name[:3].isdigit():
            found.append((int(item.name[:3]), item.name, item.read_text(encoding="utf-8")))
    return sorted(found)


def latest_version() -> int:
    return migrations()[-1][0]


def schema_version(connection: psycopg.Connection[Any]) -> int:
    """The schema version the database holds (0: none)."""
    exists = connection.execute("SELECT to_regclass('todoflow_schema') IS NOT NULL").fetchone()
    if not exists or not exists[0]:
        return 0
    row = connection.execute("SELECT coalesce(max(version), 0) FROM todoflow_schema").fetchone()
    return int(row[0]) if row else 0


def migrate(url: str, create: bool) -> tuple[int, int]:
    """Bring the database's schema to the latest version, in one transaction (two programs
    migrating at once take turns); (the version before, the version after). `create`: a
    database without the schema gets it (`db init`); else it is refused (`db migrate`)."""
    try:
        with psycopg.connect(checked(url), connect_timeout=CONNECT_TIMEOUT) as connection:
            connection.execute("SELECT pg_advisory_xact_lock(%s, 0)", (DRIVER_LOCKS,))
            connection.execute(
                "CREATE TABLE IF NOT EXISTS todoflow_schema "
                "(version int PRIMARY KEY, name text NOT NULL, applied timestamptz NOT NULL DEFAULT now())"
            )
            before = schema_version(connection)
            if before == 0 and not create:
                raise DatabaseError(
                    f"the database {shown(url)} has no todoflow schema: create it with `todoflow db init`"
                )
            if before > latest_version():
                raise DatabaseError(_newer(url, before))
            for version, name, sql in migrations():
                if version > before:
                    connection.execute(sql.encode())
                    connection.execute(
                        "INSERT INTO todoflow_schema (version, name) VALUES (%s, %s)", (version, name)
                    )
            connection.commit()
    except psycopg.Error as error:
        raise DatabaseError(f"cannot migrate {shown(url)}: {_reason(error)}") from None
    return before, latest_version()


def _newer(url: str, version: int) -> str:
    return (
        f"the database {shown(url)} holds todoflow's schema version {version}, newer than this "
        f"todoflow's {latest_version()}: upgrade todoflow"
    )


def _no_connection(location: str) -> DatabaseError:
    return DatabaseError(f"cannot reach {location}: no connection within the time allowed")


def _reason(error: BaseException) -> str:
    text = redact(str(error).strip())
    return text.splitlines()[0] if text else type(error).__name__


# -- the runs of a database --------------------------------------------------------


@register("postgresql", "postgres", shared=True)
class PgRuns:
    """The runs of one database, through a small pool of connections (one per database and
    program: `runs_at` gives the same one to every caller until it is closed)."""

    def __init__(self, url: str, pool_size: int = POOL_SIZE) -> None:
        self.url, self.location = checked(url), shown(url)
        self.closed = False
        self.pool = ConnectionPool(
            url,
            min_size=1,
            max_size=pool_size,
            kwargs={"autocommit": True, "connect_timeout": CONNECT_TIMEOUT},
            open=False,
            name="todoflow",
            timeout=CONNECT_TIMEOUT,  # a call waits this long for a connection (a server restarting)
        )
        try:
            self.pool.open(wait=True, timeout=CONNECT_TIMEOUT)
        except PoolTimeout:
            self.pool.close()
            raise DatabaseError(f"cannot connect to {self.location}: {self._why_not()}") from None
        try:
            version = self.read(schema_version)
        except BaseException:
            self.pool.close()
            raise
        if version != latest_version():
            self.pool.close()
            if version == 0:
                raise DatabaseError(
                    f"the database {self.location} has no todoflow schema: create it with "
                    f"`todoflow db init --store URL`"
                )
            if version > latest_version():
                raise DatabaseError(_newer(url, version))
            raise DatabaseError(
                f"the database {self.location} holds todoflow's schema version {version}; this todoflow "
                f"needs {latest_version()}: upgrade it with `todoflow db migrate --store URL`"
            )
        self._learnings = PgLearnings(self)
        self._presence: psycopg.Connection[Any] | None = None
        self._presence_lock = threading.Lock()
        self.instance = 0

    def _why_not(self) -> str:
        try:
            psycopg.connect(self.url, connect_timeout=CONNECT_TIMEOUT).close()
        except psycopg.Error as error:
            return _reason(error)
        return "no connection within the time allowed"

    def read(self, work: Callable[[psycopg.Connection[Any]], T]) -> T:
        """`work` on a pooled connection; a connection the server dropped (a restart) is
        replaced and the work done again: reading twice changes nothing."""
        for tries in range(POOL_SIZE + 2):
            try:
                with self.pool.connection() as connection:
                    return work(connection)
            except PoolTimeout:  # an OperationalError too, but no connection was there to replace
                raise _no_connection(self.location) from None
            except psycopg.OperationalError as error:
                if tries == POOL_SIZE + 1:
                    raise DatabaseError(f"cannot reach {self.location}: {_reason(error)}") from None
            except psycopg.Error as error:
                raise DatabaseError(f"{self.location}: {_reason(error)}") from None
        raise AssertionError("unreachable")

    def write(self, work: Callable[[psycopg.Connection[Any]], T]) -> T:
        """`work` in one transaction, all or nothing; a failure is a `DatabaseError`. A
        connection lost during the commit leaves its outcome unknown, and the work is done
        again on another: every write is made safe to repeat, one that finds itself done
        answering as it did the first time (a run's creation, a start's preparation)."""

        def transaction(connection: psycopg.Connection[Any]) -> T:
            with connection.transaction():
                return work(connection)

        return self.read(transaction)

    # -- starting and opening ----------------------------------------------------------

    def create(
        self, files: Iterable[tuple[str, str]], meta: RunMeta, ready: Mapping[str, tuple[Task, ...]]
    ) -> None:
        stored = dict(files)
        if ready:
            stored[READY] = ready_text(ready)
        self._insert_run(meta.process_id, meta.text(), stored, [], [], meta.start_attempt_id)

    def _insert_run(
        self,
        process_id: str,
        meta: str,
        files: Mapping[str, str],
        journal: Sequence[str],
        learnings: Sequence[tuple[str, str]],
        start: str | None = None,
    ) -> None:
        """The run's rows in one transaction; a run made by an MCP `start` marks the start
        executed in it. Safe to repeat (`write`): a run row made by an earlier attempt of
        this very write (its transaction id) is this write's, committed before its answer
        was lost; any other is refused."""
        made: list[str] = []  # the transaction ids of this write's attempts that made the row

        def insert(connection: psycopg.Connection[Any]) -> None:
            with connection.cursor() as cursor:
                row = cursor.execute(
                    "INSERT INTO todoflow_processes (process_id, seq, meta) VALUES (%s, %s, %s::json) "
                    "ON CONFLICT DO NOTHING RETURNING xmin::text",
                    (process_id, len(journal), meta),
                ).fetchone()
                if row is None:
                    if _made_by(cursor, process_id) in made:
                        return
                    raise StoreError(f"there is a run `{process_id}` in {self.location} already")
                made.append(str(row[0]))
                if start is not None:
                    _execute_start(cursor, start, process_id)
                cursor.executemany(
                    "INSERT INTO todoflow_plan_files (process_id, path, content) VALUES (%s, %s, %s)",
                    [(process_id, path, text) for path, text in files.items()],
                )
                cursor.executemany(
                    "INSERT INTO todoflow_journal (process_id, seq, entry) VALUES (%s, %s, %s::json)",
                    [(process_id, number, line) for number, line in enumerate(journal, start=1)],
                )
                cursor.executemany(
                    "INSERT INTO todoflow_learnings (id, sub_step_id, process_id, status, record) "
                    "VALUES (%s, %s, %s, %s, %s::json) ON CONFLICT DO NOTHING",
                    [_learning_row(sub_step, line) for sub_step, line in learnings],
                )

        self.write(insert)

    def load(self, process_id: str) -> OpenRun:
        """The run's meta, and its plan: built once per process for the plan files' sha256 the
        run recorded (their texts are read only when it is not built yet)."""
        meta = self.read_meta(process_id)
        key = meta.plan_sha256 and (meta.plan_sha256, meta.goal, meta.workflow_id, meta.title, meta.max_turns)
        plan = kept_plan(key or None, lambda: self._plan(meta))
        store = PgStore(self, meta.process_id, plan, meta.started_at, self._learnings, meta.source_sha256)
        return OpenRun(meta, store, self._learnings)

    def _plan(self, meta: RunMeta) -> RunPlan:
        """The plan built from the files stored with the run (its templates held as text)."""
        rows = self.read(
            lambda c: c.execute(
                "SELECT path, content FROM todoflow_plan_files WHERE process_id = %s", (meta.process_id,)
            ).fetchall()
        )
        files = dict(rows)
        try:
            stored = plan_from_files(files, meta.workflow_id, meta.title or meta.workflow_id)
        except PlanError as error:
            raise StoreError(f"run `{meta.process_id}`: {error}") from None
        return run_plan(stored, meta.goal, files.get(READY), meta.max_turns)

    def _no_run(self, process_id: str) -> str:
        known = [pid for pid, _ in self._listed(20)]
        return f"no run `{process_id}` in {self.location} (runs: {', '.join(known) or 'none'})"

    def _listed(self, limit: int | None = None) -> list[tuple[str, str]]:
        query = "SELECT process_id, meta::text FROM todoflow_processes ORDER BY created DESC, process_id DESC"
        if limit is not None:
            query += f" LIMIT {int(limit)}"
        return self.read(lambda c: [(str(a), str(b)) for a, b in c.execute(query).fetchall()])

    def read_meta(self, process_id: str) -> RunMeta:
        row = self.read(
            lambda c: c.execute(
                "SELECT meta::text FROM todoflow_processes WHERE process_id = %s", (process_id,)
            ).fetchone()
        )
        if row is None:
            raise StoreError(self._no_run(process_id))
        return _meta(process_id, row[0])

    def metas(self) -> Iterator[tuple[str, RunMeta | StoreError]]:
        for process_id, text in self._listed():
            try:
                yield process_id, _meta(process_id, text)
            except StoreError as error:
                yield process_id, error

    def journal_lines(self, process_id: str, after: int = 0) -> list[str]:
        rows = self.read(
            lambda c: c.execute(
                "SELECT entry::text FROM todoflow_journal WHERE process_id = %s AND seq > %s ORDER BY seq",
                (process_id, after),
            ).fetchall()
        )
        return [row[0] for row in rows]

    def plan_file(self, process_id: str, relative: str) -> str | None:
        row = self.read(
            lambda c: c.execute(
                "SELECT content FROM todoflow_plan_files WHERE process_id = %s AND path = %s",
                (process_id, relative),
            ).fetchone()
        )
        return None if row is None else str(row[0])

    def learnings(self, meta: RunMeta | None) -> PgLearnings:
        return self._learnings

    def starts(self) -> PgStarts:
        return PgStarts(self)

    @contextlib.contextmanager
    def driving(self, process_id: str) -> Iterator[None]:
        """A row naming this program's instance while inside; the run is `running` while
        the instance's advisory lock is held (a killed program's goes with its connection)."""
        instance = self.presence()
        self.write(
            lambda c: c.execute(
                "INSERT INTO todoflow_drivers (process_id, instance) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                (process_id, instance),
            )
        )
        try:
            yield
        finally:
            if not self.closed:
                with contextlib.suppress(StoreError):
                    self.write(
                        lambda c: c.execute(
                            "DELETE FROM todoflow_drivers WHERE process_id = %s AND instance = %s",
                            (process_id, instance),
                        )
                    )

    def driven(self, process_id: str) -> bool:
        row = self.read(
            lambda c: c.execute(
                "SELECT EXISTS (SELECT 1 FROM todoflow_drivers d JOIN pg_locks l ON l.locktype = 'advisory' "
                "AND l.classid = %s::oid AND l.objid = d.instance::oid AND l.objsubid = 2 AND l.granted "
                "WHERE d.process_id = %s)",
                (DRIVER_LOCKS, process_id),
            ).fetchone()
        )
        return bool(row and row[0])

    def remove(self, process_id: str) -> None:
        """One transaction: the run's row (its plan files, journal and snapshots go with it,
        ON DELETE CASCADE) and who drove or followed it."""

        self.read_meta(process_id)  # an unknown id is an error; a repeated delete is not

        def delete(connection: psycopg.Connection[Any]) -> None:
            for table in ("todoflow_drivers", "todoflow_followers", "todoflow_processes"):
                connection.execute(f"DELETE FROM {table} WHERE process_id = %s", (process_id,))

        self.write(delete)

    def driver(self, process_id: str) -> str | None:
        """The program behind the newest presence that drives the run: each names itself
        in its presence connection's application_name (`this_program`)."""
        row = self.read(
            lambda c: c.execute(
                "SELECT a.application_name FROM todoflow_drivers d "
                "JOIN pg_locks l ON l.locktype = 'advisory' AND l.classid = %s::oid "
                "AND l.objid = d.instance::oid AND l.objsubid = 2 AND l.granted "
                "JOIN pg_stat_activity a ON a.pid = l.pid "
                "WHERE d.process_id = %s ORDER BY d.instance DESC LIMIT 1",
                (DRIVER_LOCKS, process_id),
            ).fetchone()
        )
        if row is None:
            return None
        return str(row[0]).removeprefix("todoflow ") if row[0] else "another program"

    def alive(self, runner: str) -> bool:
        """Whether the program `runner` (`<host>:<pid>`) still holds its presence: the
        lease of what it runs, which PostgreSQL ends with its connection (at once for a
        killed process, within the keepalive for a machine gone)."""
        host, _, pid = runner.rpartition(":")
        row = self.read(
            lambda c: c.execute(
                "SELECT EXISTS (SELECT 1 FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid "
                "AND l.locktype = 'advisory' AND l.classid = %s::oid AND l.objsubid = 2 AND l.granted "
                "WHERE a.application_name = %s)",
                (DRIVER_LOCKS, _application_name(program_named(host, pid))),
            ).fetchone()
        )
        return bool(row and row[0])

    # -- following -----------------------------------------------------------------

    def changes(self, process_id: str, seq: int) -> Iterator[None]:
        """LISTEN on the journal's channel: wakes at a notification for the run, and every
        few seconds anyway (the caller catches up by sequence number). A database out of
        reach, now or later, raises `DatabaseError`."""
        try:
            yield from self._notified(process_id)
        except psycopg.Error as error:
            raise DatabaseError(f"cannot follow the run in {self.location}: {_reason(error)}") from None

    def _notified(self, process_id: str) -> Iterator[None]:
        with psycopg.connect(self.url, autocommit=True, connect_timeout=CONNECT_TIMEOUT) as connection:
            connection.execute(f"LISTEN {CHANNEL}")
            connection.execute(  # followers that went away without saying so
                "DELETE FROM todoflow_followers f WHERE NOT EXISTS "
                "(SELECT 1 FROM pg_stat_activity a WHERE a.pid = f.follower)"
            )
            connection.execute(
                "INSERT INTO todoflow_followers VALUES (%s, pg_backend_pid()) ON CONFLICT DO NOTHING",
                (process_id,),
            )
            try:
                yield  # listening: whatever committed before this is read by sequence number
                while True:
                    for note in connection.notifies(timeout=FOLLOW_WAKE):
                        if note.payload.rsplit(" ", 1)[0] == process_id:
                            break
                    yield
            finally:
                with contextlib.suppress(psycopg.Error):
                    connection.execute(
                        "DELETE FROM todoflow_followers "
                        "WHERE process_id = %s AND follower = pg_backend_pid()",
                        (process_id,),
                    )

    # -- moving runs -------------------------------------------------------------------

    def export(self, process_id: str) -> RunRecord:
        def read(connection: psycopg.Connection[Any]) -> RunRecord:
            row = connection.execute(
                "SELECT meta::text FROM todoflow_processes WHERE process_id = %s", (process_id,)
            ).fetchone()
            if row is None:
                raise StoreError(self._no_run(process_id))
            files = connection.execute(
                "SELECT path, content FROM todoflow_plan_files WHERE process_id = %s ORDER BY path",
                (process_id,),
            ).fetchall()
            journal = connection.execute(
                "SELECT entry::text FROM todoflow_journal WHERE process_id = %s ORDER BY seq", (process_id,)
            ).fetchall()
            return RunRecord(
                process_id,
                str(row[0]),
                {str(path): str(text) for path, text in files},
                [str(line) for (line,) in journal],
                [],
            )

        record = self.read(lambda c: _in_snapshot(c, read))
        return record._replace(learnings=self._learnings.lines(process_id))

    def import_run(self, record: RunRecord) -> None:
        for number, line in enumerate(record.journal, start=1):
            try:
                seq = json.loads(line).get("seq")
            except (ValueError, AttributeError):
                seq = None
            if seq != number:
                raise DamagedRun(f"run `{record.process_id}`: journal line {number} is not entry {number}")
        self._insert_run(record.process_id, record.meta, record.files, record.journal, record.learnings)

    # -- who drives a run ----------------------------------------------------------

    def presence(self) -> int:
        """This program's instance number, held as an advisory lock for as long as it
        lives: a run it drives is `running` while the lock is held (a killed program's
        lock goes with its connection)."""
        with self._presence_lock:
            if self._presence is None or self._presence.closed:
                try:
                    connection = psycopg.connect(
                        self.url,
                        autocommit=True,
                        connect_timeout=CONNECT_TIMEOUT,
                        application_name=_application_name(this_program()),  # what `driver` reads
                        options=KEEPALIVE,
                    )
                    row = connection.execute("SELECT nextval('todoflow_instances')").fetchone()
                    assert row is not None
                    self.instance = int(row[0]) % (1 << 31)
                    connection.execute("SELECT pg_advisory_lock(%s, %s)", (DRIVER_LOCKS, self.instance))
                except psycopg.Error as error:
                    raise DatabaseError(f"cannot reach {self.location}: {_reason(error)}") from None
                self._presence = connection
            return self.instance

    def ready(self) -> str | None:
        """The database answers, at the schema version this todoflow needs."""
        try:
            version = self.read(schema_version)
        except DatabaseError as error:
            return str(error)
        if version != latest_version():
            return f"the database holds schema version {version}; this todoflow needs {latest_version()}"
        return None

    def close(self) -> None:
        forget(self.url, self)
        self.closed = True
        with self._presence_lock:
            if self._presence is not None:
                self._presence.close()
                self._presence = None
        self.pool.close()


def _application_name(program: str) -> str:
    """The application_name of a program's presence connection (PostgreSQL keeps 63 bytes)."""
    return f"todoflow {program}"[:63]


def _in_snapshot(connection: psycopg.Connection[Any], work: Callable[[psycopg.Connection[Any]], T]) -> T:
    """`work` in one REPEATABLE READ transaction: every query sees the same moment."""
    connection.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
    try:
        return work(connection)
    finally:
        connection.execute("ROLLBACK")


def _made_by(cursor: psycopg.Cursor[Any], process_id: str) -> str | None:
    """The transaction that made a run's plan (its rows are never changed after)."""
    row = cursor.execute(
        "SELECT xmin::text FROM todoflow_plan_files WHERE process_id = %s LIMIT 1", (process_id,)
    ).fetchone()
    return None if row is None else str(row[0])


def _execute_start(cursor: psycopg.Cursor[Any], start_id: str, process_id: str) -> None:
    """The start marked executed by the run being made, in its transaction: a program that
    dies before the commit leaves the start free, one that dies after leaves it naming its
    run. Of two programs executing one start, the second's transaction is refused."""
    cursor.execute(
        "UPDATE todoflow_starts SET claimed = true, process_id = %s WHERE start_id = %s AND NOT claimed",
        (process_id, start_id),
    )
    if cursor.rowcount == 1:
        return
    row = cursor.execute("SELECT process_id FROM todoflow_starts WHERE start_id = %s", (start_id,)).fetchone()
    if row is None:
        raise StoreError(f"unknown startAttemptId `{start_id}`: call start with action `prepare` first")
    raise StoreError(f"startAttemptId `{start_id}` was executed already (process `{row[0] or ''}`)")


def _meta(process_id: str, text: str) -> RunMeta:
    try:
        return RunMeta.model_validate_json(text)
    except ValidationError as error:
        raise StoreError(f"run `{process_id}`: its meta cannot be read ({_reason(error)})") from None


def _learning_row(sub_step_id: str, line: str) -> tuple[str, str, str, str, str]:
    record = Learning.model_validate_json(line)
    return (record.id, sub_step_id, record.process_id, record.status, line)


# -- one process's store -----------------------------------------------------------


class _Hold:
    """`PgStore.locked()`: this program's thread lock and the rows others committed since
    (not read for a step on the state the store knows: its commit checks that)."""

    __slots__ = ("cached", "store")

    def __init__(self, store: PgStore, cached: bool) -> None:
        self.store, self.cached = store, cached

    def __enter__(self) -> ProcessState:
        return self.store._acquire(self.cached)

    def __exit__(self, *exc: object) -> None:
        self.store._lock.release()


class PgStore:
    shared = True

    def __init__(
        self,
        runs: PgRuns,
        process_id: str,
        plan: RunPlan,
        started_at: str,
        learnings: PgLearnings | None,
        definition_sha256: str | None,
    ) -> None:
        self.runs, self.process_id, self.plan, self.started_at = runs, process_id, plan, started_at
        self.learnings, self.definition_sha256 = learnings, definition_sha256
        self._lock = threading.Lock()
        self._state: ProcessState | None = None
        self._since = 0  # bytes of journal rows since the last snapshot this store knows
        self._snapshot_size = 0
        self._holds = (_Hold(self, False), _Hold(self, True))

    def locked(self, cached: bool = False) -> contextlib.AbstractContextManager[ProcessState]:
        return self._holds[cached]

    def _acquire(self, cached: bool) -> ProcessState:
        self._lock.acquire()
        try:
            if not cached or self._state is None:
                self._state = self.runs.read(self._refresh)
            return self._state
        except BaseException:
            self._lock.release()
            raise

    def _refresh(self, connection: psycopg.Connection[Any]) -> ProcessState:
        """The state the database holds: the known one plus the rows committed since."""
        state = self._state
        if state is None:
            row = connection.execute(
                "SELECT seq, state::text FROM todoflow_snapshots WHERE process_id = %s "
                "ORDER BY seq DESC LIMIT 1",
                (self.process_id,),
            ).fetchone()
            state = initial_state(self.plan, self.started_at)
            self._since, self._snapshot_size = 0, 0
            if row is not None:
                state = from_json(pydantic_core.from_json(row[1]), self.plan)
                self._snapshot_size = len(row[1])
        rows = connection.execute(
            "SELECT entry::text FROM todoflow_journal WHERE process_id = %s AND seq > %s ORDER BY seq",
            (self.process_id, state.seq),
        ).fetchall()
        self._since += sum(len(row[0]) for row in rows)
        return replayed(self.plan, state, self._in_order((row[0] for row in rows), state.seq))[0]

    def _in_order(self, lines: Iterable[str], after: int) -> Iterator[Entry]:
        return in_order(lines, after, self._damaged, "the journal table")

    def _damaged(self, problem: str, entries: int) -> DamagedRun:
        return DamagedRun(
            f"run `{self.process_id}` is damaged: {problem}; the journal holds {entries} entries "
            "before it. Nothing was changed"
        )

    def commit(self, steps: Sequence[Applied], after: ProcessState, request: Request | None = None) -> None:
        """The step's one statement: guard, journal rows, learnings, snapshot, notification."""
        before = steps[0].before.seq
        lines = [json_line(to_json(applied.entry))[:-1].decode() for applied in steps]
        attempt, digest = (request.attempt, request.digest) if request is not None else (None, None)
        note = f"{self.process_id} {after.seq}"
        learnings = learned(self.plan, self.process_id, self.definition_sha256, steps)
        since = self._since + sum(map(len, lines))
        snapshot = None
        if snapshot_due(before, after.seq, since, self._snapshot_size):
            snapshot = json_line(state_json(after, self.plan))[:-1].decode()
        statement: str = _ONE_ROW
        arguments: Any = (after.seq, self.process_id, before, after.seq, attempt, digest, lines[0], note)
        if len(steps) > 1 or learnings or snapshot is not None:  # the common step has none of these
            parts = [_GUARD]
            arguments = {
                "pid": self.process_id,
                "before": before,
                "after": after.seq,
                "seqs": [applied.seq for applied in steps],
                "attempts": [None] * (len(steps) - 1) + [attempt],  # the reply made the last entry
                "digests": [None] * (len(steps) - 1) + [digest],
                "entries": lines,
                "note": note,
                "learnings": [learning.model_dump_json() for learning in learnings],
                "state": snapshot,
            }
            parts += [_LEARNINGS] if learnings else []
            parts += [_SNAPSHOT] if snapshot is not None else []
            statement = "WITH " + ", ".join(parts) + _ROWS
        if self._inserted(statement, arguments) != len(steps):
            self._state = None
            raise Moved(f"run `{self.process_id}`: another program stepped it first")
        self._state = after
        self._since, self._snapshot_size = (
            (0, len(snapshot)) if snapshot is not None else (since, self._snapshot_size)
        )

    def _inserted(self, statement: str, arguments: Any) -> int:
        """The journal rows the step's statement inserted: none if the guard matched no row."""
        try:
            with self.runs.pool.connection() as connection:
                return connection.execute(statement, arguments).rowcount
        except PoolTimeout:  # nothing was sent
            raise _no_connection(self.runs.location) from None
        except psycopg.OperationalError:  # the outcome is unknown: look again at what the database holds
            self._state = None
            raise Moved(f"run `{self.process_id}`: the database did not confirm the step") from None
        except psycopg.Error as error:
            raise DatabaseError(f"the step was not saved: {_reason(error)}") from None

    def replayed(self, request: Request) -> bool:
        row = self.runs.read(
            lambda c: c.execute(
                "SELECT request FROM todoflow_journal WHERE process_id = %s AND attempt = %s",
                (self.process_id, request.attempt),
            ).fetchone()
        )
        return row is not None and row[0] == request.digest

    def behind(self, state: ProcessState) -> bool:
        row = self.runs.read(
            lambda c: c.execute(
                "SELECT seq FROM todoflow_processes WHERE process_id = %s", (self.process_id,)
            ).fetchone()
        )
        return row is None or row[0] != state.seq

    def entries(self, after: int = 0) -> list[Entry]:
        return list(self._in_order(self.runs.journal_lines(self.process_id, after), after))

    def alive(self, runner: str) -> bool | None:
        return self.runs.alive(runner)

    def close(self) -> None:
        """Nothing is held between steps."""


# The parts of a step's statement. The guard matches the process row only at the entry the
# step was taken from; everything else reads it, so a step that lost the race writes nothing.
# The statement is the journal rows' INSERT, its row count what the step wrote: no rows
# returned, no counts computed (each cost the server and the client CPU on every step).
_GUARD = (
    "guard AS (UPDATE todoflow_processes SET seq = %(after)s "
    "WHERE process_id = %(pid)s AND seq = %(before)s RETURNING process_id)"
)
_LEARNINGS = (
    "learned AS (INSERT INTO todoflow_learnings (id, sub_step_id, process_id, status, record) "
    "SELECT l.record->>'id', l.record->>'sub_step_id', guard.process_id, 'active', l.record "
    "FROM guard, unnest(%(learnings)s::json[]) AS l(record) ON CONFLICT (id, status) DO NOTHING)"
)
_SNAPSHOT = (
    "snapshot AS (INSERT INTO todoflow_snapshots (process_id, seq, state) "
    "SELECT guard.process_id, %(after)s, %(state)s::json FROM guard ON CONFLICT DO NOTHING)"
)
# NOTIFY only for a run someone follows: PostgreSQL commits notifying transactions one at
# a time (a lock held through the commit's WAL flush), which would cost every step its
# share of group commit. A lateral subquery of the guard's row: evaluated once per step
# that wins its guard (an unreferenced CTE would not be evaluated at all).
_NOTIFY = (
    "LEFT JOIN LATERAL (SELECT pg_notify('" + CHANNEL + "', {note}) WHERE EXISTS "
    "(SELECT 1 FROM todoflow_followers f WHERE f.process_id = guard.process_id)) AS noted ON true"
)
_INSERT = " INSERT INTO todoflow_journal (process_id, seq, attempt, request, entry) "
_ROWS = (
    _INSERT
    + "SELECT guard.process_id, r.seq, r.attempt, r.request, r.entry::json FROM guard "
    + _NOTIFY.format(note="%(note)s")
    + " CROSS JOIN unnest(%(seqs)s::bigint[], %(attempts)s::text[], %(digests)s::text[], "
    "%(entries)s::text[]) AS r(seq, attempt, request, entry)"
)
_ONE_ROW = (  # the common step, one row: positional parameters, the guard's inlined
    "WITH guard AS (UPDATE todoflow_processes SET seq = %s WHERE process_id = %s AND seq = %s "
    "RETURNING process_id)"
    + _INSERT
    + "SELECT guard.process_id, %s, %s, %s, %s::json FROM guard "
    + _NOTIFY.format(note="%s")
)


# -- learnings and starts ------------------------------------------------------------


class PgLearnings:
    """The learnings of every run in the database: one row per line a run folder's
    learnings.jsonl would hold (a record, then its retirement)."""

    def __init__(self, runs: PgRuns) -> None:
        self.runs, self.location = runs, runs.location

    def add(self, learning: Learning) -> bool:
        cursor = self.runs.write(
            lambda c: c.execute(
                "INSERT INTO todoflow_learnings (id, sub_step_id, process_id, status, record) "
                "VALUES (%s, %s, %s, %s, %s::json) ON CONFLICT DO NOTHING",
                (
                    learning.id,
                    learning.sub_step_id,
                    learning.process_id,
                    "active",
                    learning.model_dump_json(),
                ),
            )
        )
        return cursor.rowcount == 1

    def records(self, sub_step_id: str | None = None) -> list[Learning]:
        query = "SELECT DISTINCT ON (id) record::text FROM todoflow_learnings"
        args: tuple[str, ...] = ()
        if sub_step_id is not None:
            query, args = query + " WHERE sub_step_id = %s", (sub_step_id,)
        rows = self.runs.read(lambda c: c.execute(query + " ORDER BY id, line DESC", args).fetchall())
        found = [Learning.model_validate_json(row[0]) for row in rows]
        return sorted(found, key=lambda learning: (learning.at, learning.id))

    def find(self, learning_id: str) -> Learning:
        row = self.runs.read(
            lambda c: c.execute(
                "SELECT record::text FROM todoflow_learnings WHERE id = %s ORDER BY line DESC LIMIT 1",
                (learning_id,),
            ).fetchone()
        )
        if row is None:
            raise LearningError(f"no learning `{learning_id}` in {self.runs.location}")
        return Learning.model_validate_json(row[0])

    def retire(self, learning_id: str, at: str) -> Learning:
        learning = self.find(learning_id)
        if learning.status == "retired":
            return learning
        retired = learning.retired(at)
        self.add_lines([(retired.sub_step_id, retired.model_dump_json())])
        return retired

    def lines(self, process_id: str) -> list[tuple[str, str]]:
        rows = self.runs.read(
            lambda c: c.execute(
                "SELECT sub_step_id, record::text FROM todoflow_learnings "
                "WHERE process_id = %s ORDER BY line",
                (process_id,),
            ).fetchall()
        )
        return [(str(sub), str(line)) for sub, line in rows]

    def add_lines(self, lines: Iterable[tuple[str, str]]) -> None:
        rows = [_learning_row(sub_step, line) for sub_step, line in lines]
        self.runs.write(
            lambda c: c.cursor().executemany(
                "INSERT INTO todoflow_learnings (id, sub_step_id, process_id, status, record) "
                "VALUES (%s, %s, %s, %s, %s::json) ON CONFLICT DO NOTHING",
                rows,
            )
        )


class PgStarts:
    """MCP starts in the database: any server executes a start another one prepared, once."""

    def __init__(self, runs: PgRuns) -> None:
        self.runs = runs

    def prepare(self, start_id: str, record: StartRecord) -> None:
        self.runs.write(
            lambda c: c.execute(
                "INSERT INTO todoflow_starts (start_id, record) VALUES (%s, %s::json) "
                "ON CONFLICT DO NOTHING",  # start ids are fresh: one there already is this very write's
                (start_id, record.model_dump_json()),
            )
        )

    def executed(self, start_id: str) -> str | None:
        row = self.runs.read(
            lambda c: c.execute(
                "SELECT coalesce(process_id, '') FROM todoflow_starts WHERE start_id = %s AND claimed",
                (start_id,),
            ).fetchone()
        )
        return None if row is None else str(row[0])

    def record(self, start_id: str) -> StartRecord | None:
        row = self.runs.read(
            lambda c: c.execute(
                "SELECT record::text FROM todoflow_starts WHERE start_id = %s AND NOT claimed", (start_id,)
            ).fetchone()
        )
        return None if row is None else StartRecord.model_validate_json(row[0])

    def claim(self, start_id: str) -> bool:
        """Always granted here: the start is claimed by the transaction that makes its run
        (`PgRuns.create`), so a program that dies while executing it claims nothing."""
        return True

    def done(self, start_id: str, process_id: str) -> None:
        """Nothing to do: the run's creation recorded its process."""

    def release(self, start_id: str) -> None:
        """Nothing to give back: a start is claimed only with its run."""

    def expire(self, older_than: float) -> None:
        self.runs.write(
            lambda c: c.execute(
                "DELETE FROM todoflow_starts WHERE created < clock_timestamp() - make_interval(secs => %s)",
                (older_than,),
            )
        )
