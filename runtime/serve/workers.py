"""`todoflow serve --http --workers N`: N worker processes answering on one address.

The parent binds the address once (a port of 0 becomes one port for all), then forks the
workers. On Linux each worker listens on a socket of its own bound to that address with
SO_REUSEPORT, and the kernel spreads new connections over the workers by a hash of the
client's address: an MCP client keeps its connection for many calls, and with one shared
accept queue the worker awake first took a whole burst of them (measured: 72-78% of the
steps of 32 runs on one of 2 workers, docs/performance.md). The parent's socket is bound,
never listening, so it holds the port and takes no connection. The cost: connections
queued at a worker that dies are reset, as they would be at an instance that dies.
Elsewhere (SO_REUSEPORT does not spread connections there) the parent listens and the
workers share its socket.

The parent forks before it has opened a store or started a thread: it holds nothing a
child could not share. It only supervises: a worker that ends without being asked is
started again (said on stderr); SIGTERM or SIGINT to the parent passes SIGTERM to every
worker, each drains as one instance does, and the parent exits 0 once they all have. A
worker that cannot start (its store refused, say) stops them all: starting it again
would fail again. A worker whose parent is gone (SIGKILLed) drains and exits on its own.

What a worker knows of a run lives in the store, whose lock (a run folder's) or guarded
transaction (PostgreSQL) orders the steps of workers as it orders those of instances.
Must not import the store or the service: it runs before either exists.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import threading
import traceback
from collections.abc import Callable, Iterator

STOPS = (signal.SIGTERM, signal.SIGINT)
START_FAILED = 3  # a worker's exit status when it could not start serving (said on stderr)
FAILED = 1  # the supervisor's then: the CLI's status for an error that was reported
BACKLOG = 2048  # connections an accept queue holds (uvicorn's own default)
# where the kernel spreads connections over the sockets that share an address
SPREAD = sys.platform.startswith("linux") and hasattr(socket, "SO_REUSEPORT")


def default_count() -> int:
    """The cores this process may run on: one worker each."""
    counted = getattr(os, "process_cpu_count", os.cpu_count)()  # process_cpu_count: Python 3.13+
    return max(1, counted or 1)


def count(text: str) -> int:
    """`--workers`' value: a whole number of at least 1 (argparse reports a ValueError)."""
    try:
        workers = int(text)
    except ValueError:
        raise ValueError(f"--workers takes a number of processes, not `{text}`") from None
    if workers < 1:
        raise ValueError(f"--workers takes 1 or more processes, not {workers}")
    return workers


def listen(host: str, port: int) -> socket.socket:
    """The supervisor's socket, bound to the address the workers serve (OSError: the
    address is taken, or not this machine's); it listens only where workers share it."""
    listener = _bound(host, port)
    if not SPREAD:
        with _closed_on_error(listener):
            listener.listen(BACKLOG)
    listener.set_inheritable(True)
    return listener


def worker_socket(listener: socket.socket) -> socket.socket:
    """In a worker: the socket it accepts on, its own on the supervisor's address (Linux),
    else the supervisor's."""
    if not SPREAD:
        return listener
    host, port = listener.getsockname()[:2]
    own = _bound(host, port)
    with _closed_on_error(own):
        own.listen(BACKLOG)
    listener.close()  # the supervisor's holds the port; this worker accepts on its own
    return own


def _bound(host: str, port: int) -> socket.socket:
    bound = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    with _closed_on_error(bound):
        bound.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if SPREAD:
            bound.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        bound.bind((host, port))
    return bound


@contextlib.contextmanager
def _closed_on_error(bound: socket.socket) -> Iterator[None]:
    try:
        yield
    except BaseException:
        bound.close()
        raise


class Supervisor:
    """Starts `workers` children, each running `work(fd)` with the file descriptor of the
    socket it accepts on (`worker_socket`), and keeps that many running until told to stop."""

    def __init__(self, workers: int, listener: socket.socket, work: Callable[[int], None]) -> None:
        self.workers, self.listener, self.work = workers, listener, work
        self.running: dict[int, int] = {}  # pid -> the worker's slot (1..N)
        self.stopping = False
        self.failed = False
        # the children's read end: it reads end of file once the parent is gone, however it went
        self._parent_alive, self._parent_gone_writer = os.pipe()

    def run(self) -> int:
        """Supervise until every worker has ended; 0, or `FAILED` when one could not start."""
        previous = {stop: signal.signal(stop, self._stop) for stop in STOPS}
        try:
            with _held(STOPS):  # a stop signal waits until every first worker is known
                for slot in range(1, self.workers + 1):
                    self._start(slot)
            while self.running:
                self._reap(*os.waitpid(-1, 0))  # a signal runs `_stop`, then the wait goes on
        finally:
            for stop, handler in previous.items():
                signal.signal(stop, handler)
            os.close(self._parent_gone_writer)
            os.close(self._parent_alive)
        return FAILED if self.failed else 0

    def _reap(self, pid: int, status: int) -> None:
        slot = self.running.pop(pid, None)
        if slot is None or self.stopping:
            return
        code = os.waitstatus_to_exitcode(status)
        if code == START_FAILED:
            self.failed = True
            self._stop(signal.SIGTERM, None)
            return
        ended = f"was killed by signal {-code}" if code < 0 else f"exited with status {code}"
        print(f"todoflow serve: worker {pid} {ended}; starting another", file=sys.stderr, flush=True)
        with _held(STOPS):
            self._start(slot)

    def _start(self, slot: int) -> None:
        """Fork worker `slot` (stop signals held: it is known before a stop can look)."""
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            self._child()
        self.running[pid] = slot

    def _child(self) -> None:
        """In the worker: signals as a process of its own, the parent watched, then `work`."""
        code = 1
        try:
            for stop in STOPS:
                signal.signal(stop, signal.SIG_DFL)  # uvicorn installs its own while it serves
            signal.pthread_sigmask(signal.SIG_UNBLOCK, STOPS)
            os.close(self._parent_gone_writer)
            threading.Thread(target=_drain_when_gone, args=(self._parent_alive,), daemon=True).start()
            try:
                accepting = worker_socket(self.listener)
            except OSError as error:
                print(f"todoflow: error: a worker cannot listen: {error.strerror or error}", file=sys.stderr)
                raise StartFailed from None
            self.work(accepting.fileno())
            code = 0
        except StartFailed:
            code = START_FAILED
        except BaseException:
            traceback.print_exc()
        finally:
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):
                    stream.flush()
            os._exit(code)  # never back into the parent's code: its caller is the CLI's

    def _stop(self, _signum: int, _frame: object) -> None:
        """SIGTERM to every worker: each drains, then ends; none is started again."""
        self.stopping = True
        for pid in list(self.running):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)


class StartFailed(Exception):
    """Raised by a worker's `work` when it could not start serving (and has said why on
    stderr): the supervisor stops every worker, since another would fail alike."""


def _drain_when_gone(parent_alive: int) -> None:
    """In a worker: wait for the parent's end of the pipe to close, then drain (SIGTERM)."""
    while os.read(parent_alive, 1):
        pass
    os.kill(os.getpid(), signal.SIGTERM)


@contextlib.contextmanager
def _held(signals: tuple[signal.Signals, ...]) -> Iterator[None]:
    """Hold `signals` back while inside; delivered on leaving."""
    signal.pthread_sigmask(signal.SIG_BLOCK, signals)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, signals)
