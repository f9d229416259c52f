"""A private PostgreSQL server for the embedded Iceberg JDBC catalog.

The user installs nothing: the binaries come from the ``pgserver`` wheel. pgserver's own
server class listens only on a Unix socket, but Spark's JDBC catalog needs TCP, so this
module drives ``initdb``/``pg_ctl`` itself and listens on 127.0.0.1 at a free port.

A daemon and CLI commands may use one data directory at the same time, so the server is
shared and reference counted across processes: a JSON list of live handles is kept in a lock
file beside the data directory, and the last handle to stop shuts the server down.

Authentication is ``trust``: any local user who can reach 127.0.0.1 can connect as the
superuser. That suits a single-user lakehouse on a workstation, not a shared host.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import os
import shlex
import stat
import tempfile
import time
import uuid
from pathlib import Path
from types import TracebackType
from urllib.parse import quote

import structlog

from icemv.catalog.embedded.database import SUPERUSER, ensure_database
from icemv.catalog.embedded.privileges import (
    RunAs,
    grant_access_to_binaries,
    grant_traverse,
    run_as_user,
    run_tool,
    tool_path,
)
from icemv.catalog.embedded.processes import (
    free_port,
    pid_alive,
    pid_exists,
    port_accepts,
    port_free,
    proc_start,
)
from icemv.catalog.embedded.registry import live_handles, locked_state
from icemv.errors import EmbeddedPostgresError

__all__ = ["EmbeddedPostgres", "EmbeddedPostgresError"]

log = structlog.get_logger(__name__)

START_TIMEOUT_S = 60
# After a crash, orphaned backends may hold the old shared memory for a moment.
CRASH_RETRY_S = 15.0
# sockaddr_un.sun_path is 108 bytes on Linux (104 on macOS), including the NUL.
_MAX_SOCKET_PATH = 103
_LOG_TAIL_LINES = 30
# Startup failures that a retry can fix: a port taken in the meantime, or leftovers of a
# crashed server (orphan backends still attached to its shared memory) that exit shortly.
_RETRYABLE = (
    "Address already in use",
    "could not create any TCP/IP sockets",
    "pre-existing shared memory block",
    'lock file "postmaster.pid" already exists',
)


class EmbeddedPostgres:
    """A handle on the shared PostgreSQL server of one data directory.

    ``start()`` reuses a server another process already runs on ``data_dir`` or starts one;
    ``stop()`` shuts it down only when no other live handle remains. Unstopped handles are
    stopped at interpreter exit, and handles of processes that died are ignored.
    """

    def __init__(self, data_dir: Path, database: str = "icemv") -> None:
        self.data_dir = Path(data_dir).expanduser().absolute()
        self.database = database
        # The lock file doubles as the handle registry; it lives outside data_dir because
        # initdb wants an empty directory.
        self._state_path = self.data_dir.parent / f".{self.data_dir.name}.icemv-pg.json"
        self._log_path = self.data_dir / "postgresql.log"
        self._token: str | None = None
        self._owner_pid = 0
        self._port: int | None = None

    @property
    def port(self) -> int:
        if self._port is None:
            raise EmbeddedPostgresError("embedded PostgreSQL is not started")
        return self._port

    @property
    def url(self) -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{quote(self.database, safe='')}"

    @property
    def started(self) -> bool:
        return self._token is not None

    def start(self) -> str:
        """Start or join the server and return its URL; calling it again is a no-op."""
        if self._token is not None:
            return self.url
        t0 = time.monotonic()
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        with locked_state(self._state_path) as (state, save):
            run_as = run_as_user()
            handles = live_handles(state)
            port = self._running_port()
            reused = port is not None
            if port is None:
                self._prepare(run_as)
                port = self._launch(run_as, state.get("port"))
            try:
                ensure_database(port, self.database)
            except Exception:
                if not reused and not handles:
                    self._pg_ctl_stop(run_as)
                raise
            token = uuid.uuid4().hex
            handles.append({"token": token, "pid": os.getpid(), "start": proc_start(os.getpid())})
            save({"port": port, "handles": handles})
        self._token, self._owner_pid, self._port = token, os.getpid(), port
        atexit.register(self.stop)
        log.info(
            "embedded_postgres.started",
            data_dir=str(self.data_dir),
            port=port,
            reused=reused,
            handles=len(handles),
            seconds=round(time.monotonic() - t0, 3),
        )
        return self.url

    def stop(self) -> None:
        """Release this handle; the last live handle shuts the server down. Idempotent."""
        token = self._token
        if token is None:
            return
        self._token = None
        atexit.unregister(self.stop)
        if os.getpid() != self._owner_pid:
            return  # a forked child inherited the handle; the parent owns it
        with locked_state(self._state_path) as (state, save):
            handles = [h for h in live_handles(state) if h.get("token") != token]
            save({**state, "handles": handles})
            if not handles and self._running_port() is not None:
                self._pg_ctl_stop(run_as_user())
                log.info("embedded_postgres.stopped", data_dir=str(self.data_dir))

    def __enter__(self) -> EmbeddedPostgres:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- server lifecycle (all called under the state lock) --------------------------------

    def _running_port(self) -> int | None:
        """The port of a live, ready postmaster on data_dir, per its postmaster.pid."""
        try:
            lines = (self.data_dir / "postmaster.pid").read_text().splitlines()
            pid, port = int(lines[0]), int(lines[3])
            status = lines[7].strip() if len(lines) > 7 else ""
        except (OSError, ValueError, IndexError):
            return None
        if not pid_alive(pid):
            return None  # left by a crash; postgres cleans it up on the next start
        if status != "ready" and self._wait_ready(pid, time.monotonic() + START_TIMEOUT_S):
            return self._running_port()  # re-read: the port line may have changed
        if status != "ready":
            return None
        return port if self._serving(pid, port, time.monotonic() + CRASH_RETRY_S) else None

    def _serving(self, pid: int, port: int, deadline: float) -> bool:
        """Whether the ready postmaster ``pid`` accepts connections on ``port``. A killed
        postmaster closes its sockets before the kernel marks it a zombie, so for a moment
        it looks alive and ready but refuses: wait for it to die (False) or answer (True)."""
        while True:
            if port_accepts(port):
                return True
            if not pid_alive(pid):
                return False
            if time.monotonic() > deadline:
                raise EmbeddedPostgresError(
                    f"PostgreSQL on {self.data_dir} (pid {pid}) is ready per postmaster.pid "
                    f"but refuses connections on port {port}"
                )
            time.sleep(0.05)

    def _wait_ready(self, pid: int, deadline: float) -> bool:
        """Wait for a postmaster we did not start under the lock (e.g. its starter was
        killed mid-start) to become ready or die; True if it became ready."""
        pid_file = self.data_dir / "postmaster.pid"
        while time.monotonic() < deadline:
            if not pid_alive(pid):
                return False
            with contextlib.suppress(OSError):
                lines = pid_file.read_text().splitlines()
                if len(lines) > 7 and lines[7].strip() == "ready":
                    return True
            time.sleep(0.05)
        raise EmbeddedPostgresError(
            f"PostgreSQL on {self.data_dir} (pid {pid}) did not become ready in time"
        )

    def _prepare(self, run_as: RunAs) -> None:
        """Make the data dir usable by the server user and initialise it on first use."""
        if run_as.is_other:
            grant_access_to_binaries()
            grant_traverse(self.data_dir.parent)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        initialised = (self.data_dir / "PG_VERSION").exists()
        owner = self.data_dir.stat().st_uid
        if owner != run_as.uid:
            if initialised or not run_as.is_other:
                raise EmbeddedPostgresError(
                    f"{self.data_dir} belongs to uid {owner}, but PostgreSQL must run as "
                    f"uid {run_as.uid}"
                )
            os.chown(self.data_dir, run_as.uid, run_as.gid)
        if initialised:
            return
        t0 = time.monotonic()
        cmd = [str(tool_path("initdb")), "-D", str(self.data_dir), "--auth=trust", "-U", SUPERUSER]
        cmd += ["--encoding=utf8", "--no-locale"]
        code, out = run_tool(cmd, run_as, timeout=300)
        if code != 0:
            raise EmbeddedPostgresError(f"initdb failed for {self.data_dir} (exit {code}):\n{out}")
        log.info(
            "embedded_postgres.initdb",
            data_dir=str(self.data_dir),
            seconds=round(time.monotonic() - t0, 3),
        )

    def _launch(self, run_as: RunAs, preferred_port: object) -> int:
        """Start the postmaster, retrying what a retry can fix; return its port."""
        deadline = time.monotonic() + CRASH_RETRY_S
        self._await_crashed_postmaster(deadline)
        # Reusing the last port keeps URLs held by other live handles valid after a crash.
        port = preferred_port if isinstance(preferred_port, int) else 0
        socket_dir = self._socket_dir(run_as)
        while True:
            if not port or not port_free(port):
                port = free_port()
            opts = [
                "-c", "listen_addresses=127.0.0.1",
                "-p", str(port),
                "-c", f"unix_socket_directories={socket_dir}",
                "-c", "unix_socket_permissions=0700",
            ]  # fmt: skip
            log_offset = self._log_path.stat().st_size if self._log_path.exists() else 0
            cmd = [str(tool_path("pg_ctl")), "start", "-w", "-t", str(START_TIMEOUT_S)]
            cmd += ["-D", str(self.data_dir), "-l", str(self._log_path), "-o", shlex.join(opts)]
            code, out = run_tool(cmd, run_as, timeout=START_TIMEOUT_S + 30)
            if code == 0:
                return port
            server_log = self._log_tail(log_offset)
            if time.monotonic() < deadline and any(s in server_log for s in _RETRYABLE):
                log.warning("embedded_postgres.start_retry", port=port, reason=server_log[-300:])
                if "TCP/IP" in server_log or "Address already in use" in server_log:
                    port = 0  # lost a race for the port
                time.sleep(0.1)
                continue
            raise EmbeddedPostgresError(
                f"PostgreSQL failed to start on {self.data_dir} (pg_ctl exit {code}):\n"
                f"{out.strip()}\n--- server log ({self._log_path}) ---\n{server_log}"
            )

    def _await_crashed_postmaster(self, deadline: float) -> None:
        """Wait until a crashed postmaster is reaped: until then its pid still exists (as a
        zombie) and the new postmaster would refuse its stale postmaster.pid."""
        try:
            pid = int((self.data_dir / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return
        while pid_exists(pid) and time.monotonic() < deadline:
            time.sleep(0.05)

    def _pg_ctl_stop(self, run_as: RunAs) -> None:
        cmd = [str(tool_path("pg_ctl")), "stop", "-m", "fast", "-w", "-t", str(START_TIMEOUT_S)]
        code, out = run_tool([*cmd, "-D", str(self.data_dir)], run_as, timeout=START_TIMEOUT_S + 30)
        if code != 0 and self._running_port() is not None:
            raise EmbeddedPostgresError(
                f"PostgreSQL on {self.data_dir} failed to stop (pg_ctl exit {code}):\n{out}"
            )

    def _socket_dir(self, run_as: RunAs) -> Path:
        """Where the Unix socket goes: never the system default, so no clash with a system
        server; data_dir unless that path is too long for a socket."""
        if _socket_path_ok(self.data_dir):
            return self.data_dir
        digest = hashlib.sha256(str(self.data_dir).encode()).hexdigest()[:12]
        path = Path(tempfile.gettempdir()) / f"icemv-pg-{digest}"
        with contextlib.suppress(FileExistsError):
            path.mkdir(mode=0o700)
            os.chown(path, run_as.uid, run_as.gid)
        st = path.lstat()
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != run_as.uid or st.st_mode & 0o077:
            raise EmbeddedPostgresError(f"unsafe socket directory {path}: not a private dir")
        if not _socket_path_ok(path):
            raise EmbeddedPostgresError(f"no usable Unix socket directory for {self.data_dir}")
        return path

    def _log_tail(self, offset: int) -> str:
        try:
            with self._log_path.open("rb") as f:
                f.seek(offset)
                text = f.read().decode("utf-8", "replace")
        except OSError as e:
            return f"(cannot read server log: {e})"
        return "\n".join(text.splitlines()[-_LOG_TAIL_LINES:])


def _socket_path_ok(directory: Path) -> bool:
    # The socket is named .s.PGSQL.<port>; the directory list is comma separated.
    path = str(directory / ".s.PGSQL.65535")
    return len(os.fsencode(path)) <= _MAX_SOCKET_PATH and "," not in str(directory)
