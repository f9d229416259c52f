"""A row of the function table: a Spark function's arguments, result type and DuckDB
expression (see the package), with the small builders its expressions share."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from sqlglot import exp

from icemv.sql.spark_types import STRING, SparkType

# Argument kinds (SparkType.kind): "date-like" is a DATE, or a TIMESTAMP read as its date
# in the session zone (Spark's implicit cast; sqlglot often wraps it in TsOrDsToDate).
STRINGS = frozenset({"string"})
DATES = frozenset({"date"})
DATE_LIKE = frozenset({"date", "timestamp"})
NUMBERS = frozenset({"double", "decimal"})
TIMESTAMPS = frozenset({"timestamp"})
INTEGERS = frozenset({"tinyint", "smallint", "int", "bigint"})


def literal_int(minimum: int | None = None, nonzero: bool = False) -> Callable[[exp.Expr], bool]:
    def check(node: exp.Expr) -> bool:
        value = int_value(node)
        if value is None:
            return False
        return (minimum is None or value >= minimum) and not (nonzero and value == 0)

    return check


def int_value(node: exp.Expr) -> int | None:
    negative = isinstance(node, exp.Neg)
    inner = node.this if negative else node
    if not (isinstance(inner, exp.Literal) and not inner.is_string):
        return None
    try:
        value = int(inner.this)
    except ValueError:
        return None
    return -value if negative else value


def literal_string(nonempty: bool = False) -> Callable[[exp.Expr], bool]:
    def check(node: exp.Expr) -> bool:
        return isinstance(node, exp.Literal) and node.is_string and not (nonempty and not node.this)

    return check


@dataclass(frozen=True)
class Argument:
    """One argument: where sqlglot keeps it (an arg name, or a position of an unparsed
    call), the Spark type kinds admitted (NULL always is), a literal it must be, and
    whether it may be left out (then `absent`, if given, is what the gate uses)."""

    at: str | int
    kinds: frozenset[str]
    literal: Callable[[exp.Expr], bool] | None = None
    literal_is: str = ""  # the literal condition, for the refusal and the docs
    optional: bool = False
    absent: Callable[[], exp.Expr] | None = None
    null: bool = True  # a NULL literal admitted here
    repeated: bool = False  # at an int: this and every later argument (at least one)
    cast_to: SparkType | None = None  # other admitted kinds cast to it first, as Spark does
    # A TIMESTAMP read by its local time (date parts, clock): in a UTC session the gate
    # hands the expression its UTC time instead (portable/queries.py, Gate.utc).
    local_time: bool = False


@dataclass(frozen=True)
class Function:
    """An admitted Spark function (see the module)."""

    name: str
    node: type[exp.Expr] | str  # sqlglot's class, or an unparsed (Anonymous) call's name
    arguments: tuple[Argument, ...] = ()
    # Spark's result type: one, or of the arguments' types and the call (its literals)
    result: SparkType | Callable[[Sequence[SparkType], exp.Expr], SparkType] = STRING
    duckdb: Callable[..., exp.Expr] | None = None  # over the rendered arguments, in order
    spark_tree: Callable[[exp.Expr], exp.Expr] | None = None  # Spark's own definition
    note: str = ""
    forbidden_args: tuple[str, ...] = field(default=())  # sqlglot args that must be unset
    when: Callable[[exp.Expr], bool] | None = None  # which of a node's functions (lpad/rpad)


def call(name: str, *arguments: exp.Expr) -> exp.Expr:
    """A DuckDB function call, as named."""
    return exp.Anonymous(this=name, expressions=list(arguments))


def as_double(value: exp.Expr) -> exp.Expr:
    return exp.Cast(this=value, to=exp.DataType.build("DOUBLE"))


def num(value: int) -> exp.Expr:
    return exp.Literal.number(value)


def plus(left: exp.Expr, right: exp.Expr) -> exp.Expr:
    return exp.Add(this=left, expression=right)


def minus(left: exp.Expr, right: exp.Expr) -> exp.Expr:
    return exp.Sub(this=left, expression=right)


def mod(left: exp.Expr, right: exp.Expr) -> exp.Expr:
    """`(left % right)`, a compound `left` in parentheses (sqlglot adds none)."""
    if isinstance(left, exp.Binary):
        left = exp.Paren(this=left)
    return exp.Paren(this=exp.Mod(this=left, expression=right))
