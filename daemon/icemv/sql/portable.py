"""The portability gate: a Spark SQL tree DuckDB computes exactly as Spark 3.5 does, or why not.

The delta and merge trees the rules build (sql/delta.py, refresh/patch/) are Spark SQL. The
embedded engine (refresh/exec/duckdb.py) runs the same trees: this pass types every node
with Spark's types (sql/spark_types.py, DECIMAL by sql/decimals.py) over the relations
the engine holds, refuses exactly the constructs where the two engines differ, and renders
the rest as DuckDB SQL through sqlglot, with a cast to Spark's type wherever DuckDB would
type a value differently. What it refuses goes to Spark, with the reason as the refresh's
`engine_reason`. Every construct it admits is checked, value for value, against Spark by
the engine-comparison corpus (tests/test_engine_corpus.py).

Where the engines differ, and what the gate does about it:

- integer overflow: Spark wraps, DuckDB raises: admitted (a raise falls back to Spark);
  SUM of integers is BIGINT in Spark, HUGEINT in DuckDB: cast back (strictly: overflow
  raises).
- DECIMAL: `+`, `-` and `*` are exact in DuckDB at their natural scale (max(s1, s2), s1 +
  s2) or raise (overflow past 38 digits), and Spark computes the exact value and rounds it
  once, HALF_UP, to its result type (past precision 38 a smaller scale): the exact value
  cast to Spark's type is the same rounding (DuckDB's casts round half away from zero),
  and a value too large for it raises where Spark's is NULL. Refused: a natural scale past
  38. SUM's type is DECIMAL(p + 10, s) in Spark: cast. Division: DuckDB
  divides DECIMAL as DOUBLE, so it is rendered as integer arithmetic rounding the exact
  quotient half up to Spark's scale (`_decimal_division`). AVG of a DECIMAL is the tree
  Spark's Average evaluates, `CAST(SUM(x) / CAST(COUNT(x) AS DECIMAL(20, 0)) AS
  DECIMAL(p + 4, s + 4))`, rounded twice as there; over a window the same tree of
  windowed SUM and COUNT.
- division and `%` by zero: NULL in Spark; the connection is set so DuckDB agrees
  (`error_on_division_by_zero`, `ieee_floating_point_ops` off).
- time zones: TIMESTAMP is Spark's session-zone type: DuckDB's TIMESTAMPTZ, the
  connection's TimeZone set to Spark's session zone.
- -0.0 and NaN as keys: Spark normalises them in GROUP BY and DISTINCT, DuckDB keeps the
  first it sees: floating-point group keys and DISTINCT over them (COUNT(DISTINCT),
  SUM(DISTINCT) included) are refused.
- casts: Spark's CAST (non-ANSI) gives NULL or wraps where DuckDB's raises or rounds
  differently: every cast is rendered strict (a value that does not fit raises in DuckDB,
  and Spark computes it), so admitted are integers to integers, integers to DOUBLE and
  DECIMAL, DECIMAL to DECIMAL (fewer places round half up in both), DECIMAL to DOUBLE of
  at most 15 digits, TIMESTAMP to DATE and back, integers and dates to strings, ISO date
  and timestamp literals. An integer literal in DECIMAL arithmetic is typed by its digits,
  as Spark does. A string literal cast to a number has one value, computed at plan time
  as Spark does (sql/string_casts.py) and rendered as an exact literal.
- strings: CONCAT and `||` are NULL when an argument is (`||` in both); ordering is binary
  in both; LIKE only with a literal pattern without escapes; SUBSTR with literal positions
  from 1; UPPER and LOWER agree on ASCII only (Spark's upper('ß') is 'SS', DuckDB's 'ẞ'):
  other text raises in DuckDB. TRIM names its characters for DuckDB (a bare TRIM there also
  removes Unicode spaces such as U+00A0, Spark's only the ASCII space). sign(-0.0) is
  -0.0 in Spark: SIGN of integers only.
- NULL ordering: Spark puts NULLs first ascending and last descending; a window's ORDER
  BY is written out that way for DuckDB (sqlglot's dialects). Windows: ranks, LAG/LEAD and
  aggregates over the default frame; explicit frames refused. ORDER BY and LIMIT of a
  SELECT: refused.
- subqueries (EXISTS, IN, scalar; correlated or not) as the same SQL: EXISTS is two-valued
  in both, a scalar subquery of more than one row raises in both; `x IN (SELECT ...)` and
  `NOT (x IN (SELECT ...))` only where a WHERE tests its truth alone: under AND/OR, as a
  CASE/IF condition or branch (elsewhere Spark gives FALSE where SQL, and DuckDB, give
  NULL, and its optimiser moves NOTs: `_filters`).
- WITH: each CTE gated like a query (a column list renames its columns), its name hiding
  a relation's; recursive WITH refused.
- generators: `LATERAL VIEW explode(sequence(a, b))` (counting down when a > b, as Spark's
  does and DuckDB's series does not without a step) and `explode(array(x, ...))` of one
  type, each as an array of Spark's element type. OUTER, explode_outer (a row of NULLs
  for an empty or NULL array, which sqlglot's plain UNNEST drops) and posexplode
  (positions from 0, DuckDB's ordinality from 1) as lateral joins: `LEFT JOIN LATERAL
  (SELECT ... FROM UNNEST(...) WITH ORDINALITY) ON TRUE`.
- grouping sets: GROUPING SETS, ROLLUP and CUBE in the GROUP BY make the same groups in
  both, keys NULL where rolled up, except over no rows: DuckDB then makes the empty set's
  row (as SQL says), Spark none, so the gate adds `HAVING COUNT(*) > 0` (every other group
  has a row). GROUPING(x) is TINYINT in Spark (cast), GROUPING_ID() the same bits in both
  (the first grouping expression highest). WITH ROLLUP / WITH CUBE and nested sets
  refused.
- ANY_VALUE(x): Spark's is its First, NULLs included: DuckDB's FIRST (its ANY_VALUE skips
  NULLs). Which row's value neither engine defines; where the group decides it, both
  give it.
- functions: besides those above, the table of sql/functions.py (each argument's types
  and literals, Spark's result type, the DuckDB expression), proven per function on
  generated values; set operations other than UNION ALL, complex types, and functions
  in neither: refused.
Pure: sqlglot trees and types only (the answers kept per process, see `to_duckdb`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from sqlglot import exp

from icemv.sql import decimals
from icemv.sql.decimals import DecimalType
from icemv.sql.functions import DATE_LIKE, Function, function_of
from icemv.sql.memo import Memo
from icemv.sql.spark_types import (
    BIGINT,
    BOOLEAN,
    DATE,
    DOUBLE,
    INT,
    NULL,
    STRING,
    TIMESTAMP,
    TIMESTAMP_NTZ,
    TINYINT,
    SparkType,
    built,
    common,
    decimal_type,
    of_literal,
)
from icemv.sql.string_casts import cast_string_literal

Schema = Mapping[str, SparkType]  # a relation's columns, in order


class NotPortable(Exception):
    """Where DuckDB would not compute what Spark computes (the refresh's engine_reason)."""


@dataclass(frozen=True)
class Portable:
    sql: str  # DuckDB SQL
    columns: tuple[tuple[str, SparkType], ...]  # the output columns with Spark's types


# Kept per process: a fleet's MVs run a few trees each.
_answers: Memo[Portable | str] = Memo(1024)


def to_duckdb(query: exp.Query, relations: Mapping[str, Schema]) -> Portable:
    """`query` (Spark SQL over the named relations) as DuckDB SQL, or NotPortable.

    The answer is a function of the tree and the relations' types, so it is kept per
    process, keyed by both: a refresh builds the trees its MV's last refresh built (the
    executor names its relations alike each time). The tree's key is its whole structure
    (`tree_key`): every node's class and every argument, strings with their case. Two
    trees with one key are one tree to the gate, which reads nothing else of them
    (types it derives from `relations`, not from the nodes' annotations). The key costs
    a tenth of rendering the tree (0.26 against 2.1 ms for a fleet MV's trees)."""
    types = tuple((name, tuple(schema.items())) for name, schema in sorted(relations.items()))
    key: Any = (tree_key(query), types)
    try:
        kept = _answers.get(key)
    except TypeError:  # an argument that cannot be hashed: gate it, keep nothing
        key, kept = None, None
    if kept is None:
        try:
            rendered, columns = _Gate(relations).query(query)
            kept = Portable(rendered.sql(dialect="duckdb", copy=False), tuple(columns))
        except NotPortable as why:
            kept = str(why)
        if key is not None:
            _answers.put(key, kept)
    if isinstance(kept, str):
        raise NotPortable(kept)
    return kept


def tree_key(node: Any) -> Any:
    """A sqlglot tree as nested tuples, equal exactly when the trees are: each node's
    class and its arguments in order (unset ones left out), strings as they are. sqlglot's
    own `==` compares hashes, so it cannot be an exact key."""
    if isinstance(node, exp.Expr):
        return (
            type(node),
            *[
                (name, tree_key(value))
                for name, value in node.args.items()
                if value is not None and not (type(value) is list and not value)
            ],
        )
    if type(node) is list:
        return tuple([tree_key(value) for value in node])
    return node


def duckdb_type(spark: SparkType) -> exp.DataType:
    if spark.kind == "timestamp":
        return built("TIMESTAMPTZ", None)
    if spark.kind == "timestamp_ntz":
        return built("TIMESTAMP", None)
    return spark.build()


def _cast(node: exp.Expr, to: SparkType) -> exp.Cast:
    """A strict cast in DuckDB: a value that does not fit raises (and Spark computes it)."""
    return exp.Cast(this=node, to=duckdb_type(to))


def _rebuilt(node: exp.Expr, **children: Any) -> exp.Expr:
    """`node` anew with `children` set, its other arguments copied (no deep copy of what
    the gate renders anyway: a node belongs to one tree)."""
    args: dict[str, Any] = {}
    for key, value in node.args.items():
        if key in children:
            args[key] = children[key]
        elif isinstance(value, exp.Expr):
            args[key] = value.copy()
        elif isinstance(value, list):
            args[key] = [v.copy() if isinstance(v, exp.Expr) else v for v in value]
        else:
            args[key] = value
    for key, value in children.items():
        args.setdefault(key, value)
    return type(node)(**args)


def _text(node: exp.Expr) -> str:
    return node.sql(dialect="spark")[:80]


def _refuse(node: exp.Expr, why: str) -> NotPortable:
    return NotPortable(f"{why}: {_text(node)}")


_DATE_LITERAL = re.compile(r"\d{4}-\d{2}-\d{2}")
_TIMESTAMP_LITERAL = re.compile(r"\d{4}-\d{2}-\d{2}([ T]\d{2}:\d{2}:\d{2}(\.\d{1,6})?)?")
_TRUNC_UNITS = frozenset({"YEAR", "QUARTER", "MONTH", "WEEK", "DAY", "HOUR", "MINUTE", "SECOND"})
_PARTS = (exp.Year, exp.Quarter, exp.Month, exp.Day, exp.DayOfMonth, exp.Hour, exp.Minute,
          exp.Second)  # fmt: skip
# The last-digit test of sql/decimals.half_way (see `_half_way`).
_HALF_WAY_PATTERN = "5(E[-+]?[0-9]+)?$"
_SELECT_PARTS = frozenset({"expressions", "from_", "joins", "where", "group", "having",
                           "laterals", "hint", "distinct", "with_"})  # fmt: skip
_UNION_PARTS = frozenset({"this", "expression", "distinct", "with_"})


class _Scope:
    """The relations a SELECT reads, by alias: each column's Spark type; `parent`: the
    enclosing SELECT's, for a correlated subquery."""

    def __init__(self, parent: _Scope | None = None) -> None:
        self.relations: dict[str, dict[str, SparkType]] = {}
        self.parent = parent

    def add(self, alias: str, columns: Mapping[str, SparkType]) -> None:
        self.relations[alias] = dict(columns)

    def column(self, node: exp.Column) -> SparkType:
        if node.table:
            if node.table not in self.relations and self.parent is not None:
                return self.parent.column(node)  # an outer row's column
            found = self.relations.get(node.table, {}).get(node.name)
            if found is None:
                raise _refuse(node, "an unknown column")
            return found
        matches = [r[node.name] for r in self.relations.values() if node.name in r]
        if len(matches) != 1:
            raise _refuse(node, "an unknown or ambiguous column")
        return matches[0]

    def star(self, table: str | None) -> list[tuple[str, SparkType]]:
        picked = [self.relations[table]] if table else list(self.relations.values())
        return [item for relation in picked for item in relation.items()]


class _Gate:
    def __init__(self, relations: Mapping[str, Schema]) -> None:
        self.relations = relations
        # The CTEs in scope, innermost last: each WITH's names and their columns.
        self.ctes: list[dict[str, list[tuple[str, SparkType]]]] = []

    # -- queries -------------------------------------------------------------------------
    def query(
        self, node: exp.Expr, outer: _Scope | None = None
    ) -> tuple[exp.Expr, list[tuple[str, SparkType]]]:
        """The query rendered, and its columns; `outer`: the scope a subquery sits in."""
        if isinstance(node, exp.Subquery):
            inner, columns = self.query(node.this, outer)
            return _rebuilt(node, this=inner), columns
        if isinstance(node, exp.Union) and not node.args.get("distinct"):
            extra = sorted(k for k, v in node.args.items() if v and k not in _UNION_PARTS)
            if extra:
                raise _refuse(node, f"UNION ALL with {', '.join(extra)} (Spark only)")
            body: Callable[[], tuple[exp.Expr, list[tuple[str, SparkType]]]] = partial(
                self._union, node, outer
            )
        elif isinstance(node, exp.Select):
            body = partial(self._select, node, outer)
        else:
            raise _refuse(node, "a set operation or statement")
        with_ = node.args.get("with_")
        if with_ is None:
            return body()
        return self._with(with_, body, outer)

    def _with(
        self,
        with_: exp.With,
        body: Callable[[], tuple[exp.Expr, list[tuple[str, SparkType]]]],
        outer: _Scope | None,
    ) -> tuple[exp.Expr, list[tuple[str, SparkType]]]:
        """A query's CTEs, each gated in turn (each sees those before it), then its body,
        which sees them all; rendered as the same WITH."""
        if any(with_.args.get(k) for k in ("recursive", "search", "cycle", "udfs")):
            raise _refuse(with_, "a recursive WITH")
        frame: dict[str, list[tuple[str, SparkType]]] = {}
        self.ctes.append(frame)
        try:
            ctes = []
            for cte in with_.expressions:
                alias = cte.args.get("alias")
                if isinstance(alias, exp.Identifier):  # as sqlglot's `with_` builder sets it
                    alias = exp.TableAlias(this=alias.copy())
                if not isinstance(alias, exp.TableAlias):
                    raise _refuse(cte, "a CTE without a name")
                if cte.args.get("materialized") is not None or cte.args.get("scalar"):
                    raise _refuse(cte, "a MATERIALIZED or scalar CTE")
                rendered, columns = self.query(cte.this, outer)
                names = [c.name for c in alias.columns]
                if names:  # `WITH c (a, b) AS (...)`: the list names the columns
                    if len(names) != len(columns):
                        raise _refuse(cte, "a CTE column list of another width")
                    columns = [(n, kind) for n, (_, kind) in zip(names, columns, strict=True)]
                frame[alias.name] = columns
                ctes.append(exp.CTE(this=rendered, alias=alias.copy()))
            query, columns = body()
        finally:
            self.ctes.pop()
        query.set("with_", exp.With(expressions=ctes))
        return query, columns

    def _union(
        self, node: exp.Union, outer: _Scope | None
    ) -> tuple[exp.Expr, list[tuple[str, SparkType]]]:
        left, left_columns = self.query(node.left, outer)
        right, right_columns = self.query(node.right, outer)
        if len(left_columns) != len(right_columns):
            raise _refuse(node, "UNION ALL of different widths")
        merged = []
        for (name, a), (_, b) in zip(left_columns, right_columns, strict=True):
            both = common(a, b)
            if both is None or both.kind == "complex":
                raise _refuse(node, f"UNION ALL of {a.describe()} and {b.describe()}")
            merged.append((name, both))
        rendered = _rebuilt(
            node,
            this=self._conformed(left, left_columns, merged),
            expression=self._conformed(right, right_columns, merged),
        )
        return rendered, merged

    def _conformed(
        self,
        branch: exp.Expr,
        has: list[tuple[str, SparkType]],
        wanted: list[tuple[str, SparkType]],
    ) -> exp.Expr:
        """A UNION branch whose columns DuckDB would widen otherwise, cast as Spark does."""
        if [t for _, t in has] == [t for _, t in wanted] or not isinstance(branch, exp.Select):
            return branch
        projections = []
        for projection, (_, got), (name, want) in zip(branch.expressions, has, wanted, strict=True):
            value = projection.this if isinstance(projection, exp.Alias) else projection
            if got != want:
                value = _cast(value, want)
            projections.append(exp.alias_(value, name, quoted=True, copy=False))
        branch.set("expressions", projections)
        return branch

    def _select(
        self, node: exp.Select, outer: _Scope | None = None
    ) -> tuple[exp.Expr, list[tuple[str, SparkType]]]:
        extra = sorted(k for k, v in node.args.items() if v and k not in _SELECT_PARTS)
        if extra:
            raise _refuse(node, f"SELECT with {', '.join(extra)} (Spark only)")
        copy = exp.Select()
        distinct = node.args.get("distinct")
        if distinct is not None:
            copy.set("distinct", distinct.copy())
        scope = _Scope(outer)
        from_ = node.args.get("from_")
        if not isinstance(from_, exp.From):
            raise _refuse(node, "a SELECT without FROM")
        copy.set("from_", exp.From(this=self._relation(from_.this, scope)))
        joins = []
        for join in node.args.get("joins") or []:
            joins.append(self._join(join, scope))
        copy.set("joins", joins or None)
        laterals = node.args.get("laterals") or []
        if any(_generator(lateral)[1:] != (False, False) for lateral in laterals):
            # OUTER or positions: each generator a join, in order (a later one may read an
            # earlier one's column).
            joins += [self._lateral_join(lateral, scope) for lateral in laterals]
            copy.set("joins", joins)
        else:
            copy.set("laterals", [self._lateral(lateral, scope) for lateral in laterals] or None)
        expr = _Expressions(scope, self)
        where = node.args.get("where")
        if where is not None:
            expr.filtering = {id(n) for n in where.find_all(exp.In) if _filters(n, where)}
            copy.set("where", exp.Where(this=expr.boolean(where.this)))
            expr.filtering = set()
        group = node.args.get("group")
        if group is not None:
            if any(group.args.get(a) for a in ("grouping_sets", "cube", "rollup", "totals")):
                raise _refuse(group, "WITH ROLLUP, WITH CUBE or WITH TOTALS (Spark only)")
            keys = []
            for key in group.expressions:
                if isinstance(key, exp.Cube | exp.Rollup | exp.GroupingSets):
                    expr.grouping_sets = True
                    keys.append(_rebuilt(key, expressions=[
                        _grouping_set(expr, e, nested=isinstance(key, exp.GroupingSets))
                        for e in key.expressions
                    ]))  # fmt: skip
                    continue
                keys.append(_group_key(expr, key))
            copy.set("group", exp.Group(expressions=keys))
        having = node.args.get("having")
        if having is not None:
            copy.set("having", exp.Having(this=expr.boolean(having.this)))
        if expr.grouping_sets:
            # Over no rows DuckDB still makes the empty grouping set's row (as SQL says),
            # Spark makes none: every other group has a row.
            some = exp.GT(this=exp.Count(this=exp.Star()), expression=exp.Literal.number(0))
            kept = copy.args.get("having")
            condition = some if kept is None else exp.and_(exp.Paren(this=kept.this), some)
            copy.set("having", exp.Having(this=condition))
        projections: list[exp.Expr] = []
        columns: list[tuple[str, SparkType]] = []
        for projection in node.expressions:
            if isinstance(projection, exp.Star) or (
                isinstance(projection, exp.Column) and isinstance(projection.this, exp.Star)
            ):
                table = projection.table if isinstance(projection, exp.Column) else None
                columns += scope.star(table or None)
                projections.append(projection.copy())
                continue
            value = projection.this if isinstance(projection, exp.Alias) else projection
            rendered, kind = expr.typed(value)
            if kind.kind == "complex":
                raise _refuse(value, "a complex-typed column")
            name = projection.alias_or_name
            columns.append((name, kind))
            named = exp.alias_(rendered, name, quoted=True, copy=False) if name else rendered
            projections.append(named)
        if node.args.get("distinct") and any(k.floating for _, k in columns):
            raise _refuse(node, "DISTINCT over floating-point values")
        copy.set("expressions", projections)
        return copy, columns

    def _relation(self, node: exp.Expr, scope: _Scope) -> exp.Expr:
        alias = node.alias_or_name
        if isinstance(node, exp.Table):
            if node.args.get("version") or node.db or node.catalog:
                raise _refuse(node, "a catalog table (the embedded engine reads what it holds)")
            cte = next((f[node.name] for f in reversed(self.ctes) if node.name in f), None)
            if cte is not None:  # a CTE's name hides a relation's
                scope.add(alias, dict(cte))
                return node.copy()
            schema = self.relations.get(node.name)
            if schema is None:
                raise _refuse(node, "a relation the embedded engine does not hold")
            scope.add(alias, schema)
            return node.copy()
        if isinstance(node, exp.Subquery):
            rendered, columns = self.query(node)
            scope.add(alias, dict(columns))
            return rendered
        raise _refuse(node, "a FROM that is neither a relation nor a subquery")

    def _join(self, join: exp.Join, scope: _Scope) -> exp.Join:
        side, kind = (join.side or "").upper(), (join.kind or "").upper()
        if join.args.get("using") or join.args.get("method"):
            raise _refuse(join, "JOIN USING or a join method")
        if kind not in ("", "INNER", "OUTER", "CROSS", "SEMI", "ANTI"):
            raise _refuse(join, f"a {kind} JOIN")
        if kind in ("SEMI", "ANTI") and side not in ("", "LEFT"):
            raise _refuse(join, f"a {side} {kind} JOIN")
        seen = scope
        if kind in ("SEMI", "ANTI"):  # the right side is seen by ON only
            seen = _Scope(scope.parent)
            seen.relations = dict(scope.relations)
        this = self._relation(join.this, seen)
        on = join.args.get("on")
        rendered_on = _Expressions(seen, self).boolean(on) if on is not None else None
        rebuilt = _rebuilt(join, this=this, on=rendered_on)
        assert isinstance(rebuilt, exp.Join)
        return rebuilt

    def _lateral(self, lateral: exp.Expr, scope: _Scope) -> exp.Expr:
        """`LATERAL VIEW explode(sequence(a, b))` or `explode(array(x, ...))`, one column:
        DuckDB's UNNEST of the array in Spark's element type."""
        array, _ = self._exploded(lateral, scope, 1)
        return _rebuilt(lateral, this=exp.Explode(this=array))

    def _lateral_join(self, lateral: exp.Expr, scope: _Scope) -> exp.Join:
        """A generator as a lateral join: `posexplode` (positions from 0, INT, as Spark's;
        DuckDB's ordinality counts from 1) and OUTER, `explode_outer`, `posexplode_outer`
        (a row of NULLs for an empty or NULL array, as Spark keeps: a LEFT JOIN ON TRUE;
        sqlglot renders them as a plain UNNEST, which drops that row)."""
        _, positions, outer = _generator(lateral)
        array, alias = self._exploded(lateral, scope, 2 if positions else 1)
        names = [c.name for c in alias.columns]
        ordinal = "__icemv_ordinal"
        unnest = exp.Unnest(
            expressions=[array],
            alias=exp.TableAlias(
                this=exp.to_identifier("__icemv_unnest", quoted=True),
                columns=[exp.to_identifier(names[-1], quoted=True)],
            ),
            offset=exp.to_identifier(ordinal, quoted=True) if positions else None,
        )
        value = exp.column(names[-1], quoted=True)
        projections: list[exp.Expr] = [value]
        if positions:
            from_zero = exp.Sub(
                this=exp.column(ordinal, quoted=True), expression=exp.Literal.number(1)
            )
            position = exp.alias_(_cast(from_zero, INT), names[0], quoted=True)
            projections = [position, value]
        generated = exp.Lateral(
            this=exp.Subquery(this=exp.select(*projections).from_(unnest)),
            alias=exp.TableAlias(this=exp.to_identifier(alias.name or "__lateral", quoted=True)),
        )
        if outer:
            return exp.Join(this=generated, side="LEFT", on=exp.true())
        return exp.Join(this=generated, kind="CROSS")

    def _exploded(
        self, lateral: exp.Expr, scope: _Scope, columns: int
    ) -> tuple[exp.Expr, exp.TableAlias]:
        """The generator's array, in Spark's element type (DuckDB's series are BIGINT: INT
        would not wrap), and its alias, whose columns join `scope` (a position
        INT, then the element). Of sequence(a, b) or array(x, ...) only."""
        generator, _, _ = _generator(lateral)
        if generator is None:
            raise _refuse(lateral, "a LATERAL other than explode or posexplode (Spark only)")
        alias = lateral.args.get("alias")
        if not isinstance(alias, exp.TableAlias) or len(alias.columns) != columns:
            raise _refuse(lateral, f"a generator without its {columns} column name(s)")
        values = generator.this
        expr = _Expressions(scope, self)
        if isinstance(values, exp.GenerateSeries) and not values.args.get("step"):
            rendered, element = self._sequence(expr, values, lateral)
        elif isinstance(values, exp.Array) and values.expressions:
            rendered, element = self._array(expr, values, lateral)
        else:
            raise _refuse(lateral, "a generator other than explode(sequence(...) or array(...))")
        names = [c.name for c in alias.columns]
        scope.add(
            alias.name or "__lateral", dict(zip(names, [INT, element][-columns:], strict=True))
        )
        array = exp.DataType(
            this=exp.DataType.Type.ARRAY, expressions=[duckdb_type(element)], nested=True
        )
        return exp.Cast(this=rendered, to=array), alias

    @staticmethod
    def _sequence(
        expr: _Expressions, series: exp.GenerateSeries, lateral: exp.Expr
    ) -> tuple[exp.Expr, SparkType]:
        """Spark's sequence(a, b) counts down when a > b, where DuckDB's series is empty."""
        start, a = expr.typed(series.args["start"])
        end, b = expr.typed(series.args["end"])
        element = common(a, b)
        if not (a.integral and b.integral) or element is None:
            raise _refuse(lateral, "sequence() of non-integers")
        one = exp.Literal.number(1)
        step = exp.Case(
            ifs=[exp.If(this=exp.LTE(this=start.copy(), expression=end.copy()), true=one)],
            default=exp.Literal.number(-1),
        )
        return exp.GenerateSeries(start=start, end=end, step=step), element

    @staticmethod
    def _array(
        expr: _Expressions, array: exp.Array, lateral: exp.Expr
    ) -> tuple[exp.Expr, SparkType]:
        """array(x, ...) of values of one type (Spark would widen others)."""
        parts, kinds = expr.each(array.expressions)
        typed = {kind for kind in kinds if kind.kind != "null"}  # NULL takes the others' type
        element = next(iter(typed), None)
        if element is None or len(typed) > 1 or element.kind not in _ELEMENT_KINDS:
            raise _refuse(lateral, "array() of values of more than one type, or not scalar")
        return exp.Array(expressions=parts), element


# Spark's generators the gate renders, by sqlglot's key: whether each gives positions and
# whether it is OUTER (sqlglot's Spark parser makes explode_outer a private class).
_GENERATORS = {
    "explode": (False, False),
    "_explodeouter": (False, True),
    "explodeouter": (False, True),
    "posexplode": (True, False),
    "posexplodeouter": (True, True),
}


def _generator(lateral: exp.Expr) -> tuple[exp.Explode | None, bool, bool]:
    """A LATERAL VIEW's generator, whether it gives positions and whether it is OUTER;
    None for any other lateral (refused)."""
    generator = lateral.this if isinstance(lateral, exp.Lateral) else None
    if not isinstance(generator, exp.Explode) or generator.key not in _GENERATORS:
        return None, False, False
    positions, outer = _GENERATORS[generator.key]
    return generator, positions, outer or bool(lateral.args.get("outer"))


_ELEMENT_KINDS = frozenset({
    "boolean", "tinyint", "smallint", "int", "bigint", "double", "decimal", "string", "date",
    "timestamp",
})  # fmt: skip


class _Expressions:
    """Types and renders expressions over one SELECT's scope."""

    def __init__(self, scope: _Scope, gate: _Gate) -> None:
        self.scope = scope
        self.gate = gate
        # IN subqueries whose truth alone counts (under AND/OR in a WHERE): Spark gives
        # FALSE where SQL (and DuckDB) give NULL (`NULL IN (SELECT ...)` in a projection).
        self.filtering: set[int] = set()
        # The SELECT groups by GROUPING SETS, ROLLUP or CUBE: GROUPING() means something.
        self.grouping_sets = False

    def boolean(self, node: exp.Expr) -> exp.Expr:
        rendered, kind = self.typed(node)
        if kind not in (BOOLEAN, NULL):
            raise _refuse(node, f"a condition of type {kind.describe()}")
        return rendered

    def typed(self, node: exp.Expr) -> tuple[exp.Expr, SparkType]:
        function = function_of(node)
        if function is not None:
            return self.function(node, function)
        handler = _HANDLERS.get(type(node))
        if handler is None:
            for kind, candidate in _HANDLERS.items():
                if isinstance(node, kind):
                    handler = candidate
                    break
        if handler is None:
            raise _refuse(node, f"{type(node).__name__} (Spark only)")
        return handler(self, node)

    def each(self, nodes: Sequence[exp.Expr]) -> tuple[list[exp.Expr], list[SparkType]]:
        rendered, kinds = [], []
        for node in nodes:
            r, k = self.typed(node)
            rendered.append(r)
            kinds.append(k)
        return rendered, kinds

    def joint(self, node: exp.Expr, kinds: Sequence[SparkType]) -> SparkType:
        """The one type values of `kinds` meet in, or NotPortable."""
        found: SparkType | None = NULL
        for kind in kinds:
            found = common(found, kind) if found is not None else None
        if found is None or found.kind == "complex":
            shown = ", ".join(k.describe() for k in kinds)
            raise _refuse(node, f"values of {shown} (Spark's implicit casts)")
        return found

    # -- leaves ------------------------------------------------------------------------
    def column(self, node: exp.Column) -> tuple[exp.Expr, SparkType]:
        return _copied_column(node), self.scope.column(node)

    def literal(self, node: exp.Literal) -> tuple[exp.Expr, SparkType]:
        if set(node.args) <= {"this", "is_string"}:  # built anew: a deep copy costs 4x
            return exp.Literal(this=node.this, is_string=node.is_string), of_literal(node)
        return node.copy(), of_literal(node)

    def constant(self, node: exp.Expr) -> tuple[exp.Expr, SparkType]:
        return node.copy(), BOOLEAN if isinstance(node, exp.Boolean) else NULL

    def paren(self, node: exp.Paren) -> tuple[exp.Expr, SparkType]:
        inner, kind = self.typed(node.this)
        return exp.Paren(this=inner), kind

    # -- casts -------------------------------------------------------------------------
    def cast(self, node: exp.Cast) -> tuple[exp.Expr, SparkType]:
        target = spark_type_of(node.to)
        value = node.this
        if isinstance(value, exp.Literal) and value.is_string and target in (DATE, TIMESTAMP):
            pattern = _DATE_LITERAL if target == DATE else _TIMESTAMP_LITERAL
            if pattern.fullmatch(value.this.strip()):
                return _cast(value.copy(), target), target
            raise _refuse(node, "a date or timestamp literal that is not ISO")
        if isinstance(value, exp.Literal) and value.is_string:
            computed = cast_string_literal(value.this, target)
            if computed is not None:
                (text,) = computed
                literal = exp.null() if text is None else exp.Literal.string(text)
                return _cast(literal, target), target
        rendered, source = self.typed(value)
        if not _safe_cast(source, target):
            raise _refuse(node, f"CAST from {source.describe()} to {target.describe()}")
        return _cast(rendered, target), target

    # -- arithmetic --------------------------------------------------------------------
    def arithmetic(self, node: exp.Binary) -> tuple[exp.Expr, SparkType]:
        (left, right), (a, b) = self.each([node.this, node.expression])
        copy = _rebuilt(node, this=left, expression=right)
        if a.kind == "null" or b.kind == "null":
            return copy, a if b.kind == "null" else b
        if not (a.numeric and b.numeric):
            raise _refuse(node, f"arithmetic on {a.describe()} and {b.describe()}")
        if isinstance(node, exp.Div):
            return self._division(node, copy, left, right, a, b)
        if isinstance(node, exp.IntDiv):
            if not (a.integral and b.integral):
                raise _refuse(node, "DIV of non-integers")
            return _cast(copy, BIGINT), BIGINT
        if a.floating or b.floating:
            if isinstance(node, exp.Mod) and (a.kind == "decimal" or b.kind == "decimal"):
                raise _refuse(node, "% of DECIMAL and DOUBLE")
            return copy, DOUBLE
        if a.integral and b.integral:
            return copy, a if a == common(a, b) else b
        if isinstance(node, exp.Mod):
            raise _refuse(node, "% of DECIMAL")
        rule = decimals.multiply if isinstance(node, exp.Mul) else decimals.add
        x, y = _as_decimal(node.this, a), _as_decimal(node.expression, b)
        result = rule(x, y)
        natural = x.scale + y.scale if isinstance(node, exp.Mul) else max(x.scale, y.scale)
        if natural > decimals.MAX_PRECISION:  # DuckDB cannot hold the exact value's places
            raise _refuse(node, f"DECIMAL arithmetic needing scale {natural}")
        if isinstance(node, exp.Mul):  # DuckDB multiplies narrow DECIMALs in 64 bits
            wide = SparkType("decimal", decimals.MAX_PRECISION, x.scale)
            copy.set("this", _cast(exp.Paren(this=left), wide))
        return _cast(copy, decimal_type(result)), decimal_type(result)

    def _division(
        self,
        node: exp.Expr,
        copy: exp.Expr,
        left: exp.Expr,
        right: exp.Expr,
        a: SparkType,
        b: SparkType,
    ) -> tuple[exp.Expr, SparkType]:
        if a.floating or b.floating or (a.integral and b.integral):
            return copy, DOUBLE  # DuckDB divides integers as DOUBLE too
        x, y = _as_decimal(node.this, a), _as_decimal(node.expression, b)
        result = decimals.divide(x, y)
        return _decimal_division(left, right, x, y, result, node), decimal_type(result)

    def negate(self, node: exp.Neg) -> tuple[exp.Expr, SparkType]:
        inner, kind = self.typed(node.this)
        if not (kind.numeric or kind.kind == "null"):
            raise _refuse(node, f"- of {kind.describe()}")
        return exp.Neg(this=inner), kind

    # -- predicates --------------------------------------------------------------------
    def comparison(self, node: exp.Binary) -> tuple[exp.Expr, SparkType]:
        parts, kinds = self._literals_as_dates(*self.each([node.this, node.expression]))
        left, right = self._comparable(node, parts, kinds)
        return _rebuilt(node, this=left, expression=right), BOOLEAN

    def _literals_as_dates(
        self, rendered: list[exp.Expr], kinds: list[SparkType]
    ) -> tuple[list[exp.Expr], list[SparkType]]:
        """Spark compares a DATE or TIMESTAMP with a string by casting the string: an ISO
        string literal beside one is read as that type (others stay strings, refused)."""
        temporal = next((k for k in kinds if k in (DATE, TIMESTAMP)), None)
        if temporal is None:
            return rendered, kinds
        pattern = _DATE_LITERAL if temporal == DATE else _TIMESTAMP_LITERAL
        for index, (node, kind) in enumerate(zip(rendered, kinds, strict=True)):
            literal = kind == STRING and isinstance(node, exp.Literal) and node.is_string
            if literal and pattern.fullmatch(node.this.strip()):
                rendered[index], kinds[index] = _cast(node, temporal), temporal
        return rendered, kinds

    def _comparable(
        self, node: exp.Expr, rendered: list[exp.Expr], kinds: Sequence[SparkType]
    ) -> list[exp.Expr]:
        """The operands of a comparison in the type Spark compares them in: DECIMALs of
        other types cast to it (a value that does not fit raises, as Spark's is NULL)."""
        joint = self.joint(node, kinds)
        if joint.kind in ("binary",):
            raise _refuse(node, "a comparison of binary values")
        return [
            _cast(r, joint) if joint.kind == "decimal" and k.kind == "decimal" and k != joint else r
            for r, k in zip(rendered, kinds, strict=True)
        ]

    def logical(self, node: exp.Expr) -> tuple[exp.Expr, SparkType]:
        children = {
            key: self.boolean(child)
            for key in ("this", "expression")
            if isinstance(child := node.args.get(key), exp.Expr)
        }
        return _rebuilt(node, **children), BOOLEAN

    def is_(self, node: exp.Is) -> tuple[exp.Expr, SparkType]:
        inner, _ = self.typed(node.this)
        other = node.expression
        if not isinstance(other, exp.Null | exp.Boolean):
            raise _refuse(node, "IS other than IS [NOT] NULL / TRUE / FALSE")
        return exp.Is(this=inner, expression=other.copy()), BOOLEAN

    def in_(self, node: exp.In) -> tuple[exp.Expr, SparkType]:
        if node.args.get("unnest") or node.args.get("field"):
            raise _refuse(node, "IN UNNEST (Spark only)")
        query = node.args.get("query")
        if query is not None:
            if id(node) not in self.filtering:
                raise _refuse(node, "IN (SELECT ...) other than as a filter (Spark's NULLs)")
            value, kind = self.typed(node.this)
            inner, columns = self.gate.query(query, self.scope)
            if len(columns) != 1:
                raise _refuse(node, "IN over a subquery of several columns")
            self.joint(node, [kind, columns[0][1]])  # values DuckDB compares exactly too
            return exp.In(this=value, query=inner), BOOLEAN
        rendered, kinds = self._literals_as_dates(*self.each([node.this, *node.expressions]))
        rendered = self._comparable(node, rendered, kinds)
        return exp.In(this=rendered[0], expressions=rendered[1:]), BOOLEAN

    def between(self, node: exp.Between) -> tuple[exp.Expr, SparkType]:
        parts, kinds = self._literals_as_dates(
            *self.each([node.this, node.args["low"], node.args["high"]])
        )
        parts = self._comparable(node, parts, kinds)
        return exp.Between(this=parts[0], low=parts[1], high=parts[2]), BOOLEAN

    def like(self, node: exp.Like) -> tuple[exp.Expr, SparkType]:
        value, kind = self.typed(node.this)
        pattern = node.expression
        if kind not in (STRING, NULL) or not (
            isinstance(pattern, exp.Literal) and pattern.is_string and "\\" not in pattern.this
        ):
            raise _refuse(node, "LIKE other than of a string by a literal pattern, no escapes")
        if node.args.get("escape"):
            raise _refuse(node, "LIKE ... ESCAPE")
        return exp.Like(this=value, expression=pattern.copy()), BOOLEAN

    def regexp(self, node: exp.RegexpLike) -> tuple[exp.Expr, SparkType]:
        return _half_way(self, node)

    def exists(self, node: exp.Exists) -> tuple[exp.Expr, SparkType]:
        rendered, _ = self.gate.query(node.this, self.scope)
        return exp.Exists(this=rendered), BOOLEAN

    def scalar(self, node: exp.Subquery) -> tuple[exp.Expr, SparkType]:
        """A scalar subquery (more than one row raises in both engines)."""
        rendered, columns = self.gate.query(node, self.scope)
        if len(columns) != 1:
            raise _refuse(node, "a scalar subquery of several columns")
        return rendered, columns[0][1]

    def window(self, node: exp.Window) -> tuple[exp.Expr, SparkType]:
        """Ranks, LAG/LEAD and aggregates over a partition, ordered as Spark orders (NULLs
        first ascending, last descending: sqlglot writes them out for DuckDB); the
        default frame only."""
        if node.args.get("spec") or node.args.get("alias") or node.args.get("first"):
            raise _refuse(node, "a window frame or named window (Spark only)")
        function = node.this
        if isinstance(function, exp.RowNumber | exp.Rank | exp.DenseRank):
            if function.expressions if hasattr(function, "expressions") else False:
                raise _refuse(node, "a rank with arguments")
            rendered_function: exp.Expr = function.copy()
            kind, cast_to = INT, INT
        elif isinstance(function, exp.Lag | exp.Lead):
            value, kind = self.typed(function.this)
            offset, default = function.args.get("offset"), function.args.get("default")
            if offset is not None and not (
                isinstance(offset, exp.Literal) and not offset.is_string
            ):
                raise _refuse(node, "LAG/LEAD by a non-literal offset")
            children: dict[str, Any] = {"this": value}
            if default is not None:
                rendered_default, default_kind = self.typed(default)
                if common(kind, default_kind) != kind:
                    raise _refuse(node, "LAG/LEAD with a default of another type")
                children["default"] = rendered_default
            rendered_function, cast_to = _rebuilt(function, **children), kind
        elif isinstance(function, exp.Avg) and self.typed(function.this)[1].kind == "decimal":
            return self.typed(_windowed_average(node, function, self.typed(function.this)[1]))
        elif isinstance(function, exp.Sum | exp.Count | exp.Min | exp.Max | exp.Avg):
            rendered_function, kind = self.typed(function)
            cast_to = kind
            if isinstance(rendered_function, exp.Cast):  # the aggregate's own cast: outside
                rendered_function = rendered_function.this
        else:
            raise _refuse(node, f"the window function {type(function).__name__} (Spark only)")
        partition = [self.typed(p)[0] for p in node.args.get("partition_by") or []]
        order = node.args.get("order")
        rendered_order = None
        if order is not None:
            ordered = [_rebuilt(o, this=self.typed(o.this)[0]) for o in order.expressions]
            rendered_order = exp.Order(expressions=ordered)
        window = _rebuilt(node, this=rendered_function, partition_by=partition or None,
                          order=rendered_order)  # fmt: skip
        needs_cast = cast_to.kind in ("int", "bigint", "decimal", "date", "timestamp")
        return (_cast(window, cast_to) if needs_cast else window), kind

    # -- conditionals ------------------------------------------------------------------
    def case(self, node: exp.Case) -> tuple[exp.Expr, SparkType]:
        if node.this is not None:
            raise _refuse(node, "CASE x WHEN ... (a simple CASE)")
        conditions, results = [], []
        for branch in node.args.get("ifs") or []:
            conditions.append(self.boolean(branch.this))
            results.append(branch.args["true"])
        default = node.args.get("default")
        values, kinds = self.each([*results, *([default] if default is not None else [])])
        kind = self.joint(node, kinds)
        values = [_cast(v, kind) if k != kind and k.kind != "null" else v
                  for v, k in zip(values, kinds, strict=True)]  # fmt: skip
        rendered = exp.Case()
        for condition, value in zip(conditions, values, strict=False):
            rendered = rendered.when(condition, value, copy=False)
        if default is not None:
            rendered = rendered.else_(values[-1], copy=False)
        return rendered, kind

    def if_(self, node: exp.If) -> tuple[exp.Expr, SparkType]:
        condition = self.boolean(node.this)
        parts = [node.args["true"], node.args.get("false") or exp.null()]
        values, kinds = self.each(parts)
        kind = self.joint(node, kinds)
        values = [_cast(v, kind) if k != kind and k.kind != "null" else v
                  for v, k in zip(values, kinds, strict=True)]  # fmt: skip
        return exp.If(this=condition, true=values[0], false=values[1]), kind

    def coalesce(self, node: exp.Expr) -> tuple[exp.Expr, SparkType]:
        values, kinds = self.each([node.this, *node.expressions])
        kind = self.joint(node, kinds)
        values = [_cast(v, kind) if k != kind and k.kind != "null" else v
                  for v, k in zip(values, kinds, strict=True)]  # fmt: skip
        return _rebuilt(node, this=values[0], expressions=values[1:]), kind

    # -- functions ---------------------------------------------------------------------
    def function(self, node: exp.Expr, function: Function) -> tuple[exp.Expr, SparkType]:
        """A function of the table (sql/functions.py): Spark's own tree of it typed in its
        place, or its arguments typed and checked against its row and its DuckDB
        expression cast strictly to Spark's result type."""
        if function.spark_tree is not None:
            return self.typed(function.spark_tree(node))
        set_ = [name for name in function.forbidden_args if node.args.get(name) is not None]
        if set_:
            raise _refuse(node, f"{function.name} with {', '.join(set_)}")
        positional = node.expressions if isinstance(node, exp.Anonymous) else []
        if len(positional) > len(function.arguments):
            raise _refuse(node, f"{function.name} with {len(positional)} arguments")
        rendered, kinds = [], []
        for argument in function.arguments:
            if isinstance(argument.at, int):
                value = positional[argument.at] if argument.at < len(positional) else None
            else:
                value = node.args.get(argument.at)
            if value is None and argument.absent is not None:
                value = argument.absent()
            if value is None:
                if argument.optional:
                    continue
                raise _refuse(node, f"{function.name} without all its arguments")
            if argument.literal is not None and not argument.literal(value):
                raise _refuse(node, f"{function.name} with {_text(value)}: {argument.literal_is}")
            value_rendered, kind = self.typed(value)
            if (kind.kind != "null" and kind.kind not in argument.kinds) or (
                kind.kind == "null" and not argument.null
            ):
                raise _refuse(node, f"{function.name} of {kind.describe()}")
            if argument.kinds == DATE_LIKE and kind == TIMESTAMP:  # its date, in the zone
                value_rendered, kind = _cast(value_rendered, DATE), DATE
            if kind.kind == "null":  # typed, or DuckDB cannot choose the function's overload
                value_rendered = _cast(value_rendered, _NULL_AS[min(argument.kinds)])
            rendered.append(value_rendered)
            kinds.append(kind)
        assert function.duckdb is not None
        result = function.result
        if not isinstance(result, SparkType):
            result = result(kinds)
        return _cast(function.duckdb(*rendered), result), result

    def unary_same(self, node: exp.Func) -> tuple[exp.Expr, SparkType]:
        """abs(x), upper(s), ...: the argument's type (numbers for abs, strings else)."""
        inner, kind = self.typed(node.this)
        numeric = isinstance(node, exp.Abs)
        if numeric and not (kind.numeric or kind.kind == "null"):
            raise _refuse(node, f"abs of {kind.describe()}")
        if not numeric and kind not in (STRING, NULL):
            raise _refuse(node, f"{type(node).__name__} of {kind.describe()}")
        copy = _rebuilt(node, this=inner)
        if isinstance(node, exp.Upper | exp.Lower):
            return _ascii_only(inner, copy), STRING
        return copy, kind if kind.kind != "null" else (STRING if not numeric else NULL)

    def trim(self, node: exp.Trim) -> tuple[exp.Expr, SparkType]:
        """Spark trims only the ASCII space (or the characters named), DuckDB's bare TRIM
        every Unicode space too (U+00A0, U+3000): the characters are always named."""
        inner, kind = self.typed(node.this)
        if kind not in (STRING, NULL):
            raise _refuse(node, f"TRIM of {kind.describe()}")
        characters = node.args.get("expression")
        if characters is None:
            characters = exp.Literal.string(" ")
        elif not (isinstance(characters, exp.Literal) and characters.is_string):
            raise _refuse(node, "TRIM of characters other than a string literal")
        position = node.args.get("position")
        trimmed = exp.Trim(this=inner, expression=characters.copy(), position=position)
        return trimmed, STRING

    def sign(self, node: exp.Sign) -> tuple[exp.Expr, SparkType]:
        inner, kind = self.typed(node.this)
        if not kind.integral:  # sign(-0.0) is -0.0 in Spark, 0.0 in DuckDB
            raise _refuse(node, f"sign of {kind.describe()}")
        return _cast(exp.Sign(this=inner), DOUBLE), DOUBLE  # Spark's SIGN is DOUBLE

    def sqrt(self, node: exp.Sqrt) -> tuple[exp.Expr, SparkType]:
        inner, kind = self.typed(node.this)
        if not (kind.numeric or kind.kind == "null") or kind.kind == "decimal":
            raise _refuse(node, f"sqrt of {kind.describe()}")
        # Spark's sqrt of a negative is NaN; DuckDB's raises (and Spark computes it).
        return exp.Sqrt(this=_cast(inner, DOUBLE)), DOUBLE

    def length(self, node: exp.Length) -> tuple[exp.Expr, SparkType]:
        inner, kind = self.typed(node.this)
        if kind not in (STRING, NULL):
            raise _refuse(node, f"length of {kind.describe()}")
        return _cast(exp.Length(this=inner), INT), INT  # BIGINT in DuckDB

    def substring(self, node: exp.Substring) -> tuple[exp.Expr, SparkType]:
        inner, kind = self.typed(node.this)
        start, length = node.args.get("start"), node.args.get("length")
        literal = [p for p in (start, length) if p is not None]
        if kind not in (STRING, NULL) or not all(
            isinstance(p, exp.Literal) and not p.is_string and int(p.this) >= 0 for p in literal
        ) or (start is not None and int(start.this) < 1):  # fmt: skip
            raise _refuse(node, "SUBSTR other than of a string from literal positions >= 1")
        return _rebuilt(node, this=inner), STRING

    def concat(self, node: exp.Expr) -> tuple[exp.Expr, SparkType]:
        parts = [node.this, node.expression] if isinstance(node, exp.DPipe) else node.expressions
        values, kinds = self.each(parts)
        if any(k not in (STRING, NULL) for k in kinds):
            raise _refuse(node, "CONCAT of non-strings (Spark's implicit casts)")
        joined = values[0]
        for value in values[1:]:
            joined = exp.DPipe(this=joined, expression=value, safe=False)
        return _cast(exp.Paren(this=joined), STRING), STRING

    def extremum(self, node: exp.Func) -> tuple[exp.Expr, SparkType]:
        values, kinds = self.each([node.this, *node.expressions])
        kind = self.joint(node, kinds)
        # Spark's GREATEST / LEAST skip NULLs (however the node was built).
        copy = _rebuilt(node, this=values[0], expressions=values[1:], ignore_nulls=True)
        return (_cast(copy, kind) if kind.kind == "decimal" else copy), kind

    def round(self, node: exp.Round) -> tuple[exp.Expr, SparkType]:
        inner, kind = self.typed(node.this)
        digits = node.args.get("decimals")
        places = 0 if digits is None else digits
        if not (isinstance(places, int) or (isinstance(places, exp.Literal) and
                                            not places.is_string)):  # fmt: skip
            raise _refuse(node, "ROUND to a non-literal scale")
        scale = places if isinstance(places, int) else int(places.this)
        if kind.kind != "decimal" or scale < 0:
            raise _refuse(node, f"ROUND of {kind.describe()}")
        kept = min(kind.scale, scale)  # one more integer digit: round(9.9) is 10
        whole = min(kind.precision - kind.scale + 1 + kept, decimals.MAX_PRECISION)
        result = SparkType("decimal", whole, kept)
        return _cast(_rebuilt(node, this=inner), result), result

    def to_date(self, node: exp.Expr) -> tuple[exp.Expr, SparkType]:
        inner, kind = self.typed(node.this)
        if node.args.get("format") or kind not in (DATE, TIMESTAMP, NULL):
            raise _refuse(node, f"a DATE of {kind.describe()}")
        return _cast(inner, DATE), DATE

    def date_part(self, node: exp.Func) -> tuple[exp.Expr, SparkType]:
        inner, kind = self.typed(node.this)
        time_only = isinstance(node, exp.Hour | exp.Minute | exp.Second)
        allowed = (TIMESTAMP, NULL) if time_only else (DATE, TIMESTAMP, NULL)
        if kind not in allowed:
            raise _refuse(node, f"{type(node).__name__} of {kind.describe()}")
        return _cast(_rebuilt(node, this=inner), INT), INT

    def date_add(self, node: exp.TsOrDsAdd) -> tuple[exp.Expr, SparkType]:
        (day, count), (a, b) = self.each([node.this, node.expression])
        unit = node.args.get("unit")
        if a not in (DATE, NULL) or not (b.integral or b.kind == "null") or (
            unit is not None and unit.name.upper() != "DAY"
        ):  # fmt: skip
            raise _refuse(node, f"date_add of {a.describe()} and {b.describe()}")
        return _cast(_rebuilt(node, this=day, expression=count), DATE), DATE

    def trunc(self, node: exp.TimestampTrunc) -> tuple[exp.Expr, SparkType]:
        inner, kind = self.typed(node.this)
        unit = node.args.get("unit")
        name = unit.name.upper() if unit is not None else ""
        if kind not in (TIMESTAMP, NULL) or name not in _TRUNC_UNITS:
            raise _refuse(node, f"date_trunc('{name}') of {kind.describe()}")
        return _cast(_rebuilt(node, this=inner), TIMESTAMP), TIMESTAMP

    # -- aggregates --------------------------------------------------------------------
    def count(self, node: exp.Count) -> tuple[exp.Expr, SparkType]:
        argument = node.this
        if argument is None or isinstance(argument, exp.Star):
            return node.copy(), BIGINT
        if isinstance(argument, exp.Distinct):
            values, kinds = self.each(argument.expressions)
            if any(k.floating or k.kind == "complex" for k in kinds):
                raise _refuse(node, "COUNT(DISTINCT) of floating-point values")
            return exp.Count(this=exp.Distinct(expressions=values)), BIGINT
        inner, _ = self.typed(argument)
        return exp.Count(this=inner), BIGINT

    def count_if(self, node: exp.CountIf) -> tuple[exp.Expr, SparkType]:
        # DuckDB's count_if of a constant NULL is NULL (Spark: 0): NULL counts as false.
        counted = exp.Coalesce(this=self.boolean(node.this), expressions=[exp.false()])
        return _cast(exp.CountIf(this=counted), BIGINT), BIGINT

    def sum(self, node: exp.Sum) -> tuple[exp.Expr, SparkType]:
        """SUM, typed as Spark types it; SUM(DISTINCT x) the same over x's distinct values
        (not of floating-point values: which of -0.0 and 0.0, or of two NaNs, is kept
        differs, as for DISTINCT)."""
        argument = node.this
        distinct = isinstance(argument, exp.Distinct)
        if distinct:
            if len(argument.expressions) != 1:
                raise _refuse(node, "SUM(DISTINCT) of several values")
            argument = argument.expressions[0]
        inner, kind = self.typed(argument)
        if distinct and kind.floating:
            raise _refuse(node, "SUM(DISTINCT) of floating-point values")
        summed = exp.Sum(this=exp.Distinct(expressions=[inner]) if distinct else inner)
        if kind.integral:
            return _cast(summed, BIGINT), BIGINT
        if kind.floating or kind.kind == "null":
            return summed, DOUBLE
        if kind.kind == "decimal":
            result = decimal_type(decimals.sum_type(kind.decimal()))
            return _cast(summed, result), result
        raise _refuse(node, f"SUM of {kind.describe()}")

    def average(self, node: exp.Expr) -> tuple[exp.Expr, SparkType]:
        """AVG: DOUBLE of numbers; of a DECIMAL, what Spark 3.5's Average evaluates,
        `CAST(SUM(x) / CAST(COUNT(x) AS DECIMAL(20, 0)) AS DECIMAL(p + 4, s + 4))` (its
        sum in DECIMAL(p + 10, s), NULL for no input), typed here as that tree: the
        division rounds half up to its own scale and the cast again to AVG's, both as the
        gate renders them for `/` and CAST. In a window: `window` builds that tree of
        windowed aggregates."""
        inner, kind = self.typed(node.this)
        if kind.kind == "decimal" and not isinstance(node.parent, exp.Window):
            argument = kind.decimal()
            count = decimals.cast(exp.Count(this=node.this.copy()), decimals.COUNT_DECIMAL)
            divided = exp.Div(this=exp.Sum(this=node.this.copy()), expression=count)
            return self.typed(decimals.cast(divided, decimals.avg_type(argument)))
        if not (kind.integral or kind.floating):
            raise _refuse(node, f"{type(node).__name__} of {kind.describe()}")
        return _rebuilt(node, this=inner), DOUBLE

    def extreme(self, node: exp.Expr) -> tuple[exp.Expr, SparkType]:
        inner, kind = self.typed(node.this)
        if kind.kind in ("complex", "binary"):
            raise _refuse(node, f"{type(node).__name__} of {kind.describe()}")
        return _rebuilt(node, this=inner), kind

    def logical_aggregate(self, node: exp.Expr) -> tuple[exp.Expr, SparkType]:
        return _rebuilt(node, this=self.boolean(node.this)), BOOLEAN

    def any_value(self, node: exp.AnyValue) -> tuple[exp.Expr, SparkType]:
        """ANY_VALUE(x): some value of the group, NULL included (Spark's First without
        ignoring NULLs; DuckDB's ANY_VALUE skips NULLs, its FIRST does not). Which value
        is not defined in either engine: a view is deterministic only where the group
        decides it, and then both give it."""
        if any(value for key, value in node.args.items() if key != "this"):
            raise _refuse(node, "ANY_VALUE with options")
        inner, kind = self.typed(node.this)
        if kind.kind == "complex":
            raise _refuse(node, f"ANY_VALUE of {kind.describe()}")
        return exp.First(this=inner), kind

    def grouping(self, node: exp.Expr) -> tuple[exp.Expr, SparkType]:
        """GROUPING(x) (TINYINT in Spark, BIGINT in DuckDB: cast) and GROUPING_ID() (BIGINT
        in both; without arguments the bits of every grouping expression, the first the
        highest, in both: with arguments Spark wants exactly those, in that order)."""
        if not self.grouping_sets:
            raise _refuse(node, f"{type(node).__name__} without grouping sets")
        rendered = [_group_key(self, a) for a in node.expressions]
        if isinstance(node, exp.Grouping):
            if len(rendered) != 1:
                raise _refuse(node, "GROUPING() of other than one expression")
            return _cast(exp.Grouping(expressions=rendered), TINYINT), TINYINT
        return exp.GroupingId(expressions=rendered), BIGINT


def _windowed_average(window: exp.Window, average: exp.Avg, kind: SparkType) -> exp.Expr:
    """AVG of a DECIMAL over a window as the tree Spark's Average evaluates there, as for
    the aggregate (`average`): `CAST(SUM(x) OVER w / CAST(COUNT(x) OVER w AS DECIMAL(20,
    0)) AS DECIMAL(p + 4, s + 4))`, the sum and the count over the same partition, order
    and (default) frame; a Spark tree the gate then types and renders."""

    def over(aggregate: exp.Expr) -> exp.Expr:
        return _rebuilt(window, this=aggregate)

    count = decimals.cast(over(exp.Count(this=average.this.copy())), decimals.COUNT_DECIMAL)
    divided = exp.Div(this=over(exp.Sum(this=average.this.copy())), expression=count)
    return decimals.cast(divided, decimals.avg_type(kind.decimal()))


def _group_key(expr: _Expressions, key: exp.Expr) -> exp.Expr:
    """One GROUP BY expression: not floating point (but its text) nor complex."""
    text = _text_key(expr, key)
    if text is not None:
        return text
    rendered, kind = expr.typed(key)
    if kind.floating or kind.kind == "complex":
        raise _refuse(key, "a floating-point or complex GROUP BY key")
    return rendered


def _grouping_set(expr: _Expressions, node: exp.Expr, nested: bool) -> exp.Expr:
    """An element of CUBE / ROLLUP (a key) or of GROUPING SETS (`nested`: a key, or a
    set of keys: `(a, b)`, `(a)`, `()`). Spark and DuckDB make the same groups, in the
    same grouping-set order, their keys NULL where rolled up (tests/test_engine_corpus.py)."""
    if nested and isinstance(node, exp.Tuple):
        return exp.Tuple(expressions=[_group_key(expr, e) for e in node.expressions])
    if nested and isinstance(node, exp.Paren):
        return exp.Paren(this=_group_key(expr, node.this))
    if isinstance(node, exp.Cube | exp.Rollup | exp.GroupingSets | exp.Tuple):
        raise _refuse(node, "nested grouping sets (Spark only)")
    return _group_key(expr, node)


def _text_key(expr: _Expressions, key: exp.Expr) -> exp.Expr | None:
    """A GROUP BY key that is a floating-point value's text (sql/net.py's identity):
    each engine's text tells the same values apart (-0.0 from 0.0, NaN one), and the text
    is never output, so the engines' different spellings do not matter."""
    if not (isinstance(key, exp.Cast) and spark_type_of(key.to) == STRING):
        return None
    rendered, kind = expr.typed(key.this)
    if not kind.floating:
        return None
    return exp.Cast(this=rendered, to=built("VARCHAR", None))


def _filters(node: exp.In, where: exp.Where) -> bool:
    """Whether only the truth of `x IN (...)` (or of `NOT (x IN (...))`) counts: above it
    up to the WHERE only AND, OR, parentheses and branches of CASE/IF whose value is
    itself only tested for truth, or it is a CASE/IF condition (taken only when TRUE).
    Spark evaluates `x IN (SELECT ...)` TRUE exactly when SQL does (FALSE where SQL says
    NULL) and `NOT (x IN (SELECT ...))` null-aware (TRUE exactly when SQL's NOT IN is), so
    in such a place a row is kept by both engines alike: AND and OR are monotone, and a
    CASE takes the same branch. A NOT further up is not admitted: Spark's optimiser moves
    NOTs onto the IN (`NOT (f OR x IN s)` becomes `NOT f AND NOT (x IN s)`)."""
    above: exp.Expr = node
    while isinstance(above.parent, exp.Paren):
        above = above.parent
    if isinstance(above.parent, exp.Not):
        above = above.parent
    while True:
        parent = above.parent
        if parent is where:
            return True
        if isinstance(parent, exp.If) and above.arg_key == "this":
            return True  # a condition
        if isinstance(parent, exp.If) and above.arg_key in ("true", "false"):
            above = parent.parent if isinstance(parent.parent, exp.Case) else parent
            continue
        default = isinstance(parent, exp.Case) and above.arg_key == "default"
        if parent is None or not (default or isinstance(parent, exp.And | exp.Or | exp.Paren)):
            return False
        above = parent


def _as_decimal(node: exp.Expr, kind: SparkType) -> DecimalType:
    """An operand of DECIMAL arithmetic as Spark types it: an integer literal by its own
    digits (3 and -3 are DECIMAL(1, 0): Spark reads a minus sign before a number as part of
    the literal, not `-(3)`), an integer column by its type's (INT is DECIMAL(10, 0))."""
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal):
        node = node.this
    if kind.integral and isinstance(node, exp.Literal) and not node.is_string:
        return DecimalType(max(len(node.this.lstrip("-")), 1), 0)
    return kind.decimal()


