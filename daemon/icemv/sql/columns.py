"""What a view query needs from one source table: its columns, and filters on its rows alone.

Pure passes over the analysed (qualified, normalised) query, for the change read
(refresh/changes/reader.py): a source's change rows need only the columns the query reads
from it, and rows failing a WHERE conjunct about that table alone never reach the view.
Every answer errs towards reading more: None means all columns, or no filter.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp
from sqlglot.optimizer.scope import Scope, traverse_scope

from icemv.identifiers import Identifier
from icemv.sql.constructs import NON_DETERMINISTIC
from icemv.sql.keys import KEY_META, REACH_META


def source_of(table: exp.Table) -> Identifier:
    """The source table a (qualified) table occurrence reads."""
    return Identifier((table.db,), table.name)


def _occurrences(query: exp.Query, source: Identifier) -> list[exp.Table]:
    return [t for t in query.find_all(exp.Table) if source_of(t) == source]


def _resolve(scope: Scope, alias: str) -> exp.Expr | Scope | None:
    """What `alias` names where a column of `scope` uses it (outer scopes for correlation)."""
    current: Scope | None = scope
    while current is not None:
        if alias in current.sources:
            found: exp.Expr | Scope = current.sources[alias]
            return found
        current = current.parent
    return None


def _has_star(scope: Scope) -> bool:
    return any(
        isinstance(node, exp.Star) and not isinstance(node.parent, exp.Count)
        for node in scope.expression.find_all(exp.Star)
    )


def columns_used(query: exp.Query, source: Identifier) -> frozenset[str] | None:
    """Columns of `source` that `query` reads, in any occurrence; None: unsure (read all).

    Unsure: a star left after qualification (COUNT(*) aside), a column without its table,
    a table name that no scope defines (a generator's alias). A keyed query's key columns
    are added by `change_read`.
    """
    used: set[str] = set()
    for scope in traverse_scope(query):
        if _has_star(scope):
            return None
        for column in scope.columns:
            if not column.table:
                return None
            target = _resolve(scope, column.table)
            if target is None:
                return None
            if isinstance(target, exp.Table) and source_of(target) == source:
                used.add(column.name)
    return frozenset(used)


def _about_one_table(conjunct: exp.Expr, alias: str) -> bool:
    """Columns of `alias` only, and nothing evaluated per query rather than per row."""
    columns = list(conjunct.find_all(exp.Column))
    if not columns or any(c.table != alias or isinstance(c.this, exp.Star) for c in columns):
        return False
    for node in conjunct.walk():
        if isinstance(node, exp.Query | exp.Subquery | exp.AggFunc | exp.Window | exp.Exists):
            return False
        if isinstance(node, exp.Rand | exp.Randn | exp.Uuid):
            return False
        if isinstance(node, exp.Anonymous) and str(node.this).lower() in NON_DETERMINISTIC:
            return False
    return True


def pushable_filter(query: exp.Query, source: Identifier) -> exp.Expr | None:
    """The WHERE conjuncts about `source`'s only occurrence, over unqualified column names.

    Only for a query of inner joins (no keyed rule: an outer join's WHERE sees padded
    rows), where the source occurs once. None: no filter to push.
    """
    occurrences = _occurrences(query, source)
    if len(occurrences) != 1:
        return None
    table = occurrences[0]
    select = table.find_ancestor(exp.Select)
    if select is None:
        return None
    for join in select.args.get("joins") or ():
        if (join.side or join.kind or "INNER").upper() not in ("INNER", "CROSS"):
            return None
    where = select.args.get("where")
    if where is None:
        return None
    alias = table.alias_or_name
    kept = []
    for conjunct in where.this.flatten() if isinstance(where.this, exp.And) else [where.this]:
        if _about_one_table(conjunct, alias):
            bare = conjunct.copy()
            for column in bare.find_all(exp.Column):
                column.set("table", None)
            kept.append(bare)
    if not kept:
        return None
    return exp.and_(*kept) if len(kept) > 1 else kept[0]


@dataclass(frozen=True)
class ChangeRead:
    """How to read one source's change rows for a view."""

    columns: tuple[str, ...] | None  # in table order; None: all
    filter: exp.Expr | None  # over the source's unqualified columns
    # Cancel a rewrite's moved rows before the delta query (refresh/changes/reader.py);
    # off where the delta query nets them as early anyway.
    cancel: bool = True

    def filter_sql(self) -> str | None:
        return None if self.filter is None else self.filter.sql(dialect="spark")


ALL = ChangeRead(None, None)


def nets_at_once(query: exp.Query, keyed: bool, recomputes_groups: bool) -> bool:
    """Whether the delta query itself sums a change's rows by weight before anything else
    (one table occurrence, no key class: the rows patch nets row images, the aggregate
    patch merges sums), unless it recomputes the groups the rows touch."""
    return not keyed and not recomputes_groups and len(list(query.find_all(exp.Table))) == 1


def change_read(
    query: exp.Query, source: Identifier, table_columns: tuple[str, ...], keyed: bool
) -> ChangeRead:
    """What the change rows of `source` need for `query`; `keyed`: the query has a key
    class (sql/keys.py), whose delta reads each occurrence's key column from the change
    rows and whose outer joins rule out pushed filters."""
    used = columns_used(query, source)
    if used is None:
        return ALL
    if keyed:
        for table in _occurrences(query, source):
            key = table.meta.get(KEY_META)
            if key is None and REACH_META not in table.meta:
                return ALL
            if key is not None:  # a whole table's reach column is one the query uses
                used = used | {str(key)}
    if not used <= set(table_columns):
        return ALL  # names we cannot match to the table's: read all
    columns = tuple(c for c in table_columns if c in used)
    if len(columns) == len(table_columns):
        columns_or_all: tuple[str, ...] | None = None
    else:
        columns_or_all = columns
    return ChangeRead(columns_or_all, None if keyed else pushable_filter(query, source))
