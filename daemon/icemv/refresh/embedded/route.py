"""Which executor computes a refresh's delta, decided at plan time, in one place.

The embedded engine (DuckDB on the driver, refresh/embedded/executor.py) takes a small
change: each moved source's change rows read with pyiceberg (appended rows, shared
across MVs; or the signed rows of a range with deletes, refresh/embedded/changes.py,
while each read scans at most `refresh.embedded_read_max_rows` rows, estimated from the
manifests, and at most `refresh.embedded_max_rows` rows changed in all), and every other
table the view reads read at its pinned snapshot, whole or restricted to the keys the
delta can meet, within the join limits (refresh/embedded/held.py). Where the trees read a
moved table itself (a keyed delta's restricted reads at the old and new snapshots,
groups recomputed from the sources, a self-join's terms, and the terms of the other
moved sources, which read it at its new snapshot before their own occurrence and at its
old one after: sql/delta.py), it is read at both ends too, within the same limits.
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
from pyiceberg.table import Table
from sqlglot import exp

from icemv.errors import EngineRefusedError, SparkUnavailableError
from icemv.identifiers import Identifier
from icemv.lakehouse import Lakehouse
from icemv.refresh.changes.classify import SourceChange
from icemv.refresh.changes.manifests import touched_files
from icemv.refresh.cost import embedded_scan_rows
from icemv.refresh.embedded.changes import KeptRows, changed_rows
from icemv.refresh.embedded.executor import DuckDBExecutor
from icemv.refresh.embedded.held import Held, held_tables, hold_tables
from icemv.refresh.embedded.reads import (
    AppendedRowsCache,
    appended_change_rows,
)
from icemv.refresh.plan import IncrementalPlan
from icemv.sql.analysis import AggregateAnalysis
from icemv.sql.columns import source_of
from icemv.sql.memo import Memo
from icemv.sql.names import WEIGHT, argument_column, key_column
from icemv.sql.net import Identity, netted
from icemv.sql.portable import to_duckdb
from icemv.sql.spark_types import SparkType


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
            rows = appended_change_rows(self.source, self.change, cache)
            return executor.add_rows("delta", rows), rows.num_rows, rows.num_rows
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
        """Each table the trees read at a snapshot as a relation of `executor`
        (refresh/embedded/held.py), given the change rows' relations `delta`."""
        return hold_tables(self.held, executor, cache, delta, self.query, self.held_max_bytes)


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
        held, relations = held_tables(plan, whole, settings)
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


# The route's gate answers (None: portable, else why not) by what they are a function
# of: the view's SQL, the namespace and catalog its names resolve in, the kind of
# analysis, and each table occurrence's column types (from which the analysis expands and
# types its tree). Only
# an early answer: every tree the executor runs passes the gate again (embedded/executor.py).
_verdicts: Memo[tuple[str | None]] = Memo(2048)


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
