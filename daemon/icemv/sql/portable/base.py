"""The expression pass's core: typing a node by its handler or by the function table
(sql/functions.py), and the joint type of values Spark would cast alike."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from sqlglot import exp

from icemv.sql.functions import DATE_LIKE, Function, function_of
from icemv.sql.portable.common import _cast, _refuse, _Scope, _text
from icemv.sql.regex import Untranslatable
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
)

if TYPE_CHECKING:
    from icemv.sql.portable.queries import Gate

Handler = Callable[[Any, exp.Expr], tuple[exp.Expr, SparkType]]

# A NULL argument of a table function is cast to one type its row admits.
_NULL_AS = {"date": DATE, "decimal": SparkType("decimal", 38, 10), "double": DOUBLE,
            "bigint": BIGINT, "int": INT, "smallint": INT, "tinyint": INT, "string": STRING,
            "timestamp": TIMESTAMP}  # fmt: skip


class Base:
    """Types and renders expressions over one SELECT's scope (the handlers: `Expressions`)."""

    handlers: ClassVar[dict[type[exp.Expr], Handler]] = {}

    def __init__(self, scope: _Scope, gate: Gate) -> None:
        self.scope = scope
        self.gate = gate
        # IN subqueries whose truth alone counts (under AND/OR in a WHERE): Spark gives
        # FALSE where SQL (and DuckDB) give NULL (`NULL IN (SELECT ...)` in a projection).
        self.filtering: set[int] = set()
        # IN subqueries in a projection (or the NOT right above one) whose Spark value is
        # SQL's with NULL as FALSE (queries.py `_valued`), rendered so.
        self.valued: set[int] = set()
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
        handler = self.handlers.get(type(node))
        if handler is None:
            for kind, candidate in self.handlers.items():
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
        """The one type values of `kinds` meet in, or EngineRefusedError."""
        found: SparkType | None = NULL
        for kind in kinds:
            found = common(found, kind) if found is not None else None
        if found is None or found.kind == "complex":
            shown = ", ".join(k.describe() for k in kinds)
            raise _refuse(node, f"values of {shown} (Spark's implicit casts)")
        return found

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
        try:
            computed = function.duckdb(*rendered)
        except Untranslatable as why:
            raise _refuse(node, f"{function.name}: {why}") from None
        result = function.result
        if not isinstance(result, SparkType):
            result = result(kinds)
        return _cast(computed, result), result
