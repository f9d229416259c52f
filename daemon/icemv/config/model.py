"""The configuration model: one frozen pydantic section per concern, unknown keys refused."""

from __future__ import annotations

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

from icemv.config.cores import available_cores


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CatalogConfig(_Section):
    """The Iceberg catalog shared by Spark and pyiceberg: JDBC (default) or REST.

    jdbc: Spark's JdbcCatalog and pyiceberg's SqlCatalog on the same database.
    rest: Spark's RESTCatalog and pyiceberg's RestCatalog on the same server, both fed
    one property map (`uri`, `warehouse`, `prefix`, `credential`, `token`,
    `oauth2-server-uri`, `scope`, `header.*`): the two engines spell them alike.
    """

    type: Literal["jdbc", "rest"] = Field(
        default="jdbc", description="The catalog kind: `jdbc` (a database) or `rest`."
    )
    name: str = Field(
        default="lake", description="The catalog name both engines use (`lake.nyc.taxis`)."
    )
    uri: str = Field(
        default="embedded",
        description="jdbc: `embedded` starts a private PostgreSQL under `home`; otherwise "
        "`postgresql://host:port/db` or `sqlite:///path` (single writer only: a live Spark "
        "JVM locks SQLite). rest: the server's base URL, `http(s)://host:port[/path]`.",
    )
    user: str | None = Field(default=None, description="jdbc: the database user.")
    password: SecretStr | None = Field(
        default=None, description="jdbc: the database password (a secret: masked)."
    )
    warehouse: str | None = Field(
        default=None,
        description="rest only: the warehouse the server should serve (a name or a "
        "location, server-defined).",
    )
    prefix: str | None = Field(
        default=None,
        description="rest only: a fixed path prefix; normally the server hands it out in "
        "`GET /v1/config`.",
    )
    credential: SecretStr | None = Field(
        default=None,
        description="rest only: OAuth2 client credentials `client_id:client_secret` "
        "(a secret: masked).",
    )
    token: SecretStr | None = Field(
        default=None, description="rest only: a ready bearer token (a secret: masked)."
    )
    oauth2_server_uri: str | None = Field(
        default=None,
        description="rest only: the OAuth2 token endpoint, if not the server's own "
        "(`oauth2-server-uri`).",
    )
    scope: str | None = Field(default=None, description="rest only: the OAuth2 scope.")
    headers: dict[str, SecretStr] = Field(
        default_factory=dict,
        description="rest only: extra HTTP headers on every request, sent as "
        "`header.<name>` (values may be secrets: masked).",
    )
    properties: dict[str, str] = Field(
        default_factory=dict,
        description="Further catalog properties, given to both engines.",
    )

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

    location: str = Field(
        default="lakehouse/warehouse",
        description="A path (relative to the working directory), `file://` or "
        "`s3://bucket/prefix`.",
    )
    properties: dict[str, SecretStr | str] = Field(
        default_factory=dict,
        description="Iceberg FileIO properties for both engines (`s3.endpoint`, ...).",
    )

    @property
    def on_s3(self) -> bool:
        return urlsplit(self.location).scheme in ("s3", "s3a")


