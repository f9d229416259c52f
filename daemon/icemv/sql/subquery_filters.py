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
key, so such a refresh recomputes the view (`subquery-source-changed`), unless every
subquery reading the source is an uncorrelated EXISTS or scalar whose value is the same at
both snapshots (`unchanged_checks`, evaluated at plan time). Pure: no I/O.
"""

from __future__ import annotations

from sqlglot import exp

from icemv.identifiers import Identifier
from icemv.sql.keys import KEY_META, REACH_META
from icemv.sql.parse import inside, is_subquery_expression


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


def unchanged_checks(
    query: exp.Query, blocked: frozenset[Identifier], moved: frozenset[Identifier], keyed: bool
) -> list[exp.Query] | None:
    """One-value queries whose equal values at the old and the new snapshots prove that
    the changes to `blocked` (moved sources read by subqueries no key bounds) leave the
    view's rows outside the delta as they are; None if that cannot be proven so.

    Each such occurrence of a blocked source must lie in an uncorrelated `EXISTS` or
    scalar subquery (its outermost one): that subquery is one value for every row, the
    same at both snapshots if the check says so. `keyed` (sql/keys.py): the keyed delta
    reads it at the old snapshot on the old side and at the new one on the new side, the
    same value, and the occurrences that carry a key or a reach need no check (their
    changes reach the touched keys). Not keyed (this module's linear terms): the blocked
    sources are then counted as unmoved, each term reads them at the new snapshot, so
    such a subquery may read no other moved source. `NOT IN` reaches here as `NOT EXISTS`
    conjuncts (sql/not_in.py): it holds unless the subquery gains or loses a NULL or its
    last row. An `IN (SELECT ...)`, a set, is not checked. Pure: no I/O."""
    checks: list[exp.Query] = []
    seen: list[exp.Expr] = []
    for table in query.find_all(exp.Table):
        if Identifier((table.db,), table.name) not in blocked:
            continue
        if keyed and (KEY_META in table.meta or REACH_META in table.meta):
            continue
        node = _outermost_value(table)
        if node is None:
            return None
        if any(node is s for s in seen):
            continue
        seen.append(node)
        inner = node.this
        if not isinstance(inner, exp.Select) or _correlated(inner):
            return None
        read = {Identifier((t.db,), t.name) for t in inner.find_all(exp.Table)}
        if not keyed and read & moved - blocked:
            return None
        if isinstance(node, exp.Exists):
            count = exp.Count(this=exp.Star())
            derived = exp.Subquery(this=inner.copy(), alias=exp.TableAlias(
                this=exp.to_identifier("__icemv_exists", quoted=True)))  # fmt: skip
            checks.append(exp.select(exp.GT(this=count, expression=exp.Literal.number(0)))
                          .from_(derived))  # fmt: skip
        else:
            checks.append(inner.copy())
    return checks


def _outermost_value(table: exp.Table) -> exp.Exists | exp.Subquery | None:
    """The outermost `EXISTS` or scalar subquery around `table` (an `IN` set or a derived
    table inside one counts as part of it); None if there is none."""
    found: exp.Exists | exp.Subquery | None = None
    node: exp.Expr | None = table.parent
    while node is not None:
        if isinstance(node, exp.Exists):
            found = node
        elif isinstance(node, exp.Subquery) and is_subquery_expression(node):
            if isinstance(node.parent, exp.In):
                found = None  # a set: its value is not one row
                if node.parent.find_ancestor(exp.Exists, exp.Subquery) is None:
                    return None
            else:
                found = node
        node = node.parent
    return found


def _correlated(select: exp.Select, visible: frozenset[str] = frozenset()) -> bool:
    """Whether a column of `select` (or of a query nested in it) names an alias that
    neither its own FROM and joins nor an enclosing SELECT within `select` define: an
    outer row's."""
    from_ = select.args.get("from_")
    relations = [from_.this] if isinstance(from_, exp.From) else []
    relations += [join.this for join in select.args.get("joins") or []]
    own = visible | {r.alias_or_name for r in relations}
    for column in select.find_all(exp.Column):
        if column.parent_select is select and column.table and column.table not in own:
            return True
    nested = [n for n in select.find_all(exp.Select) if n is not select]
    return any(_correlated(n, own) for n in nested if n.parent_select is select)
