"""Which executor computes a refresh's delta, decided at plan time, in one place.

The embedded engine (DuckDB on the driver, refresh/embedded/executor.py) takes a small
change: each moved source's change rows read with pyiceberg (appended rows, shared
across MVs; or the signed rows of a range with deletes, refresh/embedded/changes.py,
while each read scans at most `refresh.embedded_read_max_rows` rows, estimated from the
manifests, and at most `refresh.embedded_max_rows` rows changed in all), and every other
table the view reads read whole at its pinned snapshot (at most
`refresh.embedded_join_max_rows` rows each, shared across MVs). Where the trees read a
moved table itself (a keyed delta's restricted reads at the old and new snapshots,
groups recomputed from the sources, a self-join's terms, and the terms of the other
moved sources, which read it at its new snapshot before their own occurrence and at its
old one after: sql/delta.py), it is read whole at both ends too, within the same limit.
The view's expressions must pass the portability gate (sql/portable/) over those tables'
types. The same delta and merge trees then run as on Spark (sql/delta.py,
refresh/patch/), in the Spark session's time zone. A Spark session in ANSI mode (however
it was set: engine/semantics.py) sends every delta to Spark: there an overflow, an
invalid cast or a division by zero fails the refresh, where DuckDB as configured here
would answer. A top-N view's reach test runs here too, over the stored rows held whole
(patch/top_n.py). Anything else goes to Spark, and the refusal's reason is reported with
the refresh (`engine=spark`, `engine_reason`); so does any refusal met while running
(more rows than the limits, a construct the gate refuses in a merge tree, a DuckDB error
such as an overflow Spark would wrap).
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from sqlglot import exp

from icemv.config import RefreshConfig
from icemv.errors import EngineRefusedError, SparkUnavailableError
from icemv.format.summary import TOTAL_RECORDS, summary_of
from icemv.identifiers import Identifier
from icemv.lakehouse import Lakehouse
from icemv.refresh.changes.classify import SourceChange
from icemv.refresh.changes.manifests import touched_files
from icemv.refresh.cost import embedded_scan_rows
from icemv.refresh.embedded.changes import KeptRows, changed_rows
from icemv.refresh.embedded.executor import DuckDBExecutor
from icemv.refresh.embedded.reads import (
    AppendedRowsCache,
    appended_rows,
    arrow_width,
    matching_rows,
    read_schema,
    table_rows,
)
from icemv.refresh.embedded.restrict import Restriction, keyed_restrictions, term_restrictions
from icemv.refresh.patch.touched_keys import field_named, iceberg_family
from icemv.refresh.plan import IncrementalPlan
from icemv.sql.analysis import AggregateAnalysis
from icemv.sql.columns import source_of
from icemv.sql.delta import DeltaInputs, touched_keys_query
from icemv.sql.keys import KEY_META
from icemv.sql.memo import Memo
from icemv.sql.names import KEY, WEIGHT, argument_column, key_column
from icemv.sql.net import Identity, netted
from icemv.sql.portable import to_duckdb
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


@dataclass(frozen=True)
class SourceRead:
    """The change rows of one moved source the embedded engine reads."""

    identifier: Identifier
    change: SourceChange
    source: Table
    columns: tuple[str, ...] | None  # read of a range with deletes; None: all
    # A view of the changed table alone: its WHERE (over `alias`), applied to each file
    # a range with deletes reads, before the rewrite diff.
    where: exp.Expr | None
    alias: str

    def read(
        self, executor: DuckDBExecutor, cache: AppendedRowsCache, max_rows: int, time_zone: str
    ) -> tuple[str, int, int]:
        """The change rows (source columns and WEIGHT) as a relation of `executor`, the
        source rows read for them and the change rows; EngineRefusedError past `max_rows`
        change rows."""
        if self.change.kind == "append-only":
            rows = appended_rows(self.source, self.change, cache)
            ones = pa.repeat(pa.scalar(1, pa.int32()), rows.num_rows)
            weighted = rows.append_column(pa.field(WEIGHT, pa.int32(), nullable=False), ones)
            return executor.add_rows("delta", weighted), rows.num_rows, rows.num_rows
        keep = self._kept(executor, time_zone) if self.where is not None else None
        changed = changed_rows(self.source, self.change, self.columns, max_rows, keep, cache)
        raw = executor.add_rows("changes", changed.rows)
        identities: list[tuple[str, Identity]] = [
            (f.name, "float" if pa.types.is_floating(f.type) else
             "complex" if f.type.num_fields > 0 else "value")
            for f in changed.rows.schema
            if f.name != WEIGHT
        ]  # fmt: skip
        table = exp.Table(this=exp.to_identifier(raw, quoted=True))
        relation = executor.register("delta", netted(table, identities))
        return relation, changed.rows_read, changed.rows.num_rows

    def _kept(self, executor: DuckDBExecutor, time_zone: str) -> KeptRows:
        """The rows of one file the view's WHERE keeps (filtering keeps their order), and
        what decides them: the WHERE, the alias it reads the rows by, the session zone."""
        where = self.where
        assert where is not None
        key = (where.sql(dialect="spark"), self.alias, time_zone)

        def kept(rows: pa.Table) -> pa.Table:
            name = executor.add_rows("file", rows)
            try:
                relation = exp.Table(
                    this=exp.to_identifier(name, quoted=True),
                    alias=exp.TableAlias(this=exp.to_identifier(self.alias, quoted=True)),
                )
                query = exp.select(exp.Star()).from_(relation).where(where.copy())
                found = executor.collect(query, rows.num_rows)
                assert found is not None
                return found
            finally:
                executor.forget(name)

        return KeptRows(kept, key)


@dataclass(frozen=True)
class EmbeddedRoute:
    """A refresh whose delta DuckDB computes: what to read, and the limits."""

    reads: tuple[SourceRead, ...]  # one per moved source
    held: tuple[Held, ...]  # those read whole first, then the restricted in order
    max_rows: int  # change rows (all sources together) the patch may come from
    held_max_bytes: int  # what one held table may take in Arrow
    query: exp.Query  # the view's, its occurrences tagged (K of a keyed delta)
    threads: int
    memory_limit: str
    time_zone: str

    def executor(self) -> DuckDBExecutor:
        return DuckDBExecutor(self.threads, self.memory_limit, self.time_zone)

    def read(
        self, executor: DuckDBExecutor, cache: AppendedRowsCache
    ) -> tuple[dict[Identifier, str], int]:
        """Each moved source's change rows as a relation of `executor`, and the source
        rows read for them. The sources' changes share `max_rows`."""
        relations: dict[Identifier, str] = {}
        read, left = 0, self.max_rows
        for source in self.reads:
            relation, rows, changed = source.read(executor, cache, left, self.time_zone)
            relations[source.identifier] = relation
            read += rows
            left -= changed
            if left < 0:
                raise EngineRefusedError(
                    f"the sources' changes pass {self.max_rows} rows "
                    "(refresh.embedded_max_rows, driver_commit_max_rows)"
                )
        return relations, read

    def hold(
        self, executor: DuckDBExecutor, cache: AppendedRowsCache, delta: dict[Identifier, str]
    ) -> dict[tuple[Identifier, int | None], str]:
        """Each table read at a snapshot, whole or restricted to the values of the delta
        relations `delta` (or of tables read before it), as a relation (or
        EngineRefusedError: more than `held_max_bytes`; equality deletes on a DOUBLE
        column)."""
        relations: dict[tuple[Identifier, int | None], str] = {}
        keys: tuple[list[object], bool] | None = None
        for held in self.held:
            restriction = held.restriction
            if restriction is None:
                rows = held.read(cache)
            elif restriction.keyed:
                keys = keys or self._keys(executor, delta)
                rows = held.matching(*keys)
                cache.count_restricted(rows.num_rows)
            else:
                values: dict[object, None] = {}
                for partner in restriction.partners:
                    relation = delta.get(partner.source) or next(
                        name for (i, _), name in relations.items() if i == partner.source
                    )
                    values.update(dict.fromkeys(_distinct(executor, relation, partner.column)))
                values.pop(None, None)
                rows = held.matching(list(values), False)
                cache.count_restricted(rows.num_rows)
            if rows.nbytes > self.held_max_bytes:
                raise EngineRefusedError(
                    f"{held.identifier}: {_mib(rows.nbytes)} read > {_mib(self.held_max_bytes)} "
                    "(refresh.embedded_join_max_bytes)"
                )
            relations[held.identifier, held.snapshot_id] = executor.add_rows("held", rows)
        return relations

    def _keys(self, executor: DuckDBExecutor, delta: dict[Identifier, str]) -> tuple[
        list[object], bool
    ]:  # fmt: skip
        """K's values (a keyed delta's touched keys, sql/delta.py) and whether it holds
        NULL."""
        inputs = DeltaInputs(catalog="", delta_views=delta, old={}, new={})
        touched = touched_keys_query(self.query, inputs)
        if touched is None:
            return [], False
        subquery = exp.Subquery(this=touched, alias=exp.TableAlias(this=exp.to_identifier("k")))
        query = exp.select(exp.column(KEY, quoted=True)).distinct().from_(subquery)
        found = executor.collect(query, 2**62)
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


