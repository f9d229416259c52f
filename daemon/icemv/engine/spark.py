"""The one SparkSession of a process, configured for the shared Iceberg catalog.

Start-up costs seconds, so only commands that compute data call `spark_session()`.
"""

from __future__ import annotations

import glob
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from icemv.catalog.backends import CatalogBackend
from icemv.config import Config
from icemv.errors import SparkSetupError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ICEBERG_RUNTIME_GLOB = "iceberg-spark-runtime-3.5_2.12-*.jar"


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
    }
    for key, value in config.warehouse.properties.items():
        secret = getattr(value, "get_secret_value", None)
        conf[f"{prefix}.{key}"] = str(secret() if callable(secret) else value)
    if spark.remote is None:
        conf["spark.master"] = spark.master
        jars = [spark.iceberg_jar] if spark.iceberg_jar else []
        if not spark.packages and not jars:
            jars.append(vendored_iceberg_jar())
        if backend.jdbc_driver is not None:
            jars += [jar for jar in spark.jdbc_driver_jars if os.path.exists(jar)]
        if jars:
            conf["spark.jars"] = ",".join(jars)
        if spark.packages:
            conf["spark.jars.packages"] = ",".join(spark.packages)
    conf.update(spark.conf)
    return conf


_session: SparkSession | None = None


def spark_session(config: Config, backend: CatalogBackend) -> SparkSession:
    global _session
    if _session is not None:
        return _session
    from pyspark.sql import SparkSession

    conf = spark_conf(config, backend)
    builder = SparkSession.builder
    if config.spark.remote is not None:
        builder = builder.remote(config.spark.remote)
    else:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        _check_driver_jars(config, backend.jdbc_driver)
    for key, value in conf.items():
        builder = builder.config(key, value)
    _session = builder.getOrCreate()
    _session.sparkContext.setLogLevel("ERROR") if config.spark.remote is None else None
    return _session


def session_ready(remote: bool) -> bool:
    """Whether this process's SparkSession exists and (classic Spark) its JVM context runs."""
    session: Any = _session
    if session is None:
        return False
    if remote:
        return True
    try:
        return not bool(session.sparkContext._jsc.sc().isStopped())
    except Exception:  # a dead JVM answers with any py4j error
        return False


def stop_spark() -> None:
    global _session
    if _session is not None:
        _session.stop()
        _session = None


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
