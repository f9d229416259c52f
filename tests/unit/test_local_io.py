"""catalog/local_io.py: pyiceberg's small I/O steps inline, longer maps on its pool."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from pyiceberg.utils.concurrent import ExecutorFactory

from icemv.catalog import backends
from icemv.catalog.local_io import SmallWorkInline, run_small_io_inline
from icemv.config import parse_config


def _thread(_: object = None) -> int:
    return threading.get_ident()


def test_submits_and_one_item_maps_run_in_the_callers_thread() -> None:
    executor = SmallWorkInline(ThreadPoolExecutor(2))
    here = threading.get_ident()
    assert executor.submit(_thread).result() == here
    assert list(executor.map(_thread, ["a"])) == [here]
    assert list(executor.map(_thread, [])) == []
    executor.shutdown()


def test_a_failure_is_the_futures_as_on_a_pool() -> None:
    executor = SmallWorkInline(ThreadPoolExecutor(1))

    def fails() -> None:
        raise ValueError("no such file")

    future = executor.submit(fails)
    with pytest.raises(ValueError, match="no such file"):
        future.result()
    executor.shutdown()


def test_longer_maps_go_to_the_pool_in_order() -> None:
    executor = SmallWorkInline(ThreadPoolExecutor(2))
    barrier = threading.Barrier(2, timeout=10)

    def both_at_once(value: int) -> tuple[int, int]:
        barrier.wait()  # passes only if two run at the same time, on the pool
        return value, threading.get_ident()

    results = list(executor.map(both_at_once, [1, 2]))
    assert [value for value, _ in results] == [1, 2]
    assert threading.get_ident() not in {ident for _, ident in results}
    executor.shutdown()


def test_installed_once_per_process() -> None:
    run_small_io_inline()
    installed = ExecutorFactory.get_or_create()
    assert isinstance(installed, SmallWorkInline)
    run_small_io_inline()
    assert ExecutorFactory.get_or_create() is installed


@pytest.mark.parametrize(("location", "inline"), [("/tmp/wh", True), ("s3://bucket/wh", False)])
def test_only_a_local_warehouse_runs_small_io_inline(
    location: str, inline: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    installs: list[str] = []
    monkeypatch.setattr(backends, "run_small_io_inline", lambda: installs.append(location))
    config = parse_config(
        {"catalog": {"uri": "sqlite:////tmp/none.db"}, "warehouse": {"location": location}}
    )
    backends.open_backend(config)  # connects to nothing until first use
    assert installs == ([location] if inline else [])
