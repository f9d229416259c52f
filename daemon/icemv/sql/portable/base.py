"""The expression pass's core: typing a node by its handler or by the function table
(sql/functions/table.py), and the joint type of values Spark would cast alike."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from sqlglot import exp

from icemv.sql.functions import DATE_LIKE, Argument, Function, function_of
from icemv.sql.portable.common import _cast, _refuse, _Scope, _text, _utc_local
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
        """A function of the table (sql/functions/table.py): Spark's own tree of it typed in its
        place, or its arguments typed and checked against its row and its DuckDB
        expression cast strictly to Spark's result type."""
        if function.spark_tree is not None:
            try:
                tree = function.spark_tree(node)
            except Untranslatable as why:
                raise _refuse(node, f"{function.name}: {why}") from None
            return self.typed(tree)
        set_ = [name for name in function.forbidden_args if node.args.get(name) is not None]
        if set_:
            raise _refuse(node, f"{function.name} with {', '.join(set_)}")
        by_position = any(isinstance(a.at, int) for a in function.arguments)
        positional = node.expressions if by_position else []
        repeated = any(a.repeated for a in function.arguments)
        if len(positional) > len(function.arguments) and not repeated:
            raise _refuse(node, f"{function.name} with {len(positional)} arguments")
        rendered, kinds = [], []
        for argument in function.arguments:
            if isinstance(argument.at, int):
                values = positional[argument.at :] if argument.repeated else (
                    positional[argument.at : argument.at + 1])  # fmt: skip
            else:
                values = [v for v in [node.args.get(argument.at)] if v is not None]
            if not values and argument.absent is not None:
                values = [argument.absent()]
            if not values:
                if argument.optional:
                    continue
                raise _refuse(node, f"{function.name} without all its arguments")
            for value in values:
                value_rendered, kind = self._argument(node, function, argument, value)
                rendered.append(value_rendered)
                kinds.append(kind)
        assert function.duckdb is not None
        try:
            computed = function.duckdb(*rendered)
        except Untranslatable as why:
            raise _refuse(node, f"{function.name}: {why}") from None
        result = function.result
        if not isinstance(result, SparkType):
            result = result(kinds, node)
        return _cast(computed, result), result

    def _argument(
        self, node: exp.Expr, function: Function, argument: Argument, value: exp.Expr
    ) -> tuple[exp.Expr, SparkType]:
        """One argument of a table function typed, checked against its row and rendered."""
        if argument.literal is not None and not argument.literal(value):
            raise _refuse(node, f"{function.name} with {_text(value)}: {argument.literal_is}")
        rendered, kind = self.typed(value)
        if (kind.kind != "null" and kind.kind not in argument.kinds) or (
            kind.kind == "null" and not argument.null
        ):
            raise _refuse(node, f"{function.name} of {kind.describe()}")
        target = argument.cast_to
        if target is None and argument.kinds == DATE_LIKE:
            target = DATE  # a TIMESTAMP's date, in the zone
        if target is not None and kind.kind not in ("null", target.kind):
            rendered, kind = _cast(rendered, target), target
        if kind.kind == "null":  # typed, or DuckDB cannot choose the function's overload
            rendered = _cast(rendered, _NULL_AS[min(argument.kinds)])
        elif argument.local_time and kind == TIMESTAMP and self.gate.utc:
            rendered = _utc_local(rendered)
        return rendered, kind
