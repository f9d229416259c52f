"""Whether a choice of key columns makes a query decompose by key: the affected-keys proof.

Given a key column for every table occurrence, the query decomposes when

    Q(r1 .. rn) = the disjoint union over key values k of Q(r1|k .. rn|k)

where ri|k are the rows of ri whose key column is k (null-safely: NULL is a value of its
own). Then the rows for the keys K a change touches are Q(r|K), and the rest did not move,
so dV = Q(r|K at new) - Q(r|K at old) exactly (sql/delta.py, `keyed_delta`), under bag
semantics, NULL keys included.

The check goes bottom-up. Each relation (a table, a join, a SELECT's output) carries E: the
expressions equal (null-safely) to its rows' key on every row. A relation decomposes, and
E is, as follows; anything else is refused with the reason:

- a table: its key column.
- `A JOIN B ON c` (inner, cross with a WHERE conjunct, semi, anti): c has a top-level
  conjunct `a = b` or `a <=> b` with a in E(A), b in E(B). Rows with different keys never
  match, so the join is the union over k of A|k JOIN B|k. E: both sides' (a semi or anti
  join: the left side's); inner-join conjuncts `x = y` then hold on every row and extend
  E. A WHERE conjunct serves as an inner join's condition only when no outer join of
  that SELECT pads its columns (a filter on preserved rows commutes with outer joins).
- `A LEFT JOIN B ON c`, c linking the keys as above: an A row of key k can only match B
  rows of key k, so it gets the same matches, or the same padding, from B|k. E is E(A)
  only: on padded rows B's columns are NULL, not the key. RIGHT: E(B). FULL: only
  COALESCE(a, b) equals the key on every row.
- WHERE: filters row by row; its top-level conjuncts `x = y` hold on every row that passes,
  so they extend E for what the same SELECT evaluates after it (windows, GROUP BY,
  DISTINCT, the projection). A conjunct of an outer SELECT never extends the E of the rows
  a window or aggregate below it saw.
- key or NULL: each relation also carries N, the expressions equal to its rows' key or NULL
  on every row: the padded side's E and N after a LEFT (RIGHT) JOIN, both sides' after a
  FULL JOIN. A member of N links a join, a correlation or `x IN (SELECT y)` (positive, as
  below) only by a strict `=`: a NULL matches nothing in Q or in any Q(..|k), a value k
  only rows of key k. A WHERE or inner-join conjunct `x = y` or `x IS NOT NULL` makes x
  non-NULL on every row it passes, so x in N is then in E. N never serves a window, an
  inner GROUP BY or DISTINCT: their NULL partition would span keys.
- a window: its PARTITION BY must hold a member of E (each partition then lies within one
  key). An inner GROUP BY and an inner DISTINCT likewise, by a member of E in the keys
  (the outputs); LIMIT inside, grouping sets inside, a global inner aggregate: refused.
- a subquery in the WHERE or the projection, correlated by a top-level conjunct of its
  WHERE `inner = outer` (inner in the subquery's E, outer in the outer row's): it reads,
  for an outer row of key k, only rows of key k, whatever it computes from them (any
  aggregate, window or null-aware IN over them): so any such subquery, in any context.
  Uncorrelated, only `x IN (SELECT y ...)` is keyed, and only where its truth is what
  counts: under nothing but AND/OR up to the WHERE (there TRUE means some y equals x; a
  NULL in y or an empty subquery, which NOT/CASE/IS ... would expose, cannot matter), with
  x in the outer E and y in the subquery's output E.
- the projection: E(output) = the output columns that project a member of E.

Tables read whole. A table occurrence may have no key column at all (a dimension joined on
another column than the key, the table whose column a window partitions by being keyed
instead): it is then read whole at both snapshots, and the query still decomposes,

    Q(r1 .. rn) = the disjoint union over k of Q(keyed r|k, whole r),

when every join that reads a whole table is linear in the keyed side: `A JOIN W` and
`W JOIN A` (inner: the union over k of A|k JOIN W is A JOIN W), `A LEFT JOIN W` and
`W RIGHT JOIN A` (an outer join is linear in its preserved side), `A SEMI/ANTI JOIN W`. A
whole table on the preserved side of an outer join whose other side is keyed would be
padded once per key, and is refused, as is a SELECT that reads no keyed table. A whole
relation adds nothing to E (an inner join's `a = w.x` with a in E still puts w.x in E).

Which keys a change to a whole table W touches: a row of W can change a row of Q(..|k)
only as part of it (matched) or by matching it no longer (padded, or dropped by an inner
join); either way the rows of that view row satisfy the SELECT's equalities. So each whole
table needs a *reach*: an equality `w.x = p.y` to a table p of the same SELECT that holds
on every row where W's row is present (an inner join's ON or a WHERE conjunct, both ways;
an outer join's ON from the preserved side to the padded one), p keyed or itself reached,
ending at a keyed table a, or at a derived relation a with an output in its E (its key).
The keys a change ΔW touches are then a's key over the rows of ΔW joined along that path
with every table (and derived relation) at the new snapshot (sql/delta.py): for a view
row affected through W's row w, take the path w, p, .., a in it; if every row past w is
unchanged it is there at the new snapshot and the join finds k; else the changed row
nearest to a is in the change of its own table, whose path (or key) finds k, or is a
changed row of the derived relation a, whose key k some change under a touched (a
decomposes by key: a row of a(..|k) moves only if a row of key k does). NULLs never
satisfy `=`, so the path joins null-safely only where the SELECT does (a superset either
way is fine: a key touched for nothing recomputes to the same rows). A `<=>` step is taken
only from a table no outer join of the SELECT pads: a padded row has no row to join at the
new snapshot, yet its NULLs match the whole table's (`_edges`). A whole table that
no equality reaches (a non-equi join, a dimension joined on an expression) still reads
whole and decomposes as above; a change to it may touch every key, so it is returned as
recomputed on, and a change to the keyed tables alone stays incremental.

A subquery expression over tables read whole only (nested ones included) is the same
relation for every key: for a row of key k it has the same value in Q(..|k, whole) as in Q,
whatever it computes and wherever it stands (NOT IN, CASE, a scalar in the projection).
Its changes reach the key when it reads one table s and its WHERE has a top-level conjunct
`s.x = o.y` (or `<=>` from an o no outer join pads) with o a keyed or reached table of the
enclosing SELECT, or when it is a positive `o.y IN (SELECT s.x ...)`: a changed row of s
changes the subquery only for outer rows with o.y = s.x, which is s's reach. Otherwise
(uncorrelated, or correlated by other predicates, outer columns only in its WHERE) a change
to its tables may flip every row; they are returned as recomputed on: a change to one
refreshes the view in full, unless each uncorrelated EXISTS or scalar subquery reading it
keeps its value (sql/subquery_filters.py, `unchanged_checks`).

The root SELECT needs only to decompose; an aggregate at the root merges the delta of its
input rows (sql/delta.py, `pre_aggregation_delta`). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from sqlglot import exp
from sqlglot.optimizer.scope import Scope, build_scope

from icemv.sql.parse import inside, positive_in


class NoKey(Exception):
    """Why the query does not decompose by the chosen key (a detail for `mv explain`)."""


@dataclass(frozen=True)
class Reach:
    """How a change to a whole table reaches the key: `column` of it equals `parent_column`
    of the occurrence aliased `parent` in the same SELECT (keyed, or reached in turn)."""

    column: str
    parent: str
    parent_column: str


@dataclass(frozen=True)
class KeyProof:
    """What the check found beside the decomposition: the reach of each table occurrence
    read whole (by `id`), and the occurrences read whole whose changes no key bounds
    (subqueries without a reach, tables no equality reaches): a change to one recomputes
    the view."""

    reach: dict[int, Reach]
    recompute: frozenset[int]
    # Derived relations (their Subquery node's `id`) a reach ends at: their key output.
    anchors: dict[int, str]


def check_keys(query: exp.Select, assignment: Mapping[int, str]) -> KeyProof:
    """Raise `NoKey` unless `query` decomposes with each table occurrence (by `id`) keyed
    by the column `assignment` gives it, the others read whole; how their changes reach
    the key."""
    root = build_scope(query)
    if root is None:
        raise NoKey("the query has no scope")
    check = _Check(assignment)
    check.relation(root, outer={}, is_root=True)
    return KeyProof(check.reach, frozenset(check.recompute), check.anchors)


def _canon(node: exp.Expr) -> str:
    """One spelling of an expression (every identifier quoted), to compare members of E."""
    if isinstance(node, exp.Paren):
        return _canon(node.this)
    copy = node.copy()
    for identifier in copy.find_all(exp.Identifier):
        identifier.set("quoted", True)
    return copy.sql()


def _column(alias: str, name: str) -> str:
    return _canon(exp.column(name, table=alias))


def _conjuncts(condition: exp.Expr | None) -> list[exp.Expr]:
    if condition is None:
        return []
    while isinstance(condition, exp.Paren):
        condition = condition.this
    if isinstance(condition, exp.And):
        return [c for part in condition.flatten() for c in _conjuncts(part)]
    return [condition]


def _equalities(conjuncts: Iterable[exp.Expr]) -> list[tuple[str, str]]:
    """`x = y` and `x <=> y` conjuncts without subqueries, as (x, y) spellings."""
    return [
        (_canon(c.this), _canon(c.expression))
        for c in conjuncts
        if isinstance(c, exp.EQ | exp.NullSafeEQ) and c.find(exp.Query) is None
    ]


Edge = tuple[str, str, str, str]  # (from alias, its column, to alias, its column)


def _edges(conjuncts: Iterable[exp.Expr], padded: Collection[str]) -> list[Edge]:
    """Each `a.x = b.y` conjunct between two aliases' plain columns both ways, as (a, x, b,
    y) and (b, y, a, x); a `a.x <=> b.y` only from a side no outer join pads: from a padded
    row (no row, its columns NULL) `<=>` would match the NULLs of the other side, which a
    join from the row's table at the new snapshot cannot find."""
    edges: list[Edge] = []
    for c in conjuncts:
        if isinstance(c, exp.EQ | exp.NullSafeEQ):
            left, right = c.this, c.expression
            if (
                isinstance(left, exp.Column)
                and isinstance(right, exp.Column)
                and left.table
                and right.table
                and left.table != right.table
            ):
                strict = isinstance(c, exp.EQ)
                a, x, b, y = left.table, left.name, right.table, right.name
                edges += [(a, x, b, y)] if strict or a not in padded else []
                edges += [(b, y, a, x)] if strict or b not in padded else []
    return edges


