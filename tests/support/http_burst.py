"""A burst of concurrent HTTP requests, from a process of its own.

`python -m tests.support.http_burst PORT KIND...` opens one connection per KIND at once
(asyncio, raw HTTP/1.1, one request each), and prints one JSON list: for each request, in
order, its kind, status (null when unanswered within `--timeout`, or the connection failed)
and seconds from its connect to the end of the answer. Run apart from the server under
test, so the client's work does not share the server's interpreter (and its GIL).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from typing import Any

# kind -> (method, path)
REQUESTS: dict[str, tuple[str, str]] = {
    "healthz": ("GET", "/healthz"),
    "readyz": ("GET", "/readyz"),
    "metrics": ("GET", "/metrics"),
    "refresh-known": ("POST", "/mvs/analytics.daily/refresh"),
    "refresh-unknown": ("POST", "/mvs/nope/refresh"),
}


async def _request(port: int, method: str, path: str) -> int:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        body = "Content-Length: 0\r\n" if method == "POST" else ""
        writer.write(f"{method} {path} HTTP/1.1\r\nHost: x\r\n{body}\r\n".encode())
        await writer.drain()
        response = await reader.read()  # the server closes after one answer
    finally:
        writer.close()
    return int(response.split(b"\r\n", 1)[0].split()[1])


async def _timed(port: int, kind: str, timeout: float) -> dict[str, Any]:
    method, path = REQUESTS[kind]
    started = time.perf_counter()
    try:
        status: int | None = await asyncio.wait_for(_request(port, method, path), timeout)
        error = None
    except (OSError, TimeoutError, IndexError, ValueError) as exc:
        status, error = None, type(exc).__name__
    seconds = time.perf_counter() - started
    return {"kind": kind, "status": status, "seconds": seconds, "error": error}


async def burst(port: int, kinds: list[str], timeout: float) -> list[dict[str, Any]]:
    return list(await asyncio.gather(*(_timed(port, kind, timeout) for kind in kinds)))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("port", type=int)
    parser.add_argument("kinds", nargs="+", choices=sorted(REQUESTS))
    parser.add_argument("--timeout", type=float, default=15.0)
    args = parser.parse_args()
    json.dump(asyncio.run(burst(args.port, args.kinds, args.timeout)), sys.stdout)


if __name__ == "__main__":
    main()
