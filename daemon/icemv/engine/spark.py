"""The one SparkSession of a process, configured for the shared Iceberg catalog.

Start-up costs seconds, so only commands that compute data call `spark_session()`.
PySpark hands every builder setting to spark-submit as a `--conf` argument, readable by
anyone with `ps`; icemv therefore launches the JVM itself with the launch settings only
(`launch_settings`) and passes the rest, catalog and S3 credentials included, over the
py4j gateway when the SparkContext is created.
"""

from __future__ import annotations

import glob
import os
import re
import subprocess
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from icemv.catalog.backends import CatalogBackend
from icemv.config import Config
from icemv.engine.jvm_output import LOG4J2_CONFIG, log4j_level, start_pump
from icemv.errors import SparkSetupError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = structlog.get_logger(__name__)

ICEBERG_RUNTIME_GLOB = "iceberg-spark-runtime-3.5_2.12-*.jar"
S3_FILE_IO = "org.apache.iceberg.aws.s3.S3FileIO"
# Spark reads some Iceberg files (delete files) by path, through Hadoop's FileSystem:
# an s3:// warehouse also needs S3A (hadoop-aws), configured from the same FileIO properties.
S3A_FILE_SYSTEM = "org.apache.hadoop.fs.s3a.S3AFileSystem"
S3A_KEYS = {
    "s3.endpoint": "fs.s3a.endpoint",
    "s3.path-style-access": "fs.s3a.path.style.access",
    "client.region": "fs.s3a.endpoint.region",
    "s3.access-key-id": "fs.s3a.access.key",
    "s3.secret-access-key": "fs.s3a.secret.key",
    "s3.session-token": "fs.s3a.session.token",
}
# Keys whose values are secrets; Spark's own default spark.redaction.regex, widened.
SECRET_KEY = re.compile(r"(?i)secret|password|token|access[.-]?key")
JAVA_OPTIONS_KEY = "spark.driver.extraJavaOptions"


def vendored_iceberg_jar() -> str:
    """The official Iceberg Spark runtime jar that snowpark-connect-deps-iceberg ships."""
    try:
        import snowpark_connect_deps_iceberg as vendored
    except ImportError as exc:
        raise SparkSetupError(
            "no Iceberg runtime: install snowpark-connect-deps-iceberg==1.0.2 "
            "or set spark.iceberg_jar / spark.packages"
        ) from exc
    jars = sorted(glob.glob(str(Path(vendored.__file__).parent / "jars" / ICEBERG_RUNTIME_GLOB)))
    if not jars:
        raise SparkSetupError("snowpark-connect-deps-iceberg has no Iceberg Spark runtime jar")
    return jars[-1]


def spark_conf(config: Config, backend: CatalogBackend) -> dict[str, str]:
    """Every Spark setting icemv needs; user `spark.conf` entries win."""
    spark = config.spark
    name = config.catalog.name
    prefix = f"spark.sql.catalog.{name}"
    conf: dict[str, str] = {
        "spark.app.name": spark.app_name,
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        prefix: "org.apache.iceberg.spark.SparkCatalog",
        **{f"{prefix}.{key}": value for key, value in backend.spark_properties().items()},
        "spark.sql.shuffle.partitions": str(spark.shuffle_partitions),
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.memory": spark.driver_memory,
        "spark.sql.session.timeZone": "UTC",
        # Refreshes of different MVs run at once (refresh.max_concurrent), each in a pool of
        # its own (`use_scheduler_pool`): a small delta's tasks are not queued behind every
        # task of a large recompute, as they would be with Spark's default FIFO.
        "spark.scheduler.mode": "FAIR",
    }
    if config.warehouse.on_s3:
        conf[f"{prefix}.io-impl"] = S3_FILE_IO
        conf["spark.hadoop.fs.s3.impl"] = S3A_FILE_SYSTEM
    for key, value in config.warehouse.properties.items():
        secret = getattr(value, "get_secret_value", None)
        plain = str(secret() if callable(secret) else value)
        conf[f"{prefix}.{key}"] = plain
        if config.warehouse.on_s3 and key in S3A_KEYS:
            conf[f"spark.hadoop.{S3A_KEYS[key]}"] = plain
    conf["spark.master"] = spark.master
    jars = [spark.iceberg_jar] if spark.iceberg_jar else []
    # Packages may be only the AWS bundle: the runtime is still needed unless listed.
    if not jars and not any("iceberg-spark-runtime" in package for package in spark.packages):
        jars.append(vendored_iceberg_jar())
    if backend.jdbc_driver is not None:
        jars += [jar for jar in spark.jdbc_driver_jars if os.path.exists(jar)]
    jars += spark.extra_jars
    if jars:
        conf["spark.jars"] = ",".join(jars)
    if spark.packages:
        conf["spark.jars.packages"] = ",".join(spark.packages)
    conf.update(spark.conf)
    # The JVM logs JSON lines at logging.spark_level (icemv re-emits them, jvm_output.py);
    # options of the user's own come later on the command line and win.
    logging_options = (
        # A file: URI has no spaces to split the option string at.
        f"-Dlog4j2.configurationFile={LOG4J2_CONFIG.as_uri()} "
        f"-Dicemv.spark.log.level={log4j_level(config.logging.spark_level)}"
    )
    own = conf.get(JAVA_OPTIONS_KEY, "").strip()
    conf[JAVA_OPTIONS_KEY] = f"{logging_options} {own}".strip()
    return conf