def choose_route(plan: IncrementalPlan, lakehouse: Lakehouse) -> EmbeddedRoute | str:
    """The embedded route of this refresh's delta, or why Spark computes it."""
    settings = lakehouse.config.refresh
    try:
        semantics = lakehouse.semantics
    except SparkUnavailableError:
        return "the Spark session's settings (ANSI mode, time zone) are not known here"
    if semantics.ansi:
        return (
            "spark.sql.ansi.enabled is true in the Spark session: Spark fails on overflow, "
            "invalid casts and division by zero, DuckDB would not"
        )
    max_rows = min(settings.embedded_max_rows, settings.driver_commit_max_rows)
    if max_rows <= 0:
        return "embedded engine off (refresh.embedded_max_rows or driver_commit_max_rows is 0)"
    appended = sum(c.changed_records for c in plan.moved.values() if c.kind == "append-only")
    if appended > max_rows:
        return (
            f"{appended} changed rows > {max_rows} "
            "(refresh.embedded_max_rows, driver_commit_max_rows)"
        )
    base = plan.base
    recomputes = plan.may_recompute_groups  # the sources held at both snapshots
    reads: list[SourceRead] = []
    for identifier, change in plan.moved.items():
        source = base.reads.load_table(identifier)
        if change.kind != "append-only":  # the rows that changed are known once read
            scanned = _scan_refusal(source, change, settings.embedded_read_max_rows)
            if scanned is not None:
                return scanned
        where, alias = _file_filter(plan, identifier)
        columns = plan.change_read(identifier).columns
        reads.append(SourceRead(identifier, change, source, columns, where, alias))
    try:
        whole = plan.keyed or recomputes or len(plan.moved) > 1 or _self_joined(plan)
        held, relations = _held(plan, whole, settings)
        _gate(plan, relations)
    except EngineRefusedError as why:
        return str(why)
    return EmbeddedRoute(
        reads=tuple(reads),
        held=tuple(held),
        max_rows=max_rows,
        held_max_bytes=settings.embedded_join_max_bytes,
        query=plan.analysis.query,
        threads=settings.duckdb_threads,
        memory_limit=settings.duckdb_memory_limit,
        time_zone=semantics.time_zone,
    )


