"""Set operations as a GROUP BY over a UNION ALL: the normalisation pass and its shape test.

`UNION`, `INTERSECT` and `EXCEPT` (without ALL) have set semantics: a row is in the result
or not, and only whether each side has a copy of it decides. At the root of a view each
becomes one GROUP BY over the UNION ALL of its sides' SELECTs, every SELECT tagged with
its side in the hidden column `_icemv_side` (0 left, 1 right):

    A UNION B      ->  SELECT u.c.. FROM (A UNION ALL B) u GROUP BY u.c..
    A INTERSECT B  ->  ... (A, 0 UNION ALL B, 1) u GROUP BY u.c.. HAVING min(side) = 0
                                                                 AND max(side) = 1
    A EXCEPT B     ->  ... (A, 0 UNION ALL B, 1) u GROUP BY u.c.. HAVING max(side) = 0

GROUP BY puts NULLs in one group, as Spark's set operations compare rows null-safely, so
the rewrite is exact with NULLs. A side may itself be a UNION (ALL or not) of SELECTs: under
set semantics only the presence of a row counts, so nested unions flatten into the side and
a SELECT DISTINCT in a side drops its DISTINCT. A set operation in a derived table (an
inlined CTE) is rewritten the same way; a plain filter or projection over it is then lifted
into the GROUP BY (sql/normalise.py). The GROUP BY's row count (the hidden
`_icemv_rows`, sql/state.py) is the multiplicity that makes deletes exact for UNION; the
HAVING of INTERSECT and EXCEPT recomputes the groups a change touches.

`INTERSECT ALL` / `EXCEPT ALL` keep min(cA, cB) / max(cA - cB, 0) copies of each row: no
GROUP BY holds that, so they stay a full recompute (`set-operation-all`). A set operation
with ORDER BY ... LIMIT, or nested in another one's side, is left as it is.

Pure: no I/O.
"""

from __future__ import annotations

from sqlglot import exp

SIDE = "_icemv_side"  # which side of INTERSECT / EXCEPT a row comes from
UNION_ALIAS = "_icemv_u"  # the derived table of the sides' UNION ALL


def set_operations_to_group_by(query: exp.Query, notes: list[str]) -> exp.Query:
    """The root UNION / INTERSECT / EXCEPT (not ALL), and those a derived table holds (an
    inlined CTE), as a GROUP BY over a tagged UNION ALL."""
    for derived in list(query.find_all(exp.Subquery)):
        body = derived.this
        if isinstance(body, exp.SetOperation) and derived.alias:
            derived.set("this", _grouped(body, notes))
    return _grouped(query, notes)


def _grouped(query: exp.Query, notes: list[str]) -> exp.Query:
    if not isinstance(query, exp.SetOperation) or not query.args.get("distinct"):
        return query
    if any(query.args.get(key) for key in ("order", "limit", "offset", "with_")):
        return query
    if isinstance(query, exp.Union):
        sides = [_leaves(query)]
    else:
        sides = [_leaves(query.left), _leaves(query.right)]
    if any(side is None for side in sides):
        return query
    tagged = len(sides) > 1
    branches: list[exp.Select] = []
    for index, side in enumerate(sides):
        assert side is not None
        for leaf in side:
            branch = leaf.copy()
            branch.set("distinct", None)
            if tagged:
                branch.select(exp.alias_(exp.Literal.number(index), SIDE, quoted=True), copy=False)
            branches.append(branch)
    names = [p.alias_or_name for p in branches[0].expressions if p.alias_or_name != SIDE]
    union: exp.Query = branches[0]
    for branch in branches[1:]:
        union = exp.union(union, branch, distinct=False)
    derived = exp.Subquery(
        this=union, alias=exp.TableAlias(this=exp.to_identifier(UNION_ALIAS, quoted=True))
    )
    columns = [exp.column(name, table=UNION_ALIAS, quoted=True) for name in names]
    grouped = (
        exp.select(
            *[exp.alias_(c, name, quoted=True) for c, name in zip(columns, names, strict=True)]
        )
        .from_(derived)
        .group_by(*[c.copy() for c in columns])
    )
    kind = query.key.upper()
    if tagged:
        tag = exp.column(SIDE, table=UNION_ALIAS, quoted=True)
        if isinstance(query, exp.Intersect):
            having = exp.and_(
                exp.EQ(this=exp.Min(this=tag.copy()), expression=exp.Literal.number(0)),
                exp.EQ(this=exp.Max(this=tag.copy()), expression=exp.Literal.number(1)),
            )
        else:
            having = exp.EQ(this=exp.Max(this=tag.copy()), expression=exp.Literal.number(0))
        grouped.set("having", exp.Having(this=having))
        notes.append(f"{kind} as GROUP BY over UNION ALL tagged by side")
    else:
        notes.append(f"{kind} as GROUP BY over UNION ALL with a row count")
    return grouped


def _leaves(query: exp.Expr) -> list[exp.Select] | None:
    """The SELECTs of a tree of UNIONs (ALL or not); None if another set operation is in it."""
    while isinstance(query, exp.Subquery) and not query.alias:
        query = query.this
    if isinstance(query, exp.Union):
        left, right = _leaves(query.left), _leaves(query.right)
        return None if left is None or right is None else [*left, *right]
    if isinstance(query, exp.Select) and not query.args.get("with_"):
        return [query]
    return None


def union_source(select: exp.Select) -> exp.Subquery | None:
    """The derived table this pass made, if `select` reads only it: a UNION ALL of plain
    SELECTs (no aggregate, window, DISTINCT, LIMIT), whose delta is its branches' deltas."""
    source = select.args.get("from_")
    derived = source.this if isinstance(source, exp.From) else None
    if not isinstance(derived, exp.Subquery) or derived.alias != UNION_ALIAS:
        return None
    if select.args.get("joins") or select.args.get("where") or select.args.get("laterals"):
        return None
    union = derived.this
    if not isinstance(union, exp.Union) or union.args.get("distinct"):
        return None
    leaves = _leaves(union)
    if leaves is None or not all(_plain(leaf) for leaf in leaves):
        return None
    return derived


def _plain(select: exp.Select) -> bool:
    blocking = ("group", "having", "qualify", "distinct", "limit", "offset", "order", "with_")
    if any(select.args.get(key) for key in blocking):
        return False
    return not any(p.find(exp.AggFunc, exp.Window) for p in select.expressions)
