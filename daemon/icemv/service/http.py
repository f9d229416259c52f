"""The daemon's small HTTP surface: metrics, probes, and on-demand refresh requests.

The stdlib's `HTTPServer` serving in a daemon thread, each request on a handler thread of
its own: four routes do not justify a web framework, and a slow scrape or probe must not
wait behind another. Every handler turns its own exceptions into a 5xx so a bad request
or a failing callback never takes the server down.

The socket timeout only bounds each read, so a client trickling one byte at a time would
hold a thread forever: a per-request deadline (kept by one thread, service/deadlines.py)
shuts the connection down once the request has not been read in full within
`REQUEST_DEADLINE_SECONDS`. A request whose client hung
up before it was answered is not executed (a refresh nobody waits for may still be
wanted, but a half-sent one is not a request), and such hang-ups are debug-level noise.

Bursts: the socket listens with a backlog of `LISTEN_BACKLOG` (the stdlib's 5 left
connections of a 200-request burst waiting on SYN retries for a minute), and at most
`MAX_HANDLERS` requests run on handler threads at once (started as needed, then kept:
no thread start per request). A connection accepted while all are busy
goes to one overflow thread (service/http_overflow.py) that answers it at once: a probe
(`/healthz`, `/readyz`, GET or HEAD) as usual, since both read only state the daemon keeps
(`liveness` and `readiness` must stay that cheap), anything else `503` with
`Retry-After: 1`, counted in `icemv_http_requests_refused_total` and logged as `http_busy`
(with the count so far) at most once a minute.
"""

from __future__ import annotations

import contextlib
import enum
import json
import queue
import select
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any, cast
from urllib.parse import unquote, urlsplit

import structlog
from prometheus_client import CONTENT_TYPE_PLAIN_0_0_4

from icemv.service.deadlines import Deadlines
from icemv.service.http_overflow import Overflow
from icemv.service.metrics import Metrics

log = structlog.get_logger(__name__)

MAX_NAME_LENGTH = 512
# Reading one request (line, headers, body) must finish within this many seconds.
REQUEST_DEADLINE_SECONDS = 10.0
# No route takes a body; anything larger than this is refused with 413 unread.
MAX_BODY_BYTES = 64 * 1024
# Errors of a client that went away: logged at debug, never with a traceback.
DISCONNECTS = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, TimeoutError)
# Connections the kernel queues before accept() (capped by net.core.somaxconn).
LISTEN_BACKLOG = 1024
# Requests served on threads at once; more are answered by the overflow thread.
MAX_HANDLERS = 64
# At most one `http_busy` warning this often.
BUSY_LOG_SECONDS = 60.0
BUSY_BODY = b'{"error": "busy, retry"}'


class RefreshRequestOutcome(enum.Enum):
    QUEUED = "queued"
    ALREADY_QUEUED = "already-queued"  # coalesced with a pending request; still accepted
    UNKNOWN_MV = "unknown-mv"
    INVALID_NAME = "invalid-name"


Liveness = Callable[[], bool]
Readiness = Callable[[], Mapping[str, bool]]
RequestRefresh = Callable[[str], RefreshRequestOutcome]