def _links(left: set[str], right: set[str], equalities: Iterable[tuple[str, str]]) -> bool:
    return any((a in left and b in right) or (b in left and a in right) for a, b in equalities)


def _strict(conjuncts: Iterable[exp.Expr]) -> list[tuple[str, str]]:
    """`x = y` conjuncts (not `<=>`) without subqueries: true only where x and y are not NULL."""
    return [
        (_canon(c.this), _canon(c.expression))
        for c in conjuncts
        if isinstance(c, exp.EQ) and c.find(exp.Query) is None
    ]


def _linked(left: _Keys, right: _Keys, conjuncts: Sequence[exp.Expr]) -> bool:
    """Some conjunct equates the two sides' keys: `a = b` or `a <=> b` with a, b in E, or
    `a = b` (strict) with a, b in E or N (a NULL matches nothing, a value only its key)."""
    return _links(left.exact, right.exact, _equalities(conjuncts)) or _links(
        left.exact | left.nullable, right.exact | right.nullable, _strict(conjuncts)
    )


def _non_null(conjuncts: Iterable[exp.Expr]) -> set[str]:
    """Expressions not NULL on every row these conjuncts pass: both sides of `x = y`, and x
    of `x IS NOT NULL`."""
    found: set[str] = set()
    for c in conjuncts:
        if c.find(exp.Query) is not None:
            continue
        if isinstance(c, exp.EQ):
            found |= {_canon(c.this), _canon(c.expression)}
        elif (
            isinstance(c, exp.Not)
            and isinstance(c.this, exp.Is)
            and isinstance(c.this.expression, exp.Null)
        ):
            found.add(_canon(c.this.this))
    return found


