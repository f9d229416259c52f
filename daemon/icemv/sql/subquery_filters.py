"""Subqueries in the WHERE that no key bounds: linear in the outer tables, full otherwise.

`t WHERE a NOT IN (SELECT x FROM s)` (as NOT EXISTS conjuncts, sql/not_in.py), or an
`[NOT] EXISTS` / `IN` whose correlation gives no key class (sql/keys.py): for fixed
subquery sources the WHERE is a predicate on each outer row alone, so the view is linear
in its outer table occurrences and the usual delta terms hold when only those changed
(the subquery tables read at their unchanged snapshot in every term).

A change to a subquery source can flip the filter of any outer row: a NULL appearing in
`s.x` drops every row of `t`, `s` emptying keeps them all. Those rows are not bounded by a
key, so such a refresh recomputes the view (`subquery-source-changed`). Pure: no I/O.
"""

from __future__ import annotations

from sqlglot import exp

from icemv.identifiers import Identifier
from icemv.sql.parse import inside


def filter_subquery_sources(query: exp.Query) -> frozenset[Identifier] | str:
    """The tables read by subqueries in the root SELECT's WHERE, if every subquery of the
    query is there; else why not."""
    if not isinstance(query, exp.Select):
        return "a subquery under a set operation"
    where = query.args.get("where")
    roots: list[exp.Expr] = []
    for node in query.walk():
        nested = isinstance(node, exp.Subquery | exp.Exists) or (
            isinstance(node, exp.Select) and node is not query
        )
        if not nested or any(inside(node, r) for r in roots):
            continue
        if where is None or not inside(node, where):
            return f"a subquery outside the WHERE: {node.sql(dialect='spark')[:120]}"
        roots.append(node)
    if not roots:
        return "no subquery"
    return frozenset(
        Identifier((table.db,), table.name) for root in roots for table in root.find_all(exp.Table)
    )