class HttpServer:
    def __init__(
        self,
        host: str,
        port: int,
        metrics: Metrics,
        liveness: Liveness,
        readiness: Readiness,
        request_refresh: RequestRefresh,
        max_handlers: int = MAX_HANDLERS,
    ) -> None:
        """`liveness` and `readiness` answer from memory: the overflow thread calls them
        for every probe that finds the handlers busy."""
        self.host, self.port = host, port
        self.metrics = metrics
        self.liveness = liveness
        self.readiness = readiness
        self.request_refresh = request_refresh
        self.max_handlers = max_handlers
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._busy_lock = threading.Lock()
        self._busy_refused = 0
        self._busy_logged_at: float | None = None

    def start(self) -> int:
        """Bind and serve in the background; returns the bound port (useful with port 0)."""
        if self._server is not None:
            raise RuntimeError("HTTP server already started")
        server = _Server(self)
        self._server = server
        server.deadlines.start()
        server.overflow.start()
        # The poll interval bounds how long stop() waits for the serving loop to notice.
        self._thread = threading.Thread(
            target=server.serve_forever, args=(0.1,), name="icemv-http", daemon=True
        )
        self._thread.start()
        port = int(server.server_address[1])
        log.info("http_server_started", host=self.host, port=port)
        return port

    def stop(self) -> None:
        server, thread = self._server, self._thread
        self._server = self._thread = None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if thread is not None:
            thread.join()

    def refused_busy(self) -> None:
        """Counts a request refused with 503 (`icemv_http_requests_refused_total`); logs
        `http_busy` with the count so far at most every BUSY_LOG_SECONDS."""
        self.metrics.record_http_refused()
        now = time.monotonic()
        with self._busy_lock:
            self._busy_refused += 1
            last = self._busy_logged_at
            if last is not None and now - last < BUSY_LOG_SECONDS:
                return
            refused, self._busy_logged_at = self._busy_refused, now
        log.warning("http_busy", refused_total=refused, max_handlers=self.max_handlers)


def _healthz_answer(app: HttpServer) -> tuple[HTTPStatus, bytes, str]:
    try:
        alive = bool(app.liveness())
    except Exception as exc:  # noqa: BLE001 (class only: probe errors may quote connection strings)
        log.warning("liveness_check_failed", error=type(exc).__name__)
        alive = False
    status = HTTPStatus.OK if alive else HTTPStatus.SERVICE_UNAVAILABLE
    return status, b"ok\n" if alive else b"unhealthy\n", "text/plain; charset=utf-8"


def _readyz_answer(app: HttpServer) -> tuple[HTTPStatus, bytes, str]:
    try:
        checks = {str(name): bool(ok) for name, ok in app.readiness().items()}
    except Exception as exc:  # noqa: BLE001 (class only: probe errors may quote connection strings)
        log.warning("readiness_check_failed", error=type(exc).__name__)
        checks = {"readiness": False}
    ready = all(checks.values())
    # The gauge then shows what the last probe saw, without a second code path.
    app.metrics.set_ready(ready)
    status = HTTPStatus.OK if ready else HTTPStatus.SERVICE_UNAVAILABLE
    return status, json.dumps({"ready": ready, "checks": checks}).encode(), "application/json"


PROBES: dict[str, Callable[[HttpServer], tuple[HTTPStatus, bytes, str]]] = {
    "/healthz": _healthz_answer,
    "/readyz": _readyz_answer,
}


def _overflow_answer(app: HttpServer, head: bytes) -> bytes:
    """The whole response to a request the handlers had no room for (`head`: its request
    line and headers as received, or b"" when they did not come in time)."""
    method, path = _method_and_path(head)
    probe = PROBES.get(path) if method in ("GET", "HEAD") else None
    if probe is not None:
        status, body, content_type = probe(app)
        extra = ""
    else:
        app.refused_busy()
        status, body, content_type = HTTPStatus.SERVICE_UNAVAILABLE, BUSY_BODY, "application/json"
        extra = "Retry-After: 1\r\n"
    head_out = (
        f"HTTP/1.0 {status.value} {status.phrase}\r\nServer: {_Handler.server_version}\r\n"
        f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n{extra}"
        "Connection: close\r\n\r\n"
    )
    return head_out.encode("latin-1") + (b"" if method == "HEAD" else body)


def _method_and_path(head: bytes) -> tuple[str, str]:
    parts = head.split(b"\r\n", 1)[0].decode("latin-1").split()
    if len(parts) != 3:
        return "", ""
    try:
        return parts[0], urlsplit(parts[1]).path
    except ValueError:
        return parts[0], ""


