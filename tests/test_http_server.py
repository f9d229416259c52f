"""The HTTP surface over real sockets on 127.0.0.1."""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from prometheus_client.parser import text_string_to_metric_families

from icemv.service.http import HttpServer, RefreshRequestOutcome
from icemv.service.metrics import Metrics

KNOWN_MVS = {"analytics.daily", "odd name/x"}


@dataclass
class Fakes:
    """The daemon's side of the server, switchable per test."""

    alive: bool = True
    checks: dict[str, bool] = field(
        default_factory=lambda: {"catalog": True, "spark": True, "kafka": True}
    )
    requested: list[str] = field(default_factory=list)
    fail: bool = False

    def liveness(self) -> bool:
        if self.fail:
            raise RuntimeError("heartbeat unknown")
        return self.alive

    def readiness(self) -> dict[str, bool]:
        if self.fail:
            raise RuntimeError("catalog password=hunter2 unreachable")
        return self.checks

    def request_refresh(self, name: str) -> RefreshRequestOutcome:
        self.requested.append(name)
        if self.fail:
            raise RuntimeError("queue broken")
        if name.startswith("bad"):
            return RefreshRequestOutcome.INVALID_NAME
        if name in KNOWN_MVS:
            return RefreshRequestOutcome.QUEUED
        return RefreshRequestOutcome.UNKNOWN_MV


@dataclass
class Running:
    fakes: Fakes
    metrics: Metrics
    port: int

    def call(self, path: str, method: str = "GET") -> tuple[int, str, bytes]:
        data = b"" if method == "POST" else None
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}", data=data, method=method
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, response.headers["Content-Type"], response.read()
        except urllib.error.HTTPError as error:
            with error:
                return error.code, error.headers["Content-Type"], error.read()


@pytest.fixture
def server() -> Iterator[Running]:
    fakes, metrics = Fakes(), Metrics(version="test")
    http = HttpServer(
        "127.0.0.1", 0, metrics, fakes.liveness, fakes.readiness, fakes.request_refresh
    )
    port = http.start()
    yield Running(fakes, metrics, port)
    http.stop()


def test_metrics_endpoint_serves_the_text_format(server: Running) -> None:
    server.metrics.record_event("icemv", "routed")
    status, content_type, body = server.call("/metrics")
    assert status == 200
    assert content_type == "text/plain; version=0.0.4; charset=utf-8"
    values = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(body.decode())
        for s in family.samples
    }
    assert values[("icemv_up", ())] == 1
    assert values[("icemv_events_total", (("format", "icemv"), ("outcome", "routed")))] == 1
    assert server.call("/metrics?debug=1")[0] == 200


def test_healthz_follows_liveness(server: Running) -> None:
    assert server.call("/healthz")[::2] == (200, b"ok\n")
    server.fakes.alive = False
    assert server.call("/healthz")[0] == 503
    server.fakes.alive, server.fakes.fail = True, True
    assert server.call("/healthz")[0] == 503


def test_readyz_flips_with_checks_and_sets_the_gauge(server: Running) -> None:
    status, content_type, body = server.call("/readyz")
    assert (status, content_type) == (200, "application/json")
    assert json.loads(body) == {
        "ready": True,
        "checks": {"catalog": True, "spark": True, "kafka": True},
    }
    assert b"icemv_ready 1.0" in server.metrics.exposition()

    server.fakes.checks["kafka"] = False
    status, _, body = server.call("/readyz")
    assert status == 503
    assert json.loads(body)["checks"]["kafka"] is False
    assert b"icemv_ready 0.0" in server.metrics.exposition()

    server.fakes.checks["kafka"] = True
    assert server.call("/readyz")[0] == 200


def test_readyz_failing_check_is_not_ready_and_leaks_nothing(server: Running) -> None:
    server.fakes.fail = True
    status, _, body = server.call("/readyz")
    assert status == 503
    assert b"hunter2" not in body


def test_refresh_request_is_accepted(server: Running) -> None:
    status, content_type, body = server.call("/mvs/analytics.daily/refresh", "POST")
    assert (status, content_type) == (202, "application/json")
    assert json.loads(body) == {"mv": "analytics.daily", "status": "queued"}
    assert server.fakes.requested == ["analytics.daily"]


def test_refresh_name_is_url_decoded_and_passed_as_data(server: Running) -> None:
    assert server.call("/mvs/odd%20name%2Fx/refresh", "POST")[0] == 202
    status, _, body = server.call("/mvs/x%27%3B%20DROP%20TABLE%20t%3B--/refresh", "POST")
    assert status == 404
    assert json.loads(body)["mv"] == "x'; DROP TABLE t;--"
    assert server.fakes.requested == ["odd name/x", "x'; DROP TABLE t;--"]


def test_refresh_of_unknown_mv_is_404(server: Running) -> None:
    assert server.call("/mvs/nope/refresh", "POST")[0] == 404


@pytest.mark.parametrize("name", ["", "%00", "a%0Ab", "%FF%FE", "x" * 600, "bad.name"])
def test_malformed_refresh_name_is_400(server: Running, name: str) -> None:
    status, _, body = server.call(f"/mvs/{name}/refresh", "POST")
    assert status == 400
    assert "error" in json.loads(body)
    # Rejected at the door unless only the daemon can tell the name is malformed.
    assert server.fakes.requested == (["bad.name"] if name == "bad.name" else [])


def test_failing_refresh_callback_is_500_and_server_lives(server: Running) -> None:
    server.fakes.fail = True
    assert server.call("/mvs/analytics.daily/refresh", "POST")[0] == 500
    server.fakes.fail = False
    assert server.call("/healthz")[0] == 200


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/"),
        ("GET", "/nope"),
        ("GET", "/mvs/analytics.daily/refresh"),
        ("POST", "/metrics"),
        ("POST", "/mvs/analytics.daily"),
        ("POST", "/mvs/a/b/refresh"),
    ],
)
def test_other_routes_are_404(server: Running, method: str, path: str) -> None:
    assert server.call(path, method)[0] == 404
    assert server.fakes.requested == []


@pytest.mark.parametrize(
    "garbage",
    [
        b"\x00\xff\xfe garbage \x01\r\n\r\n",
        b"GET /metrics HTTP/9.9\r\n\r\n",
        b"GET " + b"a" * 70000 + b" HTTP/1.1\r\n\r\n",
        b"GET /healthz HTTP/1.1\r\n" + b"X: y\r\n" * 200 + b"\r\n",
        b"",
    ],
)
def test_server_survives_garbage(server: Running, garbage: bytes) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as conn:
        conn.sendall(garbage)
        conn.shutdown(socket.SHUT_WR)
        # The server answers (an error page, or nothing) and closes: it neither hangs nor dies.
        b"".join(iter(lambda: conn.recv(4096), b""))
    assert server.call("/healthz")[0] == 200


def test_start_stop_lifecycle() -> None:
    fakes = Fakes()
    http = HttpServer(
        "127.0.0.1", 0, Metrics(), fakes.liveness, fakes.readiness, fakes.request_refresh
    )
    port = http.start()
    assert port > 0
    with pytest.raises(RuntimeError):
        http.start()
    http.stop()
    http.stop()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=10).close()
