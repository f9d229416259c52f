"""The cross-process registry of handles on one embedded server: a JSON list in a lock file.

Each process that uses the server adds a handle (pid + process start time); the last live
handle to stop shuts the server down. Handles of processes that died are ignored.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import structlog

from icemv.catalog.embedded.processes import pid_alive, proc_start

log = structlog.get_logger(__name__)


@contextlib.contextmanager
def locked_state(path: Path) -> Iterator[tuple[dict[str, Any], Callable[[dict[str, Any]], None]]]:
    """Hold the exclusive cross-process lock; yield the registry and a saver for it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    with os.fdopen(fd, "r+", encoding="utf-8") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            raw = f.read()
            try:
                state = json.loads(raw) if raw.strip() else {}
            except json.JSONDecodeError:
                log.warning("embedded_postgres.bad_state_file", path=str(path))
                state = {}
            if not isinstance(state, dict):
                state = {}

            def save(new_state: dict[str, Any]) -> None:
                f.seek(0)
                f.truncate()
                f.write(json.dumps(new_state))
                f.flush()

            yield state, save
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def live_handles(state: dict[str, Any]) -> list[dict[str, Any]]:
    handles = state.get("handles")
    if not isinstance(handles, list):
        return []
    return [
        h
        for h in handles
        if isinstance(h, dict)
        and isinstance(h.get("pid"), int)
        and pid_alive(h["pid"])
        and (h.get("start") is None or h.get("start") == proc_start(h["pid"]))
    ]
