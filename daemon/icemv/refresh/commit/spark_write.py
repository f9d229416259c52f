"""Writes to a storage table that carry the refresh record in the same atomic commit.

The commit is validated against the storage snapshot the refresh was planned from, so a
concurrent refresh makes this one fail (and re-plan) instead of recording two refreshes.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import structlog
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Snapshot, ancestors_of

from icemv.errors import StorageCommitConflictError
from icemv.identifiers import Identifier
from icemv.spec.refresh_state import REFRESH_STATE_KEY, RefreshState, encode_refresh_state

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from icemv.catalog.lakehouse import Lakehouse

log = structlog.get_logger(__name__)

REFRESH_ID_KEY = "icemv.refresh-id"
CONFLICT_MARKERS = ("ValidationException", "CommitFailedException", "CommitStateUnknownException")


def commit_properties(state: RefreshState, details: Mapping[str, str]) -> dict[str, str]:
    return {
        REFRESH_STATE_KEY: encode_refresh_state(state),
        REFRESH_ID_KEY: str(uuid.uuid4()),
        **details,
    }


def overwrite_storage(
    df: DataFrame,
    storage_name: str,
    planned_from: int | None,
    properties: Mapping[str, str],
) -> None:
    """Replace the whole storage table with `df`, in one snapshot carrying `properties`."""
    from pyspark.sql.functions import lit

    writer = df.writeTo(storage_name)
    for key, value in properties.items():
        writer = writer.option(f"snapshot-property.{key}", value)
    # Serializable: data committed since `planned_from` (or ever, on a never-refreshed
    # table, so two first refreshes cannot both land) makes this commit fail.
    writer = writer.option("isolation-level", "serializable")
    if planned_from is not None:
        writer = writer.option("validate-from-snapshot-id", str(planned_from))
    try:
        writer.overwrite(lit(True))
    except Exception as exc:
        if any(marker in str(exc) for marker in CONFLICT_MARKERS):
            raise StorageCommitConflictError(str(exc).splitlines()[0]) from exc
        raise


def find_commit(storage: Table, refresh_id: str) -> Snapshot | None:
    """The snapshot a refresh committed, by the id it wrote into the summary."""
    for snapshot in ancestors_of(storage.current_snapshot(), storage.metadata):
        summary = snapshot.summary.additional_properties if snapshot.summary else {}
        if summary.get(REFRESH_ID_KEY) == refresh_id:
            return snapshot
    return None


def run_with_commit_properties(
    spark: SparkSession, properties: Mapping[str, str], action: Callable[[], None]
) -> None:
    """Run SQL writes (MERGE) whose Iceberg commit carries `properties` in its summary.

    SQL statements take no snapshot properties; Iceberg's CommitMetadata sets them for
    commits made on the calling JVM thread, which a py4j callback runs `action` on.
    """
    from pyspark.java_gateway import ensure_callback_server_started

    gateway = spark.sparkContext._gateway
    ensure_callback_server_started(gateway)  # type: ignore[no-untyped-call]
    jvm: Any = spark.sparkContext._jvm
    java_properties = jvm.java.util.HashMap()
    for key, value in properties.items():
        java_properties.put(key, value)
    errors: list[BaseException] = []

    class _Callable:
        def call(self) -> None:
            try:
                action()
            except BaseException as exc:
                errors.append(exc)
                raise
            return None

        class Java:
            implements = ["java.util.concurrent.Callable"]

    try:
        jvm.org.apache.iceberg.spark.CommitMetadata.withCommitProperties(
            java_properties, _Callable(), jvm.java.lang.RuntimeException._java_lang_class
        )
    except Exception:
        if errors:
            raise errors[0] from None
        raise


def commit_via_branch(
    lakehouse: Lakehouse,
    storage: Identifier,
    planned_from: int,
    write: Callable[[str], None],
) -> None:
    """Write on a private branch from `planned_from`, then move main to it if still there.

    The publish is one catalog commit (main := branch head, branch removed) that asserts
    main is still at `planned_from`: a refresh planned from an older storage state can
    never land, so a delta is applied exactly once even with several daemons. Branch
    bookkeeping goes through pyiceberg: a metadata commit there costs far less than a
    Spark SQL statement.
    """
    branch = f"icemv_{uuid.uuid4().hex[:16]}"
    with lakehouse.load_table(storage).manage_snapshots() as snapshots:
        snapshots.create_branch(planned_from, branch)
    published = False
    try:
        write(f"{lakehouse.quoted(storage)}.`branch_{branch}`")
        table = lakehouse.load_table(storage)
        main = table.metadata.refs.get("main")
        if main is None or main.snapshot_id != planned_from:
            raise StorageCommitConflictError(f"{storage} moved since {planned_from}")
        try:
            with table.manage_snapshots() as snapshots:
                snapshots.set_current_snapshot(ref_name=branch)
                snapshots.remove_branch(branch)
        except CommitFailedException as exc:
            raise StorageCommitConflictError(f"{storage} moved since {planned_from}") from exc
        published = True
    finally:
        if not published:
            _drop_branch(lakehouse, storage, branch)


def _drop_branch(lakehouse: Lakehouse, storage: Identifier, branch: str) -> None:
    try:
        table = lakehouse.load_table(storage)
        if branch in table.metadata.refs:
            with table.manage_snapshots() as snapshots:
                snapshots.remove_branch(branch)
    except Exception as exc:  # a leftover private branch is harmless; never mask the cause
        log.warning("branch_cleanup_failed", table=storage.dotted, branch=branch, error=str(exc))
