"""Affected keys: a query whose rows depend on its sources one key value at a time.

Windows, outer joins, semi and anti joins and derived tables that do not fold away have no
delta rule of their own here. They share one: if every table occurrence has a key column
such that the query decomposes by key value (sql/key_check.py states when, and why the
delta is then exact), the view's delta is its rows at the new snapshots minus its rows at
the old ones, both computed from the source rows whose key the changes touched
(sql/delta.py, `keyed_delta`):

    dV = Q(r1|K .. rn|K at new) - Q(r1|K .. rn|K at old),   K = keys in dr1 + .. + drn

An aggregate over such a query (the root `GROUP BY`) takes that difference as the delta of
its input rows.

The search proposes key columns from the columns the query equates anywhere (joins,
correlations, `IN`, derived tables' outputs), and keeps a choice the check proves, the
first of those recomputed on the fewest occurrences; a proposal is only a guess, the proof
is sql/key_check.py. Choices that key every table
occurrence come first; then choices that key only some of them, the others read whole
(a dimension joined on another column, a window partitioned by a joined table's column:
sql/key_check.py says when that decomposes, and how a change to a whole table reaches
the key). `key_class` tags each keyed occurrence with its key column in its `meta`, and
each whole one with its reach (copies of the tree keep both).
Pure: no I/O.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from sqlglot import exp
from sqlglot.optimizer.scope import Scope, traverse_scope

from icemv.identifiers import Identifier
from icemv.sql.key_check import KeyProof, NoKey, check_keys
from icemv.sql.parse import in_subquery_expression

KEY_META = "icemv_key"
REACH_META = "icemv_reach"  # a whole table's `Reach` (sql/key_check.py)

Node = tuple[int, str]  # (id of a table occurrence or a derived SELECT, column name)


@dataclass(frozen=True)
class KeyClass:
    """The key each table occurrence is restricted by, for `icemv mv explain`."""

    columns: tuple[str, ...]  # "alias.column", one per keyed table occurrence
    # Sources with an occurrence the query is not linear in (a window's input, the NULL-
    # padded side of an outer join, a subquery's table). Changes to the others alone have
    # the usual delta terms: `fact LEFT JOIN dim` when only `fact` moved is `dfact LEFT
    # JOIN dim`.
    nonlinear: frozenset[Identifier]
    # "alias (via alias.column = parent.column)", one per occurrence read whole.
    whole: tuple[str, ...] = ()
    # Sources with an occurrence read whole whose changes no key bounds (a subquery without
    # a reach, a table no equality reaches): a change to one recomputes the view, unless
    # the subqueries reading it keep their values (sql/subquery_filters.py).
    recompute_on: frozenset[Identifier] = frozenset()

    def describe(self) -> str:
        keyed = " = ".join(dict.fromkeys(self.columns))
        if not self.whole:
            return keyed
        return f"{keyed}; read whole: {', '.join(self.whole)}"

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


def key_class(query: exp.Query) -> KeyClass | str:
    """The key class of `query` (a qualified, normalised SELECT), or why there is none.

    On success every table occurrence's `meta[KEY_META]` names its key column.
    """
    if not isinstance(query, exp.Select):
        return "only a SELECT (not a set operation) is keyed"
    try:
        return _KeySearch(query).run()
    except NoKey as why:
        return str(why)


def clear_keys(query: exp.Query) -> None:
    """Remove the tags `key_class` left (the view is maintained by another rule)."""
    for node in query.find_all(exp.Table, exp.Subquery):
        node.meta.pop(KEY_META, None)
        node.meta.pop(REACH_META, None)


# Choices of key columns tried per class of equated columns, at most.
_MAX_CHOICES = 256
# Choices that key only some table occurrences, tried at most (over every class).
_MAX_PARTIAL = 64


class _KeySearch:
    def __init__(self, query: exp.Select) -> None:
        self.query = query
        self.classes = _Classes()
        self.tables: dict[int, exp.Table] = {}
        self.in_subqueries: set[int] = set()  # occurrences inside subquery expressions

    def run(self) -> KeyClass:
        for scope in traverse_scope(self.query):
            self._scope(scope)
        if not self.tables:
            raise NoKey("the query reads no table")
        full: list[NoKey] = []  # a refusal names the first choice that keys every table
        partial: list[NoKey] = []
        best: tuple[dict[int, str], KeyProof] | None = None
        for choice in self._choices():
            try:
                proof = check_keys(self.query, choice)
            except NoKey as why:
                (full if len(choice) == len(self.tables) else partial).append(why)
                continue
            # The proof that recomputes on the fewest occurrences (a change to one of those
            # refreshes the view in full); the first of those.
            if best is None or len(proof.recompute) < len(best[1].recompute):
                best = (choice, proof)
            if not proof.recompute:
                break
        if best is not None:
            return self._tag(*best)
        default = NoKey("no key column that every table, join and window shares")
        raise (full or partial or [default])[0]

    def _choices(self) -> Iterator[dict[int, str]]:
        """Per class of equated columns, every way to pick one member per table occurrence;
        then, so that a refusal names what breaks the key, the class that covers the most
        occurrences, the others keyed by any column they read (the check decides)."""
        members: dict[Node, dict[int, list[str]]] = {}
        for node in self.classes.parent:
            table_id, column = node
            if table_id in self.tables:
                per_table = members.setdefault(self.classes.find(node), {})
                per_table.setdefault(table_id, []).append(column)
        for per_table in members.values():
            if set(per_table) != set(self.tables):
                continue
            ids = list(per_table)
            for picked in itertools.islice(
                itertools.product(*(per_table[i] for i in ids)), _MAX_CHOICES
            ):
                yield dict(zip(ids, picked, strict=True))
        widest = max(members.values(), key=len, default={})
        fallback = {table_id: columns[0] for table_id, columns in widest.items()}
        for node in self.classes.parent:
            if node[0] in self.tables:
                fallback.setdefault(node[0], node[1])
        yield fallback
        # Without the occurrences read by subquery expressions: those read whole.
        outside = [
            {i: c for i, c in p.items() if i not in self.in_subqueries} for p in members.values()
        ]
        candidates = [p for p in members.values() if set(p) != set(self.tables)]
        candidates += [p for p in outside if p and len(p) < len(self.tables)]
        partial = sorted(candidates, key=len, reverse=True)
        ids_of = [list(p) for p in partial]
        products = (
            dict(zip(ids, picked, strict=True))
            for ids, per_table in zip(ids_of, partial, strict=True)
            for picked in itertools.product(*(per_table[i] for i in ids))
        )
        yield from itertools.islice(products, _MAX_PARTIAL)

    def _tag(self, chosen: dict[int, str], proof: KeyProof) -> KeyClass:
        clear_keys(self.query)
        for subquery in self.query.find_all(exp.Subquery):
            if id(subquery) in proof.anchors:  # a derived relation a reach ends at
                subquery.meta[KEY_META] = proof.anchors[id(subquery)]
        columns, whole = [], []
        for table_id, table in self.tables.items():
            table.meta.pop(KEY_META, None)
            table.meta.pop(REACH_META, None)
            if table_id in chosen:
                table.meta[KEY_META] = chosen[table_id]
                columns.append(f"{table.alias_or_name}.{chosen[table_id]}")
            elif table_id in proof.reach:
                path = proof.reach[table_id]
                table.meta[REACH_META] = path
                whole.append(
                    f"{table.alias_or_name} (via {table.alias_or_name}.{path.column} = "
                    f"{path.parent}.{path.parent_column})"
                )
            else:
                whole.append(f"{table.alias_or_name} (no equality reaches it: a change recomputes)")
        linear = self._linear()
        nonlinear = frozenset(
            Identifier((table.db,), table.name)
            for table_id, table in self.tables.items()
            if table_id not in linear
        )
        recompute_on = frozenset(
            Identifier((self.tables[table_id].db,), self.tables[table_id].name)
            for table_id in proof.recompute
        )
        return KeyClass(tuple(columns), nonlinear, tuple(whole), recompute_on)

    def _linear(self) -> set[int]:
        """Table occurrences of the top SELECT itself that no outer join pads with NULLs,
        when that SELECT has no window: the query is linear in each of them."""
        select = self.query
        if _own(select, exp.Window):
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
        for source in scope.sources.values():
            if isinstance(source, exp.Table):
                self.tables[id(source)] = source
                if in_subquery_expression(source):
                    self.in_subqueries.add(id(source))
                for column in scope.columns:
                    if column.table == source.alias_or_name:
                        self.classes.find((id(source), column.name))
        if isinstance(select, exp.Select):
            self._links(scope, select)

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
        """Columns the query equates anywhere: derived tables' outputs, equalities, `IN`.
        A proposal only: where each equality holds is sql/key_check.py's business."""
        for projection in select.expressions:
            inner = projection.this if isinstance(projection, exp.Alias) else projection
            node = self._node(scope, inner)
            if node is not None:
                self.classes.union((id(select), projection.alias_or_name), node)
        for equality in _own(select, exp.EQ) + _own(select, exp.NullSafeEQ):
            a, b = self._node(scope, equality.this), self._node(scope, equality.expression)
            if a is not None and b is not None and a != b:
                self.classes.union(a, b)
        for membership in _own(select, exp.In):
            query = membership.args.get("query")
            inner = query.this if isinstance(query, exp.Subquery) else query
            if isinstance(inner, exp.Select) and len(inner.expressions) == 1:
                left = self._node(scope, membership.this)
                if left is not None:
                    self.classes.union(left, (id(inner), inner.expressions[0].alias_or_name))


def _own(select: exp.Select, kind: type[exp.Expr]) -> list[exp.Expr]:
    """The `kind` nodes of this SELECT itself, not of the queries nested in it."""
    return [node for node in select.find_all(kind) if node.parent_select is select]
