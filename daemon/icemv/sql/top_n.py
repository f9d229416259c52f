"""Top-N: a view `SELECT ... ORDER BY k1, k2 ... LIMIT n` over a row-wise query.

The storage table holds the view's first n rows, S, the n-th of them b. The view below the
LIMIT is row-wise, so its delta is the rows it gains and the rows it loses (sql/delta.py).
If every such row sorts strictly after b, and n rows are stored, S still is the answer and
the refresh records the new snapshots without writing (`top-n-unreached`). Why: a lost row
sorts after b, so it is none of S's rows, which all stay in the view; every other row of
the new view is an old row not in S (sorting at or after b) or a gained row (after b); so
S is still the view's first n. Otherwise (a gained or lost row sorts before b or ties
it, or fewer than n rows are stored) the view is recomputed (`top-n-reached`). A tie at
the boundary recomputes: which of the tied rows the query keeps is the engine's choice. A
rewrite that leaves a row as it was may show it lost and gained: if it is in S, the
refresh recomputes (never wrong, only slower).

The test needs the order keys as view columns: each ORDER BY term must be an output
column (by name, or the same expression a projection has). Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp


@dataclass(frozen=True)
class TopN:
    # ORDER BY terms over the view's output columns (unqualified column names).
    order: tuple[exp.Ordered, ...]
    limit: int

    def describe(self) -> str:
        keys = ", ".join(o.sql(dialect="spark") for o in self.order)
        return f"ORDER BY {keys} LIMIT {self.limit}"


def split_top_n(select: exp.Select) -> tuple[exp.Select, TopN] | str:
    """The query without its ORDER BY ... LIMIT, and the top-N; or why it is no top-N."""
    limit = select.args.get("limit")
    order = select.args.get("order")
    if select.args.get("offset") or select.args.get("fetch"):
        return "OFFSET: the rows before the window move with every change"
    count = limit.expression if isinstance(limit, exp.Limit) else None
    if not isinstance(count, exp.Literal) or count.is_string or not count.this.isdigit():
        return "LIMIT is not a constant row count"
    if not isinstance(order, exp.Order) or not order.expressions:
        return "LIMIT without ORDER BY keeps arbitrary rows"
    outputs = {
        p.alias_or_name: (p.this if isinstance(p, exp.Alias) else p) for p in select.expressions
    }
    terms = []
    for term in order.expressions:
        name = _output_of(term.this, outputs)
        if name is None:
            return f"ORDER BY {term.this.sql(dialect='spark')} is not an output column"
        ordered = term.copy()
        ordered.set("this", exp.column(name, quoted=True))
        terms.append(ordered)
    inner = select.copy()
    inner.set("order", None)
    inner.set("limit", None)
    return inner, TopN(tuple(terms), int(count.this))


def _output_of(key: exp.Expr, outputs: dict[str, exp.Expr]) -> str | None:
    if isinstance(key, exp.Column) and not key.table and key.name in outputs:
        return key.name
    for name, expression in outputs.items():
        if expression == key:
            return name
    return None
