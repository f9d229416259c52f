"""Turn a view delta into one write on the storage table (MERGE, or append if insert-only).

The storage table holds only the view's columns, so rows have no identity: a deleted row
image is removed by deleting all its copies and re-inserting the survivors (counts read
from storage), and aggregate rows are addressed by their group keys. Row counts are
computed before the write so that they go into the same commit as the refresh record.

All SQL text here is composed from internal temp-view names and column names that pass
through `quote_part`; nothing from outside is pasted in unquoted.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from daemon.delta_query import argument_column, key_column
from daemon.identifiers import quote_part
from daemon.ivm_analysis import WEIGHT, AggregateColumn, IvmAnalysis
from daemon.source_changes import FullRefreshRequiredError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

q = quote_part


@dataclass(frozen=True)
class StoragePatch:
    """A prepared write: `apply(target)` performs it on the given table reference.

    Row counts are None when computing them up front would cost a Spark job of its own
    (insert-only deltas): then Iceberg's summary of the same commit has them.
    """

    rows_inserted: int | None
    rows_deleted: int | None
    apply: Callable[[str], None]


class _Views:
    """Temp views of one refresh, dropped at the end."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        self.names: list[str] = []

    def register(self, purpose: str, sql: str, cache: bool = False) -> str:
        name = f"__icemv_{purpose}_{uuid.uuid4().hex[:12]}"
        df = self.spark.sql(sql)
        if cache:
            df = df.cache()
        df.createOrReplaceTempView(name)
        self.names.append(name)
        return name

    def drop(self) -> None:
        for name in self.names:
            self.spark.catalog.dropTempView(name)
        self.names.clear()


def _null_safe(left: str, right: str, pairs: Sequence[tuple[str, str]]) -> str:
    return " AND ".join(f"{left}.{q(a)} <=> {right}.{q(b)}" for a, b in pairs)


def rows_patch(
    views: _Views, delta_sql: str, outputs: Sequence[str], storage_at_plan: str, insert_only: bool
) -> StoragePatch:
    cols = ", ".join(q(c) for c in outputs)
    if insert_only:  # every weight is +1: the delta rows are the rows to append
        appended = views.spark.sql(f"SELECT {cols} FROM ({delta_sql})")

        def append_all(target: str) -> None:
            appended.writeTo(target).append()

        return StoragePatch(None, 0, append_all)
    net = views.register(
        "net",
        f"SELECT {cols}, SUM({q(WEIGHT)}) AS __icemv_net FROM ({delta_sql}) "
        f"GROUP BY {cols} HAVING SUM({q(WEIGHT)}) <> 0",
        cache=True,
    )
    stats = views.spark.sql(
        f"SELECT COALESCE(SUM(IF(__icemv_net > 0, __icemv_net, 0)), 0), "
        f"COALESCE(SUM(IF(__icemv_net < 0, -__icemv_net, 0)), 0) FROM {net}"
    ).first()
    assert stats is not None
    inserted, deleted = int(stats[0]), int(stats[1])
    same = [(c, c) for c in outputs]
    if deleted == 0:
        rows = views.spark.sql(
            f"SELECT {cols} FROM {net} LATERAL VIEW explode(sequence(1, __icemv_net)) AS __icemv_n"
        )

        def append(target: str) -> None:
            rows.writeTo(target).append()

        return StoragePatch(inserted, deleted, append)
    negatives = views.register(
        "neg",
        f"SELECT n.*, COALESCE(c.__icemv_c, 0) AS __icemv_c FROM {net} n LEFT JOIN ("
        f"  SELECT {', '.join('s.' + q(c) for c in outputs)}, COUNT(*) AS __icemv_c"
        f"  FROM {storage_at_plan} s LEFT SEMI JOIN {net} m"
        f"  ON {_null_safe('s', 'm', same)} AND m.__icemv_net < 0"
        f"  GROUP BY {', '.join('s.' + q(c) for c in outputs)}"
        f") c ON {_null_safe('n', 'c', same)} WHERE n.__icemv_net < 0",
        cache=True,
    )
    short = views.spark.sql(
        f"SELECT COUNT(*) FROM {negatives} WHERE __icemv_c + __icemv_net < 0"
    ).first()
    if short is not None and short[0]:
        raise FullRefreshRequiredError(
            "storage-inconsistent", "the delta deletes rows the storage table does not hold"
        )
    source = views.register(
        "src",
        f"SELECT {cols}, __icemv_kind FROM ("
        f"  SELECT {cols}, 'd' AS __icemv_kind, 1 AS __icemv_copies FROM {negatives}"
        f"  UNION ALL SELECT {cols}, 'i', __icemv_c + __icemv_net FROM {negatives}"
        f"    WHERE __icemv_c + __icemv_net > 0"
        f"  UNION ALL SELECT {cols}, 'i', __icemv_net FROM {net} WHERE __icemv_net > 0"
        f") LATERAL VIEW explode(sequence(1, __icemv_copies)) AS __icemv_n",
    )

    def merge(target: str) -> None:
        views.spark.sql(
            f"MERGE INTO {target} t USING {source} s "
            f"ON {_null_safe('t', 's', same)} AND s.__icemv_kind = 'd' "
            f"WHEN MATCHED THEN DELETE "
            f"WHEN NOT MATCHED AND s.__icemv_kind = 'i' THEN INSERT ({cols}) "
            f"VALUES ({', '.join('s.' + q(c) for c in outputs)})"
        )

    return StoragePatch(inserted, deleted, merge)


