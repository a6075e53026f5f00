"""A learn_code fast path for a client that answers in calls of its own (the MCP server):
the script runs on a thread of the server, and each delegation it makes becomes the
run's current directive, which the client answers as it answers any (the engine applies
the answer, prevalidates it and records the learning); the script then gets the result.

A call that answers a delegation returns once the script has made its next delegation
or ended, or after `WAIT` seconds with the directive as it stands and `fastPath:
running` (the client asks again with `status`). The engine refuses orchestrator
decisions from anyone but the script while the fast path runs, so the client cannot
take over the step by mistake.

Over a shared store (a database) the client's next call may reach another instance:
the delegation is the run's directive in the store, so that instance accepts the
answer, and both sides learn of each other's steps from the store's notifications
(`_Watch`): the script's instance that its delegation was answered, the answering one
(`elsewhere`) that the script delegated again or ended. The script's start journals
its runner, whose database presence is the attempt's lease: an instance that finds the
lease gone fails the attempt (`fast_path.due`), as a resume does.
"""

from __future__ import annotations

import contextlib
import io
import logging
import threading
from contextlib import AbstractContextManager

from todoflow.dsl.diagnostics import TodoflowError

from ..agents import fast_path
from ..directive import Directive
from ..engine import Engine
from ..plan import RunStep
from ..store.base import Runs, StoreError

WAIT = 20.0  # seconds a call waits for the script's next delegation
STOP_WAIT = 10.0  # seconds closing waits for a stopped script's failure to be journaled
POLL = 1.0  # seconds between looks at the store while its notifications are out of reach

log = logging.getLogger("todoflow.fast_path")


class Handoff:
    """One fast path attempt of one run, between the script's thread and the client's calls."""

    def __init__(
        self, engine: Engine, step: RunStep, pin: AbstractContextManager[object], runs: Runs | None
    ) -> None:
        """`runs`: the shared store whose notifications bring other instances' answers
        (None: every answer comes through this server)."""
        self.engine, self.step = engine, step
        self.changed = threading.Condition()
        self.ended = False
        self.error: str | None = None  # why a fast_path_only attempt stopped the run
        self._cancel = threading.Event()
        self._pins = contextlib.ExitStack()
        self._pins.enter_context(pin)  # the run stays open while its script runs
        if runs is not None:
            self._pins.enter_context(_Watch(runs, engine.process_id, self.changed))
        self._thread = threading.Thread(target=self._run, name=f"fast-path {engine.process_id}", daemon=True)
        self._thread.start()

    def answered(self) -> None:
        """The client stepped the run: wake the script's delegation that waits for it."""
        with self.changed:
            self.changed.notify_all()

    def wait(self, seconds: float | None = None) -> bool:
        """Until the script has a delegation out or has ended; False if neither after
        `seconds` (default `WAIT`)."""
        with self.changed:
            return self.changed.wait_for(
                lambda: self.ended or self.engine.directive().node == "delegated",
                timeout=WAIT if seconds is None else seconds,
            )

    def stop(self) -> None:
        """Stop the script (its failure is journaled: the step starts afresh, or waits)."""
        self._cancel.set()
        self.answered()
        self._thread.join(STOP_WAIT)

    def _run(self) -> None:
        out = io.StringIO()
        try:
            fast_path.run(
                self.engine,
                self.step,
                self._sub_agent,
                out,
                self.engine.fast_path_only,
                cancel=self._cancel,
            )
        except TodoflowError as error:  # fast_path_only, or a store that failed
            self.error = str(error)
        finally:
            for line in out.getvalue().splitlines():
                log.info("run %s: %s", self.engine.process_id, line)
            self._pins.close()
            with self.changed:
                self.ended = True
                self.changed.notify_all()

    def _sub_agent(self, engine: Engine, directive: Directive) -> Directive:
        """A delegation of the script: the client's to answer; the directive after its answer."""
        with self.changed:
            self.changed.notify_all()  # a call waiting for the delegation returns it
            self.changed.wait_for(
                lambda: self.ended or self._cancel.is_set() or engine.directive().node != "delegated",
                timeout=fast_path.TIMEOUT,
            )
        return engine.directive()


