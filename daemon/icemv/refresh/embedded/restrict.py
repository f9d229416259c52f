"""Tables the embedded engine reads restricted to the keys the delta can meet.

A table too large to hold whole (refresh/embedded/route.py) may still be read for a
delta: only its rows whose join key is among the values the delta's rows bring, found by
pyiceberg with a row filter (`key IN (...)` and the values' bounds, which prune data
files by their column bounds before any is read; deletes applied as for a whole read).
The delta trees then run unchanged over the smaller relation. Two cases are exact:

**A delta term** (one changed source, no keyed delta, no group recomputed from the
sources, no self-join: then every table occurrence is in exactly one term, sql/delta.py).
An occurrence `T` of an unchanged table directly in a SELECT's FROM list is restricted to
`T.c IN values(P.e)` where `T.c = P.e` is a conjunct of that SELECT's WHERE or of an inner
join's ON, or of the ON of the LEFT JOIN that joins `T` itself (its right side), and `P` is
another occurrence in the same FROM list: the changed source (its change rows) or an
unchanged table read before `T` (whole or restricted). The values are P's relation's
values of `e`, a superset of those of the rows P takes part with. Why exact: every row
the SELECT produces meets the conjunct, so its `T` row is real with `T.c` equal to a
non-NULL `P.e` of a row of P's relation, which the restriction keeps; a row of `T` the
restriction drops takes part in no produced row. Dropping it only removes rows that
involve it, or null-extends rows of a LEFT JOIN's preserved side (`T.c` NULL then), and
those fail the same conjunct. A LEFT JOIN's ON only matches rows of its left side, whose
`P.e` are in the values, so a dropped row matched nothing there either.

**A keyed delta** (sql/keys.py): the trees read every occurrence tagged with a key column
as `source|K`, an exact null-safe semi join with K, the keys the changes touch, at each
snapshot. When K is computed from the change rows alone (every changed occurrence carries
its key, none is reached through other tables) and no group is recomputed from the
sources, a source all of whose occurrences are so tagged, on one column, none in a
subquery expression, is read restricted to `c IN K` (`OR c IS NULL` when K holds NULL):
the semi join drops every other row anyway. That holds for the changed sources too, read
at both snapshots.

The values are compared by pyiceberg as the join compares them only for integral, string
and date columns on both sides (the same type family, as the keyed bounds of
refresh/patch/touched_keys.py): other key types are not restricted, and such a table is
read whole or sent to Spark.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from pyiceberg.schema import Schema
from sqlglot import exp

from icemv.identifiers import Identifier
from icemv.lakehouse import CatalogReads
from icemv.refresh.patch.touched_keys import field_named, iceberg_family
from icemv.sql.analysis import MaintainableAnalysis, analyse
from icemv.sql.columns import source_of
from icemv.sql.keys import KEY_META, REACH_META
from icemv.sql.parse import in_subquery_expression


@dataclass(frozen=True)
class Partner:
    """Where a restricted read's values come from: `column` of `source`'s relation, the
    change rows when `source` is the changed one, else its held relation."""

    source: Identifier
    column: str  # a field name of the partner's schema


@dataclass(frozen=True)
class Restriction:
    """A table read only where `column` (a field of its schema) is among the values of
    its partners (a delta term), or of K (a keyed delta: `partners` empty)."""

    column: str
    partners: tuple[Partner, ...] = ()

    @property
    def keyed(self) -> bool:
        return not self.partners


def term_restrictions(
    query: exp.Query,
    moved: Identifier,
    unchanged: Iterable[Identifier],
    schemas: Mapping[Identifier, Schema],
) -> dict[Identifier, Restriction]:
    """The unchanged tables a single-term delta may read restricted, nearest the changed
    source first: each table's partners are the changed source, tables read whole, or
    tables before it (see the module); none unless `moved` occurs once."""
    if sum(source_of(t) == moved for t in query.find_all(exp.Table)) != 1:
        return {}  # each occurrence its own term: another's rows are not the change rows
    candidates: dict[Identifier, list[list[tuple[str, Partner]]]] = {}
    for identifier in unchanged:
        links = _links(query, identifier, schemas)
        if links is not None:
            candidates[identifier] = links
    settled = {moved, *(i for i in unchanged if i not in candidates)}
    chosen: dict[Identifier, Restriction] = {}
    progress = True
    while progress:
        progress = False
        for identifier, links in candidates.items():
            if identifier in chosen:
                continue
            picked = _picked(links, settled)
            if picked is not None:
                chosen[identifier] = picked
                settled.add(identifier)
                progress = True
    return chosen


def _picked(links: list[list[tuple[str, Partner]]], settled: set[Identifier]) -> Restriction | None:
    """One column for every occurrence, each with a settled partner; None if none is."""
    columns = set.intersection(
        *({c for c, p in occurrence if p.source in settled} for occurrence in links)
    )
    if not columns:
        return None
    column = sorted(columns)[0]
    partners = [p for occurrence in links for c, p in occurrence if c == column]
    settled_partners = [p for p in partners if p.source in settled]
    return Restriction(column, tuple(dict.fromkeys(settled_partners)))


def _links(
    query: exp.Query, identifier: Identifier, schemas: Mapping[Identifier, Schema]
) -> list[list[tuple[str, Partner]]] | None:
    """For each occurrence of `identifier`, its qualifying (column, partner) equalities;
    None when an occurrence has none."""
    links: list[list[tuple[str, Partner]]] = []
    for table in query.find_all(exp.Table):
        if source_of(table) != identifier:
            continue
        found = _occurrence_links(table, schemas)
        if not found:
            return None
        links.append(found)
    return links or None


def _occurrence_links(
    table: exp.Table, schemas: Mapping[Identifier, Schema]
) -> list[tuple[str, Partner]]:
    select = _from_list_select(table)
    if select is None:
        return []
    own = {t.alias_or_name: t for t in select.find_all(exp.Table) if _from_list_select(t) is select}
    alias = table.alias_or_name
    found: list[tuple[str, Partner]] = []
    for conjunct in _qualifying_conjuncts(select, table):
        if not isinstance(conjunct, exp.EQ):
            continue
        sides = (conjunct.this, conjunct.expression)
        if not all(isinstance(s, exp.Column) and isinstance(s.this, exp.Identifier) for s in sides):
            continue
        for mine, theirs in (sides, sides[::-1]):
            assert isinstance(mine, exp.Column) and isinstance(theirs, exp.Column)
            partner = own.get(theirs.table)
            if mine.table != alias or partner is None or partner is table:
                continue
            link = _same_family(table, mine.name, partner, theirs.name, schemas)
            if link is not None:
                found.append(link)
    return found


def _same_family(
    table: exp.Table,
    column: str,
    partner: exp.Table,
    partner_column: str,
    schemas: Mapping[Identifier, Schema],
) -> tuple[str, Partner] | None:
    """The two columns' field names when pyiceberg compares their values as `=` does."""
    mine_schema, their_schema = schemas.get(source_of(table)), schemas.get(source_of(partner))
    if mine_schema is None or their_schema is None:
        return None
    mine, theirs = field_named(mine_schema, column), field_named(their_schema, partner_column)
    if mine is None or theirs is None:
        return None
    family = iceberg_family(mine.field_type)
    if family is None or family != iceberg_family(theirs.field_type):
        return None
    return mine.name, Partner(source_of(partner), theirs.name)


