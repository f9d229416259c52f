"""Turn a view delta into one write on the storage table.

The storage table holds only the view's columns, so rows have no identity: a deleted row
image is removed by deleting all its copies and re-inserting the survivors (counts read
from storage), and aggregate rows are addressed by their group keys.

A patch that fits `driver_max_rows` is collected to the driver and committed by pyiceberg
(`driver_commit`): insert-only rows are appended, deleted row images are dropped from the
storage files that hold them (`row_image_rewrite`), and a keyed patch rewrites the storage
content, which for an aggregate MV is one row per group. Bigger ones are a Spark MERGE,
or an append. Either way, row counts are known before the commit so that they go into it.

All SQL text here is composed from internal temp-view names and column names that pass
through `quote_part`; nothing from outside is pasted in unquoted.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.manifest import DataFile
from pyiceberg.table import Table

from icemv.errors import FullRefreshRequiredError
from icemv.identifiers import quote_part
from icemv.refresh.commit.driver import collect_bounded, live_data_files
from icemv.refresh.patch.row_images import rewrite_row_images
from icemv.sql.analysis import WEIGHT, AggregateColumn, IvmAnalysis
from icemv.sql.delta import argument_column, key_column

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

q = quote_part


@dataclass(frozen=True)
class StoragePatch:
    """A prepared write: either `apply(target)`, a Spark write to the given table
    reference, or `rows` to commit from the driver, replacing the `replaces` files.

    Row counts are None when computing them up front would cost a Spark job of its own:
    then Iceberg's summary of the same commit has them.
    """

    rows_inserted: int | None
    rows_deleted: int | None
    apply: Callable[[str], None] | None = None
    rows: pa.Table | None = None
    replaces: tuple[DataFile, ...] = ()


@dataclass(frozen=True)
class PatchTarget:
    """The storage table as the refresh was planned from."""

    table: Table  # as loaded when planned (pyiceberg)
    snapshot_id: int
    at_plan: str  # SQL reference: the storage table VERSION AS OF the planned snapshot
    driver_max_rows: int  # 0: always write with Spark

    @property
    def rewritable_from_driver(self) -> bool:
        """The whole storage content may be rewritten from the driver."""
        snapshot = self.table.metadata.snapshot_by_id(self.snapshot_id)
        summary = snapshot.summary.additional_properties if snapshot and snapshot.summary else {}
        # Records in data files, deletes not subtracted: a bound of the rows.
        records = int(summary.get("total-records", 0))
        return self.driver_max_rows > 0 and records <= self.driver_max_rows


class _Views:
    """Temp views of one refresh, dropped (and uncached) at the end."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        self.names: list[str] = []

    def register(self, purpose: str, sql: str, cache: bool = False) -> str:
        name = f"__icemv_{purpose}_{uuid.uuid4().hex[:12]}"
        self.spark.sql(sql).createOrReplaceTempView(name)
        self.names.append(name)
        if cache:
            self.spark.catalog.cacheTable(name)
        return name

    def drop(self) -> None:
        for name in self.names:
            self.spark.catalog.dropTempView(name)
        self.names.clear()


def _null_safe(left: str, right: str, pairs: Sequence[tuple[str, str]]) -> str:
    return " AND ".join(f"{left}.{q(a)} <=> {right}.{q(b)}" for a, b in pairs)