# Settings that must be on the JVM's launch command line (memory, classpath, master).
LAUNCH_CONF_PREFIXES = (
    "spark.master",
    "spark.app.name",
    "spark.driver.",
    "spark.jars",
    "spark.files",
    "spark.submit.",
    "spark.local.dir",
)


def launch_settings(conf: dict[str, str]) -> dict[str, str]:
    """The settings that go on spark-submit's command line, readable by anyone with `ps`.

    Only what the JVM needs at launch; everything else, catalog and S3 credentials
    included, reaches the SparkContext over the py4j gateway. A secret-looking key among
    the launch settings is refused rather than exposed.
    """
    launch = {key: value for key, value in conf.items() if key.startswith(LAUNCH_CONF_PREFIXES)}
    for key in launch:
        if SECRET_KEY.search(key):
            raise SparkSetupError(
                f"spark.conf.{key} looks secret and would be visible on the Spark command "
                "line: give credentials through warehouse.properties, the catalog password "
                "or the AWS environment instead"
            )
    return launch


_session: SparkSession | None = None
# Held while the session is created: scheduler, poller and HTTP threads may all ask first.
_session_lock = threading.Lock()


def spark_session(config: Config, backend: CatalogBackend) -> SparkSession:
    """The process's session, created once, completely, before any caller gets it.

    "Completely" means the configured Iceberg catalog plugin is loaded too: until then a
    concurrent `spark.read.format("iceberg").load("lake.ns.t")` on another thread may fail
    to resolve `lake` and fall back to Iceberg's `default_iceberg` catalog (issue 12 #5).
    """
    global _session
    session = _session
    if session is not None:
        return session
    with _session_lock:
        if _session is None:
            _session = _create_session(config, backend)
        return _session


def _create_session(config: Config, backend: CatalogBackend) -> SparkSession:
    from pyspark.sql import SparkSession

    conf = spark_conf(config, backend)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    _check_driver_jars(config, backend.jdbc_driver)
    _launch_jvm(launch_settings(conf))
    # A fresh builder: the shared SparkSession.builder keeps options of earlier sessions.
    builder = SparkSession.Builder()
    for key, value in conf.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel(log4j_level(config.logging.spark_level))
    _load_catalog(session, config.catalog.name)
    return session


def _launch_jvm(launch: dict[str, str]) -> None:
    """Start the driver JVM in a session of its own, before PySpark would start it.

    A SIGTERM (or Ctrl-C) to the daemon's process group, as Kubernetes and shells send
    it, then reaches only the daemon, which stops gracefully and stops Spark itself; the
    JVM still dies with its parent, as PySpark's gateway exits when its stdin closes.
    Everything the JVM writes reaches stderr as log events (`jvm_output`).
    """
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None:
        return
    spark_conf = SparkConf(loadDefaults=False)
    for key, value in launch.items():
        spark_conf.set(key, value)
    # The JVM's output is one pipe, re-emitted line by line through icemv's logging.
    popen = {"start_new_session": True, "stdout": subprocess.PIPE, "stderr": subprocess.STDOUT}
    gateway = launch_gateway(spark_conf, popen_kwargs=popen)  # type: ignore[no-untyped-call]
    global _jvm_output
    _jvm_output = (gateway.proc, start_pump(gateway.proc.stdout))
    SparkContext._ensure_initialized(gateway=gateway)


