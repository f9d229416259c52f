"""Refresh worker processes: the daemon's refreshes on more than one core.

A refresh the embedded engine computes is mostly Python (planning, the portability gate,
tree building, pyiceberg's storage commit); DuckDB itself is a few milliseconds of it.
Under one interpreter lock a fleet's refreshes therefore run one after another whatever
`refresh.max_concurrent` says. With `refresh.processes` > 0 each scheduler thread hands
its refresh to a pool of worker processes (spawned, never forked: the daemon runs a JVM
and threads) and waits, the lock released. The scheduler hands out one refresh per
worker beyond `max_concurrent` (`queue_ahead`), which waits in the pool's queue: a worker
starts its next refresh as soon as it returns one, instead of after the daemon has
handled the result and dispatched again.

Each worker is a pool of its own, and an MV's refreshes go to the same worker while it is
not much busier than the others (`RefreshWorkers`): what a worker keeps of an MV serves its
next refresh. A worker runs the same `refresh_mv` over a lakehouse of its own without
Spark: the plan, the embedded engine's delta and the storage commit, with the same
conflict checks as in the daemon's process. Having no Spark session, a worker is given
its daemon's session settings (ANSI mode, time zone: engine/semantics.py) when it
starts, and computes a delta on DuckDB only where the daemon's Spark would agree. A
refresh that needs Spark (a full recompute, a delta the gate refuses, a repair) meets
`SparkUnavailableError` before it commits anything and is handed back: `refresh()`
returns None and the caller runs it itself, planning it again (a few milliseconds; a
fleet whose refreshes mostly need Spark gains nothing from workers and pays that twice).
A worker that dies (killed, out of memory) loses only its refresh's uncommitted work: its
pool is replaced and the refresh runs in the daemon's process; a storage commit is
atomic either way.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import pickle
import signal
import threading
import zlib
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from functools import partial

import structlog

from icemv.config import Config
from icemv.engine.semantics import SessionSemantics
from icemv.errors import RefreshFailedError, SparkUnavailableError
from icemv.identifiers import Identifier
from icemv.lakehouse import Lakehouse
from icemv.logs import configure_logging
from icemv.refresh.policy import refresh_mv
from icemv.refresh.rehearsal import rehearse_mv
from icemv.refresh.result import RefreshResult
from icemv.service.heap import freeze_startup_heap

log = structlog.get_logger(__name__)

# The worker process's own lakehouse (set by _start in each worker).
_LAKEHOUSE: Lakehouse | None = None


class RefreshWorkers:
    """`processes` worker processes, each a pool of one, started by `start()` or on first
    use. An MV's refreshes go to one worker, its home (a hash of its name), unless that
    worker has a refresh running and one queued while another has less: a worker keeps
    what it learnt of an MV (its storage files' rows, written by its last commit and read
    again by the next merge; the trees and gate answers of the sql/ and refresh/ memos)."""

    def __init__(
        self,
        config: Config,
        processes: int,
        on_handback: Callable[[str], None] | None = None,
        *,
        semantics: Callable[[], SessionSemantics],
    ) -> None:
        """`on_handback(reason)`: told of each refresh handed back, `spark` (it needs
        Spark) or `lost` (its worker died or could not be started). `semantics()`: the
        daemon's Spark session settings, asked when a worker is started."""
        self._config = config
        self._semantics = semantics
        self._on_handback = on_handback or (lambda reason: None)
        self._processes = processes
        self._pools: list[ProcessPoolExecutor | None] = [None] * processes
        self._handed = [0] * processes  # refreshes handed to each worker, not yet returned
        self._lock = threading.Lock()
        self.lost = 0  # pools replaced after a worker died
        self.disabled = False
        self._proven: set[ProcessPoolExecutor] = set()  # pools whose worker answered

    def start(self) -> None:
        """Start every worker now (a worker takes seconds to import and set up), so the
        first refreshes after the daemon starts do not wait for them."""
        for slot in range(self._processes):
            pool = self._current(slot)
            if pool is not None:
                pool.submit(_ready).add_done_callback(partial(self._started, pool))

    def refresh(self, mv: Identifier) -> RefreshResult | None:
        """`mv` refreshed by a worker; None if it needs Spark or its worker died (the
        caller refreshes it in this process)."""
        slot = self._slot(mv)
        try:
            return self._refresh_in(slot, mv)
        finally:
            with self._lock:
                self._handed[slot] -= 1

    def rehearse(self, mv: Identifier) -> str | None:
        """`mv`'s last change rehearsed in its home worker (refresh/rehearsal.py) if no
        worker has anything to do, and what happened; None (nothing done) if one has."""
        home = choose_worker(mv, [0] * self._processes)
        with self._lock:
            if any(self._handed):
                return None
            self._handed[home] += 1
        try:
            pool = self._current(home)
            if pool is None:
                return "no worker"
            try:
                return pool.submit(_rehearse, mv).result()
            except (BrokenProcessPool, OSError) as error:
                self._lost(home, pool, mv, error)
                return "worker lost"
        finally:
            with self._lock:
                self._handed[home] -= 1

    def _slot(self, mv: Identifier) -> int:
        """The worker for `mv` (choose_worker), counted as handed one more refresh."""
        with self._lock:
            slot = choose_worker(mv, self._handed)
            self._handed[slot] += 1
            return slot

    def _refresh_in(self, slot: int, mv: Identifier) -> RefreshResult | None:
        pool = self._current(slot)
        if pool is None:  # turned off: not a handback
            return None
        try:  # an OSError here is the spawn failing; from result(), the refresh's own
            future = pool.submit(_refresh, mv)
        except (BrokenProcessPool, OSError) as error:
            self._lost(slot, pool, mv, error)
            return None
        try:
            result = future.result()
        except BrokenProcessPool as error:
            self._lost(slot, pool, mv, error)
            return None
        self._started(pool, None)
        if result is None:
            self._on_handback("spark")
        return result

    def _lost(self, slot: int, pool: ProcessPoolExecutor, mv: Identifier, error: Exception) -> None:
        self._replace(slot, pool)
        self._on_handback("lost")
        log.warning(
            "refresh_worker_lost",
            mv=mv.dotted,
            processes=self._processes,
            error=f"{type(error).__name__}: {error}"[:200],
        )

    def _started(self, pool: ProcessPoolExecutor, ready: Future[int] | None) -> None:
        """`pool`'s worker proved it starts (it answered)."""
        if ready is None or (not ready.cancelled() and ready.exception() is None):
            with self._lock:
                self._proven.add(pool)

    def close(self, wait: bool = True) -> None:
        with self._lock:
            pools, self._pools = self._pools, [None] * self._processes
        for pool in pools:
            if pool is not None:
                pool.shutdown(wait=wait, cancel_futures=True)

    def _current(self, slot: int) -> ProcessPoolExecutor | None:
        semantics = self._semantics()  # before the lock: it may wait for Spark to start
        with self._lock:
            if self.disabled:
                return None
            pool = self._pools[slot]
            if pool is None:
                pool = self._pools[slot] = ProcessPoolExecutor(
                    1,
                    mp_context=multiprocessing.get_context("spawn"),
                    initializer=_start,
                    initargs=(self._config, semantics),
                )
            return pool

    def _replace(self, slot: int, broken: ProcessPoolExecutor) -> None:
        """Drop a broken pool for a new one; a pool whose worker never answered broke at
        its start (a worker cannot start here): then workers are off for good, rather
        than spawning new ones for every refresh."""
        with self._lock:
            if self._pools[slot] is broken:
                self._pools[slot] = None
                self.lost += 1
                if broken not in self._proven and not self.disabled:
                    self.disabled = True
                    log.error(
                        "refresh_workers_disabled",
                        reason="no worker process ever answered: they cannot start here",
                    )
            self._proven.discard(broken)
        broken.shutdown(wait=False, cancel_futures=True)


