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
import fcntl
import hashlib
import importlib.util
import json
import os
import pwd
import shlex
import socket
import stat
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import quote

import psycopg2  # type: ignore[import-untyped, unused-ignore]
import structlog
from psycopg2 import sql  # type: ignore[import-untyped, unused-ignore]

from icemv.errors import EmbeddedPostgresError

__all__ = ["EmbeddedPostgres", "EmbeddedPostgresError"]

log = structlog.get_logger(__name__)

SUPERUSER = "postgres"
# PostgreSQL refuses to run as root; as root we run it as this unprivileged system user.
SYSTEM_USER = "icemv"
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


@dataclass(frozen=True)
class _RunAs:
    """Whom the PostgreSQL processes run as: the current user, or SYSTEM_USER under root."""

    uid: int
    gid: int

    @property
    def is_other(self) -> bool:
        return self.uid != os.geteuid()

    def subprocess_kwargs(self) -> dict[str, Any]:
        if not self.is_other:
            return {}
        # extra_groups=[] drops root's supplementary groups too.
        return {"user": self.uid, "group": self.gid, "extra_groups": []}


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
        with self._locked_state() as (state, save):
            run_as = _run_as()
            handles = _live_handles(state)
            port = self._running_port()
            reused = port is not None
            if port is None:
                self._prepare(run_as)
                port = self._launch(run_as, state.get("port"))
            try:
                _ensure_database(port, self.database)
            except Exception:
                if not reused and not handles:
                    self._pg_ctl_stop(run_as)
                raise
            token = uuid.uuid4().hex
            handles.append({"token": token, "pid": os.getpid(), "start": _proc_start(os.getpid())})
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
        with self._locked_state() as (state, save):
            handles = [h for h in _live_handles(state) if h.get("token") != token]
            save({**state, "handles": handles})
            if not handles and self._running_port() is not None:
                self._pg_ctl_stop(_run_as())
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

    @contextlib.contextmanager
    def _locked_state(self) -> Iterator[tuple[dict[str, Any], Callable[[dict[str, Any]], None]]]:
        """Hold the exclusive cross-process lock; yield the registry and a saver for it."""
        fd = os.open(self._state_path, os.O_RDWR | os.O_CREAT, 0o600)
        with os.fdopen(fd, "r+", encoding="utf-8") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                raw = f.read()
                try:
                    state = json.loads(raw) if raw.strip() else {}
                except json.JSONDecodeError:
                    log.warning("embedded_postgres.bad_state_file", path=str(self._state_path))
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

    def _running_port(self) -> int | None:
        """The port of a live, ready postmaster on data_dir, per its postmaster.pid."""
        try:
            lines = (self.data_dir / "postmaster.pid").read_text().splitlines()
            pid, port = int(lines[0]), int(lines[3])
            status = lines[7].strip() if len(lines) > 7 else ""
        except (OSError, ValueError, IndexError):
            return None
        if not _pid_alive(pid):
            return None  # left by a crash; postgres cleans it up on the next start
        if status != "ready" and self._wait_ready(pid, time.monotonic() + START_TIMEOUT_S):
            return self._running_port()  # re-read: the port line may have changed
        return port if status == "ready" else None

    def _wait_ready(self, pid: int, deadline: float) -> bool:
        """Wait for a postmaster we did not start under the lock (e.g. its starter was
        killed mid-start) to become ready or die; True if it became ready."""
        pid_file = self.data_dir / "postmaster.pid"
        while time.monotonic() < deadline:
            if not _pid_alive(pid):
                return False
            with contextlib.suppress(OSError):
                lines = pid_file.read_text().splitlines()
                if len(lines) > 7 and lines[7].strip() == "ready":
                    return True
            time.sleep(0.05)
        raise EmbeddedPostgresError(
            f"PostgreSQL on {self.data_dir} (pid {pid}) did not become ready in time"
        )

    def _prepare(self, run_as: _RunAs) -> None:
        """Make the data dir usable by the server user and initialise it on first use."""
        if run_as.is_other:
            _grant_access_to_binaries()
            _grant_traverse(self.data_dir.parent)
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
        cmd = [str(_bin("initdb")), "-D", str(self.data_dir), "--auth=trust", "-U", SUPERUSER]
        cmd += ["--encoding=utf8", "--no-locale"]
        code, out = _run(cmd, run_as, timeout=300)
        if code != 0:
            raise EmbeddedPostgresError(f"initdb failed for {self.data_dir} (exit {code}):\n{out}")
        log.info(
            "embedded_postgres.initdb",
            data_dir=str(self.data_dir),
            seconds=round(time.monotonic() - t0, 3),
        )

    def _launch(self, run_as: _RunAs, preferred_port: object) -> int:
        """Start the postmaster, retrying what a retry can fix; return its port."""
        deadline = time.monotonic() + CRASH_RETRY_S
        self._await_crashed_postmaster(deadline)
        # Reusing the last port keeps URLs held by other live handles valid after a crash.
        port = preferred_port if isinstance(preferred_port, int) else 0
        socket_dir = self._socket_dir(run_as)
        while True:
            if not port or not _port_free(port):
                port = _free_port()
            opts = [
                "-c", "listen_addresses=127.0.0.1",
                "-p", str(port),
                "-c", f"unix_socket_directories={socket_dir}",
                "-c", "unix_socket_permissions=0700",
            ]  # fmt: skip
            log_offset = self._log_path.stat().st_size if self._log_path.exists() else 0
            cmd = [str(_bin("pg_ctl")), "start", "-w", "-t", str(START_TIMEOUT_S)]
            cmd += ["-D", str(self.data_dir), "-l", str(self._log_path), "-o", shlex.join(opts)]
            code, out = _run(cmd, run_as, timeout=START_TIMEOUT_S + 30)
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
        while _pid_exists(pid) and time.monotonic() < deadline:
            time.sleep(0.05)

    def _pg_ctl_stop(self, run_as: _RunAs) -> None:
        cmd = [str(_bin("pg_ctl")), "stop", "-m", "fast", "-w", "-t", str(START_TIMEOUT_S)]
        code, out = _run([*cmd, "-D", str(self.data_dir)], run_as, timeout=START_TIMEOUT_S + 30)
        if code != 0 and self._running_port() is not None:
            raise EmbeddedPostgresError(
                f"PostgreSQL on {self.data_dir} failed to stop (pg_ctl exit {code}):\n{out}"
            )

    def _socket_dir(self, run_as: _RunAs) -> Path:
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