def rows_patch(
    views: _Views, delta_sql: str, outputs: Sequence[str], target: PatchTarget, insert_only: bool
) -> StoragePatch:
    cols = ", ".join(q(c) for c in outputs)
    if insert_only:  # every weight is +1: the delta rows are the rows to append
        appended = views.spark.sql(f"SELECT {cols} FROM ({delta_sql})")
        if target.driver_max_rows:
            rows = collect_bounded(appended, target.driver_max_rows)
            if rows is not None:
                return StoragePatch(rows.num_rows, 0, rows=rows)

        def append_all(target: str) -> None:
            appended.writeTo(target).append()

        return StoragePatch(None, 0, append_all)
    net = views.register(
        "net",
        f"SELECT {cols}, SUM({q(WEIGHT)}) AS __icemv_net FROM ({delta_sql}) "
        f"GROUP BY {cols} HAVING SUM({q(WEIGHT)}) <> 0",
        cache=True,
    )
    if target.driver_max_rows:
        net_rows = collect_bounded(views.spark.table(net), target.driver_max_rows)
        if net_rows is not None:
            rewrite = rewrite_row_images(
                target.table, target.snapshot_id, net_rows, target.driver_max_rows
            )
            if rewrite is not None:
                return StoragePatch(
                    rewrite.inserted, rewrite.deleted, rows=rewrite.rows, replaces=rewrite.replaces
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
        f"  FROM {target.at_plan} s LEFT SEMI JOIN {net} m"
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


@dataclass(frozen=True)
class _Counts:
    inserted: int
    deleted: int
    updated: int
    suspect: bool  # some updated row needs recomputing from the base tables

    def patch(self, **write: Any) -> StoragePatch:
        # An updated row counts once as deleted and once as inserted.
        return StoragePatch(self.inserted + self.updated, self.deleted + self.updated, **write)


@dataclass(frozen=True)
class _KeyedMerge:
    """A patch keyed like the storage rows (group keys): matched storage rows are deleted
    or updated, unmatched source rows inserted. Rendered as a Spark MERGE, or as the whole
    new storage content to commit from the driver.

    Expressions see the storage row as `t` and the source row as `s`.
    """

    source: str
    on: str
    outputs: Sequence[str]
    updates: Mapping[str, str]  # column -> its new value in a matched row
    inserts: Sequence[str]  # the value of each output column in an inserted row
    delete_when: str  # matched rows to delete
    insert_when: str  # unmatched source rows to insert

    def merge(self, spark: SparkSession, target: str) -> None:
        clauses = []
        if self.delete_when != "FALSE":
            clauses.append(f"WHEN MATCHED AND {self.delete_when} THEN DELETE")
        if self.updates:
            sets = ", ".join(f"{q(c)} = {value}" for c, value in self.updates.items())
            clauses.append(f"WHEN MATCHED THEN UPDATE SET {sets}")
        clauses.append(
            f"WHEN NOT MATCHED AND {self.insert_when} "
            f"THEN INSERT ({', '.join(q(c) for c in self.outputs)}) "
            f"VALUES ({', '.join(self.inserts)})"
        )
        spark.sql(f"MERGE INTO {target} t USING {self.source} s ON {self.on} {' '.join(clauses)}")

    def counts(self, spark: SparkSession, storage_at_plan: str, suspect: str = "FALSE") -> _Counts:
        """What the MERGE will do, counted before it runs (one Spark job)."""
        stats = spark.sql(
            f"SELECT COUNT_IF(t.__icemv_here IS NULL AND {self.insert_when}), "
            f"COUNT_IF(t.__icemv_here AND {self.delete_when}), "
            f"COUNT_IF(t.__icemv_here AND NOT ({self.delete_when})), "
            f"COUNT_IF(t.__icemv_here AND NOT ({self.delete_when}) AND ({suspect})) "
            f"FROM {self.source} s LEFT JOIN "
            f"(SELECT *, TRUE AS __icemv_here FROM {storage_at_plan}) t ON {self.on}"
        ).first()
        assert stats is not None
        return _Counts(int(stats[0]), int(stats[1]), int(stats[2]), bool(stats[3]))

    def content_sql(self, storage_at_plan: str, suspect: str) -> str:
        """Every storage row after the patch, with its fate, as MERGE would leave them.

        Only for storage small enough for the driver: one partition of it joins a small
        delta without a shuffle.

        `suspect` flags updated rows whose new value cannot be trusted (see callers).
        """
        columns = [
            f"CASE WHEN t.__icemv_here IS NULL THEN {insert} "
            f"WHEN s.__icemv_hit IS NULL THEN t.{q(c)} "
            f"ELSE {self.updates.get(c, f't.{q(c)}')} END AS {q(c)}"
            for c, insert in zip(self.outputs, self.inserts, strict=True)
        ]
        status = (
            f"CASE WHEN t.__icemv_here IS NULL THEN IF({self.insert_when}, 'inserted', 'skipped') "
            f"WHEN s.__icemv_hit IS NULL THEN 'kept' "
            f"WHEN {self.delete_when} THEN 'deleted' ELSE 'updated' END"
        )
        return (
            f"SELECT {', '.join(columns)}, {status} AS __icemv_status, "
            f"COALESCE(t.__icemv_here AND s.__icemv_hit AND NOT ({self.delete_when}) "
            f"AND ({suspect}), FALSE) AS __icemv_suspect "
            f"FROM (SELECT /*+ COALESCE(1) */ *, TRUE AS __icemv_here FROM {storage_at_plan}) t "
            f"FULL OUTER JOIN (SELECT *, TRUE AS __icemv_hit FROM {self.source}) s ON {self.on}"
        )


@dataclass(frozen=True)
class _Rewrite:
    patch: StoragePatch
    suspect: bool  # some updated row needs recomputing from the base tables


def _rewrite_from_driver(
    views: _Views, spec: _KeyedMerge, target: PatchTarget, suspect: str = "FALSE"
) -> _Rewrite | None:
    """The patched storage content, collected; None if it is too big for the driver."""
    if not target.rewritable_from_driver:
        return None
    content = collect_bounded(
        views.spark.sql(spec.content_sql(target.at_plan, suspect)), target.driver_max_rows
    )
    if content is None:
        return None
    status = content["__icemv_status"]

    def count(state: str) -> int:
        return int(pc.sum(pc.equal(status, state)).as_py() or 0)

    counts = _Counts(
        count("inserted"), count("deleted"), count("updated"),
        bool(pc.any(content["__icemv_suspect"]).as_py()),
    )  # fmt: skip
    kept = content.filter(pc.is_in(status, pa.array(["kept", "updated", "inserted"])))
    patch = counts.patch(
        rows=kept.select(list(range(len(spec.outputs)))),
        replaces=tuple(live_data_files(target.table, target.snapshot_id)),
    )
    return _Rewrite(patch, counts.suspect)


def merge_aggregates_patch(
    views: _Views,
    analysis: IvmAnalysis,
    pre_delta_sql: str,
    outputs: Sequence[str],
    target: PatchTarget,
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
    source = views.register("aggd", delta_sql)
    on = " AND ".join(f"t.{q(out)} <=> s.{alias}" for out, alias in keys) or "TRUE"
    gone = "FALSE"
    if with_deletes and keys:  # a global aggregate always keeps its one row
        assert count_index is not None, "merge-aggregates with deletes needs COUNT(*)"
        counted = outputs[analysis.aggregates[count_index].position]
        gone = f"(t.{q(counted)} + s.__icemv_d{count_index}) = 0"
    updates = {
        outputs[a.position]: _merged_value(a, "t." + q(outputs[a.position]), f"s.__icemv_d{i}")
        for i, a in enumerate(analysis.aggregates)
    }
    inserts = []
    for position, _ in enumerate(outputs):
        key = next((alias for out, alias in keys if out == outputs[position]), None)
        agg = next((i for i, a in enumerate(analysis.aggregates) if a.position == position), None)
        inserts.append(f"s.{key}" if key else f"s.__icemv_d{agg}")
    spec = _KeyedMerge(source, on, outputs, updates, inserts, gone, "s.__icemv_dcount > 0")
    suspects = "FALSE"
    if with_deletes and sums:
        suspects = " OR ".join(_may_be_null_now(analysis.aggregates[i], i, outputs) for i in sums)
    rewrite = _rewrite_from_driver(views, spec, target, suspects)
    if rewrite is not None:
        return recompute() if rewrite.suspect else rewrite.patch

    merge = partial(spec.merge, views.spark)
    if not with_deletes:  # no suspects; Iceberg's summary of the commit has the counts
        return StoragePatch(None, None, merge)
    views.spark.catalog.cacheTable(source)  # read by the statistics and the MERGE
    counts = spec.counts(views.spark, target.at_plan, suspects)
    return recompute() if counts.suspect else counts.patch(apply=merge)


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
    target: PatchTarget,
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
    )
    on = " AND ".join(f"t.{q(out)} <=> s.{alias}" for out, alias in keys)
    inserts = [
        f"s.{next(alias for out, alias in keys if out == c)}" if c in key_outputs else f"s.{q(c)}"
        for c in outputs
    ]
    spec = _KeyedMerge(
        source,
        on,
        outputs,
        {c: f"s.{q(c)}" for c in others},
        inserts,
        "s.__icemv_present IS NULL",
        "s.__icemv_present",
    )
    rewrite = _rewrite_from_driver(views, spec, target)
    if rewrite is not None:
        return rewrite.patch
    views.spark.catalog.cacheTable(source)  # read by the statistics and the MERGE
    counts = spec.counts(views.spark, target.at_plan)
    return counts.patch(apply=partial(spec.merge, views.spark))
