"""EmbeddedPostgres against the real bundled PostgreSQL: no mocks.

Run as root (as here), these exercise the unprivileged ``icemv`` user path, including the
o+x grant on pytest's private /tmp/pytest-of-root directory.
"""

from __future__ import annotations

import os
import pwd
import re
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg2
import pytest

from icemv.catalog.embedded.server import EmbeddedPostgres
from icemv.errors import EmbeddedPostgresError

pytestmark = pytest.mark.postgres

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT_S = 60.0

# A second process holding a handle; it obeys one command from stdin:
# "stop" -> stop() then exit, "die" -> exit without stop() or atexit, EOF -> normal exit.
CHILD = """
import os, sys
from pathlib import Path
import structlog
structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))  # stdout is ours
from icemv.catalog.embedded.server import EmbeddedPostgres
pg = EmbeddedPostgres(Path(sys.argv[1]))
print(pg.start(), flush=True)
cmd = sys.stdin.readline().strip()
if cmd == "stop":
    pg.stop()
    print("stopped", flush=True)
elif cmd == "die":
    os._exit(0)
"""


def _wait_until(predicate: Callable[[], bool], what: str, timeout: float = TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def _query(url: str, query: str, *params: object) -> list[tuple[object, ...]]:
    conn = psycopg2.connect(url, connect_timeout=10)
    try:
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute(query, params)
            return cur.fetchall() if cur.description else []
    finally:
        conn.close()


def _refuses(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    except ConnectionRefusedError:
        return True
    return False


def _postmaster_pid(data_dir: Path) -> int:
    return int((data_dir / "postmaster.pid").read_text().split()[0])


def _pid_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


class Child:
    """Another process with its own EmbeddedPostgres on the same data dir."""

    def __init__(self, data_dir: Path) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.proc = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(data_dir)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env=env,
        )
        self.url = self._readline()

    def _readline(self) -> str:
        assert self.proc.stdout is not None
        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            if not sel.select(TIMEOUT_S):
                raise AssertionError("child process did not answer in time")
        line = self.proc.stdout.readline().strip()
        if not line:
            _, err = self.proc.communicate(timeout=TIMEOUT_S)
            raise AssertionError(f"child process failed:\n{err}")
        return line

    def finish(self, command: str) -> None:
        """Send the command and wait for the process to exit successfully."""
        _, err = self.proc.communicate(f"{command}\n" if command else "", timeout=TIMEOUT_S)
        assert self.proc.returncode == 0, err


@pytest.fixture
def data_dir(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "catalog" / "pg"
    yield path
    # A failed test must not leave a server behind.
    try:
        pid = _postmaster_pid(path)
    except (OSError, ValueError, IndexError):
        return
    if not _pid_gone(pid):
        os.kill(pid, signal.SIGINT)  # fast shutdown
        _wait_until(lambda: _pid_gone(pid), "leftover server to exit")


def test_start_serves_tcp_on_loopback_with_private_socket(data_dir: Path) -> None:
    pg = EmbeddedPostgres(data_dir)
    url = pg.start()
    try:
        assert re.fullmatch(r"postgresql://postgres@127\.0\.0\.1:\d+/icemv", url)
        assert url.endswith(f":{pg.port}/icemv")
        assert pg.port != 5432
        assert pg.start() == url  # idempotent
        assert _query(url, "SELECT current_database(), current_user, host(inet_server_addr())") == [
            ("icemv", "postgres", "127.0.0.1")
        ]
        assert _query(url, "SHOW listen_addresses") == [("127.0.0.1",)]
        assert _query(url, "SHOW unix_socket_directories") == [(str(data_dir),)]
        assert _query(url, "SHOW server_encoding") == [("UTF8",)]
        server_uid = (data_dir / "postmaster.pid").stat().st_uid
        if os.geteuid() == 0:
            assert pwd.getpwuid(server_uid).pw_name == "icemv"
        else:
            assert server_uid == os.geteuid()
    finally:
        pg.stop()
    assert _refuses(pg.port)
    pg.stop()  # idempotent


def test_context_manager_stops_server(data_dir: Path) -> None:
    with EmbeddedPostgres(data_dir, database="lake-catalog") as pg:
        assert _query(pg.url, "SELECT current_database()") == [("lake-catalog",)]
        port = pg.port
    assert _refuses(port)


def test_second_process_reuses_server_until_last_handle_stops(data_dir: Path) -> None:
    pg = EmbeddedPostgres(data_dir)
    url = pg.start()
    pid = _postmaster_pid(data_dir)
    child = Child(data_dir)
    try:
        assert child.url == url
        assert _postmaster_pid(data_dir) == pid
        pg.stop()
        # The child's handle keeps the server up.
        assert _query(url, "SELECT 1") == [(1,)]
    finally:
        child.finish("stop")
    assert _refuses(pg.port)


def test_process_exit_without_stop_call_stops_server_via_atexit(data_dir: Path) -> None:
    child = Child(data_dir)
    port = int(child.url.rsplit(":", 1)[1].split("/")[0])
    assert _query(child.url, "SELECT 1") == [(1,)]
    child.finish("")  # plain interpreter exit
    assert _refuses(port)


def test_handle_of_dead_process_does_not_keep_server_alive(data_dir: Path) -> None:
    pg = EmbeddedPostgres(data_dir)
    pg.start()
    child = Child(data_dir)
    child.finish("die")  # gone without unregistering
    assert _query(pg.url, "SELECT 1") == [(1,)]
    pg.stop()
    assert _refuses(pg.port)


def test_data_persists_across_stop_and_start(data_dir: Path) -> None:
    with EmbeddedPostgres(data_dir) as pg:
        _query(pg.url, "CREATE TABLE t (v text)")
        _query(pg.url, "INSERT INTO t VALUES (%s)", "kept")
    with EmbeddedPostgres(data_dir) as pg:
        assert _query(pg.url, "SELECT v FROM t") == [("kept",)]


def test_start_after_postmaster_crash(data_dir: Path) -> None:
    crashed = EmbeddedPostgres(data_dir)
    crashed.start()
    _query(crashed.url, "CREATE TABLE t (v int)")
    _query(crashed.url, "INSERT INTO t VALUES (42)")
    pid = _postmaster_pid(data_dir)
    os.kill(pid, signal.SIGKILL)
    _wait_until(lambda: _refuses(crashed.port), "killed server to close its port")
    assert (data_dir / "postmaster.pid").exists()  # stale, left by the crash

    pg = EmbeddedPostgres(data_dir)
    try:
        pg.start()
        assert _postmaster_pid(data_dir) != pid
        assert _query(pg.url, "SELECT v FROM t") == [(42,)]
    finally:
        crashed.stop()
        pg.stop()
    assert _refuses(pg.port)


def test_start_waits_out_a_postmaster_that_is_dying(data_dir: Path) -> None:
    """A killed postmaster closes its port before the kernel marks it a zombie: for that
    moment postmaster.pid names a live, ready server that refuses connections (CI saw it).
    start() must wait for it to die and launch a new server, not hand out the dead port."""
    with EmbeddedPostgres(data_dir) as pg:
        _query(pg.url, "CREATE TABLE t (v int)")
        _query(pg.url, "INSERT INTO t VALUES (7)")
    dying = subprocess.Popen(["sleep", "60"])
    dead_port = socket.socket()
    dead_port.bind(("127.0.0.1", 0))
    port = dead_port.getsockname()[1]
    dead_port.close()  # nothing listens there: connections are refused
    lines = [str(dying.pid), str(data_dir), str(int(time.time())), str(port), str(data_dir)]
    lines += ["127.0.0.1", "0 0", "ready   "]
    (data_dir / "postmaster.pid").write_text("\n".join(lines) + "\n")
    killer = threading.Timer(1.0, lambda: (dying.kill(), dying.wait()))
    killer.start()
    pg = EmbeddedPostgres(data_dir)
    try:
        pg.start()
        assert dying.poll() is not None  # start() waited for it
        assert _postmaster_pid(data_dir) != dying.pid
        assert _query(pg.url, "SELECT v FROM t") == [(7,)]
    finally:
        killer.join()
        pg.stop()


def test_failed_start_raises_with_server_log_tail(data_dir: Path) -> None:
    with EmbeddedPostgres(data_dir):
        pass
    conf = data_dir / "postgresql.conf"
    good = conf.read_text()
    conf.write_text(good + "\nno_such_setting = 1\n")
    pg = EmbeddedPostgres(data_dir)
    with pytest.raises(
        EmbeddedPostgresError, match='unrecognized configuration parameter "no_such'
    ):
        pg.start()
    assert not pg.started
    conf.write_text(good)
    with EmbeddedPostgres(data_dir) as pg:
        assert _query(pg.url, "SELECT 1") == [(1,)]


def test_long_data_dir_puts_socket_in_short_private_dir(tmp_path: Path) -> None:
    data_dir = tmp_path / ("d" * 60) / ("e" * 60) / "pg"
    with EmbeddedPostgres(data_dir) as pg:
        ((socket_dir,),) = _query(pg.url, "SHOW unix_socket_directories")
        assert isinstance(socket_dir, str)
        assert socket_dir.startswith(os.path.join(tempfile.gettempdir(), "icemv-pg-"))
        assert Path(socket_dir).stat().st_mode & 0o077 == 0