def _self_joined(plan: IncrementalPlan) -> bool:
    """Whether one SELECT reads a moved source twice (its terms read it at its snapshots)."""
    for select in plan.analysis.query.find_all(exp.Select):
        own = [source_of(t) for t in select.find_all(exp.Table) if t.parent_select is select]
        if any(own.count(moved) > 1 for moved in plan.moved):
            return True
    return False


def _held(
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
        table.alias_or_name: _types(schemas[source_of(table)].as_arrow())
        for table in query.find_all(exp.Table)
    }
    return held, relations


def _restrictions(
    plan: IncrementalPlan,
    whole: bool,
    pins: dict[Identifier, tuple[int | None, ...]],
    schemas: dict[Identifier, Schema],
) -> dict[Identifier, Restriction]:
    """The held tables the delta allows to read restricted (refresh/embedded/restrict.py)."""
    query = plan.analysis.query
    if plan.may_recompute_groups:  # recomputing groups reads the sources unrestricted
        return {}
    if plan.keyed:
        families = {
            iceberg_family(field.field_type) if field is not None else None
            for table in query.find_all(exp.Table)
            if source_of(table) in plan.moved and KEY_META in table.meta
            for field in [field_named(schemas[source_of(table)], str(table.meta[KEY_META]))]
        }
        family = families.pop() if len(families) == 1 else None
        return keyed_restrictions(query, plan.moved, pins, schemas, family)
    if whole or len(plan.moved) != 1:
        return {}
    (moved,) = plan.moved
    if sum(source_of(t) == moved for t in query.find_all(exp.Table)) != 1:
        return {}
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