class Handoffs:
    """The fast paths a server runs, one per process id at most."""

    def __init__(self, peers: bool = False) -> None:
        """`peers`: other instances of this server (its worker processes) serve the same
        runs, so a run's next call may reach another even when its store is a run folder."""
        self._running: dict[str, Handoff] = {}
        self._lock = threading.Lock()
        self._peers = peers

    def elsewhere_too(self, engine: Engine) -> bool:
        """Whether another program may answer this run's delegations: a shared store's
        other instances, or this server's peers over a run folder. Such a fast path's
        script watches the store for answers, and a call that finds it running in another
        of them waits for it (`elsewhere`)."""
        return engine.store.shared or self._peers

    def get(self, process_id: str) -> Handoff | None:
        """The run's fast path on this server; where another program may answer it, only
        while it runs (its end is in the store, where whichever instance the next call
        reaches reads it) or, with `fast_path_only`, until its failure was the error of a
        call here."""
        with self._lock:
            handoff = self._running.get(process_id)
            # kept while its failure is to be said: no call was waiting when it failed
            if (
                handoff is not None
                and handoff.ended
                and handoff.error is None
                and self.elsewhere_too(handoff.engine)
            ):
                del self._running[process_id]
                return None
            return handoff

    def begin(
        self, engine: Engine, step: RunStep, pin: AbstractContextManager[object], runs: Runs
    ) -> Handoff:
        watched = runs if self.elsewhere_too(engine) else None
        handoff = Handoff(engine, step, pin, watched)  # not under the lock: its watch opens first
        with self._lock:
            self._running[engine.process_id] = handoff
        return handoff

    def end(self, handoff: Handoff) -> None:
        with self._lock:
            if self._running.get(handoff.engine.process_id) is handoff:
                del self._running[handoff.engine.process_id]

    def stop(self) -> None:
        with self._lock:
            running, self._running = list(self._running.values()), {}
        for handoff in running:
            handoff.stop()


def elsewhere(engine: Engine, runs: Runs, seconds: float | None = None) -> Directive:
    """A fast path another instance runs (`Handoffs.elsewhere_too`): the directive once its
    script has a delegation out, its attempt has ended or its runner's lease is gone, or
    after `seconds` (default `WAIT`) as it then stands."""
    if _settled(engine):
        return engine.directive()
    changed = threading.Condition()
    with _Watch(runs, engine.process_id, changed), changed:
        changed.wait_for(lambda: _settled(engine), timeout=WAIT if seconds is None else seconds)
    return engine.directive()


def _settled(engine: Engine) -> bool:
    directive = engine.directive()
    if directive.node == "delegated" or directive.state.fast_path != "running":
        return True
    return fast_path.abandoned(engine, here=False)


class _Watch:
    """While open, wakes `changed` whenever the run's journal may have grown: at the
    store's notifications (another instance's step), or every `POLL` seconds while they
    are out of reach. Opening returns once it listens, so no later step goes unnoticed."""

    def __init__(self, runs: Runs, process_id: str, changed: threading.Condition) -> None:
        self._runs, self._process_id, self._changed = runs, process_id, changed
        self._closed = threading.Event()
        self._listening = threading.Event()
        self._thread = threading.Thread(target=self._listen, name=f"watch {process_id}", daemon=True)

    def __enter__(self) -> _Watch:
        self._thread.start()
        self._listening.wait(WAIT)
        return self

    def __exit__(self, *exc: object) -> None:
        self._closed.set()  # the thread ends at its next wake; a daemon, nothing waits for it

    def _listen(self) -> None:
        while not self._closed.is_set():
            try:
                for _ in self._runs.changes(self._process_id, 0):  # its connection ends with the loop
                    self._wake()
                    if self._closed.is_set():
                        return
            except StoreError as error:
                log.warning("run %s: %s; looking every %g s instead", self._process_id, error, POLL)
            self._wake()
            self._closed.wait(POLL)

    def _wake(self) -> None:
        self._listening.set()
        with self._changed:
            self._changed.notify_all()
