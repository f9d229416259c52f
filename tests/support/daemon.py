"""Running the daemon in a test: in a thread, with its own port and consumer group."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections.abc import Callable
from typing import IO, Any

from prometheus_client.parser import text_string_to_metric_families

from icemv.config import Config
from icemv.identifiers import Identifier
from icemv.lakehouse import Lakehouse
from icemv.mv.freshness import assess_freshness
from icemv.mv.model import load_materialized_view
from icemv.refresh.result import RefreshResult
from icemv.service.daemon import Daemon
from tests.support.kafka_broker import TansuBroker


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def metric(port: int, name: str, labels: dict[str, str]) -> float:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    total = 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                total += sample.value
    return total


class LogLines:
    """Collects a process's JSON log lines from a pipe, in a thread."""

    def __init__(self, stream: IO[str]) -> None:
        self.lines: list[dict[str, Any]] = []
        self.raw: list[str] = []
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self.raw.append(line)
            try:
                self.lines.append(json.loads(line))
            except json.JSONDecodeError:
                continue

    def join(self, timeout: float) -> None:
        """Wait for the stream to end (the process exited) and every line to be read."""
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "the stream did not end"

    def seen(self, event: str, **fields: Any) -> bool:
        return self.count(event, **fields) > 0

    def count(self, event: str, **fields: Any) -> int:
        return sum(
            line.get("event") == event and all(line.get(k) == v for k, v in fields.items())
            for line in list(self.lines)
        )


class RunningDaemon:
    def __init__(self, config: Config) -> None:
        self.daemon = Daemon(config)
        self.thread = threading.Thread(target=self.daemon.run, daemon=True)

    def __enter__(self) -> Daemon:
        self.thread.start()
        wait_for(self.daemon.ready.is_set, 60, "daemon ready")
        return self.daemon

    def __exit__(self, *exc: object) -> None:
        self.daemon.stop()
        self.thread.join(90)
        assert not self.thread.is_alive(), "daemon did not stop"


def kafka_settings(broker: TansuBroker, topic: str) -> dict[str, Any]:
    """A fresh consumer group on `topic` that reads from the start and joins quickly."""
    return {
        "bootstrap_servers": [broker.bootstrap],
        "topics": [topic],
        "group_id": f"g-{topic}",
        "auto_offset_reset": "earliest",
        "session_timeout_ms": 6000,
    }


def daemon_config(base: Config, **sections: Any) -> Config:
    update: dict[str, Any] = {"metrics": base.metrics.model_copy(update={"port": 0})}
    for name, values in sections.items():
        update[name] = getattr(base, name).model_copy(update=values)
    return base.model_copy(update=update)


def is_fresh(lakehouse: Lakehouse, mv: Identifier) -> bool:
    return assess_freshness(lakehouse, load_materialized_view(lakehouse, mv)).state == "fresh"


def max_overlap(results: list[RefreshResult]) -> int:
    """The largest number of refreshes running at one moment, from their recorded intervals."""
    edges = []
    for result in results:
        start = result.started_ms / 1000
        edges += [(start, 1), (start + result.duration_seconds, -1)]
    running = peak = 0
    for _, step in sorted(edges):
        running += step
        peak = max(peak, running)
    return peak
