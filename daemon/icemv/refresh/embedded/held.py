"""The tables the embedded engine reads besides the change rows, at a snapshot each.

Every other table a view reads (and a changed table where the delta reads it at both
ends: keyed deltas, groups recomputed from the sources, self-joins, each other's terms)
is read with only the columns the view names: whole, shared across MVs and kept in the
process cache (refresh/embedded/reads.py) while its estimated Arrow size fits
`refresh.embedded_cache_bytes`; else restricted to the keys the delta can meet where the
join allows (refresh/embedded/restrict.py says when, and why exact); else, past
`refresh.embedded_join_max_bytes`, the refresh goes to Spark. A table holds at most
`refresh.embedded_join_max_rows` rows at its snapshot either way, and at most
`refresh.embedded_join_max_bytes` in Arrow once read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from sqlglot import exp

from icemv.catalog.arrow_schemas import arrow_schema
from icemv.config import RefreshConfig
from icemv.errors import EngineRefusedError
from icemv.format.summary import TOTAL_RECORDS, summary_of
from icemv.identifiers import Identifier
from icemv.refresh.embedded.executor import DuckDBExecutor
from icemv.refresh.embedded.reads import (
    AppendedRowsCache,
    arrow_width,
    matching_rows,
    read_schema,
    table_rows,
)
from icemv.refresh.embedded.restrict import Restriction, keyed_restrictions, term_restrictions
from icemv.refresh.plan import IncrementalPlan
from icemv.sql.columns import source_of
from icemv.sql.delta import DeltaInputs, touched_keys_query
from icemv.sql.memo import Memo
from icemv.sql.names import KEY
from icemv.sql.spark_types import SparkType, of_arrow


@dataclass(frozen=True)
class Held:
    """A source the embedded engine reads at a snapshot: whole (shared in the cache), or
    only the rows the delta can meet (`restriction`, refresh/embedded/restrict.py)."""

    identifier: Identifier
    table: Table
    snapshot_id: int | None
    schema: Schema  # the snapshot's
    columns: tuple[str, ...]  # those the view names
    restriction: Restriction | None = None

    def read(self, cache: AppendedRowsCache) -> pa.Table:
        return table_rows(self.table, self.snapshot_id, self.schema, self.columns, cache)

    def matching(self, values: list[object], with_null: bool) -> pa.Table:
        assert self.restriction is not None
        column = self.restriction.column
        return matching_rows(
            self.table, self.snapshot_id, self.schema, self.columns, column, values, with_null
        )


def held_tables(
    plan: IncrementalPlan, whole: bool, settings: RefreshConfig
) -> tuple[list[Held], dict[str, dict[str, SparkType]]]:
    """The tables to read at a snapshot: every unchanged one at its pin, and the moved
    ones at both ends when `whole` (the trees read them: keyed, recomputed groups, a
    self-join, each other's terms when several moved), each whole or restricted to the
    delta's keys (`_sized`); and every table occurrence's schema by a placeholder name
    (its alias) for the gate."""
    query = plan.analysis.query
    pins: dict[Identifier, tuple[int | None, ...]] = {}
    schemas: dict[Identifier, Schema] = {}
    for table in query.find_all(exp.Table):
        identifier = source_of(table)
        change = plan.changes.get(identifier)
        if change is None:
            raise EngineRefusedError(f"{identifier}: not a source table")
        if identifier not in schemas:
            schemas[identifier] = read_schema(plan.base.reads.load_table(identifier), change)
        if identifier not in plan.moved:
            pins[identifier] = (change.new_snapshot_id,)
        elif whole:
            pins[identifier] = (change.old_snapshot_id, change.new_snapshot_id)
    restrictions = _restrictions(plan, whole, pins, schemas)
    held: list[Held] = []
    for identifier, snapshots in pins.items():
        loaded = plan.base.reads.load_table(identifier)
        schema = schemas[identifier]
        names = _columns_named(query, identifier, schema, star=identifier in plan.moved)
        for snapshot_id in dict.fromkeys(snapshots):
            restriction = restrictions.get(identifier)
            held.append(_sized(loaded, identifier, snapshot_id, schema, names, restriction,
                               identifier in plan.moved, settings))  # fmt: skip
    order = list(restrictions)  # whole reads first: a restricted read's partners first
    held.sort(key=lambda h: -1 if h.restriction is None else order.index(h.identifier))
    relations = {
        table.alias_or_name: _types(arrow_schema(schemas[source_of(table)]))
        for table in query.find_all(exp.Table)
    }
    return held, relations


def _restrictions(
    plan: IncrementalPlan,
    whole: bool,
    pins: dict[Identifier, tuple[int | None, ...]],
    schemas: dict[Identifier, Schema],
) -> dict[Identifier, Restriction]:
    """The held tables the delta allows to read restricted (refresh/embedded/restrict.py),
    kept per process by what they are a function of (`_restricted`)."""
    analysis = plan.analysis
    key = None
    if analysis.memo_key is not None:
        tables = {i: plan.base.reads.load_table(i).metadata.table_uuid for i in schemas}
        key = (analysis.memo_key, plan.may_recompute_groups, plan.keyed, whole,
               tuple(plan.moved), tuple(pins),
               tuple((i, str(tables[i]), s.schema_id) for i, s in schemas.items()))  # fmt: skip
        kept = _restricted.get(key)
        if kept is not None:
            return kept
    found = _restrictions_of(plan, whole, pins, schemas)
    if key is not None:
        _restricted.put(key, found)
    return found


# Restrictions by the analysis (its memo key), how the delta reads (groups recomputed,
# keyed, moved tables held whole), the moved and held tables, and each one's schema (by
# its table and schema id). Read only.
_restricted: Memo[dict[Identifier, Restriction]] = Memo(1024)


def _restrictions_of(
    plan: IncrementalPlan,
    whole: bool,
    pins: dict[Identifier, tuple[int | None, ...]],
    schemas: dict[Identifier, Schema],
) -> dict[Identifier, Restriction]:
    query = plan.analysis.query
    if plan.may_recompute_groups:  # recomputing groups reads the sources unrestricted
        return {}
    if plan.keyed:
        return keyed_restrictions(query, plan.moved, pins, schemas)
    if whole or len(plan.moved) != 1:
        return {}
    (moved,) = plan.moved
    return term_restrictions(query, moved, pins, schemas)


def _sized(
    table: Table,
    identifier: Identifier,
    snapshot_id: int | None,
    schema: Schema,
    columns: tuple[str, ...],
    restriction: Restriction | None,
    moved: bool,
    settings: RefreshConfig,
) -> Held:
    """`identifier` read at `snapshot_id` (None: empty), under `schema`: restricted when
    it may be and it changes with each refresh (`moved`) or would not stay in the cache
    whole, else whole; or EngineRefusedError past the limits."""
    max_rows = settings.embedded_join_max_rows
    if max_rows <= 0:
        raise EngineRefusedError("joins off (refresh.embedded_join_max_rows is 0)")
    snapshot = None
    if snapshot_id is not None:
        snapshot = table.snapshot_by_id(snapshot_id)
        if snapshot is None:
            raise EngineRefusedError(f"{identifier}: snapshot {snapshot_id} is gone")
        if snapshot.schema_id is not None and snapshot.schema_id != schema.schema_id:
            raise EngineRefusedError(f"{identifier}: its schema changed within the range")
    records = int(summary_of(snapshot).get(TOTAL_RECORDS, -1)) if snapshot else 0
    if records < 0 or records > max_rows:
        shown = "unknown" if records < 0 else str(records)
        raise EngineRefusedError(
            f"{identifier}: {shown} rows > {max_rows} (refresh.embedded_join_max_rows)"
        )
    estimate = records * arrow_width(schema, columns)
    if restriction is not None and (moved or estimate > settings.embedded_cache_bytes):
        return Held(identifier, table, snapshot_id, schema, columns, restriction)
    if estimate > settings.embedded_join_max_bytes:
        raise EngineRefusedError(
            f"{identifier}: ~{_mib(estimate)} to read whole > "
            f"{_mib(settings.embedded_join_max_bytes)} (refresh.embedded_join_max_bytes), "
            "and no join key of the delta restricts it"
        )
    return Held(identifier, table, snapshot_id, schema, columns)


def _columns_named(
    query: exp.Query, identifier: Identifier, schema: Schema, star: bool
) -> tuple[str, ...]:
    """The columns of `identifier`'s occurrences the query names; a star names every
    column (`star`: allowed, the changed table's; else refused). A table read only for its
    rows (`SELECT 1 FROM f`) reads its first column: DuckDB holds no relation without
    columns, and the column carries the row count."""
    aliases = {t.alias_or_name for t in query.find_all(exp.Table) if source_of(t) == identifier}
    names: dict[str, None] = {}
    for column in query.find_all(exp.Column):
        if column.table in aliases:
            if isinstance(column.this, exp.Star):
                if not star:
                    raise EngineRefusedError(f"{column.table}.* over an unchanged table")
                return tuple(f.name for f in schema.fields)
            names[column.name] = None
    return tuple(names) or (schema.fields[0].name,)


def _types(schema: pa.Schema) -> dict[str, SparkType]:
    return {f.name: of_arrow(f.type) for f in schema}


def hold_tables(
    held: Sequence[Held],
    executor: DuckDBExecutor,
    cache: AppendedRowsCache,
    delta: dict[Identifier, str],
    query: exp.Query,
    max_bytes: int,
) -> dict[tuple[Identifier, int | None], str]:
    """Each of `held` read at its snapshot, whole or restricted to the values of the delta
    relations `delta` (or of tables read before it; K of `query` for a keyed delta), as a
    relation of `executor` (or EngineRefusedError: more than `max_bytes`; equality
    deletes on a DOUBLE column)."""
    relations: dict[tuple[Identifier, int | None], str] = {}
    keys: tuple[list[object], bool] | None = None
    for table in held:
        restriction = table.restriction
        if restriction is None:
            rows = table.read(cache)
        elif restriction.keyed:
            keys = keys or _keys(executor, delta, query)
            rows = table.matching(*keys)
            cache.count_restricted(rows.num_rows)
        else:
            values: dict[object, None] = {}
            for partner in restriction.partners:
                relation = delta.get(partner.source) or next(
                    name for (i, _), name in relations.items() if i == partner.source
                )
                values.update(dict.fromkeys(_distinct(executor, relation, partner.column)))
            values.pop(None, None)
            rows = table.matching(list(values), False)
            cache.count_restricted(rows.num_rows)
        if rows.nbytes > max_bytes:
            raise EngineRefusedError(
                f"{table.identifier}: {_mib(rows.nbytes)} read > {_mib(max_bytes)} "
                "(refresh.embedded_join_max_bytes)"
            )
        relations[table.identifier, table.snapshot_id] = executor.add_rows("held", rows)
    return relations


def _keys(
    executor: DuckDBExecutor, delta: dict[Identifier, str], query: exp.Query
) -> tuple[list[object], bool]:
    """K's values (a keyed delta's touched keys, sql/delta.py) and whether it holds
    NULL."""
    inputs = DeltaInputs(catalog="", delta_views=delta, old={}, new={})
    touched = touched_keys_query(query, inputs)
    if touched is None:
        return [], False
    subquery = exp.Subquery(this=touched, alias=exp.TableAlias(this=exp.to_identifier("k")))
    distinct = exp.select(exp.column(KEY, quoted=True)).distinct().from_(subquery)
    found = executor.collect(distinct, 2**62)
    assert found is not None
    values = found.column(0).to_pylist()
    return [v for v in values if v is not None], None in values


def _distinct(executor: DuckDBExecutor, relation: str, column: str) -> list[object]:
    """The distinct values of `column` in a relation of `executor`."""
    query = (
        exp.select(exp.column(column, quoted=True))
        .distinct()
        .from_(exp.Table(this=exp.to_identifier(relation, quoted=True)))
    )
    found = executor.collect(query, 2**62)
    assert found is not None
    values: list[object] = found.column(0).to_pylist()
    return values


def _mib(size: int) -> str:
    return f"{size / 2**20:.1f} MiB"