_SIMPLE_TYPES = {
    "BOOLEAN": BOOLEAN, "INT": INT, "BIGINT": BIGINT, "DOUBLE": DOUBLE, "STRING": STRING,
    "DATE": DATE, "TIMESTAMP": TIMESTAMP, "TINYINT": SparkType("tinyint"),
    "SMALLINT": SparkType("smallint"), "FLOAT": SparkType("float"),
    "TIMESTAMP_NTZ": TIMESTAMP_NTZ,
}  # fmt: skip


def spark_type_of(data_type: exp.DataType) -> SparkType:
    if set(data_type.args) == {"this"}:  # a bare type: by its kind, as its text would say
        known = _BARE_TYPES.get(data_type.this)
        if known is not None:
            return known
    decimal = _decimal_parameters(data_type)
    if decimal is not None:
        return SparkType("decimal", *decimal)
    return spark_type_of_text(data_type.sql(dialect="spark").upper())


def _decimal_parameters(data_type: exp.DataType) -> tuple[int, int] | None:
    """DECIMAL(p, s) read off the node, as its Spark text would say it (rendering a type
    is a generator pass, ~50 us, and the gate reads dozens per merge tree); None for any
    other shape."""
    if data_type.this != exp.DataType.Type.DECIMAL or set(data_type.args) - {
        "this",
        "expressions",
        "nested",
    }:
        return None
    parameters = data_type.expressions
    if len(parameters) != 2 or not all(isinstance(p, exp.DataTypeParam) for p in parameters):
        return None
    values = [p.this for p in parameters]
    if not all(isinstance(v, exp.Literal) and not v.is_string and str(v.this).isdigit()
               for v in values):  # fmt: skip
        return None
    return int(values[0].this), int(values[1].this)


