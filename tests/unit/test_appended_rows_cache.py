"""refresh/embedded/reads.py's cache: one load per piece across threads, bounded."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pytest

from icemv.refresh.embedded.reads import AppendedRowsCache


def _rows(n: int) -> pa.Table:
    return pa.table({"x": pa.array(range(n), pa.int64())})


def test_concurrent_callers_share_one_load() -> None:
    cache = AppendedRowsCache(1 << 20)
    loads = 0
    gate = threading.Event()

    def load() -> pa.Table:
        nonlocal loads
        loads += 1
        assert gate.wait(timeout=10)
        return _rows(10)

    with ThreadPoolExecutor(8) as pool:
        futures = [pool.submit(cache.piece, ("t", 1, 0), load) for _ in range(8)]
        gate.set()
        results = [f.result(timeout=10) for f in futures]
    assert loads == 1
    assert all(r.equals(_rows(10)) for r in results)
    assert cache.piece(("t", 1, 0), lambda: pytest.fail("loaded again")).num_rows == 10


def test_bounded_by_bytes_least_recently_used_first() -> None:
    piece = _rows(100)
    cache = AppendedRowsCache(piece.nbytes * 2)
    for snapshot in (1, 2):
        cache.piece(("t", snapshot, 0), lambda: _rows(100))
    cache.piece(("t", 1, 0), lambda: pytest.fail("1 was evicted"))  # 1 is now the newest
    cache.piece(("t", 3, 0), lambda: _rows(100))  # evicts 2
    assert cache.cached_bytes <= cache.max_bytes
    reloaded: list[int] = []

    def reload() -> pa.Table:
        reloaded.append(2)
        return _rows(100)

    cache.piece(("t", 2, 0), reload)
    assert reloaded == [2]
    cache.piece(("t", 9, 0), lambda: _rows(10_000))  # larger than the bound: not kept
    assert cache.cached_bytes <= cache.max_bytes


def test_a_failed_load_lets_waiters_load_themselves() -> None:
    cache = AppendedRowsCache(1 << 20)
    started = threading.Event()
    release = threading.Event()

    def failing() -> pa.Table:
        started.set()
        assert release.wait(timeout=10)
        raise OSError("file gone")

    with ThreadPoolExecutor(2) as pool:
        owner = pool.submit(cache.piece, ("t", 1, 0), failing)
        assert started.wait(timeout=10)
        waiter = pool.submit(cache.piece, ("t", 1, 0), lambda: _rows(3))
        release.set()
        with pytest.raises(OSError):
            owner.result(timeout=10)
        assert waiter.result(timeout=10).num_rows == 3


def test_a_piece_past_its_share_of_the_bound_is_returned_not_kept() -> None:
    piece = _rows(100)
    cache = AppendedRowsCache(piece.nbytes * 4)
    assert cache.piece(("big",), lambda: piece, share=0.2).equals(piece)
    assert cache.cached_bytes == 0
    assert cache.piece(("fits",), lambda: piece, share=0.25).equals(piece)
    assert cache.cached_bytes == piece.nbytes