class _Workers:
    """Handler threads, started as needed up to the slots and then kept: a burst does not
    pay for a thread start per request (each waits for the new thread to get the GIL)."""

    def __init__(self, serve: Callable[[Any, Any], None]) -> None:
        self._serve = serve
        self._queue: queue.SimpleQueue[tuple[Any, Any] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0
        self._threads: list[threading.Thread] = []

    def submit(self, request: Any, client_address: Any) -> None:
        """Callers never have more requests in flight than they have slots."""
        with self._lock:
            if self._idle:
                self._idle -= 1
            else:
                thread = threading.Thread(
                    target=self._work, name=f"icemv-http-{len(self._threads)}", daemon=True
                )
                self._threads.append(thread)
                thread.start()
        self._queue.put((request, client_address))

    def stop(self) -> None:
        for _ in self._threads:
            self._queue.put(None)

    def _work(self) -> None:
        while (item := self._queue.get()) is not None:
            self._serve(*item)
            with self._lock:
                self._idle += 1


class _Server(HTTPServer):
    request_queue_size = LISTEN_BACKLOG

    def __init__(self, app: HttpServer) -> None:
        self.app = app
        self._slots = threading.BoundedSemaphore(app.max_handlers)
        self._workers = _Workers(self._serve)
        self.deadlines = Deadlines("icemv-http-deadlines")
        self.overflow = Overflow(lambda head: _overflow_answer(app, head))
        if ":" in app.host:
            self.address_family = socket.AF_INET6
        try:
            super().__init__((app.host, app.port), _Handler)
        except BaseException:  # the port is taken, say: the overflow's sockets go too
            self.overflow.stop()
            raise

    def process_request(self, request: Any, client_address: Any) -> None:
        """A handler thread for the request while there is room, else the overflow thread."""
        if not self._slots.acquire(blocking=False):
            self.overflow.add(request)
            return
        try:
            self._workers.submit(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def _serve(self, request: Any, client_address: Any) -> None:
        try:
            self.finish_request(request, client_address)
        except Exception:  # noqa: BLE001 (as socketserver does: the serving goes on)
            self.handle_error(request, client_address)
        finally:
            self.shutdown_request(request)
            self._slots.release()

    def server_close(self) -> None:
        super().server_close()
        self._workers.stop()
        self.overflow.stop()
        self.deadlines.stop()

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Instead of a traceback on stderr: such errors are clients hanging up or garbage.
        log.debug("http_connection_error", client=client_address[0], error=_error_name())


def _error_name() -> str:
    exc = sys.exc_info()[1]
    return type(exc).__name__ if exc is not None else "unknown"


class _Handler(BaseHTTPRequestHandler):
    # Bounds each read; the whole request is bounded by REQUEST_DEADLINE_SECONDS.
    timeout = 10
    server_version = "icemv"

    @property
    def app(self) -> HttpServer:
        return cast(_Server, self.server).app

    def setup(self) -> None:
        super().setup()
        self._read_done = threading.Event()
        self._deadline = cast(_Server, self.server).deadlines.add(
            REQUEST_DEADLINE_SECONDS, self._request_expired
        )

    def finish(self) -> None:
        cast(_Server, self.server).deadlines.cancel(self._deadline)
        with contextlib.suppress(*DISCONNECTS, OSError):
            super().finish()

    def _request_expired(self) -> None:
        """Runs on the deadlines thread: a request still unread is cut off (its reads see
        EOF)."""
        if self._read_done.is_set():
            return
        log.debug("http_request_deadline", client=self.client_address[0])
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def handle_one_request(self) -> None:
        try:
            super().handle_one_request()
        except DISCONNECTS as exc:
            log.debug("http_client_gone", client=self.client_address[0], error=type(exc).__name__)
            self.close_connection = True

    def do_GET(self) -> None:
        self._dispatch(self._get_route())

    def do_HEAD(self) -> None:
        """Probes that send HEAD get the GET status and headers, without a body."""
        self._dispatch(self._get_route())

    def _get_route(self) -> Callable[[], None] | None:
        path = urlsplit(self.path).path
        routes = {"/metrics": self._metrics, "/healthz": self._healthz, "/readyz": self._readyz}
        return routes.get(path)

    def do_POST(self) -> None:
        parts = urlsplit(self.path).path.split("/")
        refresh = len(parts) == 4 and parts[:2] == ["", "mvs"] and parts[3] == "refresh"
        self._dispatch((lambda: self._refresh(parts[2])) if refresh else None)

    def _dispatch(self, route: Callable[[], None] | None) -> None:
        if not self._read_body():
            return
        self._read_done.set()
        if self._client_gone():
            log.debug("http_client_gone", client=self.client_address[0], method=self.command)
            self.close_connection = True
            return
        try:
            if route is None:
                self._send_json(HTTPStatus.NOT_FOUND, {"error": "not found"})
            else:
                route()
        except DISCONNECTS as exc:
            log.debug("http_client_gone", client=self.client_address[0], error=type(exc).__name__)
            self.close_connection = True
        except Exception:
            log.exception("http_handler_failed", method=self.command, path=self.path)
            with contextlib.suppress(OSError):  # the client may be gone already
                self._send_json(HTTPStatus.INTERNAL_SERVER_ERROR, {"error": "internal error"})

    def _read_body(self) -> bool:
        """Reads (and discards) a declared body; False when the request must not run."""
        declared = self.headers.get("Content-Length")
        if declared is None:
            return True
        try:
            length = int(declared)
        except ValueError:
            length = -1
        if length < 0:
            self._refuse(HTTPStatus.BAD_REQUEST, "invalid Content-Length")
            return False
        if length > MAX_BODY_BYTES:
            self._refuse(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "request body too large")
            return False
        remaining = length
        while remaining > 0:
            chunk = self.rfile.read(min(remaining, 16384))
            if not chunk:  # hung up (or cut off by the deadline) mid-body
                log.debug("http_client_gone", client=self.client_address[0], phase="body")
                self.close_connection = True
                return False
            remaining -= len(chunk)
        return True

    def _refuse(self, status: HTTPStatus, message: str) -> None:
        self._read_done.set()
        self.close_connection = True
        with contextlib.suppress(OSError):
            self._send_json(status, {"error": message})

    def _client_gone(self) -> bool:
        """Whether the client closed its side: a readable socket with nothing to read.

        Covers requests whose header block was cut short (the parser takes EOF as its end).
        """
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            if not readable:
                return False
            return bool(self.connection.recv(1, socket.MSG_PEEK) == b"")
        except OSError:
            return True

    def _metrics(self) -> None:
        self._send(HTTPStatus.OK, self.app.metrics.exposition(), CONTENT_TYPE_PLAIN_0_0_4)

    def _healthz(self) -> None:
        self._send(*_healthz_answer(self.app))

    def _readyz(self) -> None:
        self._send(*_readyz_answer(self.app))

    def _refresh(self, quoted_name: str) -> None:
        try:
            name = unquote(quoted_name, errors="strict")
        except UnicodeDecodeError:
            name = ""
        if not name or len(name) > MAX_NAME_LENGTH or not name.isprintable():
            self._send_json(HTTPStatus.BAD_REQUEST, {"error": "invalid materialized view name"})
            return
        outcome = self.app.request_refresh(name)
        if outcome in (RefreshRequestOutcome.QUEUED, RefreshRequestOutcome.ALREADY_QUEUED):
            self._send_json(HTTPStatus.ACCEPTED, {"mv": name, "status": outcome.value})
        elif outcome is RefreshRequestOutcome.UNKNOWN_MV:
            self._send_json(HTTPStatus.NOT_FOUND, {"mv": name, "error": outcome.value})
        else:
            self._send_json(HTTPStatus.BAD_REQUEST, {"mv": name, "error": outcome.value})

    def _send_json(self, status: HTTPStatus, body: Mapping[str, Any]) -> None:
        self._send(status, json.dumps(body).encode(), "application/json")

    def _send(self, status: HTTPStatus, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        # Replaces stderr printing; only the request line and status, never headers.
        log.debug("http_request", client=self.client_address[0], message=format % args)