def _copied_column(node: exp.Column) -> exp.Expr:
    """`node` anew: a column named by quoted or unquoted identifiers is rebuilt (a deep
    copy costs 3x); any other shape is copied."""
    table = node.args.get("table")
    name = node.this
    if set(node.args) - {"this", "table"} or not isinstance(name, exp.Identifier) or (
        table is not None and not isinstance(table, exp.Identifier)
    ) or set(name.args) - {"this", "quoted"} or (
        table is not None and set(table.args) - {"this", "quoted"}
    ):  # fmt: skip
        return node.copy()
    return exp.Column(
        this=exp.Identifier(this=name.this, quoted=name.args.get("quoted")),
        table=None if table is None else exp.Identifier(this=table.this,
                                                        quoted=table.args.get("quoted")),
    )  # fmt: skip


def spark_type_of_text(text: str) -> SparkType:
    if text in _SIMPLE_TYPES:
        return _SIMPLE_TYPES[text]
    match = re.fullmatch(r"DECIMAL\((\d+),\s*(\d+)\)", text)
    if match:
        return SparkType("decimal", int(match.group(1)), int(match.group(2)))
    if text == "DECIMAL":
        return SparkType("decimal", 10, 0)
    return SparkType("complex")


# The bare kinds whose Spark text names one of the simple types (rendering a type is a
# generator pass; the gate reads hundreds of them per tree).
_BARE_TYPES = {
    kind: _SIMPLE_TYPES[text]
    for kind in exp.DataType.Type
    if (text := exp.DataType(this=kind).sql(dialect="spark").upper()) in _SIMPLE_TYPES
}