class SparkConfig(_Section):
    """The Spark session icemv starts for refreshes (as the driver, in client mode)."""

    master: str = Field(
        default="local[2]",
        description="`local[N]`, `spark://host:7077` (a standalone cluster) or "
        "`k8s://...` (executors as pods).",
    )
    app_name: str = Field(default="icemv", description="The Spark application name.")
    iceberg_jar: str | None = Field(
        default=None,
        description="The Iceberg Spark runtime jar; default: the one vendored by "
        "snowpark-connect-deps-iceberg.",
    )
    extra_jars: list[str] = Field(
        default_factory=list,
        description="Further local jars added to icemv's own (e.g. iceberg-aws-bundle for "
        "an s3:// warehouse); `spark.jars` in `conf` would replace the whole list instead.",
    )
    packages: list[str] = Field(
        default_factory=list,
        description="Maven coordinates (`spark.jars.packages`), e.g. "
        "`org.apache.iceberg:iceberg-aws-bundle:1.10.2` (needs a reachable Maven "
        "repository); added to the local jars.",
    )
    jdbc_driver_jars: list[str] = Field(
        default_factory=lambda: [
            "/usr/share/java/postgresql.jar",
            "/usr/share/java/sqlite-jdbc.jar",
        ],
        description="The JDBC drivers Spark's Iceberg JdbcCatalog loads.",
    )
    driver_memory: str = Field(default="2g", description="`spark.driver.memory`.")
    shuffle_partitions: int = Field(default=4, ge=1, description="`spark.sql.shuffle.partitions`.")
    conf: dict[str, str] = Field(
        default_factory=dict, description="Any other Spark setting; wins over icemv's."
    )

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
    """The daemon's event source; with no `bootstrap_servers` the daemon polls only."""

    bootstrap_servers: list[str] = Field(
        default_factory=list, description="Brokers, `host:port`; empty: poll only."
    )
    topics: list[str] = Field(
        default_factory=lambda: ["icemv-commits"],
        description="Topics of commit events; the first one's partitions split the MVs "
        "between replicas.",
    )
    group_id: str = Field(
        default="icemv", description="The consumer group: replicas in one group share the MVs."
    )
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = Field(
        default="PLAINTEXT", description="How to talk to the brokers."
    )
    sasl_mechanism: str | None = Field(default=None, description="SASL mechanism, e.g. `PLAIN`.")
    sasl_username: str | None = Field(default=None, description="SASL user name.")
    sasl_password: SecretStr | None = Field(
        default=None, description="SASL password (a secret: masked)."
    )
    ssl_cafile: str | None = Field(default=None, description="CA certificate file for SSL.")
    ssl_certfile: str | None = Field(default=None, description="Client certificate file.")
    ssl_keyfile: str | None = Field(default=None, description="Client key file.")
    dead_letter_topic: str | None = Field(
        default=None, description="Records that cannot be handled are copied here."
    )
    auto_offset_reset: Literal["earliest", "latest"] = Field(
        default="latest",
        description="Where a new consumer group starts: at the end by default, as the "
        "catalog poll covers what came before.",
    )
    session_timeout_ms: int = Field(
        default=10_000,
        ge=1_000,
        description="A replica silent this long leaves the group; its MVs move to the others.",
    )
    max_poll_interval_ms: int = Field(
        default=600_000,
        ge=10_000,
        description="A refresh may take minutes; the consumer must stay in its group meanwhile.",
    )

    @property
    def enabled(self) -> bool:
        return bool(self.bootstrap_servers)


class PollingConfig(_Section):
    """The catalog poll: the only trigger without Kafka, a safety net with it."""

    interval_seconds: float = Field(
        default=30.0, gt=0, description="Seconds between catalog polls."
    )


# Deprecated names of refresh settings, and their names now.
RENAMED_REFRESH_KEYS = {
    "arrow_max_rows": "embedded_max_rows",
    "arrow_read_max_rows": "embedded_read_max_rows",
    "arrow_cache_bytes": "embedded_cache_bytes",
    "arrow_join_max_rows": "embedded_join_max_rows",
}


