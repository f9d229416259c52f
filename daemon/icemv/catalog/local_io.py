"""pyiceberg's small I/O steps run inline when the warehouse is a local file system.

pyiceberg hands its file work to one thread pool per process (`ExecutorFactory`): a
commit's three manifest writers go there as `submit`s, and every read or write of a list
of files as a `map`. On an object store that overlaps network round trips. On a local
disk a small refresh's steps are a few hundred microseconds of Python each, and handing
them to a thread and back under the interpreter lock cost more than they save: a fleet
refresh took 4-9 % more CPU with the pool than with inline calls (alternating rounds
here). So, for a `file:` warehouse, `submit`s and `map`s over at most one item run in
the calling thread; a `map` over several files still goes to pyiceberg's pool, where
Parquet decoding and encoding (which release the lock) use several cores.

`run_small_io_inline()` installs the executor for the process (pyiceberg 0.12's private
`ExecutorFactory._instance`, fenced here); opening a catalog backend calls it for a local
warehouse.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import Any, TypeVar

from pyiceberg.utils.concurrent import ExecutorFactory

T = TypeVar("T")

_installed = threading.Lock()


class SmallWorkInline(Executor):
    """`submit` and a one-item `map` in the caller's thread; longer `map`s on `pool`."""

    def __init__(self, pool: Executor) -> None:
        self._pool = pool

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        future: Future[T] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except Exception as error:  # noqa: BLE001 (the future carries it, as a pool's would)
            future.set_exception(error)
        return future

    def map(
        self,
        fn: Callable[..., T],
        *iterables: Iterable[Any],
        timeout: float | None = None,
        chunksize: int = 1,
    ) -> Iterator[T]:
        items = list(zip(*iterables, strict=False))
        if len(items) <= 1:
            return iter([fn(*item) for item in items])
        return self._pool.map(fn, *zip(*items, strict=True), timeout=timeout)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._pool.shutdown(wait=wait, cancel_futures=cancel_futures)


def run_small_io_inline() -> None:
    """pyiceberg's executor for this process: SmallWorkInline over its own pool (once per
    process; a forked child makes its own, as pyiceberg does)."""
    with _installed:
        current = ExecutorFactory.get_or_create()
        if isinstance(current, SmallWorkInline):
            return
        pool = current if isinstance(current, ThreadPoolExecutor) else ThreadPoolExecutor()
        ExecutorFactory._instance = SmallWorkInline(pool)  # noqa: SLF001
        ExecutorFactory._instance_pid = os.getpid()  # noqa: SLF001