# The route's gate answers (None: portable, else why not) by what they are a function
# of: the view's SQL, the namespace and catalog its names resolve in, the kind of
# analysis, and each table occurrence's column types (from which the analysis expands and
# types its tree). Only
# an early answer: every tree the executor runs passes the gate again (exec/duckdb.py).
_verdicts: Memo[tuple[str | None]] = Memo(1024)


def _gate(plan: IncrementalPlan, relations: dict[str, dict[str, SparkType]]) -> None:
    """The view's expressions through the portability gate (kept per process, see
    `_verdicts`): raises EngineRefusedError."""
    key = (
        plan.base.mv.sql,
        plan.base.namespace,
        plan.base.reads.catalog_name,
        type(plan.analysis),
        tuple((alias, tuple(types.items())) for alias, types in sorted(relations.items())),
    )
    kept = _verdicts.get(key)
    if kept is None:
        try:
            _gated(plan, relations)
            kept = (None,)
        except EngineRefusedError as why:
            kept = (str(why),)
        _verdicts.put(key, kept)
    if kept[0] is not None:
        raise EngineRefusedError(kept[0])


def _gated(plan: IncrementalPlan, relations: dict[str, dict[str, SparkType]]) -> None:
    """The view's expressions through the portability gate, each table occurrence read as
    a relation named by its alias: the projection, WHERE and joins of a rows view; the
    group keys and aggregate arguments of an aggregate (its merge trees are icemv's own,
    gated when they run), whose keys must not be floating point."""
    query = plan.analysis.query.copy()
    for table in list(query.find_all(exp.Table)):
        table.replace(
            exp.Table(
                this=exp.to_identifier(table.alias_or_name, quoted=True),
                alias=exp.TableAlias(this=exp.to_identifier(table.alias_or_name, quoted=True)),
            )
        )
    analysis = plan.analysis
    if not isinstance(analysis, AggregateAnalysis):
        to_duckdb(query, relations)
        return
    assert isinstance(query, exp.Select)
    keys = [exp.alias_(k.expression.copy(), key_column(i), quoted=True)
            for i, k in enumerate(analysis.keys)]  # fmt: skip
    arguments = [
        exp.alias_(a.argument.copy(), argument_column(i), quoted=True)
        for i, a in enumerate(analysis.aggregates)
        if a.argument is not None
    ]
    query.set("expressions", [*keys, *arguments] or [exp.alias_(exp.true(), "any")])
    query.set("group", None)
    query.set("having", None)
    portable = to_duckdb(query, relations)
    for name, kind in portable.columns[: len(keys)]:
        if kind.floating or kind.kind == "complex":
            raise EngineRefusedError(f"a {kind.describe()} group key ({name})")


def _file_filter(plan: IncrementalPlan, identifier: Identifier) -> tuple[exp.Expr | None, str]:
    """A one-table view's WHERE and its table's alias (filtering each file read is the
    filter of the rows read); None for a view of several tables, or one whose WHERE is
    over a CTE or derived table (its names are the inner query's outputs, not the
    table's columns: `WITH c AS (SELECT x AS day FROM f) ... WHERE day > 5`)."""
    query = plan.analysis.query
    tables = list(query.find_all(exp.Table))
    where = query.args.get("where") if isinstance(query, exp.Select) else None
    if len(tables) != 1 or where is None or source_of(tables[0]) != identifier:
        return None, ""
    if tables[0].parent_select is not query:
        return None, ""
    return where.this.copy(), tables[0].alias_or_name


def _scan_refusal(source: Table, change: SourceChange, read_max_rows: int) -> str | None:
    """Why the read of a range with deletes would scan too much (its estimate from the
    range's manifests), or None."""
    touched = touched_files(source, change)
    if touched.equality_delete_records and touched.equality_scan_records is None:
        return f"{change.identifier}: an equality delete not pushed down"
    rows, hit = embedded_scan_rows(touched)
    if rows + hit > read_max_rows:
        return (
            f"the change read scans ~{rows + hit} rows > {read_max_rows} "
            "(refresh.embedded_read_max_rows)"
        )
    return None