# -- helpers ---------------------------------------------------------------------------------


@cache
def _install_dir() -> Path:
    """The pgserver wheel's PostgreSQL tree, found without importing pgserver (whose import
    has side effects we do not need)."""
    spec = importlib.util.find_spec("pgserver")
    if spec is None or spec.origin is None:
        raise EmbeddedPostgresError("the pgserver package (bundled PostgreSQL) is not installed")
    return Path(spec.origin).parent / "pginstall"


def _bin(name: str) -> Path:
    path = _install_dir() / "bin" / name
    if not path.is_file():
        raise EmbeddedPostgresError(f"bundled PostgreSQL binary missing: {path}")
    return path


def _run(cmd: list[str], run_as: _RunAs, timeout: float) -> tuple[int, str]:
    """Run a PostgreSQL tool; return exit code and combined output.

    Output goes to a temporary file, not a pipe: the postmaster that pg_ctl forks could
    inherit a pipe and keep it open, hanging the read.
    """
    # PG* variables from the caller's shell must not redirect our tools to another server.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env["LC_ALL"] = "C"
    with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as out:
        try:
            proc = subprocess.run(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                cwd="/",
                timeout=timeout,
                check=False,
                **run_as.subprocess_kwargs(),
            )
        except subprocess.TimeoutExpired as e:
            raise EmbeddedPostgresError(f"{Path(cmd[0]).name} timed out after {timeout}s") from e
        out.seek(0)
        return proc.returncode, out.read()


