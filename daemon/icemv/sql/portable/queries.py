"""Queries through the gate: SELECT, UNION ALL, WITH, joins and generators, each
relation's columns typed in its scope; expressions by `expressions.Expressions`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial

from sqlglot import exp

from icemv.sql.portable.aggregates import group_key, grouping_set
from icemv.sql.portable.common import (
    _SELECT_PARTS,
    _UNION_PARTS,
    Schema,
    _cast,
    _rebuilt,
    _refuse,
    _Scope,
    duckdb_type,
)  # fmt: skip
from icemv.sql.portable.expressions import Expressions
from icemv.sql.spark_types import (
    INT,
    SparkType,
    common,
)


class Gate:
    """`utc`: the session zone is one of `UTC_ZONES`, where a TIMESTAMP's local time is
    its UTC time (`_utc_local`, and the module `icemv.sql.portable` on time zones)."""

    def __init__(self, relations: Mapping[str, Schema], utc: bool = False) -> None:
        self.relations = relations
        self.utc = utc
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
        expr = Expressions(scope, self)
        where = node.args.get("where")
        if where is not None:
            where = exp.Where(this=_nots_pushed(where.this))
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
                        grouping_set(expr, e, nested=isinstance(key, exp.GroupingSets))
                        for e in key.expressions
                    ]))  # fmt: skip
                    continue
                keys.append(group_key(expr, key))
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
        outputs = [_nots_pushed(projection) for projection in node.expressions]
        for projection in outputs:
            for found in projection.find_all(exp.In):
                at = _valued(found, projection)
                if at is not None:
                    expr.valued.add(id(at))
                    if at is not found:  # the NOT right above it: the IN itself bare
                        expr.filtering.add(id(found))
        for projection in outputs:
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
        order = node.args.get("order")
        if order is not None:
            copy.set("order", exp.Order(expressions=[_ordered(expr, o) for o in order.expressions]))
        limit = node.args.get("limit")
        if limit is not None:
            copy.set("limit", _limit(limit))
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
        rendered_on = Expressions(seen, self).boolean(on) if on is not None else None
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
        expr = Expressions(scope, self)
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
        expr: Expressions, series: exp.GenerateSeries, lateral: exp.Expr
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
        expr: Expressions, array: exp.Array, lateral: exp.Expr
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


def _nots_pushed(node: exp.Expr) -> exp.Expr:
    """`node`, or where an `IN (SELECT ...)` is below, a copy whose NOTs stand where Spark
    3.5's optimiser moves them before it plans the IN (BooleanSimplification: `NOT (a AND
    b)` is `NOT a OR NOT b`, `NOT (a OR b)` is `NOT a AND NOT b`, `NOT NOT a` is `a`; laws
    of SQL's three-valued logic too, so every other value is unchanged). Spark values an
    IN by the NOT right above it or none (`_valued`, `_filters`), so the gate must see it
    there. A NOT above anything else (a CASE, a comparison) stays where it is."""
    if not any(found.args.get("query") is not None for found in node.find_all(exp.In)):
        return node
    return _pushed(node, negated=False)


def _pushed(node: exp.Expr, negated: bool) -> exp.Expr:
    inner = node
    while isinstance(inner, exp.Paren):
        inner = inner.this
    if isinstance(inner, exp.Not):
        return _pushed(inner.this, not negated)
    if isinstance(inner, exp.And | exp.Or):
        kind: type[exp.Connector] = type(inner)
        if negated:
            kind = exp.Or if isinstance(inner, exp.And) else exp.And
        left, right = (_pushed(side, negated) for side in (inner.this, inner.expression))
        return exp.Paren(this=kind(this=left, expression=right))
    copy = node.copy()
    for child in list(copy.iter_expressions()):
        child.replace(_pushed(child, negated=False))
    if not negated:
        return copy
    return exp.Not(this=copy if isinstance(copy, exp.Paren) else exp.Paren(this=copy))


def _valued(node: exp.In, projection: exp.Expr) -> exp.Expr | None:
    """The node of `projection` to render as `COALESCE(node, FALSE)` for `x IN (SELECT
    ...)` to have Spark's value in a projection, or None (refused). Spark 3.5 plans it as
    an existence join: `x IN s` is TRUE exactly when SQL's IN is, else FALSE (never NULL),
    and `NOT (x IN s)` null-aware, TRUE exactly when SQL's NOT IN is, else FALSE. So the IN,
    or a NOT right above it, is that node, when above them there are only parentheses, AND,
    OR and CASE/IF: no other NOT, which Spark's optimiser would move onto the IN
    (`NOT (f OR x IN s)` becomes `NOT f AND NOT (x IN s)`)."""
    if node.args.get("query") is None:
        return None
    above: exp.Expr = node
    while isinstance(above.parent, exp.Paren):
        above = above.parent
    valued: exp.Expr = above.parent if isinstance(above.parent, exp.Not) else node
    above = valued
    while above is not projection:
        parent = above.parent
        if not isinstance(parent, exp.Paren | exp.Alias | exp.And | exp.Or | exp.If | exp.Case):
            return None
        above = parent
    return valued


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


def _ordered(expr: Expressions, node: exp.Expr) -> exp.Expr:
    """An ORDER BY term whose order both engines agree on: NULLs placed as the tree says
    (sqlglot keeps Spark's default placement on the node, DuckDB's output spells it), and
    no floating-point key (engines may tell -0.0 and 0.0 apart) or complex one."""
    if not isinstance(node, exp.Ordered):
        raise _refuse(node, "an ORDER BY term")
    value, kind = expr.typed(node.this)
    if kind.floating or kind.kind == "complex":
        raise _refuse(node, "ORDER BY a floating-point or complex value")
    return _rebuilt(node, this=value)


def _limit(node: exp.Expr) -> exp.Expr:
    """LIMIT n of an integer literal (a row count both engines take alike)."""
    count = node.args.get("expression")
    if (
        not isinstance(node, exp.Limit)
        or node.args.get("offset")
        or not (isinstance(count, exp.Literal) and not count.is_string and count.this.isdigit())
    ):
        raise _refuse(node, "a LIMIT other than a row count")
    return node.copy()