def _safe_cast(source: SparkType, target: SparkType) -> bool:
    """Casts that cannot fail, wrap or round in either engine."""
    if source == target or source.kind == "null":
        return target.kind != "complex"
    if source.integral and target.integral:
        return True  # narrowing wraps in Spark, raises in DuckDB (rendered strict): Spark then
    if source.integral and target.kind == "double":
        return True
    if source.kind == "decimal" and target.kind == "decimal":
        return True  # fewer places round half up in both; too few digits raise in DuckDB
    if source.integral and target.kind == "decimal":
        return target.precision - target.scale >= source.decimal().precision
    if source.kind == "decimal" and target.kind == "double":
        return source.precision <= 15
    # A timestamp's date and a date's midnight: in the session time zone (DuckDB's
    # connection is set to it) for TIMESTAMP; for TIMESTAMP_NTZ the local date-time's date,
    # no zone. Neither fails, years 1-9999 in both (tests/test_engine_corpus.py).
    if {source, target} in ({TIMESTAMP, DATE}, {TIMESTAMP_NTZ, DATE}):
        return True
    return target == STRING and (source.integral or source in (DATE, STRING))


def _ascii_only(value: exp.Expr, computed: exp.Expr) -> exp.Expr:
    """Case mapping agrees on ASCII only (Spark's upper('ß') is 'SS', DuckDB's 'ẞ'): other
    text raises in DuckDB, and Spark computes the refresh."""
    other = exp.Anonymous(
        this="regexp_matches", expressions=[value.copy(), exp.Literal.string("[^\x01-\x7f]")]
    )
    stop = exp.Anonymous(
        this="error", expressions=[exp.Literal.string("case mapping of non-ASCII text")]
    )
    return exp.Case().when(other, stop, copy=False).else_(computed, copy=False)


