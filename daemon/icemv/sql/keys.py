"""Affected keys: a query whose rows depend on its sources one key value at a time.

Windows, outer joins, semi and anti joins and derived tables that do not fold away have no
delta rule of their own here. They share one: if every table the query reads carries a
column of one key class (columns that joins, correlated subqueries and `IN` equate), every
window partitions by it, and every inner aggregate (or inner `DISTINCT`) groups by it,
then the rows with key value k come from source rows with key value k only. The view's
delta is then its rows at the new snapshots minus its rows at the old ones, both computed
from the source rows whose key the changes touched (sql/delta.py, `keyed_delta`):

    dV = Q(r1|K .. rn|K at new) - Q(r1|K .. rn|K at old),   K = keys in dr1 + .. + drn

exact under bag semantics, NULL keys included (matched with `<=>`). An aggregate over
such a query (the root `GROUP BY`) takes that difference as the delta of its input rows.

`key_class` finds the class and tags each table occurrence with its key column in the
occurrence's `meta` (copies of the tree keep it). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sqlglot import exp
from sqlglot.optimizer.scope import Scope, traverse_scope

from icemv.identifiers import Identifier

KEY_META = "icemv_key"

Node = tuple[int, str]  # (id of a table occurrence or a derived SELECT, column name)


@dataclass(frozen=True)
class KeyClass:
    """The key each table occurrence is restricted by, for `icemv mv explain`."""

    columns: tuple[str, ...]  # "alias.column", one per table occurrence
    # Sources with an occurrence the query is not linear in (a window's input, the NULL-
    # padded side of an outer join, a subquery's table). Changes to the others alone have
    # the usual delta terms: `fact LEFT JOIN dim` when only `fact` moved is `dfact LEFT
    # JOIN dim`.
    nonlinear: frozenset[Identifier]

    def describe(self) -> str:
        return " = ".join(dict.fromkeys(self.columns))

    def needs_keys(self, moved: Iterable[Identifier]) -> bool:
        """Whether the delta for these moved sources must go through the affected keys."""
        return any(source in self.nonlinear for source in moved)


class _Classes:
    """Union-find over column nodes."""

    def __init__(self) -> None:
        self.parent: dict[Node, Node] = {}

    def find(self, node: Node) -> Node:
        self.parent.setdefault(node, node)
        while self.parent[node] != node:
            self.parent[node] = self.parent[self.parent[node]]
            node = self.parent[node]
        return node

    def union(self, a: Node, b: Node) -> None:
        self.parent[self.find(a)] = self.find(b)


class _NoKey(Exception):
    """Why no key class exists (a detail for `icemv mv explain`)."""


def key_class(query: exp.Query) -> KeyClass | str:
    """The key class of `query` (a qualified, normalised SELECT), or why there is none.

    On success every table occurrence's `meta[KEY_META]` names its key column.
    """
    try:
        return _KeySearch(query).run()
    except _NoKey as why:
        return str(why)


class _KeySearch:
    def __init__(self, query: exp.Query) -> None:
        self.query = query
        self.classes = _Classes()
        self.tables: dict[int, exp.Table] = {}
        # Each constraint: the key class must contain one of these nodes.
        self.constraints: list[tuple[str, set[Node]]] = []

    def run(self) -> KeyClass:
        if not isinstance(self.query, exp.Select):
            raise _NoKey("only a SELECT (not a set operation) is keyed")
        for scope in traverse_scope(self.query):
            self._scope(scope)
        if not self.tables:
            raise _NoKey("the query reads no table")
        for root in self._candidate_roots():
            members = [n for n in self.classes.parent if self.classes.find(n) == root]
            chosen = self._per_table(members)
            if chosen is None:
                continue
            if all(nodes & set(members) for _, nodes in self.constraints):
                return self._tag(chosen)
        raise _NoKey("no key column that every table, join, window and inner GROUP BY shares")

    def _candidate_roots(self) -> list[Node]:
        roots: list[Node] = []
        for node in self.classes.parent:
            root = self.classes.find(node)
            if node[0] in self.tables and root not in roots:
                roots.append(root)
        return roots

    def _per_table(self, members: Iterable[Node]) -> dict[int, str] | None:
        chosen: dict[int, str] = {}
        for table_id, column in members:
            if table_id in self.tables:
                chosen.setdefault(table_id, column)
        return chosen if set(chosen) == set(self.tables) else None

    def _tag(self, chosen: dict[int, str]) -> KeyClass:
        columns = []
        for table_id, table in self.tables.items():
            table.meta[KEY_META] = chosen[table_id]
            columns.append(f"{table.alias_or_name}.{chosen[table_id]}")
        linear = self._linear()
        nonlinear = frozenset(
            Identifier((table.db,), table.name)
            for table_id, table in self.tables.items()
            if table_id not in linear
        )
        return KeyClass(tuple(columns), nonlinear)

    def _linear(self) -> set[int]:
        """Table occurrences of the top SELECT itself that no outer join pads with NULLs,
        when that SELECT has no window: the query is linear in each of them."""
        select = self.query
        if not isinstance(select, exp.Select) or _own(select, exp.Window):
            return set()
        from_ = select.args.get("from_")
        first = from_.this if isinstance(from_, exp.From) else None
        preserved: list[exp.Expr] = [first] if first is not None else []
        padded: list[exp.Expr] = []
        for join in select.args.get("joins") or []:
            side = (join.side or "").upper()
            if side in ("RIGHT", "FULL"):
                padded += preserved
                preserved = []
            (padded if side in ("LEFT", "FULL") else preserved).append(join.this)
        return {id(node) for node in preserved if isinstance(node, exp.Table)}

    def _scope(self, scope: Scope) -> None:
        select = scope.expression
        if not isinstance(select, exp.Select):
            raise _NoKey("a set operation inside the query")
        for source in scope.sources.values():
            if isinstance(source, exp.Table):
                self.tables[id(source)] = source
                for column in scope.columns:
                    if column.table == source.alias_or_name:
                        self.classes.find((id(source), column.name))
        self._links(scope, select)
        self._constraints(scope, select)

    def _node(self, scope: Scope | None, column: exp.Expr) -> Node | None:
        if not isinstance(column, exp.Column) or not column.table:
            return None
        while scope is not None:
            source = scope.sources.get(column.table)
            if isinstance(source, exp.Table):
                return (id(source), column.name)
            if isinstance(source, Scope):
                return (id(source.expression), column.name)
            scope = scope.parent
        return None

    def _links(self, scope: Scope, select: exp.Select) -> None:
        """Columns equal to each other: a derived table's outputs, equalities, `IN`."""
        for projection in select.expressions:
            inner = projection.this if isinstance(projection, exp.Alias) else projection
            node = self._node(scope, inner)
            if node is not None:
                self.classes.union((id(select), projection.alias_or_name), node)
        conditions = [join.args.get("on") for join in select.args.get("joins") or []]
        where = select.args.get("where")
        conditions.append(where.this if where is not None else None)
        for condition in conditions:
            if condition is None:
                continue
            for conjunct in condition.flatten() if isinstance(condition, exp.And) else [condition]:
                if isinstance(conjunct, exp.EQ):
                    self._equate(scope, conjunct.this, conjunct.expression)
        for membership in _own(select, exp.In):
            query = membership.args.get("query")
            if query is None:
                continue
            if isinstance(membership.parent, exp.Not):
                raise _NoKey("NOT IN (SELECT ...) depends on every row's NULLs, not on one key")
            inner = query.this if isinstance(query, exp.Subquery) else query
            if isinstance(inner, exp.Select) and len(inner.expressions) == 1:
                left = self._node(scope, membership.this)
                if left is not None:
                    self.classes.union(left, (id(inner), inner.expressions[0].alias_or_name))

    def _equate(self, scope: Scope, left: exp.Expr, right: exp.Expr) -> None:
        a, b = self._node(scope, left), self._node(scope, right)
        if a is not None and b is not None and a != b:
            self.classes.union(a, b)

    def _constraints(self, scope: Scope, select: exp.Select) -> None:
        windows = _own(select, exp.Window)
        aggregate = bool(select.args.get("group")) or any(
            node.find_ancestor(exp.Window) is None for node in _own(select, exp.AggFunc)
        )
        for window in windows:
            nodes = self._nodes(scope, window.args.get("partition_by") or [])
            if not nodes:
                raise _NoKey(f"a window without PARTITION BY a column: {_text(window)}")
            self.constraints.append(("window", nodes))
        if scope.is_root:
            if aggregate and windows:
                raise _NoKey("a window over the grouped rows reads every group")
            return
        if select.args.get("limit") or select.args.get("offset"):
            raise _NoKey(f"LIMIT inside the query: {_text(select)}")
        if aggregate:
            group = select.args.get("group")
            nodes = self._nodes(scope, group.expressions if group else [])
            if not nodes:
                raise _NoKey(f"an inner aggregate without GROUP BY a column: {_text(select)}")
            self.constraints.append(("group", nodes))
        if select.args.get("distinct"):
            self.constraints.append(("distinct", self._nodes(scope, select.expressions)))

    def _nodes(self, scope: Scope, expressions: Iterable[exp.Expr]) -> set[Node]:
        found = set()
        for expression in expressions:
            inner = expression.this if isinstance(expression, exp.Alias) else expression
            node = self._node(scope, inner)
            if node is not None:
                found.add(node)
        return found


def _own(select: exp.Select, kind: type[exp.Expr]) -> list[exp.Expr]:
    """The `kind` nodes of this SELECT itself, not of the queries nested in it."""
    return [node for node in select.find_all(kind) if node.parent_select is select]


def _text(node: exp.Expr) -> str:
    return node.sql(dialect="spark")[:120]
