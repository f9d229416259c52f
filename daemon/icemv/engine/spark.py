"""The one SparkSession of a process, configured for the shared Iceberg catalog.

Start-up costs seconds, so only commands that compute data call `spark_session()`.
PySpark hands every builder setting to spark-submit as a `--conf` argument, readable by
anyone with `ps`; secret catalog properties (JDBC password, S3 keys) are therefore set on
the session at run time instead, before the catalog is first loaded.
"""

from __future__ import annotations

import glob
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from icemv.catalog.jdbc import CatalogEndpoint
from icemv.config import Config
from icemv.errors import SparkSetupError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

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


def spark_conf(config: Config, endpoint: CatalogEndpoint) -> dict[str, str]:
    """Every Spark setting icemv needs; user `spark.conf` entries win."""
    spark = config.spark
    name = config.catalog.name
    prefix = f"spark.sql.catalog.{name}"
    conf: dict[str, str] = {
        "spark.app.name": spark.app_name,
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        prefix: "org.apache.iceberg.spark.SparkCatalog",
        f"{prefix}.catalog-impl": "org.apache.iceberg.jdbc.JdbcCatalog",
        f"{prefix}.uri": endpoint.jdbc_url,
        f"{prefix}.jdbc.schema-version": "V1",
        f"{prefix}.warehouse": config.warehouse_uri,
        # Other writers commit all the time: never serve a cached table.
        f"{prefix}.cache-enabled": "false",
        "spark.sql.shuffle.partitions": str(spark.shuffle_partitions),
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.memory": spark.driver_memory,
        "spark.sql.session.timeZone": "UTC",
    }
    if endpoint.user:
        conf[f"{prefix}.jdbc.user"] = endpoint.user
    if endpoint.password:
        conf[f"{prefix}.jdbc.password"] = endpoint.password
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
    jars += [jar for jar in spark.jdbc_driver_jars if os.path.exists(jar)]
    jars += spark.extra_jars
    if jars:
        conf["spark.jars"] = ",".join(jars)
    if spark.packages:
        conf["spark.jars.packages"] = ",".join(spark.packages)
    conf.update(spark.conf)
    return conf


def split_secrets(conf: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """(settings for the JVM launch, secret settings to apply to the running session).

    Catalog settings can wait because Spark reads them when the catalog is first loaded,
    Hadoop settings because file systems are created on first use. A secret-looking key
    elsewhere would have to be on the command line, so it is refused.
    """
    launch: dict[str, str] = {}
    runtime: dict[str, str] = {}
    for key, value in conf.items():
        if not SECRET_KEY.search(key):
            launch[key] = value
        elif key.startswith(("spark.sql.catalog.", "spark.hadoop.")):
            runtime[key] = value
        else:
            raise SparkSetupError(
                f"spark.conf.{key} looks secret and would be visible on the Spark command "
                "line: give credentials through warehouse.properties, the catalog password "
                "or the AWS environment instead"
            )
    return launch, runtime


def _apply_secrets(session: SparkSession, secrets: dict[str, str]) -> None:
    hadoop = session.sparkContext._jsc.hadoopConfiguration()
    for key, value in secrets.items():
        if key.startswith("spark.hadoop."):
            hadoop.set(key[len("spark.hadoop.") :], value)
        else:
            session.conf.set(key, value)


_session: SparkSession | None = None


def spark_session(config: Config, endpoint: CatalogEndpoint) -> SparkSession:
    global _session
    if _session is not None:
        return _session
    from pyspark.sql import SparkSession

    launch, secrets = split_secrets(spark_conf(config, endpoint))
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    _check_driver_jars(config)
    # A fresh builder: the shared SparkSession.builder keeps options of earlier sessions.
    builder = SparkSession.Builder()
    for key, value in launch.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    _apply_secrets(session, secrets)
    session.sparkContext.setLogLevel("ERROR")
    _session = session
    return _session


def session_ready() -> bool:
    """Whether this process's SparkSession exists and its JVM context still runs."""
    session: Any = _session
    if session is None:
        return False
    try:
        return not bool(session.sparkContext._jsc.sc().isStopped())
    except Exception:  # a dead JVM answers with any py4j error
        return False


def stop_spark() -> None:
    global _session
    if _session is not None:
        _session.stop()
        _session = None


def _check_driver_jars(config: Config) -> None:
    uri = config.catalog.uri
    needed = "sqlite" if uri.startswith("sqlite") else "postgresql"
    if not any(
        needed in Path(jar).name and os.path.exists(jar) for jar in config.spark.jdbc_driver_jars
    ):
        package = "libxerial-sqlite-jdbc-java" if needed == "sqlite" else "libpostgresql-jdbc-java"
        raise SparkSetupError(
            f"no {needed} JDBC driver jar among spark.jdbc_driver_jars "
            f"{config.spark.jdbc_driver_jars}: install the Debian package {package}"
        )
