"""Spark SQL expressions evaluated with pyarrow.compute, for a subset whose semantics match.

`compile_expr` translates a (qualified) sqlglot expression against the Arrow types of its
input columns, before any data is read: the result knows its Arrow type, and anything
outside the subset raises `ArrowUnsupportedError` with the reason, so the caller chooses
Spark up front. Inside the subset the result equals Spark's (non-ANSI, Spark 3.5):

- columns, literals (integers as INT or BIGINT; decimal literals only beside a DOUBLE,
  where Spark computes in DOUBLE too), TRUE/FALSE/NULL, strings;
- `+ - *` and unary minus over integers (wrapping on overflow, as Spark without ANSI) and
  DOUBLE; `/` in DOUBLE, NULL for a zero divisor; `%` of integers (the sign of the
  dividend, as Java's; NULL for a zero divisor); no DECIMAL, FLOAT, `%` of DOUBLE or `DIV`;
- comparisons of numbers, of dates (a date against a 'YYYY-MM-DD' literal too), `=`/`<>`
  of strings and booleans (ordering strings is left to Spark: collation);
- AND / OR (three-valued), NOT, IS [NOT] NULL, IN (list), CASE, IF, COALESCE,
  GREATEST / LEAST (skipping NULLs), SQRT (NaN below zero);
- CAST only where it cannot fail or round: widening integers, integers to DOUBLE,
  integers, dates and booleans to STRING.

Pure: no I/O; evaluation needs only the input table.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from icemv.errors import ArrowUnsupportedError

Values = Any  # an Arrow array, chunked array or scalar (pyarrow ships no usable stubs)
# (table qualifier or "", column name) -> the input column's name and type
Fields = Mapping[tuple[str, str], tuple[str, pa.DataType]]

_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_INT32 = 2**31


@dataclass(frozen=True)
class ArrowExpr:
    """A compiled expression: its Arrow type, and how to compute it from an input table."""

    type: pa.DataType
    run: Callable[[pa.Table], Values]
    # A DECIMAL literal: usable only beside a DOUBLE (then it is one).
    decimal_literal: float | None = None

    def evaluate(self, table: pa.Table) -> Values:
        """The value of every row of `table` (a literal repeated)."""
        values = self.run(table)
        if isinstance(values, pa.Scalar):
            return pa.array([values.as_py()] * table.num_rows, self.type)
        return values


def compile_expr(node: exp.Expr, fields: Fields) -> ArrowExpr:
    """`node` as an Arrow computation over columns described by `fields`."""
    return _Compiler(fields).compile(node)


def _unsupported(detail: str) -> ArrowUnsupportedError:
    return ArrowUnsupportedError(detail)


def _is_int(t: pa.DataType) -> bool:
    return bool(pa.types.is_integer(t))


def _is_double(t: pa.DataType) -> bool:
    return bool(pa.types.is_float64(t))


def _is_number(t: pa.DataType) -> bool:
    return _is_int(t) or _is_double(t)


def _is_string(t: pa.DataType) -> bool:
    return bool(pa.types.is_string(t) or pa.types.is_large_string(t))


def _is_null(t: pa.DataType) -> bool:
    return bool(pa.types.is_null(t))


def _wider_int(a: pa.DataType, b: pa.DataType) -> pa.DataType:
    return a if a.bit_width >= b.bit_width else b


def _literal(value: Any, arrow_type: pa.DataType) -> ArrowExpr:
    scalar = pa.scalar(value, arrow_type)
    return ArrowExpr(arrow_type, lambda _: scalar)


def _cast(expr: ArrowExpr, target: pa.DataType) -> ArrowExpr:
    if expr.type == target:
        return expr
    if expr.decimal_literal is not None:
        return _literal(expr.decimal_literal, target)
    run = expr.run
    return ArrowExpr(target, lambda t: pc.cast(run(t), target))


def common_type(types: Sequence[pa.DataType], what: str) -> pa.DataType:
    """The type Spark gives values of `types` side by side (CASE branches, COALESCE)."""
    known = [t for t in types if not _is_null(t)]
    if not known:
        return pa.null()
    first = known[0]
    if all(t == first for t in known):
        return first
    if all(_is_int(t) for t in known):
        widest = first
        for t in known[1:]:
            widest = _wider_int(widest, t)
        return widest
    if all(_is_number(t) for t in known):
        return pa.float64()
    if all(_is_string(t) for t in known):
        return pa.large_string()
    raise _unsupported(f"{what} mixes {', '.join(sorted({str(t) for t in known}))}")


def _unify(exprs: Sequence[ArrowExpr], what: str) -> list[ArrowExpr]:
    decimals = [e for e in exprs if e.decimal_literal is not None]
    others = [e.type for e in exprs if e.decimal_literal is None]
    if decimals and not any(_is_double(t) for t in others):
        raise _unsupported(f"{what} with a DECIMAL literal (DECIMAL arithmetic)")
    target = common_type([*others, *([pa.float64()] if decimals else [])], what)
    return [_cast(e, target) for e in exprs]


class _Compiler:
    def __init__(self, fields: Fields) -> None:
        self.fields = fields
        self._rules: dict[type[exp.Expr], Callable[[Any], ArrowExpr]] = {
            exp.Column: self._column,
            exp.Literal: self._literal,
            exp.Boolean: lambda n: _literal(bool(n.this), pa.bool_()),
            exp.Null: lambda _: _literal(None, pa.null()),
            exp.Paren: lambda n: self.compile(n.this),
            exp.Alias: lambda n: self.compile(n.this),
            exp.Add: lambda n: self._arithmetic(n, "add"),
            exp.Sub: lambda n: self._arithmetic(n, "subtract"),
            exp.Mul: lambda n: self._arithmetic(n, "multiply"),
            exp.Div: self._divide,
            exp.Mod: self._modulo,
            exp.Neg: self._negate,
            exp.EQ: lambda n: self._compare(n, "equal"),
            exp.NEQ: lambda n: self._compare(n, "not_equal"),
            exp.GT: lambda n: self._compare(n, "greater"),
            exp.GTE: lambda n: self._compare(n, "greater_equal"),
            exp.LT: lambda n: self._compare(n, "less"),
            exp.LTE: lambda n: self._compare(n, "less_equal"),
            exp.And: lambda n: self._logic(n, pc.and_kleene),
            exp.Or: lambda n: self._logic(n, pc.or_kleene),
            exp.Not: self._not,
            exp.Is: self._is,
            exp.In: self._in,
            exp.Case: self._case,
            exp.If: lambda n: self._branches([(n.this, n.args.get("true"))], n.args.get("false")),
            exp.Coalesce: self._coalesce,
            exp.Greatest: lambda n: self._extreme(n, pc.max_element_wise),
            exp.Least: lambda n: self._extreme(n, pc.min_element_wise),
            exp.Sqrt: self._sqrt,
            exp.Cast: self._cast,
            exp.TryCast: self._cast,  # Spark's CAST parses as TRY_CAST: the subset cannot fail
        }

    def compile(self, node: exp.Expr) -> ArrowExpr:
        rule = self._rules.get(type(node))
        if rule is None:
            raise _unsupported(f"{type(node).__name__} ({node.sql(dialect='spark')[:60]})")
        return rule(node)

    def _column(self, node: exp.Column) -> ArrowExpr:
        if isinstance(node.this, exp.Star):
            raise _unsupported("a star")
        found = self.fields.get((node.table, node.name))
        if found is None:
            raise _unsupported(f"unknown column {node.sql(dialect='spark')}")
        name, arrow_type = found
        return ArrowExpr(arrow_type, lambda t: t.column(name))

    def _literal(self, node: exp.Literal) -> ArrowExpr:
        text = str(node.this)
        if node.is_string:
            return _literal(text, pa.large_string())
        if re.fullmatch(r"\d+", text):
            value = int(text)
            if value >= 2**63:
                raise _unsupported(f"integer literal {text} (DECIMAL)")
            return _literal(value, pa.int32() if value < _INT32 else pa.int64())
        if re.fullmatch(r"(\d+\.\d*|\.\d+)", text):  # Spark: DECIMAL; beside a DOUBLE, DOUBLE
            return ArrowExpr(pa.float64(), lambda _: pa.scalar(float(text)), float(text))
        if re.fullmatch(r"(\d+\.?\d*|\.\d+)[eE][+-]?\d+", text):
            return _literal(float(text), pa.float64())
        raise _unsupported(f"numeric literal {text}")

    def _numbers(self, node: exp.Binary, what: str) -> tuple[ArrowExpr, ArrowExpr]:
        left, right = self.compile(node.this), self.compile(node.expression)
        for side in (left, right):
            if not (_is_number(side.type) or _is_null(side.type)):
                raise _unsupported(f"{what} of {side.type}")
        unified = _unify([left, right], what)
        return unified[0], unified[1]

    def _arithmetic(self, node: exp.Binary, function: str) -> ArrowExpr:
        left, right = self._numbers(node, function)
        lrun, rrun = left.run, right.run
        return ArrowExpr(left.type, lambda t: pc.call_function(function, [lrun(t), rrun(t)]))

    def _divide(self, node: exp.Div) -> ArrowExpr:
        left, right = self._numbers(node, "divide")
        lrun, rrun = _cast(left, pa.float64()).run, _cast(right, pa.float64()).run

        def run(t: pa.Table) -> Values:
            divisor = rrun(t)
            quotient = pc.divide(lrun(t), divisor)
            return pc.if_else(pc.equal(divisor, 0.0), pa.scalar(None, pa.float64()), quotient)

        return ArrowExpr(pa.float64(), run)

    def _modulo(self, node: exp.Mod) -> ArrowExpr:
        left, right = self._numbers(node, "Mod")
        if not _is_int(left.type):  # Java's double remainder: left to Spark
            raise _unsupported(f"Mod of {left.type}")
        lrun, rrun = left.run, right.run
        one = pa.scalar(1, left.type)

        def run(t: pa.Table) -> Values:
            divisor = rrun(t)
            zero = pc.equal(divisor, 0)
            remainder = pc.remainder(lrun(t), pc.if_else(zero, one, divisor))
            return pc.if_else(zero, pa.scalar(None, left.type), remainder)

        return ArrowExpr(left.type, run)

    def _negate(self, node: exp.Neg) -> ArrowExpr:
        inner = self.compile(node.this)
        if inner.decimal_literal is not None:
            value = -inner.decimal_literal
            return ArrowExpr(pa.float64(), lambda _: pa.scalar(value), value)
        if not _is_number(inner.type):
            raise _unsupported(f"negation of {inner.type}")
        run = inner.run
        return ArrowExpr(inner.type, lambda t: pc.negate(run(t)))

    def _compare(self, node: exp.Binary, function: str) -> ArrowExpr:
        left, right = self.compile(node.this), self.compile(node.expression)
        left, right = self._comparable(left, right, node.this, node.expression, function)
        lrun, rrun = left.run, right.run
        return ArrowExpr(pa.bool_(), lambda t: pc.call_function(function, [lrun(t), rrun(t)]))

    def _comparable(
        self,
        left: ArrowExpr,
        right: ArrowExpr,
        left_node: exp.Expr,
        right_node: exp.Expr,
        function: str,
    ) -> tuple[ArrowExpr, ArrowExpr]:
        types = (left.type, right.type)
        if any(_is_null(t) for t in types):
            null = _literal(None, pa.bool_())
            return null, null
        if all(_is_number(t) for t in types):
            unified = _unify([left, right], function)
            return unified[0], unified[1]
        if pa.types.is_date32(left.type) or pa.types.is_date32(right.type):
            return self._date(left, left_node), self._date(right, right_node)
        equality = function in ("equal", "not_equal")
        if equality and all(_is_string(t) for t in types):
            return left, right
        if equality and all(pa.types.is_boolean(t) for t in types):
            return left, right
        raise _unsupported(f"{function} of {left.type} and {right.type}")

    def _date(self, expr: ArrowExpr, node: exp.Expr) -> ArrowExpr:
        if pa.types.is_date32(expr.type):
            return expr
        if isinstance(node, exp.Literal) and node.is_string and _DATE.match(str(node.this)):
            return _literal(dt.date.fromisoformat(str(node.this)), pa.date32())
        raise _unsupported(f"a date compared with {expr.type}")

    def _boolean(self, node: exp.Expr) -> ArrowExpr:
        expr = self.compile(node)
        if _is_null(expr.type):
            return _literal(None, pa.bool_())
        if not pa.types.is_boolean(expr.type):
            raise _unsupported(f"{expr.type} as a condition")
        return expr

    def _logic(self, node: exp.Binary, function: Callable[..., Values]) -> ArrowExpr:
        lrun, rrun = self._boolean(node.this).run, self._boolean(node.expression).run
        return ArrowExpr(pa.bool_(), lambda t: function(lrun(t), rrun(t)))

    def _not(self, node: exp.Not) -> ArrowExpr:
        run = self._boolean(node.this).run
        return ArrowExpr(pa.bool_(), lambda t: pc.invert(run(t)))

    def _is(self, node: exp.Is) -> ArrowExpr:
        if not isinstance(node.expression, exp.Null):
            raise _unsupported(f"IS {node.expression.sql(dialect='spark')}")
        run = self.compile(node.this).run
        return ArrowExpr(pa.bool_(), lambda t: pc.is_null(run(t)))

    def _in(self, node: exp.In) -> ArrowExpr:
        if node.args.get("query") or node.args.get("unnest") or node.args.get("field"):
            raise _unsupported("IN over a subquery")
        options = node.expressions
        if not options:
            raise _unsupported("an empty IN list")
        # x IN (a, b) is x = a OR x = b, three-valued, as Spark evaluates it.
        equal = [exp.EQ(this=node.this.copy(), expression=o.copy()) for o in options]
        condition: exp.Expr = equal[0]
        for more in equal[1:]:
            condition = exp.Or(this=condition, expression=more)
        return self._boolean(condition)

    def _case(self, node: exp.Case) -> ArrowExpr:
        subject = node.this
        whens: list[tuple[exp.Expr, exp.Expr | None]] = []
        for when in node.args.get("ifs") or []:
            condition = when.this
            if subject is not None:
                condition = exp.EQ(this=subject.copy(), expression=condition.copy())
            whens.append((condition, when.args.get("true")))
        return self._branches(whens, node.args.get("default"))

    def _branches(
        self, whens: Sequence[tuple[exp.Expr, exp.Expr | None]], default: exp.Expr | None
    ) -> ArrowExpr:
        """The first branch whose condition is TRUE (NULL counts as not), else `default`."""
        conditions = [self._boolean(c).run for c, _ in whens]
        values = [self.compile(v) if v is not None else _literal(None, pa.null()) for _, v in whens]
        otherwise = self.compile(default) if default is not None else _literal(None, pa.null())
        unified = _unify([*values, otherwise], "CASE")
        target = unified[0].type
        if _is_null(target):
            return _literal(None, pa.null())
        runs = [u.run for u in unified]

        def run(t: pa.Table) -> Values:
            result = runs[-1](t)
            for condition, value in reversed(list(zip(conditions, runs[:-1], strict=True))):
                taken = pc.fill_null(condition(t), False)
                result = pc.if_else(taken, value(t), result)
            return result

        return ArrowExpr(target, run)

    def _operands(self, node: exp.Func, what: str) -> list[ArrowExpr]:
        return _unify([self.compile(e) for e in (node.this, *node.expressions)], what)

    def _coalesce(self, node: exp.Coalesce) -> ArrowExpr:
        operands = self._operands(node, "COALESCE")
        runs = [o.run for o in operands]
        return ArrowExpr(operands[0].type, lambda t: pc.coalesce(*[r(t) for r in runs]))

    def _extreme(self, node: exp.Func, function: Callable[..., Values]) -> ArrowExpr:
        operands = self._operands(node, type(node).__name__.upper())
        target = operands[0].type
        if not (_is_number(target) or pa.types.is_date32(target)):
            raise _unsupported(f"{type(node).__name__.upper()} of {target}")
        runs = [o.run for o in operands]
        return ArrowExpr(target, lambda t: function(*[r(t) for r in runs], skip_nulls=True))

    def _sqrt(self, node: exp.Sqrt) -> ArrowExpr:
        inner = self.compile(node.this)
        if not (_is_number(inner.type) or _is_null(inner.type)):
            raise _unsupported(f"SQRT of {inner.type}")
        run = _cast(inner, pa.float64()).run  # a negative gives NaN, as in Spark
        return ArrowExpr(pa.float64(), lambda t: pc.sqrt(run(t)))

    def _cast(self, node: exp.Cast) -> ArrowExpr:
        inner = self.compile(node.this)
        target = _CAST_TARGETS.get(node.to.this)
        if target is None:
            raise _unsupported(f"CAST to {node.to.sql(dialect='spark')}")
        if _is_null(inner.type) or inner.type == target:
            return _literal(None, target) if _is_null(inner.type) else inner
        if inner.decimal_literal is not None:
            raise _unsupported("CAST of a DECIMAL literal")
        source = inner.type
        lossless = (
            (_is_int(source) and _is_int(target) and target.bit_width >= source.bit_width)
            or (_is_int(source) and _is_double(target))
            or (
                _is_string(target)
                and (_is_int(source) or pa.types.is_date32(source) or pa.types.is_boolean(source))
            )
            or (_is_string(source) and _is_string(target))
        )
        if not lossless:
            raise _unsupported(f"CAST from {source} to {target}")
        return _cast(inner, target)


_CAST_TARGETS: dict[Any, pa.DataType] = {
    exp.DataType.Type.TINYINT: pa.int8(),
    exp.DataType.Type.SMALLINT: pa.int16(),
    exp.DataType.Type.INT: pa.int32(),
    exp.DataType.Type.BIGINT: pa.int64(),
    exp.DataType.Type.DOUBLE: pa.float64(),
    exp.DataType.Type.VARCHAR: pa.large_string(),
    exp.DataType.Type.TEXT: pa.large_string(),
    exp.DataType.Type.BOOLEAN: pa.bool_(),
    exp.DataType.Type.DATE: pa.date32(),
}