def _from_list_select(table: exp.Table) -> exp.Select | None:
    """The SELECT whose FROM list (its FROM or one of its joins) holds `table` itself."""
    holder = table.parent
    if isinstance(holder, exp.From | exp.Join) and isinstance(holder.parent, exp.Select):
        return holder.parent
    return None


def _qualifying_conjuncts(select: exp.Select, table: exp.Table) -> list[exp.Expr]:
    """The conjuncts every row `select` produces meets and that hold `table`'s rows to a
    partner: its WHERE's, its inner joins' ON's, and the ON of the LEFT JOIN of `table`."""
    conjuncts: list[exp.Expr] = []
    where = select.args.get("where")
    if where is not None:
        conjuncts += _conjuncts(where.this)
    for join in select.args.get("joins") or []:
        on = join.args.get("on")
        if on is None:
            continue
        side, kind = (join.side or "").upper(), (join.kind or "").upper()
        inner = not side and kind in ("", "INNER", "CROSS")
        if inner or (side == "LEFT" and kind in ("", "OUTER") and join.this is table):
            conjuncts += _conjuncts(on)
    return conjuncts


def _conjuncts(condition: exp.Expr) -> list[exp.Expr]:
    node = condition.unnest()
    if isinstance(node, exp.And):
        return _conjuncts(node.left) + _conjuncts(node.right)
    return [node]


