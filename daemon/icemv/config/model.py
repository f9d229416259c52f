"""The configuration model: one frozen pydantic section per concern, unknown keys refused."""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SecretStr,
    field_validator,
    model_validator,
)


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CatalogConfig(_Section):
    """The Iceberg catalog shared by Spark and pyiceberg: JDBC (default) or REST.

    jdbc: Spark's JdbcCatalog and pyiceberg's SqlCatalog on the same database.
    rest: Spark's RESTCatalog and pyiceberg's RestCatalog on the same server, both fed
    one property map (`uri`, `warehouse`, `prefix`, `credential`, `token`,
    `oauth2-server-uri`, `scope`, `header.*`): the two engines spell them alike.
    """

    type: Literal["jdbc", "rest"] = "jdbc"
    name: str = "lake"
    # jdbc: "embedded" starts a private PostgreSQL under `home`; otherwise
    # postgresql://host:port/db or sqlite:///path (single writer only: a live Spark JVM
    # locks SQLite). rest: the server's base URL, http(s)://host:port[/path].
    uri: str = "embedded"
    user: str | None = None
    password: SecretStr | None = None
    # rest only: the warehouse the server should serve (a name or a location, server-defined).
    warehouse: str | None = None
    # rest only: a fixed path prefix; normally the server hands it out in GET /v1/config.
    prefix: str | None = None
    # rest only: OAuth2 client credentials "client_id:client_secret", or a ready bearer token.
    credential: SecretStr | None = None
    token: SecretStr | None = None
    oauth2_server_uri: str | None = None
    scope: str | None = None
    # rest only: extra HTTP headers on every request (values may be secrets: masked).
    headers: dict[str, SecretStr] = Field(default_factory=dict)
    properties: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _known_scheme(self) -> CatalogConfig:
        scheme = urlsplit(self.uri).scheme
        if self.type == "rest":
            if scheme not in ("http", "https"):
                raise ValueError("catalog.uri: a REST catalog needs an http(s):// URL")
            return self
        rest_only = [
            key
            for key in ("warehouse", "prefix", "credential", "token", "oauth2_server_uri", "scope")
            if getattr(self, key) is not None
        ] + (["headers"] if self.headers else [])
        if rest_only:
            raise ValueError(f"catalog.{rest_only[0]} applies to type rest only")
        if self.uri != "embedded" and scheme not in ("postgresql", "sqlite"):
            raise ValueError(
                "catalog.uri must be 'embedded', postgresql://host:port/db or sqlite:///path"
            )
        return self

    @property
    def embedded(self) -> bool:
        return self.type == "jdbc" and self.uri == "embedded"


class WarehouseConfig(_Section):
    """Where table files live: a local path, file://, or s3://bucket/prefix.

    `properties` are Iceberg FileIO properties handed to both engines under the same names
    (`s3.endpoint`, `s3.path-style-access`, `client.region`, `s3.access-key-id`,
    `s3.secret-access-key`; on s3:// Spark also gets `io-impl` S3FileIO unless set). Leave
    credentials out to use the AWS default chain (AWS_* environment, web identity, instance
    profile); secrets given here reach the Spark JVM at run time, never its command line.
    """

    location: str = "lakehouse/warehouse"
    properties: dict[str, SecretStr | str] = Field(default_factory=dict)

    @property
    def on_s3(self) -> bool:
        return urlsplit(self.location).scheme in ("s3", "s3a")


class SparkConfig(_Section):
    master: str = "local[2]"  # or spark://host:7077 for a standalone cluster
    app_name: str = "icemv"
    # Iceberg runtime jar; default: the one vendored by snowpark-connect-deps-iceberg.
    iceberg_jar: str | None = None
    # Further local jars added to icemv's own (e.g. iceberg-aws-bundle for an s3:// warehouse);
    # spark.jars in `conf` would replace the whole list instead.
    extra_jars: list[str] = Field(default_factory=list)
    # Maven coordinates, e.g. org.apache.iceberg:iceberg-aws-bundle:1.10.2 (needs a reachable
    # Maven repository); added to the local jars.
    packages: list[str] = Field(default_factory=list)
    jdbc_driver_jars: list[str] = Field(
        default_factory=lambda: [
            "/usr/share/java/postgresql.jar",
            "/usr/share/java/sqlite-jdbc.jar",
        ]
    )
    driver_memory: str = "2g"
    shuffle_partitions: int = Field(default=4, ge=1)
    conf: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _no_spark_connect(cls, data: Any) -> Any:
        # Incremental refresh drives Iceberg through the JVM (py4j), which Spark Connect
        # does not expose; an explicit error beats "extra inputs are not permitted".
        if isinstance(data, dict) and data.get("remote") is not None:
            raise ValueError(
                "spark.remote (Spark Connect) is not supported: incremental refresh needs the "
                "Spark JVM; use spark.master: spark://host:7077 (standalone cluster) instead"
            )
        if isinstance(data, dict) and "remote" in data:
            data = {key: value for key, value in data.items() if key != "remote"}
        return data


