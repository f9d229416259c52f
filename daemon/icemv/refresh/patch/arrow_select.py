"""The one-source SELECT an Arrow delta evaluates: its WHERE, and its columns by alias.

Views read by the Arrow path (refresh/patch/arrow_rows.py, arrow_aggregates.py) are one
SELECT over one table occurrence: no join, no UNION, no LIMIT, no window, no keyed delta.
Everything is compiled against the source's Arrow schema before any row is read.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
from sqlglot import exp

from icemv.errors import ArrowUnsupportedError
from icemv.sql.arrow_expr import ArrowExpr, Fields, compile_expr

# SELECT parts the Arrow path evaluates; any other part set sends the view to Spark.
_PARTS = frozenset({"expressions", "from_", "where", "group", "kind"})


@dataclass(frozen=True)
class ArrowSelect:
    fields: Fields  # the source columns, under the table's alias
    where: ArrowExpr | None

    def compile(self, node: exp.Expr) -> ArrowExpr:
        return compile_expr(node, self.fields)

    def filtered(self, rows: pa.Table) -> pa.Table:
        """The source rows that pass the WHERE clause (NULL does not pass)."""
        if self.where is None:
            return rows
        keep = self.where.evaluate(rows)
        return rows.filter(keep, null_selection_behavior="drop")


def compile_select(query: exp.Query, source: pa.Schema) -> ArrowSelect:
    """The SELECT's WHERE over `source`; raises ArrowUnsupportedError outside the subset."""
    if not isinstance(query, exp.Select):
        raise ArrowUnsupportedError("not a single SELECT")
    extra = sorted(k for k, v in query.args.items() if v and k not in _PARTS)
    if extra:
        raise ArrowUnsupportedError(f"SELECT with {', '.join(extra)}")
    if query.args.get("kind"):
        raise ArrowUnsupportedError(f"SELECT {query.args['kind']}")
    tables = list(query.find_all(exp.Table))
    if len(tables) != 1 or any(query.find_all(exp.Subquery, exp.Join, exp.Window)):
        raise ArrowUnsupportedError("more than one table occurrence")
    alias = tables[0].alias_or_name
    fields: Fields = {(alias, f.name): (f.name, f.type) for f in source}
    where = query.args.get("where")
    compiled = compile_expr(where.this, fields) if where is not None else None
    if compiled is not None and not pa.types.is_boolean(compiled.type):
        raise ArrowUnsupportedError(f"WHERE of type {compiled.type}")
    return ArrowSelect(fields, compiled)