def _delta_expression(aggregate: AggregateColumn, index: int) -> str:
    argument = argument_column(index)
    weight = q(WEIGHT)
    if aggregate.func == "count_star":
        return f"SUM({weight})"
    if aggregate.func == "count":
        return f"SUM(IF({argument} IS NOT NULL, {weight}, 0))"
    if aggregate.func == "sum":
        return f"SUM({argument} * {weight})"
    return f"{aggregate.func.upper()}({argument})"


def _merged_value(aggregate: AggregateColumn, old: str, delta: str) -> str:
    if aggregate.func in ("count_star", "count"):
        return f"{old} + {delta}"
    if aggregate.func == "sum":
        return (
            f"CASE WHEN {old} IS NULL THEN {delta} "
            f"WHEN {delta} IS NULL THEN {old} ELSE {old} + {delta} END"
        )
    return f"{'LEAST' if aggregate.func == 'min' else 'GREATEST'}({old}, {delta})"


def merge_aggregates_patch(
    views: _Views,
    analysis: IvmAnalysis,
    pre_delta_sql: str,
    outputs: Sequence[str],
    storage_at_plan: str,
    with_deletes: bool,
    recompute: Callable[[], StoragePatch],
) -> StoragePatch:
    """Stored aggregates plus the delta's. A SUM whose inputs may all have been deleted
    must turn NULL, which stored values cannot tell: such groups (merged sum ~ 0 after
    deletions) send the whole patch to `recompute`, which reads those groups' base rows.
    """
    keys = [(outputs[k.position], key_column(i)) for i, k in enumerate(analysis.keys)]
    key_list = ", ".join(alias for _, alias in keys)
    deltas = ", ".join(
        f"{_delta_expression(a, i)} AS __icemv_d{i}" for i, a in enumerate(analysis.aggregates)
    )
    sums = [i for i, a in enumerate(analysis.aggregates) if a.func == "sum"]
    if with_deletes and sums:
        deltas += "".join(
            f", SUM(IF({argument_column(i)} IS NOT NULL AND {q(WEIGHT)} < 0, 1, 0)) "
            f"AS __icemv_gone{i}"
            for i in sums
        )
    count_index = next(
        (i for i, a in enumerate(analysis.aggregates) if a.func == "count_star"), None
    )
    delta_sql = (
        f"SELECT {key_list}{', ' if key_list else ''}SUM({q(WEIGHT)}) AS __icemv_dcount, {deltas} "
        f"FROM ({pre_delta_sql})" + (f" GROUP BY {key_list}" if key_list else "")
    )
    source = views.register("aggd", delta_sql, cache=with_deletes)
    on = " AND ".join(f"t.{q(out)} <=> s.{alias}" for out, alias in keys) or "TRUE"
    gone = "FALSE"
    if with_deletes and keys:  # a global aggregate always keeps its one row
        assert count_index is not None, "merge-aggregates with deletes needs COUNT(*)"
        counted = outputs[analysis.aggregates[count_index].position]
        gone = f"(t.{q(counted)} + s.__icemv_d{count_index}) = 0"
    merge = _merge_statement(views, analysis, outputs, keys, source, on, gone, with_deletes)
    if not with_deletes:  # no suspects; Iceberg's summary of the commit has the counts
        return StoragePatch(None, None, merge)
    suspects = "FALSE"
    if with_deletes and sums:
        suspects = " OR ".join(_may_be_null_now(analysis.aggregates[i], i, outputs) for i in sums)
    stats = views.spark.sql(
        f"SELECT COUNT_IF(t.__icemv_here IS NULL AND s.__icemv_dcount > 0), "
        f"COUNT_IF(t.__icemv_here AND {gone}), COUNT_IF(t.__icemv_here AND NOT ({gone})), "
        f"COUNT_IF(t.__icemv_here AND NOT ({gone}) AND ({suspects})) "
        f"FROM {source} s LEFT JOIN "
        f"(SELECT *, TRUE AS __icemv_here FROM {storage_at_plan}) t ON {on}"
    ).first()
    assert stats is not None
    new_groups, removed, updated = int(stats[0]), int(stats[1]), int(stats[2])
    if int(stats[3]):
        return recompute()
    return StoragePatch(new_groups + updated, removed + updated, merge)


