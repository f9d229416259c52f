"""A real Iceberg REST catalog server for the tests, built at test time from Java source.

`IcemvRestServer.java` serves Iceberg's own server-side handlers (`CatalogHandlers`, as
Polaris and Gravitino do) over a JdbcCatalog on PostgreSQL. It is compiled with `javac`
against the Iceberg Spark runtime jar icemv already uses, into a temporary directory
keyed by the source's hash (class files are never committed). Settings, including the
bearer token and the OAuth2 client credential, go through the environment, never argv.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pyspark

from icemv.engine.spark import vendored_iceberg_jar

SOURCE = Path(__file__).with_name("IcemvRestServer.java")
MAIN_CLASS = "org.apache.iceberg.rest.IcemvRestServer"
POSTGRES_JDBC_JAR = "/usr/share/java/postgresql.jar"
START_TIMEOUT_SECONDS = 60.0


def _spark_jars(*prefixes: str) -> list[str]:
    jars_dir = Path(pyspark.__file__).parent / "jars"
    found = [str(jar) for jar in sorted(jars_dir.glob("*.jar")) if jar.name.startswith(prefixes)]
    if len(found) < len(prefixes):
        raise RuntimeError(f"pyspark's jars/ lacks one of {prefixes}")
    return found


def _class_path() -> list[str]:
    # Hadoop (JdbcCatalog's default HadoopFileIO) with its logging, and slf4j (Iceberg logs).
    hadoop = _spark_jars(
        "hadoop-client-api-", "hadoop-client-runtime-", "slf4j-api-", "commons-logging-"
    )
    return [vendored_iceberg_jar(), *hadoop, POSTGRES_JDBC_JAR]


def compiled_classes() -> Path:
    """The directory with the compiled server, compiling it first if this source is new."""
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:16]
    target = Path(tempfile.gettempdir()) / f"icemv-rest-catalog-{digest}"
    if (target / "org/apache/iceberg/rest/IcemvRestServer.class").exists():
        return target
    if shutil.which("javac") is None:
        raise RuntimeError("javac not found: install openjdk-17-jdk-headless (make system-deps)")
    building = Path(tempfile.mkdtemp(prefix="icemv-rest-catalog-build-"))
    subprocess.run(
        ["javac", "-nowarn", "-cp", ":".join(_class_path()), "-d", str(building), str(SOURCE)],
        check=True,
        capture_output=True,
    )
    try:
        building.rename(target)  # atomic: a concurrent build of the same source loses harmlessly
    except OSError:
        shutil.rmtree(building, ignore_errors=True)
    return target


@dataclass
class RestCatalogServer:
    """One running server; `uri` for clients, `credential` / `token` for auth tests."""

    process: subprocess.Popen[bytes]
    uri: str
    credential: str
    token: str
    prefix: str

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def start_rest_catalog(
    jdbc_uri: str,
    jdbc_user: str | None,
    warehouse: str,
    log_path: Path,
    prefix: str = "icemv-test",
    properties: dict[str, str] | None = None,
    jars: Sequence[str] = (),
) -> RestCatalogServer:
    """Start a server on 127.0.0.1 (ephemeral port) and wait until it listens.

    `properties` are more catalog properties (an s3:// warehouse's S3FileIO settings, with
    its `jars` on the class path). The server's stderr (stack traces of failed requests)
    goes to `log_path`.
    """
    classes = compiled_classes()
    token = secrets.token_hex(16)
    credential = f"icemv-test:{secrets.token_hex(16)}"
    env = {
        **os.environ,
        "ICEMV_REST_JDBC_URI": jdbc_uri,
        "ICEMV_REST_WAREHOUSE": warehouse,
        "ICEMV_REST_PREFIX": prefix,
        "ICEMV_REST_TOKEN": token,
        "ICEMV_REST_CREDENTIAL": credential,
        "ICEMV_REST_CATALOG_PROPERTIES": "\n".join(
            f"{k}={v}" for k, v in (properties or {}).items()
        ),
    }
    if jdbc_user:
        env["ICEMV_REST_JDBC_USER"] = jdbc_user
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            [
                "java",
                "-Xmx384m",
                "-cp",
                ":".join([str(classes), *_class_path(), *jars]),
                MAIN_CLASS,
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=log,
        )
    assert process.stdout is not None
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        line = process.stdout.readline().decode()
        if line.startswith("LISTENING "):
            port = int(line.split()[1])
            return RestCatalogServer(process, f"http://127.0.0.1:{port}", credential, token, prefix)
        if not line and process.poll() is not None:
            break
    process.kill()
    process.wait()
    raise RuntimeError(f"the REST catalog server did not start (exit code {process.returncode})")
