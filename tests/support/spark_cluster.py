"""A real Spark standalone cluster (one master, one worker) started from pyspark's own scripts.

`spark.master: spark://host:7077` is the supported way to run refreshes away from the
daemon's pod; this proves the Iceberg, JDBC and S3 jars reach the executors through
`spark.jars` (the worker's executor JVM has none of them on its classpath).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.kafka_broker import free_port

HOST = "127.0.0.1"


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


@dataclass
class SparkCluster:
    work_dir: Path
    worker_memory: str = "1g"
    master_url: str = ""
    master_ui: str = ""
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def start(self, timeout: float = 600.0) -> SparkCluster:
        """Start both daemons; a busy 2-core machine needs a minute or more for the pair."""
        try:
            self._start(time.monotonic() + timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self, deadline: float) -> None:
        port, ui_port = free_port(), free_port()
        self.master_url = f"spark://{HOST}:{port}"
        self.master_ui = f"http://{HOST}:{ui_port}"
        master = ["--host", HOST, "--port", str(port), "--webui-port", str(ui_port)]
        self._spawn("master", "org.apache.spark.deploy.master.Master", master)
        self._wait(deadline, "master", self._master_alive)
        worker = [
            "--host",
            HOST,
            "--webui-port",
            str(free_port()),
            "--cores",
            "2",
            "--memory",
            self.worker_memory,
            "--work-dir",
            str(self.work_dir / "work"),
            self.master_url,
        ]
        self._spawn("worker", "org.apache.spark.deploy.worker.Worker", worker)
        self._wait(deadline, "worker registration", self._alive_workers)

    def stop(self) -> None:
        for process in reversed(self.processes):
            process.terminate()
        for process in self.processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def _spawn(self, role: str, main_class: str, arguments: list[str]) -> None:
        home = spark_home()
        env = {
            **os.environ,
            "SPARK_HOME": str(home),
            "SPARK_LOCAL_IP": HOST,
            "SPARK_DAEMON_MEMORY": "256m",
            "SPARK_LOG_DIR": str(self.work_dir / "logs"),
        }
        self.work_dir.mkdir(parents=True, exist_ok=True)
        log = (self.work_dir / f"{role}.log").open("wb")
        process = subprocess.Popen(
            [str(home / "bin" / "spark-class"), main_class, *arguments],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )
        self.processes.append(process)

    def _wait(self, deadline: float, what: str, ready: Callable[..., bool], *args: object) -> None:
        while not ready(*args):
            for process in self.processes:
                if process.poll() is not None:
                    raise RuntimeError(f"spark {what}: a daemon exited, see {self.work_dir}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"spark {what} not ready, see {self.work_dir}")
            time.sleep(0.5)

    def _master_state(self) -> dict[str, object] | None:
        try:
            with urllib.request.urlopen(f"{self.master_ui}/json/", timeout=2) as response:
                state: dict[str, object] = json.load(response)
        except OSError:
            return None
        return state

    def _master_alive(self) -> bool:
        state = self._master_state()
        return state is not None and state.get("status") == "ALIVE"

    def _alive_workers(self) -> bool:
        state = self._master_state()
        return state is not None and int(str(state.get("aliveworkers", 0))) >= 1