# A home worker with this many refreshes handed to it (one running, one queued) is passed
# over for an idle one; one with this many more than another, for that one.
BUSY = 2


def choose_worker(mv: Identifier, handed: Sequence[int]) -> int:
    """The worker for `mv`, given how many refreshes each has been handed: its home (a
    hash of its name), unless that one has BUSY or more while another has none (it would
    idle), or BUSY more than another (a long refresh there would hold up those queued
    behind it).

    A fleet's refreshes keep going to their MVs' homes while both workers are busy: with
    the scheduler handing out two refreshes per worker, a refresh went elsewhere whenever
    its home had two and the other one (a third of a 100-MV fleet's refreshes on each
    commit, each losing what its home kept of the MV: the storage rows, the live files,
    the metadata parsed)."""
    home = zlib.crc32(mv.dotted.encode()) % len(handed)
    least = min(range(len(handed)), key=handed.__getitem__)
    if handed[home] >= BUSY and handed[least] == 0:
        return least
    return least if handed[home] - handed[least] >= BUSY else home


def _start(config: Config, semantics: SessionSemantics) -> None:
    """A worker's set-up: the daemon's logging, a lakehouse without Spark but with its
    daemon's session settings."""
    global _LAKEHOUSE
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the daemon decides when to stop
    configure_logging(config.logging)
    _LAKEHOUSE = Lakehouse(config, spark=False, semantics=semantics)
    freeze_startup_heap()


def _ready() -> int:
    return os.getpid()


def _refresh(mv: Identifier) -> RefreshResult | None:
    assert _LAKEHOUSE is not None, "not a refresh worker process"
    try:
        result = refresh_mv(_LAKEHOUSE, mv)
    except SparkUnavailableError:
        return None
    except Exception as error:  # noqa: BLE001 (it must cross the process boundary intact)
        raise _portable(error) from None
    return dataclasses.replace(result, worker_pid=os.getpid())


def _rehearse(mv: Identifier) -> str:
    assert _LAKEHOUSE is not None, "not a refresh worker process"
    return rehearse_mv(_LAKEHOUSE, mv)


def _portable(error: Exception) -> Exception:
    """`error` if it survives pickling (as the pool sends it back), else its message in a
    RefreshFailedError."""
    try:
        copy = pickle.loads(pickle.dumps(error))
        if type(copy) is type(error) and str(copy) == str(error):
            return error
    except Exception:  # noqa: BLE001 (any failure to round-trip means: wrap it)
        pass
    return RefreshFailedError(f"{type(error).__name__}: {error}")