def _pow10(n: int) -> exp.Expr:
    return exp.Cast(this=exp.Literal.number(10**n), to=built("HUGEINT", None))


def _unscaled(value: exp.Expr, kind: DecimalType) -> exp.Expr:
    """The DECIMAL's digits as an integer: value * 10^scale, exactly (HUGEINT)."""
    shift = exp.Cast(this=exp.Literal.number(10**kind.scale),
                     to=built(f"DECIMAL({kind.scale + 1}, 0)", None))  # fmt: skip
    return exp.Cast(this=exp.Mul(this=exp.Paren(this=value), expression=shift),
                    to=built("HUGEINT", None))  # fmt: skip


def _decimal_division(
    left: exp.Expr,
    right: exp.Expr,
    a: DecimalType,
    b: DecimalType,
    result: DecimalType,
    node: exp.Expr,
) -> exp.Expr:
    """a / b as Spark computes it: the exact quotient rounded half up (away from zero) to
    the result's scale, NULL for a zero divisor, by integer arithmetic on the digits."""
    if a.precision + a.scale + 1 > decimals.MAX_PRECISION or b.precision + b.scale + 1 > 38:
        raise _refuse(node, "a DECIMAL division too wide for exact integer arithmetic")
    shift = result.scale - a.scale + b.scale
    numerator, denominator = _unscaled(left, a), _unscaled(right, b)
    if shift >= 0:
        numerator = exp.Mul(this=numerator, expression=_pow10(shift))
    else:
        denominator = exp.Mul(this=denominator, expression=_pow10(-shift))
    denominator = exp.Nullif(this=denominator, expression=exp.Literal.number(0))
    two = exp.Literal.number(2)
    magnitude = exp.IntDiv(
        this=exp.Paren(this=exp.Add(
            this=exp.Mul(this=two, expression=exp.Abs(this=numerator)),
            expression=exp.Abs(this=denominator.copy()))),
        expression=exp.Paren(this=exp.Mul(this=two.copy(),
                                          expression=exp.Abs(this=denominator.copy()))),
    )  # fmt: skip
    sign = exp.Mul(this=exp.Sign(this=numerator.copy()), expression=exp.Sign(this=denominator))
    digits = exp.Cast(this=exp.Mul(this=magnitude, expression=sign),
                      to=built("DECIMAL(38, 0)", None))  # fmt: skip
    unit = built(f"DECIMAL({result.scale + 1}, {result.scale})", None)
    scale = exp.Cast(this=exp.Literal.string(f"1e-{result.scale}"), to=unit)
    value = exp.Mul(this=digits, expression=scale) if result.scale else digits
    return _cast(exp.Paren(this=value), decimal_type(result))


