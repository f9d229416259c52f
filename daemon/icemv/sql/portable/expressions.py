"""Expressions through the gate: leaves, casts, arithmetic, predicates, conditionals
and windows here; scalar functions and aggregates in their mixins; the handler
table by node class."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlglot import exp

from icemv.sql import decimals
from icemv.sql.functions import timestamp_text
from icemv.sql.portable.aggregates import Aggregates
from icemv.sql.portable.base import Handler
from icemv.sql.portable.common import (
    _DATE_LITERAL,
    _PARTS,
    _TIMESTAMP_LITERAL,
    _as_decimal,
    _cast,
    _copied_column,
    _rebuilt,
    _refuse,
    _safe_cast,
    spark_type_of,
)  # fmt: skip
from icemv.sql.portable.division import _decimal_division, _half_way
from icemv.sql.portable.scalars import Scalars
from icemv.sql.portable.string_numbers import integral_of_string
from icemv.sql.spark_types import (
    BIGINT,
    BOOLEAN,
    DATE,
    DOUBLE,
    INT,
    NULL,
    STRING,
    TIMESTAMP,
    SparkType,
    common,
    decimal_type,
    of_literal,
)
from icemv.sql.string_casts import cast_string_literal


class Expressions(Scalars, Aggregates):
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
        if source == STRING and target.integral:
            return integral_of_string(rendered, target), target
        if source == TIMESTAMP and target == STRING:
            return _cast(timestamp_text(rendered), STRING), STRING
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
        integral = next((k for k in kinds if k.integral), None)
        if integral is not None and STRING in kinds:  # Spark casts the string
            parts = [integral_of_string(p, integral) if k == STRING else p
                     for p, k in zip(parts, kinds, strict=True)]  # fmt: skip
            kinds = [integral, integral]
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
        rendered = _rebuilt(node, **children)
        if id(node) in self.valued:  # NOT (x IN (SELECT ...)) in a projection: NULL is FALSE
            rendered = exp.Coalesce(this=rendered, expressions=[exp.false()])
        return rendered, BOOLEAN

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
            valued = id(node) in self.valued
            if id(node) not in self.filtering and not valued:
                raise _refuse(node, "IN (SELECT ...) whose NULL Spark reads otherwise")
            value, kind = self.typed(node.this)
            inner, columns = self.gate.query(query, self.scope)
            if len(columns) != 1:
                raise _refuse(node, "IN over a subquery of several columns")
            (name, column), texts = columns[0], _as_strings([kind, columns[0][1]])
            if texts:  # Spark compares an integer and a string as strings here
                if texts[0]:
                    value, kind = _cast(value, STRING), STRING
                else:
                    inner, column = _strings_of(inner, name), STRING
            self.joint(node, [kind, column])  # values DuckDB compares exactly too
            tested: exp.Expr = exp.In(this=value, query=inner)
            if valued:  # Spark's NULL is FALSE here
                tested = exp.Coalesce(this=tested, expressions=[exp.false()])
            return tested, BOOLEAN
        rendered, kinds = self._literals_as_dates(*self.each([node.this, *node.expressions]))
        texts = _as_strings(kinds)
        if texts:  # Spark compares integers and strings in a list as strings
            rendered = [_cast(r, STRING) if t else r for r, t in zip(rendered, texts, strict=True)]
            kinds = [STRING if t else k for k, t in zip(kinds, texts, strict=True)]
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
        if node.args.get("alias") or node.args.get("first"):
            raise _refuse(node, "a named window (Spark only)")
        function = node.this
        spec = node.args.get("spec")
        framed = exp.Sum | exp.Count | exp.Min | exp.Max | exp.Avg | exp.FirstValue | exp.LastValue
        if spec is not None and not (isinstance(function, framed) and _same_frame(spec)):
            raise _refuse(node, "a window frame other than ROWS, or RANGE unbounded before")
        if isinstance(function, exp.RowNumber | exp.Rank | exp.DenseRank | exp.PercentRank
                      | exp.CumeDist):  # fmt: skip
            if function.expressions if hasattr(function, "expressions") else False:
                raise _refuse(node, "a rank with arguments")
            rendered_function: exp.Expr = function.copy()
            # PERCENT_RANK and CUME_DIST: one division of two counts as DOUBLE in both.
            fraction = isinstance(function, exp.PercentRank | exp.CumeDist)
            kind = cast_to = DOUBLE if fraction else INT
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
        elif isinstance(function, exp.FirstValue | exp.LastValue):
            # the frame's first (last) row's value, NULL or not, in both (IGNORE NULLS is
            # another node: refused below)
            value, kind = self.typed(function.this)
            rendered_function, cast_to = _rebuilt(function, this=value), kind
        elif isinstance(function, exp.Avg) and (kind := self.typed(function.this)[1]).kind == (
            "decimal"
        ):
            if spec is not None:
                raise _refuse(node, "AVG of a DECIMAL over a window frame")
            return self.decimal_average(
                function, kind, lambda aggregate: _rebuilt(node, this=aggregate)
            )
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


_HANDLERS: dict[type[exp.Expr], Handler] = {
    exp.Column: Expressions.column,  # type: ignore[dict-item]
    exp.Literal: Expressions.literal,  # type: ignore[dict-item]
    exp.Boolean: Expressions.constant,
    exp.Null: Expressions.constant,
    exp.Paren: Expressions.paren,  # type: ignore[dict-item]
    exp.Exists: Expressions.exists,  # type: ignore[dict-item]
    exp.Subquery: Expressions.scalar,  # type: ignore[dict-item]
    exp.Window: Expressions.window,  # type: ignore[dict-item]
    exp.Cast: Expressions.cast,  # type: ignore[dict-item]
    exp.Add: Expressions.arithmetic,  # type: ignore[dict-item]
    exp.Sub: Expressions.arithmetic,  # type: ignore[dict-item]
    exp.Mul: Expressions.arithmetic,  # type: ignore[dict-item]
    exp.Div: Expressions.arithmetic,  # type: ignore[dict-item]
    exp.Mod: Expressions.arithmetic,  # type: ignore[dict-item]
    exp.IntDiv: Expressions.arithmetic,  # type: ignore[dict-item]
    exp.Neg: Expressions.negate,  # type: ignore[dict-item]
    exp.EQ: Expressions.comparison,  # type: ignore[dict-item]
    exp.NEQ: Expressions.comparison,  # type: ignore[dict-item]
    exp.LT: Expressions.comparison,  # type: ignore[dict-item]
    exp.LTE: Expressions.comparison,  # type: ignore[dict-item]
    exp.GT: Expressions.comparison,  # type: ignore[dict-item]
    exp.GTE: Expressions.comparison,  # type: ignore[dict-item]
    exp.NullSafeEQ: Expressions.comparison,  # type: ignore[dict-item]
    exp.And: Expressions.logical,
    exp.Or: Expressions.logical,
    exp.Not: Expressions.logical,
    exp.Is: Expressions.is_,  # type: ignore[dict-item]
    exp.In: Expressions.in_,  # type: ignore[dict-item]
    exp.Between: Expressions.between,  # type: ignore[dict-item]
    exp.Like: Expressions.like,  # type: ignore[dict-item]
    exp.RegexpLike: Expressions.regexp,  # type: ignore[dict-item]
    exp.Case: Expressions.case,  # type: ignore[dict-item]
    exp.If: Expressions.if_,  # type: ignore[dict-item]
    exp.Coalesce: Expressions.coalesce,
    exp.Abs: Expressions.unary_same,  # type: ignore[dict-item]
    exp.Trim: Expressions.trim,  # type: ignore[dict-item]
    exp.Substring: Expressions.substring,  # type: ignore[dict-item]
    exp.Concat: Expressions.concat,
    exp.DPipe: Expressions.concat,
    exp.Greatest: Expressions.extremum,  # type: ignore[dict-item]
    exp.Least: Expressions.extremum,  # type: ignore[dict-item]
    exp.Round: Expressions.round,  # type: ignore[dict-item]
    exp.TsOrDsToDate: Expressions.to_date,
    exp.TimeStrToTime: Expressions.as_timestamp,
    exp.TsOrDsAdd: Expressions.date_add,  # type: ignore[dict-item]
    exp.TimestampTrunc: Expressions.trunc,  # type: ignore[dict-item]
    **{part: Expressions.date_part for part in _PARTS},  # type: ignore[misc]
    exp.Count: Expressions.count,  # type: ignore[dict-item]
    exp.CountIf: Expressions.count_if,  # type: ignore[dict-item]
    exp.Sum: Expressions.sum,  # type: ignore[dict-item]
    exp.Avg: Expressions.average,
    exp.Variance: Expressions.average,
    exp.VariancePop: Expressions.average,
    exp.Stddev: Expressions.average,
    exp.StddevPop: Expressions.average,
    exp.StddevSamp: Expressions.average,
    exp.Median: Expressions.median,  # type: ignore[dict-item]
    exp.Quantile: Expressions.percentile,  # type: ignore[dict-item]
    exp.WithinGroup: Expressions.within_group,  # type: ignore[dict-item]
    exp.Min: Expressions.extreme,
    exp.Max: Expressions.extreme,
    exp.LogicalAnd: Expressions.logical_aggregate,
    exp.LogicalOr: Expressions.logical_aggregate,
    exp.AnyValue: Expressions.any_value,  # type: ignore[dict-item]
    exp.Grouping: Expressions.grouping,
    exp.GroupingId: Expressions.grouping,
}

Expressions.handlers = _HANDLERS


def _same_frame(spec: exp.Expr) -> bool:
    """A frame both engines bound alike: ROWS between UNBOUNDED, CURRENT ROW or a literal
    count of rows before or after; RANGE only from UNBOUNDED PRECEDING to CURRENT ROW or
    UNBOUNDED FOLLOWING (a RANGE offset's arithmetic on the ORDER BY key, and its NULLs,
    are not compared). Which rows a ROWS frame holds among ORDER BY ties is the sort's in
    both: as in Spark itself, only ties that are whole rows alike give one answer."""
    if spec.args.get("exclude"):
        return False
    start, end = spec.args.get("start"), spec.args.get("end")
    start_side, end_side = spec.args.get("start_side"), spec.args.get("end_side")
    if str(spec.args.get("kind", "")).upper() == "RANGE":
        return _bound(start) == "UNBOUNDED" and str(start_side).upper() == "PRECEDING" and (
            end is None or _bound(end) == "CURRENT ROW"
            or (_bound(end) == "UNBOUNDED" and str(end_side).upper() == "FOLLOWING")
        )  # fmt: skip
    if str(spec.args.get("kind", "")).upper() != "ROWS":
        return False
    return _row_bound(start, start_side, "PRECEDING") and (
        end is None or _row_bound(end, end_side, "FOLLOWING")
    )


def _bound(value: object) -> str:
    return str(value.name if isinstance(value, exp.Expr) else value or "").upper()


def _row_bound(value: object, side: object, unbounded_side: str) -> bool:
    if _bound(value) == "CURRENT ROW":
        return True
    if _bound(value) == "UNBOUNDED":
        return str(side).upper() == unbounded_side
    return (
        isinstance(value, exp.Literal)
        and not value.is_string
        and value.this.isdigit()
        and str(side).upper() in ("PRECEDING", "FOLLOWING")
    )


def _as_strings(kinds: Sequence[SparkType]) -> list[bool]:
    """Which values of an IN Spark casts to strings (its wider common type of integers
    and strings is STRING; an integer's text is the same in DuckDB), or none."""
    mixed = STRING in kinds and any(k.integral for k in kinds)
    if not mixed or not all(k == STRING or k.integral or k.kind == "null" for k in kinds):
        return []
    return [k.integral for k in kinds]


def _strings_of(query: exp.Expr, name: str) -> exp.Expr:
    """A one-column subquery's values as strings."""
    if not name:
        raise _refuse(query, "IN over an unnamed column of another type")
    body = query.this if isinstance(query, exp.Subquery) else query
    column = exp.column(name, table="__icemv_in", quoted=True)
    strings = exp.select(_cast(column, STRING)).from_(
        exp.Subquery(this=body, alias=exp.TableAlias(this=exp.to_identifier("__icemv_in")))
    )
    return exp.Subquery(this=strings)