class RefreshConfig(_Section):
    """How refreshes are chosen, computed, committed and retried."""

    auto_cost_factor: float = Field(
        default=1.5,
        gt=0,
        description="Policy `auto` recomputes fully when the change read's estimated rows "
        "(from the manifests: touched files at the old and new snapshots), times this "
        "factor, exceed the rows a full recompute scans (all sources). It prices a "
        "change-read row in full-scan rows: measured at most ~1 at the margin (1M rows, busy "
        "2-core box); 1.5 leaves room. The per-refresh overhead of a Spark delta is not in "
        "the estimate.",
    )
    auto_full_ratio: float | None = Field(
        default=None,
        gt=0,
        description="Deprecated and ignored (kept so older configs load): the "
        "changed-records share it bounded counted a copy-on-write file rewrite as changed; "
        "use `auto_cost_factor`.",
    )
    coalesce_seconds: float = Field(
        default=0.05,
        ge=0,
        description="Commits to the sources of one MV announced (by events) within this "
        "window yield one refresh; a poll's request starts at once (the poll folded every "
        "commit since the last). Every event waits this long before its refresh starts; "
        "events that arrive while the MV refreshes wait for it anyway and yield one more "
        "refresh, so a short window loses little folding.",
    )
    driver_commit_max_rows: int = Field(
        default=500_000,
        ge=0,
        description="A patch up to this many rows is collected and committed by pyiceberg "
        "instead of a Spark write (an aggregate MV's patch is its whole storage table); "
        "0: always Spark (and no embedded engine).",
    )
    embedded_max_rows: int = Field(
        default=100_000,
        ge=0,
        description="The embedded engine (DuckDB on the driver, no Spark job) computes the "
        "delta of a change of at most this many changed rows, all changed source tables "
        "together (appended, deleted; and at most `driver_commit_max_rows`) when the view "
        "passes the portability gate; 0: always Spark.",
    )
    embedded_read_max_rows: int = Field(
        default=4_000_000,
        ge=0,
        description="A change with deletes (position deletes, deletion vectors, "
        "copy-on-write rewrites, pushed-down equality deletes) stays on the embedded engine "
        "while the source rows its read scans (whole rewritten files, the row groups "
        "deletes hit; estimated from the manifests) are at most this many; the rows that "
        "changed, once a rewrite's unchanged rows cancel, must still be at most "
        "`embedded_max_rows`.",
    )
    embedded_cache_bytes: int = Field(
        default=64 * 1024 * 1024,
        ge=0,
        description="Rows read with pyiceberg for the embedded engine (appended rows, "
        "tables read whole, the rows a view keeps of a rewritten file read whole) are "
        "shared across MVs, per process, up to this many bytes "
        "(least recently used first out).",
    )
    embedded_join_max_rows: int = Field(
        default=100_000_000,
        ge=0,
        description="The embedded engine reads each other table the view reads (and the "
        "changed table where the delta reads it at both ends: keyed deltas, groups "
        "recomputed from the sources, self-joins) when it holds at most this many rows at "
        "its snapshot: whole (its named columns only, kept in the cache above for the next "
        "refreshes) when that fits the cache, else only the rows whose join key the "
        "delta's rows bring, where the join allows it; 0: such views always go to Spark.",
    )
    embedded_join_max_bytes: int = Field(
        default=256 * 1024 * 1024,
        ge=0,
        description="The most one table the embedded engine reads for a join may take in "
        "Arrow (estimated from its row count and column types before it is read whole, "
        "checked once read, whole or restricted); past it the refresh goes to Spark.",
    )
    duckdb_threads: int = Field(
        default=1,
        ge=1,
        description="Threads of each refresh's DuckDB connection (the embedded engine). "
        "Refreshes overlap (DuckDB releases the GIL): `max_concurrent` of them.",
    )
    duckdb_memory_limit: str = Field(
        default="512MB",
        pattern=r"^\d+(\.\d+)?\s*[KMGT]i?B$",
        description="Memory limit of the embedded engine's DuckDB database, e.g. `512MB`, "
        "`2GiB`. Up to half of it holds the operator states of the statements kept "
        "prepared (the merge statements of 60-100 small aggregates at 512MB); past that "
        "new statements are planned each time they run.",
    )
    max_concurrent: int = Field(
        default_factory=available_cores,
        ge=1,
        description="Refreshes running at once (Spark jobs in FAIR pools, DuckDB "
        "connections); default: the cores the process may use (its CPU affinity, capped "
        "by a container's CPU limit).",
    )
    processes: int = Field(
        default_factory=available_cores,
        ge=0,
        description="Worker processes for the daemon's refreshes, each with its own "
        "interpreter: a refresh on the embedded engine is mostly Python (planning, the "
        "portability gate, pyiceberg's commit) under one interpreter lock, so in one process "
        "a fleet's refreshes run one at a time whatever `max_concurrent` says. A worker runs "
        "a refresh to its commit when the embedded engine computes it and hands any refresh "
        "that needs Spark back to the daemon's process. At most `max_concurrent` workers "
        "are started (a larger value counts as `max_concurrent`); each has its next refresh "
        "queued while it runs one, so it need not wait for the daemon between refreshes; "
        "refreshes handed back run in the daemon's process, at most `max_concurrent` at "
        "once. Each worker holds its own read cache "
        "(`embedded_cache_bytes`) and DuckDB memory (`duckdb_memory_limit`), 250-300 MB each "
        "measured. Default: the cores the process may use, as `max_concurrent`. 0: every "
        "refresh in the daemon's process.",
    )
    retry_initial_seconds: float = Field(
        default=2.0, gt=0, description="The first back-off after a failed refresh."
    )
    retry_max_seconds: float = Field(
        default=300.0, gt=0, description="The longest back-off (it doubles up to this)."
    )
    shutdown_grace_seconds: float = Field(
        default=60.0, ge=0, description="On SIGTERM, running refreshes get this long."
    )

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, data: Any) -> Any:
        """The embedded engine's settings were `arrow_*` until 2026-11-28: an old name still
        sets its new one (a deprecation line when the config loads); both given: an error."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        for old, new in RENAMED_REFRESH_KEYS.items():
            if old not in data:
                continue
            if new in data:
                raise ValueError(f"refresh.{old} and refresh.{new} both given: keep {new}")
            data[new] = data.pop(old)
            warnings.warn(
                f"refresh.{old} is deprecated: it is now refresh.{new}", FutureWarning, stacklevel=2
            )
        return data

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

    enabled: bool = Field(default=True, description="Whether the daemon runs upkeep at all.")
    interval_seconds: float = Field(
        default=3600.0,
        ge=0,
        description="How often the daemon expires snapshots and removes unreferenced files "
        "(0: never).",
    )
    keep_snapshots: int = Field(
        default=10, ge=1, description="Refresh records kept (the history `icemv mv show` lists)."
    )
    max_snapshots: int = Field(
        default=100,
        ge=0,
        description="A storage table that holds more snapshots than this after a refresh gets "
        "its upkeep pass right away, not at the next interval: every commit writes, and every "
        "load reads, metadata that grows with them (a fleet refresh took 16 % more CPU at 270 "
        "snapshots than at 20). 0: only the passes every `interval_seconds`.",
    )
    keep_seconds: float = Field(
        default=0.0, ge=0, description="Also keep snapshots younger than this."
    )
    orphan_file_age_seconds: float = Field(
        default=86400.0,
        ge=0,
        description="Files under the table location that no snapshot references are "
        "removed once older than this, so a write still in flight (not yet committed) "
        "never loses its files: keep it above the longest refresh (Iceberg's own default "
        "is three days).",
    )
    branch_min_age_seconds: float = Field(
        default=600.0,
        ge=0,
        description="A private `icemv_*` refresh branch older than this is a leftover of a "
        "killed refresh, and removed.",
    )
    verify_interval_seconds: float = Field(
        default=0.0,
        ge=0,
        description="How often the daemon verifies every MV it owns against its SQL at the "
        "recorded snapshots (`icemv mv verify`), one MV at a time; a difference is "
        "counted, logged and repaired with a full refresh. 0: never (86400: daily).",
    )
    verify_slices: int = Field(
        default=64, ge=1, description="The hash slices each MV is cut into for verification."
    )
    verify_sample: float = Field(
        default=1.0,
        gt=0,
        le=1,
        description="The share of the slices one scheduled run checks (different slices each run).",
    )
    verify_max_source_rows: int = Field(
        default=0,
        ge=0,
        description="The budget: an MV whose sources hold more rows than this is skipped by "
        "scheduled runs (each run evaluates the view's SQL in full); 0: no limit.",
    )


class MetricsConfig(_Section):
    """The daemon's HTTP server: `/metrics`, `/healthz`, `/readyz`, `POST /mvs/NAME/refresh`."""

    host: str = Field(default="127.0.0.1", description="The address to listen on.")
    port: int = Field(default=9108, ge=0, le=65535, description="The port to listen on.")


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

    level: Level = Field(
        default="INFO", description="The root level: DEBUG, INFO, WARNING, ERROR, CRITICAL."
    )
    format: Literal["auto", "json", "console"] = Field(
        default="auto", description="`json` when not on a terminal with `auto`."
    )
    levels: dict[str, Level] = Field(
        default_factory=dict,
        description="Python loggers by name, e.g. `{kafka: INFO}`; the chatty libraries "
        "(apscheduler, botocore, kafka, pgserver, py4j, pyiceberg, urllib3) stay at WARNING "
        "unless named.",
    )
    spark_level: Level = Field(
        default="WARNING",
        description="The Spark JVM's log4j level (its lines: logger `spark`).",
    )

    @field_validator("levels", mode="after")
    @classmethod
    def _named_loggers(cls, levels: dict[str, str]) -> dict[str, str]:
        for name in levels:
            if not name.strip() or name != name.strip():
                raise ValueError(f"logger name {name!r} is empty or has surrounding spaces")
        return levels