def keyed_restrictions(
    query: exp.Query,
    moved: Iterable[Identifier],
    sources: Iterable[Identifier],
    schemas: Mapping[Identifier, Schema],
) -> dict[Identifier, Restriction]:
    """The sources a keyed delta may read restricted to K (see the module); none unless
    the changed occurrences' key columns are of one type family that compares exactly."""
    moved = set(moved)
    tables = list(query.find_all(exp.Table))
    changed = [t for t in tables if source_of(t) in moved]
    if any(KEY_META not in t.meta or REACH_META in t.meta for t in changed):
        return {}  # K reaches some keys through other tables
    families = {_family(schemas[source_of(t)], str(t.meta[KEY_META])) for t in changed}
    key_family = families.pop() if len(families) == 1 else None
    if key_family is None:
        return {}
    chosen: dict[Identifier, Restriction] = {}
    for identifier in sources:
        occurrences = [t for t in tables if source_of(t) == identifier]
        keys = {str(t.meta.get(KEY_META)) for t in occurrences}
        if (
            not occurrences
            or any(KEY_META not in t.meta or in_subquery_expression(t) for t in occurrences)
            or len(keys) != 1
        ):
            continue
        field = field_named(schemas[identifier], keys.pop())
        if field is not None and iceberg_family(field.field_type) == key_family:
            chosen[identifier] = Restriction(field.name)
    return chosen


def _family(schema: Schema, column: str) -> str | None:
    field = field_named(schema, column)
    return iceberg_family(field.field_type) if field is not None else None


def joined_reads(
    query: exp.Query, nonlinear: Callable[[Identifier], bool], schemas: Mapping[Identifier, Schema]
) -> list[str]:
    """For `icemv mv explain`: for each source changing alone, how the embedded engine
    may read the other tables (`nonlinear`: whether its change goes through a keyed
    delta). A table is so restricted when it would not stay in the cache whole (a keyed
    delta's changed table always), and not when groups are recomputed from the sources."""
    lines: list[str] = []
    for moved in schemas:
        others = [i for i in schemas if i != moved]
        if not others:
            continue
        if nonlinear(moved):
            found = keyed_restrictions(query, [moved], schemas, schemas)
            shown = [f"{i.dotted} where {r.column} is a touched key" for i, r in found.items()]
        else:
            found = term_restrictions(query, moved, others, schemas)
            shown = [
                f"{i.dotted} where {r.column} is among "
                + " or ".join(f"{p.source.dotted}.{p.column}" for p in r.partners)
                for i, r in found.items()
            ]
        rest = [i.dotted for i in others if i not in found]
        if rest:
            shown.append(f"{', '.join(rest)} whole")
        lines.append(f"a change to {moved.dotted} alone: {'; '.join(shown)}")
    return lines


def explain_joined_reads(reads: CatalogReads, sql: str, namespace: tuple[str, ...]) -> list[str]:
    """`joined_reads` of a view's SQL, its sources' current schemas; none for a view of
    one table or one not maintained incrementally."""
    analysis = analyse(reads, sql, namespace)
    if not isinstance(analysis, MaintainableAnalysis) or len(analysis.sources) < 2:
        return []
    schemas = {source: reads.load_table(source).schema() for source in analysis.sources}
    keyed = analysis.keyed
    return joined_reads(
        analysis.query, lambda moved: keyed is not None and keyed.needs_keys([moved]), schemas
    )