@dataclass
class _Keys:
    """E and N of a relation: expressions equal (null-safely) to the key on every row, and
    expressions equal to it or NULL on every row (an outer join's padded side)."""

    exact: set[str]
    nullable: set[str]

    def filtered(self, conjuncts: list[exp.Expr]) -> _Keys:
        """After a filter by `conjuncts` (a WHERE, an inner join's ON): a member of N that
        they make non-NULL equals the key, and their equalities extend E."""
        exact = self.exact | (self.nullable & _non_null(conjuncts))
        return _Keys(_closure(exact, _equalities(conjuncts)), self.nullable - exact)


def _closure(members: set[str], equalities: list[tuple[str, str]]) -> set[str]:
    grown = set(members)
    changed = True
    while changed:
        changed = False
        for a, b in equalities:
            if (a in grown) != (b in grown):
                grown |= {a, b}
                changed = True
    return grown


def _aliases(node: exp.Expr) -> set[str]:
    """The table aliases the columns of `node` name (outside nested queries)."""
    return {c.table for c in node.find_all(exp.Column)}


def _own(select: exp.Select, kind: type[exp.Expr]) -> list[exp.Expr]:
    """The `kind` nodes of this SELECT itself, not of the queries nested in it."""
    return [node for node in select.find_all(kind) if node.parent_select is select]