def _half_way(gate: _Expressions, node: exp.RegexpLike) -> tuple[exp.Expr, SparkType]:
    """Only the last-digit test of sql/decimals.half_way: `CAST(CAST(q AS DECIMAL(38, k))
    AS STRING) RLIKE '5(E...)?$'` (Spark prints tiny decimals in E notation), rendered
    for DuckDB on the digits: the digit in place k is 5."""
    inner = node.this
    pattern = node.expression
    if not (
        isinstance(pattern, exp.Literal) and pattern.this == _HALF_WAY_PATTERN
        and isinstance(inner, exp.Cast) and isinstance(inner.this, exp.Cast)
    ):  # fmt: skip
        raise _refuse(node, "a regular expression (Spark only)")
    decimal = spark_type_of(inner.this.to)
    rendered, _ = gate.typed(inner.this)
    if decimal.kind != "decimal":
        raise _refuse(node, "a regular expression (Spark only)")
    digits = _unscaled(rendered, decimal.decimal())
    last = exp.Mod(this=digits, expression=exp.Literal.number(10))
    five = [exp.Literal.number(5), exp.Neg(this=exp.Literal.number(5))]
    return exp.In(this=exp.Paren(this=last), expressions=five), BOOLEAN


# A NULL argument of a table function is cast to one type its row admits.
_NULL_AS = {"date": DATE, "decimal": SparkType("decimal", 38, 10), "double": DOUBLE,
            "bigint": BIGINT, "int": INT, "smallint": INT, "tinyint": INT, "string": STRING,
            "timestamp": TIMESTAMP}  # fmt: skip