def _merge_statement(
    views: _Views,
    analysis: IvmAnalysis,
    outputs: Sequence[str],
    keys: Sequence[tuple[str, str]],
    source: str,
    on: str,
    gone: str,
    with_deletes: bool,
) -> Callable[[str], None]:
    updates = ", ".join(
        f"{q(outputs[a.position])} = "
        + _merged_value(a, "t." + q(outputs[a.position]), f"s.__icemv_d{i}")
        for i, a in enumerate(analysis.aggregates)
    )
    values = []
    for position, _ in enumerate(outputs):
        key = next((alias for out, alias in keys if out == outputs[position]), None)
        agg = next((i for i, a in enumerate(analysis.aggregates) if a.position == position), None)
        values.append(f"s.{key}" if key else f"s.__icemv_d{agg}")
    clauses = []
    if with_deletes:
        clauses.append(f"WHEN MATCHED AND {gone} THEN DELETE")
    if updates:
        clauses.append(f"WHEN MATCHED THEN UPDATE SET {updates}")
    clauses.append(
        "WHEN NOT MATCHED AND s.__icemv_dcount > 0 "
        f"THEN INSERT ({', '.join(q(c) for c in outputs)}) "
        f"VALUES ({', '.join(values)})"
    )

    def merge(target: str) -> None:
        views.spark.sql(f"MERGE INTO {target} t USING {source} s ON {on} {' '.join(clauses)}")

    return merge


def _may_be_null_now(aggregate: AggregateColumn, index: int, outputs: Sequence[str]) -> str:
    """The merged SUM is ~0 after non-NULL inputs were deleted: maybe none is left."""
    old = "t." + q(outputs[aggregate.position])
    merged = _merged_value(aggregate, old, f"s.__icemv_d{index}")
    return (
        f"(s.__icemv_gone{index} > 0 AND "
        f"ABS({merged}) <= 1e-9 * (ABS(COALESCE({old}, 0)) + ABS(COALESCE(s.__icemv_d{index}, 0))))"
    )


def recompute_groups_patch(
    views: _Views,
    analysis: IvmAnalysis,
    pre_delta_sql: str,
    new_query_sql: str,
    outputs: Sequence[str],
    storage_at_plan: str,
) -> StoragePatch:
    keys = [(outputs[k.position], key_column(i)) for i, k in enumerate(analysis.keys)]
    if not keys:
        raise FullRefreshRequiredError("no-group-keys", "a global aggregate is recomputed whole")
    key_list = ", ".join(alias for _, alias in keys)
    affected = views.register(
        "keys", f"SELECT DISTINCT {key_list} FROM ({pre_delta_sql})", cache=True
    )
    key_outputs = {out for out, _ in keys}
    others = [c for c in outputs if c not in key_outputs]
    match_new = " AND ".join(f"g.{q(out)} <=> k.{alias}" for out, alias in keys)
    source = views.register(
        "groups",
        f"SELECT k.*, {''.join(f'g.{q(c)}, ' for c in others)}g.__icemv_present FROM {affected} k "
        f"LEFT JOIN (SELECT n.*, TRUE AS __icemv_present FROM ({new_query_sql}) n "
        f"  LEFT SEMI JOIN {affected} k2 ON "
        + " AND ".join(f"n.{q(out)} <=> k2.{alias}" for out, alias in keys)
        + f") g ON {match_new}",
        cache=True,
    )
    on = " AND ".join(f"t.{q(out)} <=> s.{alias}" for out, alias in keys)
    stats = views.spark.sql(
        f"SELECT COUNT_IF(t.__icemv_here IS NULL AND s.__icemv_present), "
        f"COUNT_IF(t.__icemv_here AND s.__icemv_present IS NULL), "
        f"COUNT_IF(t.__icemv_here AND s.__icemv_present) "
        f"FROM {source} s LEFT JOIN "
        f"(SELECT *, TRUE AS __icemv_here FROM {storage_at_plan}) t ON {on}"
    ).first()
    assert stats is not None
    new_groups, removed, updated = int(stats[0]), int(stats[1]), int(stats[2])
    values = [
        f"s.{next(alias for out, alias in keys if out == c)}" if c in key_outputs else f"s.{q(c)}"
        for c in outputs
    ]
    clauses = ["WHEN MATCHED AND s.__icemv_present IS NULL THEN DELETE"]
    if others:
        clauses.append(
            "WHEN MATCHED THEN UPDATE SET " + ", ".join(f"{q(c)} = s.{q(c)}" for c in others)
        )
    clauses.append(
        f"WHEN NOT MATCHED AND s.__icemv_present THEN INSERT ({', '.join(q(c) for c in outputs)}) "
        f"VALUES ({', '.join(values)})"
    )

    def merge(target: str) -> None:
        views.spark.sql(f"MERGE INTO {target} t USING {source} s ON {on} {' '.join(clauses)}")

    return StoragePatch(new_groups + updated, removed + updated, merge)
