"""Connections beyond the HTTP server's handler threads: answered at once, on one thread.

The server (service/http.py) runs each request on a thread of its own, at most so many at
a time. A connection accepted while all of them are busy is handed here: one thread with a
selector reads its request head without blocking, writes the answer `respond(head)` gives
(a probe's, from the state the daemon keeps, or a 503), and closes the connection once the
client has read it and hung up. Reading the request before answering and waiting for the
client's close keeps the answer from being lost: closing a socket with unread input
resets the connection, and the client may then never see the answer.

A client gets `HEAD_SECONDS` to send its request head (else a 503 from `respond(b"")`) and
`LINGER_SECONDS` to hang up after the answer. At most `MAX_CONNECTIONS` wait here; past
that a connection is closed unanswered (the handlers and this thread are both saturated).
"""

from __future__ import annotations

import contextlib
import queue
import selectors
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import structlog

log = structlog.get_logger(__name__)

HEAD_SECONDS = 2.0
LINGER_SECONDS = 1.0
MAX_CONNECTIONS = 1024
# A request head longer than this is answered as it stands (the answer is a 503 or 400).
MAX_HEAD_BYTES = 16 * 1024
HEAD_END = b"\r\n\r\n"

Respond = Callable[[bytes], bytes]


@dataclass(eq=False)
class _Connection:
    sock: socket.socket
    deadline: float
    head: bytearray = field(default_factory=bytearray)
    # The answer still to send; None until the head is in.
    pending: bytes | None = None
    answered: bool = False


class Overflow:
    """`add(sock)` from the serving thread; everything else happens on this one's thread."""

    def __init__(self, respond: Respond) -> None:
        self._respond = respond
        self._incoming: queue.SimpleQueue[socket.socket] = queue.SimpleQueue()
        self._waiting = 0  # connections handed over and not yet closed
        self._count_lock = threading.Lock()
        self._wake_read, self._wake_write = socket.socketpair()
        self._wake_read.setblocking(False)
        self._wake_write.setblocking(False)
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._wake_read, selectors.EVENT_READ, None)
        self._connections: set[_Connection] = set()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="icemv-http-overflow", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        self._wake()
        if self._thread.is_alive():
            self._thread.join(5.0)
        for conn in list(self._connections):
            self._close(conn)
        while True:
            try:
                self._incoming.get_nowait().close()
            except queue.Empty:
                break
        self._selector.close()
        self._wake_read.close()
        self._wake_write.close()

    def add(self, sock: socket.socket) -> None:
        """Take over an accepted connection (closed at once when too many wait already)."""
        with self._count_lock:
            full = self._waiting >= MAX_CONNECTIONS or self._stopping.is_set()
            if not full:
                self._waiting += 1
        if full:
            with contextlib.suppress(OSError):
                sock.close()
            return
        self._incoming.put(sock)
        self._wake()

    @property
    def waiting(self) -> int:
        with self._count_lock:
            return self._waiting

    def _wake(self) -> None:
        with contextlib.suppress(OSError):  # full (a wake-up is pending anyway) or closed
            self._wake_write.send(b"\0")

    def _run(self) -> None:
        while not self._stopping.is_set():
            timeout = self._next_timeout()
            for key, events in self._selector.select(timeout):
                conn = key.data
                if conn is None:
                    with contextlib.suppress(OSError):
                        while self._wake_read.recv(4096):
                            pass
                    continue
                if events & selectors.EVENT_WRITE:
                    self._send(conn)
                if events & selectors.EVENT_READ and conn in self._connections:
                    self._read(conn)
            self._take_incoming()
            self._expire()

    def _next_timeout(self) -> float:
        if not self._connections:
            return 1.0
        soonest = min(conn.deadline for conn in self._connections)
        return min(1.0, max(0.0, soonest - time.monotonic()))

    def _take_incoming(self) -> None:
        while True:
            try:
                sock = self._incoming.get_nowait()
            except queue.Empty:
                return
            conn = _Connection(sock, time.monotonic() + HEAD_SECONDS)
            try:
                sock.setblocking(False)
                self._selector.register(sock, selectors.EVENT_READ, conn)
            except (OSError, ValueError):
                self._forget(conn)
                continue
            self._connections.add(conn)

    def _read(self, conn: _Connection) -> None:
        try:
            data = conn.sock.recv(8192)
        except BlockingIOError:
            return
        except OSError:
            self._close(conn)
            return
        if not data:  # the client hung up: after the answer, or before sending a whole head
            self._close(conn)
            return
        if conn.pending is not None or conn.answered:
            return  # the rest of a request already answered (a body): read and dropped
        conn.head += data
        if HEAD_END in conn.head or len(conn.head) >= MAX_HEAD_BYTES:
            self._answer(conn, bytes(conn.head))

    def _answer(self, conn: _Connection, head: bytes) -> None:
        try:
            conn.pending = self._respond(head)
        except Exception as exc:  # noqa: BLE001 (the thread must go on for the others)
            log.warning("http_overflow_answer_failed", error=type(exc).__name__)
            self._close(conn)
            return
        self._send(conn)

    def _send(self, conn: _Connection) -> None:
        if conn.pending is None:
            return
        try:
            sent = conn.sock.send(conn.pending)
        except BlockingIOError:
            sent = 0
        except OSError:
            self._close(conn)
            return
        conn.pending = conn.pending[sent:]
        if conn.pending:
            self._selector.modify(conn.sock, selectors.EVENT_READ | selectors.EVENT_WRITE, conn)
            return
        conn.pending, conn.answered = None, True
        conn.deadline = time.monotonic() + LINGER_SECONDS
        self._selector.modify(conn.sock, selectors.EVENT_READ, conn)
        with contextlib.suppress(OSError):
            conn.sock.shutdown(socket.SHUT_WR)

    def _expire(self) -> None:
        now = time.monotonic()
        for conn in [c for c in self._connections if c.deadline <= now]:
            if conn.answered or conn.pending is not None:
                self._close(conn)
                continue
            # No whole request head in time: a 503 as it stands, then the linger.
            conn.deadline = now + LINGER_SECONDS
            self._answer(conn, b"")

    def _close(self, conn: _Connection) -> None:
        if conn not in self._connections:
            return  # closed already
        self._connections.discard(conn)
        with contextlib.suppress(KeyError, ValueError, OSError):
            self._selector.unregister(conn.sock)
        self._forget(conn)

    def _forget(self, conn: _Connection) -> None:
        with contextlib.suppress(OSError):
            conn.sock.close()
        with self._count_lock:
            self._waiting -= 1
