"""Subqueries that no key bounds: linear in the outer tables, full otherwise.

`t WHERE a NOT IN (SELECT x FROM s)` (as NOT EXISTS conjuncts, sql/not_in.py), or an
`[NOT] EXISTS` / `IN` whose correlation gives no key class (sql/keys.py): for fixed
subquery sources the WHERE is a predicate on each outer row alone, so the view is linear
in its outer table occurrences and the usual delta terms hold when only those changed
(the subquery tables read at their unchanged snapshot in every term). The same holds of a
scalar subquery in the root SELECT's projection or HAVING (a share of a total, a value
looked up), correlated or not: for fixed subquery sources it is a value of the outer row,
or of the group, alone. Under a GROUP BY the rows entering it do not read the projection's
subqueries, and a HAVING or a derived output recomputes the touched groups at the new
snapshots (sql/analysis.py), where the subquery has the value it had.

A change to a subquery source can flip the filter of any outer row: a NULL appearing in
`s.x` drops every row of `t`, `s` emptying keeps them all. Those rows are not bounded by a
key, so such a refresh recomputes the view (`subquery-source-changed`). Pure: no I/O.
"""

from __future__ import annotations

from sqlglot import exp

from icemv.identifiers import Identifier
from icemv.sql.parse import inside


def filter_subquery_sources(query: exp.Query) -> frozenset[Identifier] | str:
    """The tables read by subqueries in the root SELECT's WHERE, projection or HAVING, if
    every subquery of the query is there; else why not. A UNION ALL is linear in each
    branch: the same of every branch that has subqueries."""
    if isinstance(query, exp.Union) and not query.args.get("distinct"):
        found: set[Identifier] = set()
        for branch in (query.left, query.right):
            inner = branch.unnest() if isinstance(branch, exp.Subquery) else branch
            if not isinstance(inner, exp.Query):
                return "a set operation over something else than queries"
            of_branch = filter_subquery_sources(inner)
            if isinstance(of_branch, str) and of_branch != "no subquery":
                return of_branch
            if isinstance(of_branch, frozenset):
                found |= of_branch
        return frozenset(found) if found else "no subquery"
    if not isinstance(query, exp.Select):
        return "a subquery under a set operation"
    where = query.args.get("where")
    having = query.args.get("having")
    places = [p for p in (where, having, *query.expressions) if p is not None]
    roots: list[exp.Expr] = []
    for node in query.walk():
        nested = isinstance(node, exp.Subquery | exp.Exists) or (
            isinstance(node, exp.Select) and node is not query
        )
        if not nested or any(inside(node, r) for r in roots):
            continue
        if not any(inside(node, place) for place in places):
            where_not = "outside the WHERE, the projection and HAVING"
            return f"a subquery {where_not}: {node.sql(dialect='spark')[:120]}"
        roots.append(node)
    if not roots:
        return "no subquery"
    return frozenset(
        Identifier((table.db,), table.name) for root in roots for table in root.find_all(exp.Table)
    )