def _run_as() -> _RunAs:
    if os.geteuid() != 0:
        return _RunAs(os.geteuid(), os.getegid())
    try:
        pw = pwd.getpwnam(SYSTEM_USER)
    except KeyError:
        cmd = ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin"]
        proc = subprocess.run([*cmd, SYSTEM_USER], capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            with contextlib.suppress(KeyError):  # another process created it meanwhile
                pw = pwd.getpwnam(SYSTEM_USER)
                return _RunAs(pw.pw_uid, pw.pw_gid)
            raise EmbeddedPostgresError(
                f"cannot create system user {SYSTEM_USER!r} to run PostgreSQL as (it refuses "
                f"to run as root): {proc.stderr.strip()}"
            ) from None
        pw = pwd.getpwnam(SYSTEM_USER)
        log.info("embedded_postgres.user_created", user=SYSTEM_USER)
    return _RunAs(pw.pw_uid, pw.pw_gid)


def _grant_traverse(path: Path) -> None:
    """Let other users traverse ``path`` and its ancestors: adds o+x only, never read."""
    for p in (path, *path.parents):
        mode = p.stat().st_mode
        if not mode & stat.S_IXOTH:
            log.info("embedded_postgres.chmod_o+x", path=str(p))
            p.chmod(stat.S_IMODE(mode) | stat.S_IXOTH)


@cache
def _grant_access_to_binaries() -> None:
    """Let the server user read and run the bundled PostgreSQL and its libpq (o+r, and o+x
    on directories and executables); a no-op for the usual pip install with umask 022."""
    root = _install_dir()
    trees = [root / "bin", root / "lib", root / "share", root.parent.parent / "pgserver.libs"]
    for tree in trees:
        if not tree.exists():
            continue
        _grant_traverse(tree)
        for dirpath, _dirnames, filenames in os.walk(tree):
            for p in [Path(dirpath), *(Path(dirpath) / n for n in filenames)]:
                st = p.lstat()
                if stat.S_ISLNK(st.st_mode):
                    continue
                want = stat.S_IROTH
                if stat.S_ISDIR(st.st_mode) or st.st_mode & stat.S_IXUSR:
                    want |= stat.S_IXOTH
                if st.st_mode & want != want:
                    p.chmod(stat.S_IMODE(st.st_mode) | want)


def _ensure_database(port: int, database: str) -> None:
    try:
        conn = psycopg2.connect(
            host="127.0.0.1", port=port, user=SUPERUSER, dbname="postgres", connect_timeout=10
        )
    except psycopg2.Error as e:
        raise EmbeddedPostgresError(f"cannot connect to PostgreSQL on port {port}: {e}") from e
    try:
        conn.autocommit = True  # CREATE DATABASE cannot run in a transaction
        with conn.cursor() as cur:
            cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,))
            if cur.fetchone() is None:
                cur.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
                log.info("embedded_postgres.database_created", database=database)
    finally:
        conn.close()


def _live_handles(state: dict[str, Any]) -> list[dict[str, Any]]:
    handles = state.get("handles")
    if not isinstance(handles, list):
        return []
    return [
        h
        for h in handles
        if isinstance(h, dict)
        and isinstance(h.get("pid"), int)
        and _pid_alive(h["pid"])
        and (h.get("start") is None or h.get("start") == _proc_start(h["pid"]))
    ]


def _proc_stat(pid: int) -> list[str] | None:
    """Fields of /proc/<pid>/stat after the command name, or None if unavailable."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw.rpartition(")")[2].split()


def _proc_start(pid: int) -> str | None:
    """The process start time in clock ticks: tells a pid apart from a later reuse of it."""
    fields = _proc_stat(pid)
    return fields[19] if fields and len(fields) > 19 else None


def _pid_alive(pid: int) -> bool:
    if Path("/proc/self/stat").exists():
        fields = _proc_stat(pid)
        return fields is not None and fields[0] not in ("Z", "X")  # zombies are dead
    return _pid_exists(pid)


def _pid_exists(pid: int) -> bool:
    """Whether the pid is taken, zombies included (that is what postgres checks)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        # PostgreSQL sets SO_REUSEADDR too, so a port in TIME_WAIT is usable.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def _socket_path_ok(directory: Path) -> bool:
    # The socket is named .s.PGSQL.<port>; the directory list is comma separated.
    path = str(directory / ".s.PGSQL.65535")
    return len(os.fsencode(path)) <= _MAX_SOCKET_PATH and "," not in str(directory)