_Handler = Callable[[_Expressions, exp.Expr], tuple[exp.Expr, SparkType]]
_HANDLERS: dict[type[exp.Expr], _Handler] = {
    exp.Column: _Expressions.column,  # type: ignore[dict-item]
    exp.Literal: _Expressions.literal,  # type: ignore[dict-item]
    exp.Boolean: _Expressions.constant,
    exp.Null: _Expressions.constant,
    exp.Paren: _Expressions.paren,  # type: ignore[dict-item]
    exp.Exists: _Expressions.exists,  # type: ignore[dict-item]
    exp.Subquery: _Expressions.scalar,  # type: ignore[dict-item]
    exp.Window: _Expressions.window,  # type: ignore[dict-item]
    exp.Cast: _Expressions.cast,  # type: ignore[dict-item]
    exp.Add: _Expressions.arithmetic,  # type: ignore[dict-item]
    exp.Sub: _Expressions.arithmetic,  # type: ignore[dict-item]
    exp.Mul: _Expressions.arithmetic,  # type: ignore[dict-item]
    exp.Div: _Expressions.arithmetic,  # type: ignore[dict-item]
    exp.Mod: _Expressions.arithmetic,  # type: ignore[dict-item]
    exp.IntDiv: _Expressions.arithmetic,  # type: ignore[dict-item]
    exp.Neg: _Expressions.negate,  # type: ignore[dict-item]
    exp.EQ: _Expressions.comparison,  # type: ignore[dict-item]
    exp.NEQ: _Expressions.comparison,  # type: ignore[dict-item]
    exp.LT: _Expressions.comparison,  # type: ignore[dict-item]
    exp.LTE: _Expressions.comparison,  # type: ignore[dict-item]
    exp.GT: _Expressions.comparison,  # type: ignore[dict-item]
    exp.GTE: _Expressions.comparison,  # type: ignore[dict-item]
    exp.NullSafeEQ: _Expressions.comparison,  # type: ignore[dict-item]
    exp.And: _Expressions.logical,
    exp.Or: _Expressions.logical,
    exp.Not: _Expressions.logical,
    exp.Is: _Expressions.is_,  # type: ignore[dict-item]
    exp.In: _Expressions.in_,  # type: ignore[dict-item]
    exp.Between: _Expressions.between,  # type: ignore[dict-item]
    exp.Like: _Expressions.like,  # type: ignore[dict-item]
    exp.RegexpLike: _Expressions.regexp,  # type: ignore[dict-item]
    exp.Case: _Expressions.case,  # type: ignore[dict-item]
    exp.If: _Expressions.if_,  # type: ignore[dict-item]
    exp.Coalesce: _Expressions.coalesce,
    exp.Abs: _Expressions.unary_same,  # type: ignore[dict-item]
    exp.Upper: _Expressions.unary_same,  # type: ignore[dict-item]
    exp.Lower: _Expressions.unary_same,  # type: ignore[dict-item]
    exp.Trim: _Expressions.trim,  # type: ignore[dict-item]
    exp.Sign: _Expressions.sign,  # type: ignore[dict-item]
    exp.Length: _Expressions.length,  # type: ignore[dict-item]
    exp.Sqrt: _Expressions.sqrt,  # type: ignore[dict-item]
    exp.Substring: _Expressions.substring,  # type: ignore[dict-item]
    exp.Concat: _Expressions.concat,
    exp.DPipe: _Expressions.concat,
    exp.Greatest: _Expressions.extremum,  # type: ignore[dict-item]
    exp.Least: _Expressions.extremum,  # type: ignore[dict-item]
    exp.Round: _Expressions.round,  # type: ignore[dict-item]
    exp.TsOrDsToDate: _Expressions.to_date,
    exp.TsOrDsAdd: _Expressions.date_add,  # type: ignore[dict-item]
    exp.TimestampTrunc: _Expressions.trunc,  # type: ignore[dict-item]
    **{part: _Expressions.date_part for part in _PARTS},  # type: ignore[misc]
    exp.Count: _Expressions.count,  # type: ignore[dict-item]
    exp.CountIf: _Expressions.count_if,  # type: ignore[dict-item]
    exp.Sum: _Expressions.sum,  # type: ignore[dict-item]
    exp.Avg: _Expressions.average,
    exp.Variance: _Expressions.average,
    exp.VariancePop: _Expressions.average,
    exp.Stddev: _Expressions.average,
    exp.StddevPop: _Expressions.average,
    exp.StddevSamp: _Expressions.average,
    exp.Min: _Expressions.extreme,
    exp.Max: _Expressions.extreme,
    exp.LogicalAnd: _Expressions.logical_aggregate,
    exp.LogicalOr: _Expressions.logical_aggregate,
    exp.AnyValue: _Expressions.any_value,  # type: ignore[dict-item]
    exp.Grouping: _Expressions.grouping,
    exp.GroupingId: _Expressions.grouping,
}
