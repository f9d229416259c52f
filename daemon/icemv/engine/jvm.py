"""Every reach into the Spark JVM through py4j, in one place.

Classic Spark only: Spark Connect has no `sparkContext` and no py4j gateway, so each entry
point here would fail there. Keeping them together makes that dependency visible and
checkable (ruff SLF001 is allowed in this module and `engine/arrow.py` only).

Uses Iceberg's Java API where the Spark SQL surface has no equivalent: scan task sets
(the rewrite procedures' way to read exact files), `Spark3Util.loadIcebergTable`,
`ContentFileUtil`, and `CommitMetadata.withCommitProperties`, which attaches summary
properties to commits made by SQL statements on the calling JVM thread.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Iceberg's exceptions for "someone else committed first" (org.apache.iceberg.exceptions).
CONFLICT_CLASSES = frozenset(
    {
        "org.apache.iceberg.exceptions.ValidationException",
        "org.apache.iceberg.exceptions.CommitFailedException",
        "org.apache.iceberg.exceptions.CommitStateUnknownException",
    }
)


def _jvm(spark: SparkSession) -> Any:
    return spark.sparkContext._jvm


def load_iceberg_table(spark: SparkSession, name: str) -> Any:
    """The Java `org.apache.iceberg.Table` behind a Spark table name (catalog.db.table)."""
    return _jvm(spark).org.apache.iceberg.spark.Spark3Util.loadIcebergTable(
        spark._jsparkSession, name
    )


def format_version(table: Any) -> int:
    """The Iceberg format version of a Java `Table`."""
    return int(table.operations().current().formatVersion())


def column_names(table: Any) -> list[str]:
    """The top-level columns of an Iceberg (Java) table's current schema, in order."""
    return [str(field.name()) for field in table.schema().columns()]


def referenced_data_file(spark: SparkSession, delete_file: Any) -> str | None:
    """The one data file a position-delete file applies to, if its metadata says so."""
    location = _jvm(spark).org.apache.iceberg.util.ContentFileUtil.referencedDataFileLocation(
        delete_file
    )
    return None if location is None else str(location)


def stage_scan_tasks(spark: SparkSession, table: Any, set_id: str, tasks: Iterable[Any]) -> int:
    """Stage `tasks` as scan task set `set_id` of `table`; returns how many were staged.

    Spark then reads exactly those files with
    `spark.read.format("iceberg").option("scan-task-set-id", set_id)`.
    """
    jvm = _jvm(spark)
    staged = jvm.java.util.ArrayList()
    for task in tasks:
        staged.add(task)
    if not staged.isEmpty():
        jvm.org.apache.iceberg.spark.ScanTaskSetManager.get().stageTasks(table, set_id, staged)
    return int(staged.size())


# Per column: whether NULL matches, the values that match, the (low, high) ranges that do.
ColumnFilter = tuple[bool, Sequence[object], Sequence[tuple[object, object]]]


def values_filter(spark: SparkSession, columns: Mapping[str, ColumnFilter]) -> Any:
    """An Iceberg expression true where every named column matches its filter, for
    planning a scan: Iceberg skips the data files, and Parquet readers the row groups,
    whose column bounds and null counts rule it out."""
    jvm = _jvm(spark)
    expressions = jvm.org.apache.iceberg.expressions.Expressions
    and_, or_, in_ = (getattr(expressions, n) for n in ("and", "or", "in"))  # Python keywords
    result = expressions.alwaysTrue()
    for column, (null, values, ranges) in columns.items():
        term = expressions.isNull(column) if null else expressions.alwaysFalse()
        if values:
            listed = jvm.java.util.ArrayList()
            for value in values:
                listed.add(value)
            term = or_(term, in_(column, listed))
        for low, high in ranges:
            between = and_(
                expressions.greaterThanOrEqual(column, low),
                expressions.lessThanOrEqual(column, high),
            )
            term = or_(term, between)
        result = and_(result, term)
    return result


def remove_scan_tasks(spark: SparkSession, table: Any, set_id: str) -> None:
    _jvm(spark).org.apache.iceberg.spark.ScanTaskSetManager.get().removeTasks(table, set_id)


def with_commit_properties(
    spark: SparkSession, properties: Mapping[str, str], action: Callable[[], None]
) -> None:
    """Run `action` (SQL writes) so that its Iceberg commits carry `properties`.

    `CommitMetadata.withCommitProperties` applies to commits on the calling JVM thread,
    so `action` runs as a py4j callback on that thread. An error raised by `action` is
    re-raised as itself, not as the py4j wrapper around it.
    """
    from pyspark.java_gateway import ensure_callback_server_started

    ensure_callback_server_started(spark.sparkContext._gateway)  # type: ignore[no-untyped-call]
    jvm = _jvm(spark)
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


def is_commit_conflict(exc: BaseException) -> bool:
    """Whether a failed Spark write lost a commit race, judged by the Java exception class.

    Walks the Java cause chain (Spark wraps a commit failure in job errors). An error
    that carries no Java exception (Spark Connect) is judged by its text, the only thing
    such errors expose.
    """
    # Py4JJavaError carries it publicly; PySpark's converted errors keep it as `_origin`.
    java = getattr(exc, "java_exception", None) or getattr(exc, "_origin", None)
    if java is None:
        text = str(exc)
        return any(name.rsplit(".", 1)[1] in text for name in CONFLICT_CLASSES)
    seen = 0
    while java is not None and seen < 32:  # cause chains may be cyclic in principle
        if str(java.getClass().getName()) in CONFLICT_CLASSES:
            return True
        java = java.getCause()
        seen += 1
    return False


# Java exceptions that, raised while Spark plans a query icemv built, are Spark failing on
# a valid query (its analyzer or optimizer), not the data or the cluster.
_PLANNING_BUG_CLASSES = frozenset(
    {
        "java.util.NoSuchElementException",
        "java.lang.IllegalStateException",
        "java.lang.AssertionError",
        "java.lang.NullPointerException",
        "scala.MatchError",
    }
)


def planning_failure(exc: BaseException) -> str | None:
    """One line saying how Spark failed to plan a query, when `exc` is Spark's own bug
    (an `[INTERNAL_ERROR]`, or one of the exceptions above thrown while planning); None
    for anything else (a job that failed on data or on the cluster, an I/O error)."""
    text = str(exc)
    java = getattr(exc, "java_exception", None) or getattr(exc, "_origin", None)
    name = str(java.getClass().getName()) if java is not None else ""
    planning = "QueryExecution" in text and name in _PLANNING_BUG_CLASSES
    if "[INTERNAL_ERROR]" not in text and not planning:
        return None
    message = str(java.getMessage()) if java is not None else text
    first = next((line.strip() for line in message.splitlines() if line.strip()), "")
    return f"{name or type(exc).__name__}: {first[:200]}"
