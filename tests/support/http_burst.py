"""A burst of concurrent HTTP requests, from a process of its own.

`python -m tests.support.http_burst PORT KIND...` opens one connection per KIND at once
and sends one raw HTTP/1.1 request on each, then prints one JSON list: for each request,
in order, its kind, status (null when unanswered within `--timeout`, or the connection
failed) and seconds from its connect to the end of the answer (the server closes).

Run apart from the server under test, so the client does not share the server's
interpreter (and its GIL). One thread with non-blocking sockets and a selector: a client
of little overhead per request, so the times are mostly the server's.
"""

from __future__ import annotations

import argparse
import errno
import json
import selectors
import socket
import sys
import time
from dataclasses import dataclass, field
from typing import Any

# kind -> (method, path)
REQUESTS: dict[str, tuple[str, str]] = {
    "healthz": ("GET", "/healthz"),
    "readyz": ("GET", "/readyz"),
    "metrics": ("GET", "/metrics"),
    "refresh-known": ("POST", "/mvs/analytics.daily/refresh"),
    "refresh-unknown": ("POST", "/mvs/nope/refresh"),
}


@dataclass(eq=False)
class _Request:
    kind: str
    sock: socket.socket
    started: float
    out: bytes
    received: bytearray = field(default_factory=bytearray)
    seconds: float | None = None
    error: str | None = None

    def result(self) -> dict[str, Any]:
        status = None
        if self.error is None and self.seconds is not None:
            try:
                status = int(bytes(self.received).split(b"\r\n", 1)[0].split()[1])
            except (IndexError, ValueError):
                self.error = "no status line"
        seconds = self.seconds if self.seconds is not None else time.perf_counter() - self.started
        return {"kind": self.kind, "status": status, "seconds": seconds, "error": self.error}


def _request_bytes(kind: str) -> bytes:
    method, path = REQUESTS[kind]
    body = "Content-Length: 0\r\n" if method == "POST" else ""
    return f"{method} {path} HTTP/1.1\r\nHost: x\r\n{body}\r\n".encode()


def burst(port: int, kinds: list[str], timeout: float) -> list[dict[str, Any]]:
    selector = selectors.DefaultSelector()
    requests = []
    for kind in kinds:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        request = _Request(kind, sock, time.perf_counter(), _request_bytes(kind))
        code = sock.connect_ex(("127.0.0.1", port))
        if code not in (0, errno.EINPROGRESS):
            request.error = errno.errorcode.get(code, str(code))
            request.seconds = time.perf_counter() - request.started
            sock.close()
        else:
            selector.register(sock, selectors.EVENT_WRITE, request)
        requests.append(request)
    deadline = time.monotonic() + timeout
    open_count = len(selector.get_map())
    while open_count and time.monotonic() < deadline:
        for key, _ in selector.select(max(0.0, deadline - time.monotonic())):
            request = key.data
            try:
                if request.out:
                    sent = request.sock.send(request.out)
                    request.out = request.out[sent:]
                    if not request.out:
                        selector.modify(request.sock, selectors.EVENT_READ, request)
                    continue
                chunk = request.sock.recv(65536)
            except BlockingIOError:
                continue
            except OSError as exc:
                request.error = type(exc).__name__
                chunk = b""
            if chunk:
                request.received += chunk
                continue
            request.seconds = time.perf_counter() - request.started
            selector.unregister(request.sock)
            request.sock.close()
            open_count -= 1
    for key in list(selector.get_map().values()):
        key.data.error = "timeout"
        key.data.sock.close()
    selector.close()
    return [request.result() for request in requests]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("port", type=int)
    parser.add_argument("kinds", nargs="+", choices=sorted(REQUESTS))
    parser.add_argument("--timeout", type=float, default=15.0)
    args = parser.parse_args()
    json.dump(burst(args.port, args.kinds, args.timeout), sys.stdout)


if __name__ == "__main__":
    main()