class KafkaConfig(_Section):
    bootstrap_servers: list[str] = Field(default_factory=list)
    topics: list[str] = Field(default_factory=lambda: ["icemv-commits"])
    group_id: str = "icemv"
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    dead_letter_topic: str | None = None
    # A new consumer group starts at the end: the catalog poll covers what came before.
    auto_offset_reset: Literal["earliest", "latest"] = "latest"
    session_timeout_ms: int = Field(default=10_000, ge=1_000)
    # A refresh may take minutes; the consumer must stay in its group meanwhile.
    max_poll_interval_ms: int = Field(default=600_000, ge=10_000)

    @property
    def enabled(self) -> bool:
        return bool(self.bootstrap_servers)


class PollingConfig(_Section):
    interval_seconds: float = Field(default=30.0, gt=0)


class RefreshConfig(_Section):
    # Policy `auto` recomputes fully when the change read's estimated rows (from the
    # manifests: touched files at the old and new snapshots), times this factor, exceed the
    # rows a full recompute scans (all sources). It prices a change-read row in full-scan
    # rows: measured at most ~1 at the margin (1M rows, busy 2-core box, README); 1.5
    # leaves room. The per-refresh overhead of the Spark delta path is not in the estimate.
    auto_cost_factor: float = Field(default=1.5, gt=0)
    # Deprecated and ignored (kept so older configs load): the changed-records share it
    # bounded counted a copy-on-write file rewrite as changed; use auto_cost_factor.
    auto_full_ratio: float | None = Field(default=None, gt=0)
    # Commits to the sources of one MV announced (by events) within this window yield one
    # refresh; a poll's request starts at once (the poll folded every commit since the last).
    coalesce_seconds: float = Field(default=1.0, ge=0)
    # A patch up to this many rows is collected and committed by pyiceberg instead of a
    # Spark write (an aggregate MV's patch is its whole storage table); 0: always Spark.
    driver_commit_max_rows: int = Field(default=500_000, ge=0)
    # A change of one source of up to this many changed rows (appended, deleted, position
    # deletes) has its delta computed in Arrow on the driver, no Spark job (filter /
    # projection and merged GROUP BY views whose expressions Arrow evaluates as Spark
    # does; README "The Arrow path"); 0: always Spark.
    arrow_max_rows: int = Field(default=100_000, ge=0)
    # A change with deletes (position deletes, deletion vectors, copy-on-write rewrites)
    # stays on the Arrow path while the source rows its read scans (whole rewritten files,
    # the row groups deletes hit; estimated from the manifests) are at most this many;
    # the rows that changed, after a rewrite's unchanged rows cancel, must still be at
    # most `arrow_max_rows`.
    arrow_read_max_rows: int = Field(default=4_000_000, ge=0)
    # Appended rows read for the Arrow path are shared across MVs, per process, up to
    # this many bytes (least recently used first out).
    arrow_cache_bytes: int = Field(default=64 * 1024 * 1024, ge=0)
    # The Arrow path joins the changed source with unchanged tables of at most this many
    # rows (each read whole at its pinned snapshot, its columns read only, shared in the
    # cache above); 0: a join always goes to Spark.
    arrow_join_max_rows: int = Field(default=100_000, ge=0)
    # The embedded engine (DuckDB, on the driver): threads and memory of each refresh's
    # connection. Refreshes overlap (DuckDB releases the GIL): max_concurrent of them.
    duckdb_threads: int = Field(default=1, ge=1)
    duckdb_memory_limit: str = Field(default="512MB", pattern=r"^\d+(\.\d+)?\s*[KMGT]i?B$")
    # Refreshes running at once (Spark jobs in FAIR pools, DuckDB connections); default:
    # the machine's cores.
    max_concurrent: int = Field(default_factory=lambda: os.cpu_count() or 1, ge=1)
    retry_initial_seconds: float = Field(default=2.0, gt=0)
    retry_max_seconds: float = Field(default=300.0, gt=0)
    shutdown_grace_seconds: float = Field(default=60.0, ge=0)

    @model_validator(mode="after")
    def _deprecated_ratio(self) -> RefreshConfig:
        if self.auto_full_ratio is not None:
            warnings.warn(
                "refresh.auto_full_ratio is deprecated and ignored: policy auto weighs the "
                "change read against a full recompute; tune refresh.auto_cost_factor",
                FutureWarning,
                stacklevel=2,
            )
        return self