class MaterializedViewSpec(_Section):
    """A declarative MV: `icemv apply` creates or replaces it to match."""

    name: str = Field(description="`name`, `namespace.name` or `catalog.namespace.name`.")
    sql: str = Field(description="The defining query (Spark SQL).")
    properties: dict[str, str] = Field(
        default_factory=dict, description="View properties (`icemv.refresh-policy`, ...)."
    )
    partition_by: list[str] = Field(
        default_factory=list,
        description="Partition expressions of the storage table: a column, "
        "`years|months|days|hours(col)`, `bucket(N, col)`, `truncate(N, col)`.",
    )


class Config(_Section):
    """The whole configuration: one YAML file, each key overridable from the environment."""

    home: str = Field(
        default="lakehouse",
        description="Local state (embedded catalog database, demo log) lives here.",
    )
    default_namespace: str = Field(
        default="default", description="The namespace of unqualified MV names."
    )
    catalog: CatalogConfig = Field(
        default_factory=CatalogConfig, description="The Iceberg catalog."
    )
    warehouse: WarehouseConfig = Field(
        default_factory=WarehouseConfig, description="Where table files live."
    )
    spark: SparkConfig = Field(default_factory=SparkConfig, description="The Spark session.")
    kafka: KafkaConfig = Field(default_factory=KafkaConfig, description="Commit events.")
    polling: PollingConfig = Field(default_factory=PollingConfig, description="Catalog polls.")
    refresh: RefreshConfig = Field(default_factory=RefreshConfig, description="Refreshes.")
    maintenance: MaintenanceConfig = Field(
        default_factory=MaintenanceConfig, description="Storage upkeep and verification."
    )
    metrics: MetricsConfig = Field(default_factory=MetricsConfig, description="HTTP endpoints.")
    logging: LoggingConfig = Field(default_factory=LoggingConfig, description="Log lines.")
    materialized_views: list[MaterializedViewSpec] = Field(
        default_factory=list, description="MVs `icemv apply` creates or replaces to match."
    )

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
