"""A patch addressed by key, like an aggregate MV's storage rows (one per group).

Matched storage rows are deleted or updated, unmatched source rows inserted: a Spark
MERGE, or, when the storage table is small, the whole new storage content computed by
one Spark query and committed from the driver. Either way the counts of what the patch
does are known before the commit, so that they go into it.

Why exact: the source rows are unique by the match keys (one per touched group or key),
so each storage row matches at most one source row, and every stored row whose key the
delta touches is matched: MERGE and the driver rewrite then leave exactly the untouched
rows, the updated ones and the inserted ones. The driver rewrite reads the storage at the
planned snapshot (or the files the executor holds: those whose bounds admit the keys), and
the commit asserts the storage has not moved since.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from icemv.refresh.exec import Executor
from icemv.refresh.patch.model import DriverPatch, PatchTarget, SparkPatch
from icemv.refresh.patch.sqltree import (
    aliased,
    case,
    coalesce,
    col,
    if_,
    join,
    merge_into,
    num,
    paren,
    render,
    subquery,
    text,
    view,
    when_matched_delete,
    when_matched_update,
    when_not_matched_insert,
)
from icemv.sql.portable import tree_key

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

HERE = "__icemv_here"  # set on every storage row
HIT = "__icemv_hit"  # set on every source row
STATUS = "__icemv_status"
SUSPECT = "__icemv_suspect"
LET = "__icemv_let"  # the table name a let is read by (KeyedMerge.lets)


def let(name: str) -> exp.Column:
    """A let of the joined storage and source row, by name (see KeyedMerge.lets)."""
    return col(name, LET)


def without_stored(value: exp.Expr) -> exp.Expr:
    """`value` for a source row that matches no storage row: every `t` column NULL (a
    MERGE's INSERT clause cannot name the target row)."""

    def stored_to_null(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Column) and node.table == "t":
            return exp.null()
        return node

    return value.transform(stored_to_null)  # a copy


@dataclass(frozen=True)
class Counts:
    inserted: int
    deleted: int
    updated: int
    suspect: bool  # some updated row needs recomputing from the base tables

    @property
    def rows_inserted(self) -> int:  # an updated row counts once as inserted...
        return self.inserted + self.updated

    @property
    def rows_deleted(self) -> int:  # ...and once as deleted
        return self.deleted + self.updated


@dataclass(frozen=True)
class KeyedMerge:
    """What the patch does, as expressions over the storage row `t` and source row `s`.

    Every expression is copied where it is used: a sqlglot node belongs to one tree.

    `lets` name values of the joined row (over `t` and `s`, and the lets before them)
    that the other expressions read as `let(name)`, several times each (an AVG's merged
    sum and count, read by its quotient, the quotient by its value and its half-way
    test). The driver rewrite computes each once per row, in a SELECT under the ones that
    read it; MERGE and its counts write them out in place. Both mean the same: a let
    reads the row it is used in, `t` NULL where no storage row matched, so an INSERT's let
    is the let without the stored row.
    """

    # The temp view of the source rows, or (the driver rewrite only) their query, which
    # the content then reads in the same statement.
    source: str | exp.Query
    on: exp.Expr
    outputs: Sequence[str]
    updates: Mapping[str, exp.Expr]  # column -> its new value in a matched row
    inserts: Sequence[exp.Expr]  # the value of each output column in an inserted row
    delete_when: exp.Expr  # matched rows to delete
    insert_when: exp.Expr  # unmatched source rows to insert
    lets: Mapping[str, exp.Expr] = field(default_factory=dict)

    def inlined(self, expression: exp.Expr, stored: bool = True) -> exp.Expr:
        """A copy of `expression` with each let written out (`stored` False: in an
        INSERT, which has no storage row)."""

        def each(node: exp.Expr) -> exp.Expr:
            if isinstance(node, exp.Column) and node.table == LET:
                value = self.lets[node.name]
                value = value.copy() if stored else without_stored(value)
                # A tree built here has no precedence but its Paren nodes.
                return paren(value.transform(each, copy=False))  # the lets it reads
            return node

        return expression.copy().transform(each)

    def merge(self, spark: SparkSession, target: str) -> None:
        whens = []
        if self.delete_when != exp.false():
            whens.append(when_matched_delete(self.inlined(self.delete_when)))
        if self.updates:
            updates = [(c, self.inlined(v)) for c, v in self.updates.items()]
            whens.append(when_matched_update(updates))
        whens.append(
            when_not_matched_insert(
                self.inlined(self.insert_when, stored=False),
                self.outputs,
                [self.inlined(v, stored=False) for v in self.inserts],
            )
        )
        source = view(self.named_source(), "s")
        spark.sql(render(merge_into(target, source, self.on.copy(), whens)))

    def named_source(self) -> str:
        """The temp view of the source rows (MERGE reads one)."""
        if not isinstance(self.source, str):
            raise ValueError("MERGE and its counts read the source rows from a temp view")
        return self.source

    def _storage(self, target: PatchTarget, coalesce_to_one: bool = False) -> exp.Subquery:
        """The planned storage rows, each flagged `HERE`, as `t`."""
        rows = exp.select(exp.Star(), aliased(exp.true(), HERE)).from_(
            target.at_plan("p"), copy=False
        )
        if coalesce_to_one:
            rows.set("hint", exp.Hint(expressions=[exp.Coalesce(this=num(1))]))
        return subquery(rows, "t")

    def counts(
        self, spark: SparkSession, target: PatchTarget, suspect: exp.Expr | None = None
    ) -> Counts:
        """What the MERGE will do, counted before it runs (one Spark job)."""
        here = col(HERE, "t")
        delete_when = self.inlined(self.delete_when)
        kept = exp.and_(here.copy(), exp.Not(this=paren(delete_when.copy())))
        query = (
            exp.select(
                exp.CountIf(this=exp.and_(exp.Is(this=here.copy(), expression=exp.null()),
                                          self.inlined(self.insert_when))),
                exp.CountIf(this=exp.and_(here.copy(), paren(delete_when))),
                exp.CountIf(this=kept.copy()),
                exp.CountIf(this=exp.and_(kept, paren(self.inlined(suspect or exp.false())))),
            )
            .from_(view(self.named_source(), "s"), copy=False)
            .join(join(self._storage(target), self.on.copy(), "LEFT"), copy=False)
        )  # fmt: skip
        stats = spark.sql(render(query)).first()
        if stats is None:  # an aggregate without GROUP BY always has one row
            raise RuntimeError("the patch statistics query returned no row")
        return Counts(int(stats[0]), int(stats[1]), int(stats[2]), bool(stats[3]))

    def content(self, target: PatchTarget, suspect: exp.Expr) -> exp.Query:
        """Every storage row after the patch, with its fate, as MERGE would leave them.

        Only for storage small enough for the driver: one partition of it joins a small
        delta without a shuffle. `suspect` flags updated rows whose new value cannot be
        trusted (see callers).
        """
        new_row = exp.Is(this=col(HERE, "t"), expression=exp.null())
        untouched = exp.Is(this=col(HIT, "s"), expression=exp.null())
        values = [
            aliased(self._value(c, insert, new_row, untouched), c)
            for c, insert in zip(self.outputs, self.inserts, strict=True)
        ]
        fates: list[tuple[exp.Expr, exp.Expr]] = [
            (new_row.copy(), if_(self.insert_when.copy(), text("inserted"), text("skipped"))),
            (untouched.copy(), text("kept")),
        ]
        if self.delete_when != exp.false():  # a WHEN FALSE branch is never taken
            fates.append((self.delete_when.copy(), text("deleted")))
        status = case(*fates, default=text("updated"))
        suspect_row = exp.and_(
            col(HERE, "t"),
            col(HIT, "s"),
            exp.Not(this=paren(self.delete_when.copy())),
            paren(suspect.copy()),
        )
        rows = view(self.source) if isinstance(self.source, str) else subquery(
            self.source.copy(), "d"
        )  # fmt: skip
        source = exp.select(exp.Star(), aliased(exp.true(), HIT)).from_(rows, copy=False)
        row = [
            *values,
            aliased(status, STATUS),
            aliased(coalesce(suspect_row, exp.false()), SUSPECT),
        ]

        def joined(*projections: exp.Expr) -> exp.Select:
            return (
                exp.select(*projections)
                .from_(self._storage(target, coalesce_to_one=True), copy=False)
                .join(join(subquery(source, "s"), self.on.copy(), "FULL", "OUTER"), copy=False)
            )

        return _over_lets(row, self.lets, joined) if self.lets else joined(*row)

    def _value(
        self, column: str, insert: exp.Expr, new_row: exp.Expr, untouched: exp.Expr
    ) -> exp.Expr:
        """`column` after the patch: `insert` in a new row, the stored value in a row the
        delta does not touch, the update in the others.

        Written with fewer branches where two of them mean the same, which changes no
        value (a smaller statement is planned faster: DuckDB's binding and optimizing
        grow with its text). A column no update sets keeps its stored value in every
        stored row, touched or not. And where the insert is the update with every
        stored column NULL (`without_stored`, as an aggregate's merged values are), the
        update also serves new rows: in a new row every stored column is NULL (the
        FULL OUTER JOIN found no storage row: `HERE`, set on every one, is NULL), so
        the update reads exactly what the insert reads there.
        """
        stored = col(column, "t")
        update = self.updates.get(column)
        if update is None:
            return case((new_row.copy(), insert.copy()), default=stored)
        if without_stored(update) == insert:
            return case((untouched.copy(), stored), default=update.copy())
        return case(
            (new_row.copy(), insert.copy()), (untouched.copy(), stored), default=update.copy()
        )


def _over_lets(
    row: Sequence[exp.Expr],
    lets: Mapping[str, exp.Expr],
    joined: Callable[..., exp.Select],
) -> exp.Select:
    """`row` over the join, with each let computed once per joined row by a SELECT under
    it: the lets that read no let in the SELECT over the join, which also names every `t`
    and `s` column read above it (`__icemv_t_<name>`, `__icemv_s_<name>`: the two sides
    may share names), each further let in a SELECT of its own depth over it (all `j`)."""
    layers: list[dict[str, exp.Expr]] = []
    depth: dict[str, int] = {}
    for name, value in lets.items():  # a let reads only lets before it
        read = [depth[c.name] + 1 for c in value.find_all(exp.Column) if c.table == LET]
        depth[name] = max(read, default=0)
        if depth[name] == len(layers):
            layers.append({})
        layers[depth[name]][name] = value.copy()
    lifted_columns: dict[str, exp.Expr] = {}

    def lifted(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Column) and node.table in ("t", "s"):
            name = f"__icemv_{node.table}_{node.name}"
            lifted_columns.setdefault(name, col(node.name, node.table))
            return col(name, "j")
        if isinstance(node, exp.Column) and node.table == LET:
            return col(node.name, "j")
        return node

    for layer in layers[1:]:  # their own new trees: lifted in place
        for name, value in layer.items():
            layer[name] = value.transform(lifted, copy=False)
    # The row's expressions are the caller's own new trees: lifted in place, not copied.
    above = [expression.transform(lifted, copy=False) for expression in row]
    below = {**layers[0], **lifted_columns}
    query = joined(*[aliased(value, name) for name, value in below.items()])
    for layer in layers[1:]:
        values = [aliased(value, name) for name, value in layer.items()]
        query = exp.select(exp.Star(), *values).from_(subquery(query, "j"), copy=False)
    return exp.select(*above).from_(subquery(query, "j"), copy=False)


@dataclass(frozen=True)
class Rewrite:
    patch: DriverPatch
    suspect: bool  # some updated row needs recomputing from the base tables


def rewrite_from_driver(
    views: Executor,
    spec: KeyedMerge,
    target: PatchTarget,
    suspect: exp.Expr | None = None,
    key: Hashable | None = None,
) -> Rewrite | None:
    """The patched storage content (of the whole table, or of the rows the executor
    holds), collected; None if it is too big for the driver. `key`: what `spec` (but its
    source's name) and `suspect` are a function of, exactly (see Executor); with the
    source's name and the storage's relation it keys the content tree."""
    if not target.rewritable_from_driver:
        return None
    content_key = None
    if key is not None:  # a source query is a function of `key`
        source = spec.source if isinstance(spec.source, str) else "query"
        content_key = ("content", key, source, tree_key(target.at_plan("p")))
    content = views.collect(
        lambda: spec.content(target, suspect or exp.false()), target.driver_max_rows, content_key
    )
    if content is None:
        return None
    status = content[STATUS]

    def count(state: str) -> int:
        return int(pc.sum(pc.equal(status, state)).as_py() or 0)

    counts = Counts(
        count("inserted"), count("deleted"), count("updated"),
        bool(pc.any(content[SUSPECT]).as_py()),
    )  # fmt: skip
    outputs = list(range(len(spec.outputs)))
    if not (counts.inserted or counts.deleted or counts.updated):  # every row kept: the
        # files stay (rewriting them would write the rows they hold), nothing is added
        return Rewrite(DriverPatch(0, 0, content.select(outputs).slice(0, 0)), counts.suspect)
    kept = content.filter(pc.is_in(status, pa.array(["kept", "updated", "inserted"])))
    patch = DriverPatch(
        counts.rows_inserted,
        counts.rows_deleted,
        kept.select(outputs),
        tuple(target.live_data_files()),
    )
    return Rewrite(patch, counts.suspect)


def spark_merge(spark: SparkSession, spec: KeyedMerge, counts: Counts | None) -> SparkPatch:
    """The MERGE as a Spark write; no counts: Iceberg's summary of the commit has them."""

    def merge(target: str) -> None:
        spec.merge(spark, target)

    if counts is None:
        return SparkPatch(None, None, merge)
    return SparkPatch(counts.rows_inserted, counts.rows_deleted, merge)