# The driver JVM this process launched, and the thread re-emitting its output.
_jvm_output: tuple[subprocess.Popen[bytes], threading.Thread] | None = None


def stop_jvm(timeout: float = 30.0) -> None:
    """End the driver JVM (after `stop_spark`) and wait until everything it wrote is logged.

    For a process about to exit: PySpark's gateway exits when its stdin closes, and no
    line of its last words is lost or written while the interpreter shuts down. The JVM
    cannot be started again in this process afterwards.
    """
    global _jvm_output
    launched, _jvm_output = _jvm_output, None
    if launched is None:
        return
    process, pump = launched
    try:
        if process.stdin is not None:
            process.stdin.close()
        process.wait(timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.warning("spark_jvm_stop_failed", error=type(exc).__name__)
        process.kill()
    pump.join(timeout)


def _load_catalog(session: SparkSession, catalog: str) -> None:
    """Load the catalog plugin now; Spark caches it, so later lookups cannot race or fail."""
    jsession: Any = session._jsparkSession
    try:
        jsession.sessionState().catalogManager().catalog(catalog)
    except Exception as exc:  # noqa: BLE001 (any failure to load the catalog is a setup error)
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SparkSetupError(f"Spark cannot load catalog {catalog!r}: {first}") from None


def activate(session: SparkSession) -> None:
    """Make `session` the active one of the calling thread's JVM thread.

    Iceberg's source resolves names through `SparkSession.active()`, a JVM thread-local
    that threads started by the scheduler do not inherit.
    """
    jsession: Any = session._jsparkSession
    jvm: Any = session.sparkContext._jvm
    jvm.org.apache.spark.sql.SparkSession.setActiveSession(jsession)


SCHEDULER_POOL_PROPERTY = "spark.scheduler.pool"


def use_scheduler_pool(session: SparkSession, pool: str) -> None:
    """Run the Spark jobs the calling thread starts from now on in the FAIR pool `pool`.

    A pool that no allocation file declares is created on first use, with equal weight;
    the property is local to the thread (PySpark pins each Python thread to a JVM thread).
    """
    session.sparkContext.setLocalProperty(SCHEDULER_POOL_PROPERTY, pool)


def scheduler_pools(session: SparkSession) -> list[str]:
    """The names of the FAIR pools Spark's scheduler has (a pool exists once a job used it)."""
    jsc: Any = session.sparkContext._jsc
    pools: Any = jsc.sc().getAllPools()
    return [str(pools.apply(i).name()) for i in range(pools.size())]


def session_ready() -> bool:
    """Whether this process's SparkSession exists and its JVM context still runs."""
    session: Any = _session
    if session is None:
        return False
    try:
        return not bool(session.sparkContext._jsc.sc().isStopped())
    except Exception:  # noqa: BLE001 (a dead JVM answers with any py4j error)
        return False


def stop_spark() -> None:
    """Stop the session; a JVM that is gone already (killed, crashed) is not an error here."""
    global _session
    with _session_lock:
        session, _session = _session, None
    if session is None:
        return
    try:
        session.stop()
    except Exception as exc:  # noqa: BLE001 (py4j errors of a dead gateway)
        log.warning("spark_stop_failed", error=type(exc).__name__)


def _check_driver_jars(config: Config, needed: str | None) -> None:
    if needed is None:
        return
    if not any(
        needed in Path(jar).name and os.path.exists(jar) for jar in config.spark.jdbc_driver_jars
    ):
        package = "libxerial-sqlite-jdbc-java" if needed == "sqlite" else "libpostgresql-jdbc-java"
        raise SparkSetupError(
            f"no {needed} JDBC driver jar among spark.jdbc_driver_jars "
            f"{config.spark.jdbc_driver_jars}: install the Debian package {package}"
        )