def _text(node: exp.Expr) -> str:
    return node.sql(dialect="spark")[:120]


class _Check:
    def __init__(self, assignment: Mapping[int, str]) -> None:
        self.assignment = assignment
        self.reach: dict[int, Reach] = {}
        self.recompute: set[int] = set()
        self.derived_keys: dict[int, set[str]] = {}  # E of each derived relation's outputs
        self.anchors: dict[int, str] = {}  # derived relations (Subquery) that end a reach

    def relation(self, scope: Scope, outer: Mapping[str, set[str]], is_root: bool = False) -> _Keys:
        """E and N of the SELECT's output rows (output column names), after checking that
        it decomposes. `outer`: E of the enclosing row, by alias, for a correlated subquery
        that the caller already found keyed by its correlation (then its own aggregates
        and windows see one key's rows only and are not constrained)."""
        select = scope.expression
        if not isinstance(select, exp.Select):
            raise NoKey(f"a set operation inside the query: {_text(select)}")
        keys = self.rows(scope)
        self._subqueries(scope, select, keys)
        if not outer:
            self._constraints(select, keys.exact, is_root)
        outputs = _Keys(set(), set())
        for projection in select.expressions:
            inner = _canon(projection.this if isinstance(projection, exp.Alias) else projection)
            if inner in keys.exact:
                outputs.exact.add(projection.alias_or_name)
            elif inner in keys.nullable:
                outputs.nullable.add(projection.alias_or_name)
        return outputs

    def rows(self, scope: Scope) -> _Keys:
        """E and N of the rows a SELECT's WHERE passes: its FROM and joins, then the WHERE."""
        select = scope.expression
        assert isinstance(select, exp.Select)
        from_ = select.args.get("from_")
        if not isinstance(from_, exp.From):
            raise NoKey(f"a SELECT without FROM: {_text(select)}")
        joins = list(select.args.get("joins") or [])
        where = select.args.get("where")
        where_conjuncts = _conjuncts(where.this if where is not None else None)
        padded = self._padded(from_.this, joins)
        local = set(scope.sources)
        usable = [
            c
            for c in where_conjuncts
            if c.find(exp.Query) is None and _aliases(c) <= local and not _aliases(c) & padded
        ]
        keys = self._source(scope, from_.this)
        first = from_.this.alias_or_name
        joined = {first}
        whole = {first} if self._whole(scope, from_.this) else set()
        edges: list[Edge] = []
        for join in joins:
            alias = join.this.alias_or_name
            right = self._source(scope, join.this)
            right_whole, left_whole = self._whole(scope, join.this), joined <= whole
            # WHERE conjuncts on the rows joined so far hold before this join already.
            keys = keys.filtered([c for c in usable if _aliases(c) <= joined])
            side, kind = (join.side or "").upper(), (join.kind or "").upper()
            on = _conjuncts(join.args.get("on"))
            if join.args.get("using"):
                raise NoKey(f"a join with USING: {_text(join)}")
            linked = _linked(keys, right, on)
            pairs = _edges(on, padded)
            if kind in ("SEMI", "ANTI") or side == "LEFT":
                # From the preserved side to the padded one; a whole right side only matches.
                edges += [e for e in pairs if e[0] in joined and e[2] == alias]
                if left_whole and not right_whole:
                    raise NoKey(f"a table read whole on the preserved side: {_text(join)}")
                if not (right_whole or linked):
                    what = "a semi or anti join" if kind in ("SEMI", "ANTI") else "an outer join"
                    raise NoKey(f"{what} not on the key: {_text(join)}")
                if side == "LEFT":  # the right side's key, or NULL where padded
                    keys = _Keys(keys.exact, keys.nullable | right.exact | right.nullable)
            elif side == "RIGHT":
                edges += [e for e in pairs if e[0] == alias and e[2] in joined]
                if right_whole and not left_whole:
                    raise NoKey(f"a table read whole on the preserved side: {_text(join)}")
                if not (left_whole or linked):
                    raise NoKey(f"an outer join not on the key: {_text(join)}")
                keys = _Keys(right.exact, right.nullable | keys.exact | keys.nullable)
            elif side == "FULL":
                if left_whole != right_whole:
                    raise NoKey(f"a full outer join of a table read whole: {_text(join)}")
                if not (left_whole or linked):
                    raise NoKey(f"an outer join not on the key: {_text(join)}")
                exact = {
                    _canon(exp.Coalesce(this=exp.maybe_parse(a), expressions=[exp.maybe_parse(b)]))
                    for a, b in [*((m, r) for m in keys.exact for r in right.exact),
                                 *((r, m) for m in keys.exact for r in right.exact)]
                }  # fmt: skip
                nullable = keys.exact | keys.nullable | right.exact | right.nullable
                keys = _Keys(exact, nullable)
            else:
                edges += pairs
                here = [c for c in usable if _aliases(c) <= joined | {alias}]
                keyed_both = not (right_whole or left_whole)
                if keyed_both and not (linked or _linked(keys, right, here)):
                    raise NoKey(f"a join not on the key: {_text(join)}")
                keys = _Keys(keys.exact | right.exact, keys.nullable | right.nullable)
                keys = keys.filtered(on)
            joined.add(alias)
            if right_whole:
                whole.add(alias)
        if whole:
            if joined <= whole:
                raise NoKey(f"a SELECT that reads no keyed table: {_text(select)}")
            edges += _edges(where_conjuncts, padded)
            self._reach(scope, joined - whole, whole, edges)
        return keys.filtered([c for c in where_conjuncts if _aliases(c) <= local])

    def _whole(self, scope: Scope, node: exp.Expr) -> bool:
        """Whether `node` is a table occurrence without a key column: read whole."""
        source = scope.sources.get(node.alias_or_name)
        return isinstance(source, exp.Table) and id(source) not in self.assignment

    def _reach(
        self,
        scope: Scope,
        keyed: set[str],
        whole: set[str],
        edges: list[Edge],
    ) -> None:
        """A reach for every whole table of this SELECT, nearest the keyed tables first;
        one that no equality reaches is recomputed on. A keyed table anchors a path, and so
        does a derived relation with an output in its E (read at the new snapshot, it gives
        that output as the key: a changed row of it is one of a touched key, as the query
        decomposes)."""
        anchors = {alias: self._anchor(scope, alias) for alias in keyed}
        reached = {alias for alias, anchor in anchors.items() if anchor is not None}
        frontier = sorted(reached)
        while frontier:
            parent = frontier.pop(0)
            for source, column, target, target_column in edges:
                if source == parent and target in whole and target not in reached:
                    table = scope.sources[target]
                    assert isinstance(table, exp.Table)
                    self.reach[id(table)] = Reach(target_column, parent, column)
                    anchor = anchors.get(parent)
                    if anchor is not None and not isinstance(anchor[0], exp.Table):
                        self.anchors[id(anchor[0])] = anchor[1]
                    reached.add(target)
                    frontier.append(target)
        # No equality links these to the key: a change to one may touch every key.
        self.recompute |= {id(scope.sources[alias]) for alias in whole - reached}

    def _anchor(self, scope: Scope, alias: str) -> tuple[exp.Expr, str] | None:
        """The node a path to the key may end at, with its key column: a keyed table, or a
        derived relation (its Subquery) with an output in its E; None otherwise."""
        source = scope.sources.get(alias)
        if isinstance(source, exp.Table):
            key = self.assignment.get(id(source))
            return None if key is None else (source, key)
        if isinstance(source, Scope) and isinstance(source.expression.parent, exp.Subquery):
            outputs = self.derived_keys.get(id(source), set())
            return (source.expression.parent, min(outputs)) if outputs else None
        return None

    def _padded(self, first: exp.Expr, joins: list[exp.Join]) -> set[str]:
        """Aliases an outer join of this SELECT may pad with NULLs."""
        seen = [first.alias_or_name]
        padded: set[str] = set()
        for join in joins:
            side = (join.side or "").upper()
            if side in ("RIGHT", "FULL"):
                padded |= set(seen)
            if side in ("LEFT", "FULL"):
                padded.add(join.this.alias_or_name)
            seen.append(join.this.alias_or_name)
        return padded

    def _source(self, scope: Scope, node: exp.Expr) -> _Keys:
        alias = node.alias_or_name
        source = scope.sources.get(alias)
        if isinstance(node, exp.Table) and isinstance(source, exp.Table):
            key = self.assignment.get(id(source))
            return _Keys(set() if key is None else {_column(alias, key)}, set())
        if isinstance(source, Scope):
            outputs = self.relation(source, outer={})
            self.derived_keys[id(source)] = outputs.exact
            return _Keys(
                {_column(alias, name) for name in outputs.exact},
                {_column(alias, name) for name in outputs.nullable},
            )
        raise NoKey(f"a source that is neither a table nor a query: {_text(node)}")

    def _subqueries(self, scope: Scope, select: exp.Select, keys: _Keys) -> None:
        where = select.args.get("where")
        for sub in scope.subquery_scopes:
            inner = sub.expression
            context = inner.parent
            holder = context.parent if isinstance(context, exp.Subquery) else context
            in_where = where is not None and inside(inner, where)
            in_projection = any(inside(inner, p) for p in select.expressions)
            if not (in_where or in_projection):
                raise NoKey(f"a subquery outside the WHERE and the projection: {_text(inner)}")
            if self._correlated_on_key(sub, scope, keys):
                continue
            positive = (
                isinstance(holder, exp.In)
                and isinstance(where, exp.Where)
                and in_where
                and positive_in(holder, where)
            )
            if self._read_whole(sub, scope, positive):
                continue
            if sub.external_columns:
                raise NoKey(f"a subquery correlated on other columns than the key: {_text(inner)}")
            if not (isinstance(holder, exp.In) and in_where and where is not None):
                raise NoKey(f"a subquery that reads every key: {_text(inner)}")
            if not positive_in(holder, where):
                why = "IN (SELECT ...) under NOT, CASE or a comparison is null-aware"
                raise NoKey(f"{why}: {_text(holder)}")
            # TRUE only where x equals some y, neither NULL: a member of E or N on both sides.
            if _canon(holder.this) not in keys.exact | keys.nullable:
                raise NoKey(f"IN (SELECT ...) not on the key: {_text(holder)}")
            if not isinstance(inner, exp.Select) or len(inner.expressions) != 1:
                raise NoKey(f"IN over a set operation or several columns: {_text(holder)}")
            outputs = self.relation(sub, outer={})
            if inner.expressions[0].alias_or_name not in outputs.exact | outputs.nullable:
                raise NoKey(f"IN (SELECT ...) of a column that is not the key: {_text(holder)}")

    def _correlated_on_key(self, sub: Scope, scope: Scope, outer_keys: _Keys) -> bool:
        """A subquery whose WHERE has `inner = outer` with inner its key, outer the row's:
        checked as a relation of its own, its aggregates and windows unconstrained."""
        inner = sub.expression
        if not isinstance(inner, exp.Select) or not sub.external_columns:
            return False
        outer_aliases = {c.table for c in sub.external_columns}
        if not outer_aliases <= set(scope.sources):
            raise NoKey(f"a subquery correlated with a query two levels out: {_text(inner)}")
        where = inner.args.get("where")
        conjuncts = _conjuncts(where.this if where is not None else None)
        correlations = [
            c
            for c in conjuncts
            if isinstance(c, exp.EQ | exp.NullSafeEQ)
            and any(col.table in outer_aliases for col in c.find_all(exp.Column))
        ]
        if not correlations or self._whole_tables(sub) is not None:
            return False
        if not _linked(self.rows(sub), outer_keys, correlations):
            return False
        self.relation(sub, outer={alias: outer_keys.exact for alias in outer_aliases})
        return True

    def _whole_tables(self, sub: Scope) -> list[exp.Table] | None:
        """The table occurrences a subquery reads, nested ones included, if it reads some
        and none is keyed; else None."""
        tables = [
            source
            for nested in sub.traverse()
            for source in nested.sources.values()
            if isinstance(source, exp.Table)
        ]
        if not tables or any(id(table) in self.assignment for table in tables):
            return None
        return tables

    def _read_whole(self, sub: Scope, scope: Scope, positive_in: bool) -> bool:
        """A subquery over tables read whole only: for a row of key k its value is the same
        in Q(r|k, whole) as in Q, whatever it computes and wherever it stands (NOT, CASE, a
        projection), since it reads no keyed row. Its changes are bounded by the key when
        it reads one table s and either its WHERE has a conjunct `s.x = o.y` (or `<=>`), o
        a keyed or reached table of the enclosing SELECT (a changed row of s changes the
        subquery's value only for outer rows with o.y = s.x), or it is `o.y IN (SELECT s.x
        FROM s ...)` in a positive place of the WHERE (`positive_in`: only its truth counts,
        TRUE where some row has s.x = o.y, so a changed row of s flips it only for outer rows
        with o.y = s.x). A `<=>` reaches only from an o no outer join pads (`_edges`).
        Otherwise, correlated or not, a change to its tables may change every row: they are
        recomputed on."""
        tables = self._whole_tables(sub)
        if tables is None:
            return False
        nested = [s for s in sub.traverse() if s is not sub]
        if any(s.external_columns for s in nested):
            return False  # correlated deeper in: not checked here
        reach = None if nested else self._whole_reach(sub, scope, positive_in)
        if reach is not None:
            self.reach[id(tables[0])] = reach
            return True
        where = sub.expression.args.get("where")
        if any(where is None or not inside(c, where) for c in sub.external_columns):
            return False  # an outer column outside the WHERE (`avg(outer.x)`): not checked
        self.recompute |= {id(table) for table in tables}
        return True

    def _whole_reach(self, sub: Scope, scope: Scope, positive_in: bool) -> Reach | None:
        """The reach of a one-table subquery read whole, by `_read_whole`'s two forms."""
        inner = sub.expression
        table = next(iter(sub.sources.values()), None)
        if len(sub.sources) != 1 or not isinstance(table, exp.Table):
            return None
        if not isinstance(inner, exp.Select):
            return None

        def anchored(alias: str) -> bool:
            parent = scope.sources.get(alias)
            return isinstance(parent, exp.Table) and (
                id(parent) in self.assignment or id(parent) in self.reach
            )

        alias = table.alias_or_name
        if sub.external_columns:
            where = inner.args.get("where")
            outer = scope.expression
            from_ = outer.args.get("from_")
            padded = (
                self._padded(from_.this, list(outer.args.get("joins") or []))
                if isinstance(from_, exp.From)
                else set()
            )
            for o, y, a, x in _edges(_conjuncts(where.this if where else None), padded):
                # `o` names the outer row's table; the subquery's own one shadows it.
                if a == alias and o != alias and anchored(o):
                    return Reach(x, o, y)
            return None
        holder = inner.parent.parent if isinstance(inner.parent, exp.Subquery) else inner.parent
        if not positive_in or not isinstance(holder, exp.In) or len(inner.expressions) != 1:
            return None
        output = inner.expressions[0]
        output = output.this if isinstance(output, exp.Alias) else output
        outer = holder.this
        plain = not any(inner.args.get(a) for a in ("group", "having", "limit", "offset"))
        plain = plain and not (_own(inner, exp.AggFunc) or _own(inner, exp.Window))
        if (
            plain
            and isinstance(output, exp.Column)
            and output.table == alias
            and isinstance(outer, exp.Column)
            and outer.table != alias  # the subquery's own table would shadow the outer one
            and anchored(outer.table)
        ):
            return Reach(output.name, outer.table, outer.name)
        return None

    def _constraints(self, select: exp.Select, members: set[str], is_root: bool) -> None:
        windows = _own(select, exp.Window)
        for window in windows:
            partition = window.args.get("partition_by") or []
            if not any(_canon(p) in members for p in partition):
                raise NoKey(f"a window not partitioned by the key: {_text(window)}")
        group = select.args.get("group")
        aggregate = bool(group) or any(
            node.find_ancestor(exp.Window) is None for node in _own(select, exp.AggFunc)
        )
        if is_root:
            if aggregate and windows:
                raise NoKey("a window over the grouped rows reads every group")
            return
        if select.args.get("limit") or select.args.get("offset"):
            raise NoKey(f"LIMIT inside the query: {_text(select)}")
        if aggregate:
            if group is not None and any(group.args.get(a) for a in ("grouping_sets", "cube",
                                                                      "rollup")):  # fmt: skip
                raise NoKey(f"grouping sets inside the query: {_text(select)}")
            keys = group.expressions if group is not None else []
            if not any(_canon(k) in members for k in keys):
                raise NoKey(f"an inner aggregate not grouped by the key: {_text(select)}")
        if select.args.get("distinct"):
            outputs = [p.this if isinstance(p, exp.Alias) else p for p in select.expressions]
            if not any(_canon(o) in members for o in outputs):
                raise NoKey(f"an inner DISTINCT without the key: {_text(select)}")
