"""Process and port facts from the OS, for the embedded server's cross-process bookkeeping."""

from __future__ import annotations

import os
import socket
from pathlib import Path


def proc_stat(pid: int) -> list[str] | None:
    """Fields of /proc/<pid>/stat after the command name, or None if unavailable."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw.rpartition(")")[2].split()


def proc_start(pid: int) -> str | None:
    """The process start time in clock ticks: tells a pid apart from a later reuse of it."""
    fields = proc_stat(pid)
    return fields[19] if fields and len(fields) > 19 else None


def pid_alive(pid: int) -> bool:
    if Path("/proc/self/stat").exists():
        fields = proc_stat(pid)
        return fields is not None and fields[0] not in ("Z", "X")  # zombies are dead
    return pid_exists(pid)


def pid_exists(pid: int) -> bool:
    """Whether the pid is taken, zombies included (that is what postgres checks)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        # PostgreSQL sets SO_REUSEADDR too, so a port in TIME_WAIT is usable.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def port_accepts(port: int) -> bool:
    """Whether something accepts TCP connections on 127.0.0.1:port."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    except OSError:
        return False
    return True


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port
