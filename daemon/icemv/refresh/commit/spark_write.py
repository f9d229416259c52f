"""Spark writes to a storage table that carry the refresh record in the same commit.

The commit is validated against the storage snapshot the refresh was planned from, so a
concurrent refresh makes this one fail (and re-plan) instead of recording two refreshes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from icemv.engine.jvm import is_commit_conflict, with_commit_properties
from icemv.errors import StorageCommitConflictError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


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
        if is_commit_conflict(exc):
            raise StorageCommitConflictError(str(exc).splitlines()[0]) from exc
        raise


def run_with_commit_properties(
    spark: SparkSession, properties: Mapping[str, str], action: Callable[[], None]
) -> None:
    """Run SQL writes (MERGE) whose Iceberg commit carries `properties` in its summary.

    SQL statements take no snapshot properties; see `engine.jvm.with_commit_properties`.
    """
    with_commit_properties(spark, properties, action)