class MaintenanceConfig(_Section):
    """Storage-table upkeep the daemon runs on its own (and `icemv mv compact` on demand).

    Every refresh adds a storage snapshot, and pyiceberg's commit time grows with their
    number; expiry keeps the metadata bounded. Retention keeps a snapshot if it is among
    the newest `keep_snapshots` refresh records or younger than `keep_seconds`; the
    latest refresh record and every snapshot after it are always kept.
    """

    enabled: bool = True
    # How often the daemon expires snapshots and removes unreferenced files (0: never).
    interval_seconds: float = Field(default=3600.0, ge=0)
    # Refresh records `icemv mv show` lists as history.
    keep_snapshots: int = Field(default=10, ge=1)
    keep_seconds: float = Field(default=0.0, ge=0)
    # Files under the table location that no snapshot references are removed once older
    # than this, so a write still in flight (not yet committed) never loses its files:
    # keep it above the longest refresh (Iceberg's own default is three days).
    orphan_file_age_seconds: float = Field(default=86400.0, ge=0)
    # A private `icemv_*` refresh branch older than this is a leftover of a killed refresh.
    branch_min_age_seconds: float = Field(default=600.0, ge=0)
    # How often the daemon verifies every MV it owns against its SQL at the recorded
    # snapshots (mv/verify.py), one MV at a time; a difference is counted, logged and
    # repaired with a full refresh. 0: never (`icemv mv verify` on demand; 86400: daily).
    verify_interval_seconds: float = Field(default=0.0, ge=0)
    # The hash slices each MV is cut into, and the share of them one scheduled run checks
    # (different slices each run).
    verify_slices: int = Field(default=64, ge=1)
    verify_sample: float = Field(default=1.0, gt=0, le=1)
    # The budget: an MV whose sources hold more rows than this is skipped by scheduled
    # runs (each run evaluates the view's SQL in full); 0: no limit.
    verify_max_source_rows: int = Field(default=0, ge=0)


class MetricsConfig(_Section):
    host: str = "127.0.0.1"
    port: int = Field(default=9108, ge=0, le=65535)


LevelName = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]


def _upper_level(value: Any) -> Any:
    """Level names in any case; log4j's `WARN` (and Python's alias) is `WARNING`."""
    if not isinstance(value, str):
        return value
    upper = value.strip().upper()
    return "WARNING" if upper == "WARN" else upper


Level = Annotated[LevelName, BeforeValidator(_upper_level)]


class LoggingConfig(_Section):
    """Log lines on stderr: with format `json` (`auto` off a terminal) one JSON object each.

    These are `icemv run`'s levels. Every other command logs at WARNING (INFO with
    `--verbose`, DEBUG with `--debug`) and raises any level below that to it
    (`icemv.logs.command_logging`); `format` applies to all.

    `level` is the root level. `levels` sets Python loggers by name, a library's or an
    icemv module's (`kafka: INFO`, `icemv.service.consumer: DEBUG`); the chatty libraries
    (`icemv.logs.DEFAULT_LIBRARY_LEVELS`) stay at WARNING (or `level` if higher) unless
    named. `spark_level` is the Spark JVM's log4j level; its lines are
    re-emitted as events of logger `spark`.
    """

    level: Level = "INFO"
    format: Literal["auto", "json", "console"] = "auto"
    levels: dict[str, Level] = Field(default_factory=dict)
    spark_level: Level = "WARNING"

    @field_validator("levels", mode="after")
    @classmethod
    def _named_loggers(cls, levels: dict[str, str]) -> dict[str, str]:
        for name in levels:
            if not name.strip() or name != name.strip():
                raise ValueError(f"logger name {name!r} is empty or has surrounding spaces")
        return levels


class MaterializedViewSpec(_Section):
    """A declarative MV: `icemv apply` creates or replaces it to match."""

    name: str
    sql: str
    properties: dict[str, str] = Field(default_factory=dict)
    partition_by: list[str] = Field(default_factory=list)


class Config(_Section):
    # Local state (embedded catalog database, default warehouse) lives here.
    home: str = "lakehouse"
    default_namespace: str = "default"
    catalog: CatalogConfig = Field(default_factory=CatalogConfig)
    warehouse: WarehouseConfig = Field(default_factory=WarehouseConfig)
    spark: SparkConfig = Field(default_factory=SparkConfig)
    kafka: KafkaConfig = Field(default_factory=KafkaConfig)
    polling: PollingConfig = Field(default_factory=PollingConfig)
    refresh: RefreshConfig = Field(default_factory=RefreshConfig)
    maintenance: MaintenanceConfig = Field(default_factory=MaintenanceConfig)
    metrics: MetricsConfig = Field(default_factory=MetricsConfig)
    logging: LoggingConfig = Field(default_factory=LoggingConfig)
    materialized_views: list[MaterializedViewSpec] = Field(default_factory=list)

    @property
    def home_path(self) -> Path:
        return Path(self.home).expanduser().resolve()

    @property
    def warehouse_uri(self) -> str:
        """The warehouse as a URI; a bare path is taken relative to the working directory."""
        location = self.warehouse.location
        if "://" in location:
            return location.rstrip("/")
        return Path(location).expanduser().resolve().as_uri()
