"""The delta of a view from the deltas of its sources, as SQL over the qualified query.

For a select over table occurrences r1..rn, of which some changed:
    ΔV = Σ_i  Q(r1..r(i-1) at new, Δri, r(i+1)..rn at old)
which is exact under bag semantics for any inner joins, filters and projections, self-joins
included (each occurrence is a term). Every output row carries the weight of the delta row
it came from (+1 insert, -1 delete). UNION ALL is the sum of its branches' deltas, also as
the derived table a set operation's GROUP BY reads (sql/setops.py).

A keyed query (sql/keys.py: windows, outer and semi joins, derived tables) has instead
    dV = Q(sources|K at new) - Q(sources|K at old),  K = the keys its changes touch,
a table the key class reads whole taking part unrestricted at each snapshot, and its
changes reaching K along the equalities of its reach (sql/key_check.py says why exact).
K is evaluated once by the refresh (`touched_keys_query`, then `TouchedKeys`): each
restricted read `source|K` is an exact null-safe semi join with K, plus literal bounds of
K's values (a range, and an IN list when K is small) that Iceberg prunes files and row
groups with.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sqlglot import exp

from icemv.errors import EngineRefusedError
from icemv.identifiers import Identifier
from icemv.sql.analysis import AggregateAnalysis, MaintainableAnalysis, RowsAnalysis, selects_of
from icemv.sql.key_check import Reach
from icemv.sql.keys import KEY_META, REACH_META
from icemv.sql.names import ANY, KEY, KEYS, WEIGHT, argument_column, key_column
from icemv.sql.parse import in_subquery_expression
from icemv.sql.pinning import pin_tables, table_at
from icemv.sql.setops import union_source

# Iceberg's metrics evaluators check IN lists up to 200 values against file bounds.
IN_LIST_MAX = 200


@dataclass(frozen=True)
class KeyBounds:
    """Literals bounding the touched keys: every non-NULL key k has low <= k <= high and,
    when `values` is not empty, is one of them; `has_null`: K holds NULL."""

    low: exp.Expr | None  # None: K holds only NULL
    high: exp.Expr | None
    values: tuple[exp.Expr, ...] = ()
    has_null: bool = False

    def admits(self, column: exp.Column) -> exp.Expr:
        """A condition every row whose `column` is in K meets (a superset: pruning only)."""
        terms: list[exp.Expr] = []
        if self.low is not None and self.high is not None:
            terms.append(
                exp.Between(this=column.copy(), low=self.low.copy(), high=self.high.copy())
            )
            if self.values:
                terms.append(
                    exp.In(this=column.copy(), expressions=[v.copy() for v in self.values])
                )
        present = exp.and_(*terms, copy=False) if terms else None
        if not self.has_null:
            return present if present is not None else exp.false()
        is_null = exp.Is(this=column.copy(), expression=exp.null())
        return is_null if present is None else exp.or_(is_null, exp.Paren(this=present))


@dataclass(frozen=True)
class TouchedKeys:
    """K, evaluated: a temp view of the touched keys (column KEY, duplicates allowed) and
    literal bounds of them for the table occurrences whose key column they suit."""

    view: str
    bounds: KeyBounds | None = None
    # (source, key column) of the occurrences `bounds` may filter: same type family as K.
    bounded: frozenset[tuple[Identifier, str]] = frozenset()
    broadcast: bool = False  # K is small: hint the semi joins to broadcast it


@dataclass(frozen=True)
class DeltaInputs:
    catalog: str
    # Temp view holding Δ rows (table columns + WEIGHT) per changed source.
    delta_views: Mapping[Identifier, str]
    old: Mapping[Identifier, int | None]
    new: Mapping[Identifier, int | None]
    # The keyed delta's K, evaluated by the refresh; None: an inline CTE over the deltas.
    keys: TouchedKeys | None = None
    # Relations an executor holds for sources read whole at a snapshot (the embedded
    # engine's unchanged tables), by (source, snapshot); None: the catalog's tables.
    held: Mapping[tuple[Identifier, int | None], str] | None = None

    def table(self, source: Identifier, snapshot: int | None, alias: str) -> exp.Expr:
        """`source` at `snapshot` under `alias`: the held relation, or the catalog's table."""
        if self.held is None:
            return table_at(self.catalog, source, snapshot, alias)
        name = self.held.get((source, snapshot))
        if name is None:
            raise EngineRefusedError(f"{source} at snapshot {snapshot} is not read")
        return exp.Table(
            this=exp.to_identifier(name, quoted=True),
            alias=exp.TableAlias(this=exp.to_identifier(alias, quoted=True)),
        )

    def pinned(self, query: exp.Query, pins: Mapping[Identifier, int | None]) -> exp.Query:
        """A copy of `query` reading each table at its pin (as `table`)."""
        pinned = query.copy()
        for table in list(pinned.find_all(exp.Table)):
            source = _identifier(table)
            table.replace(self.table(source, pins[source], table.alias_or_name))
        return pinned


def _identifier(table: exp.Table) -> Identifier:
    return Identifier((table.db,), table.name)


def _tables(select: exp.Select) -> list[exp.Table]:
    return list(select.find_all(exp.Table))


def _terms(select: exp.Select, inputs: DeltaInputs) -> list[exp.Select]:
    terms = []
    for index, occurrence in enumerate(_tables(select)):
        if _identifier(occurrence) not in inputs.delta_views:
            continue
        term = select.copy()
        delta_alias = occurrence.alias_or_name
        for position, table in enumerate(_tables(term)):
            source = _identifier(table)
            alias = table.alias_or_name
            if position == index:
                replacement: exp.Expr = exp.Table(
                    this=exp.to_identifier(inputs.delta_views[source], quoted=True),
                    alias=exp.TableAlias(this=exp.to_identifier(alias, quoted=True)),
                )
            else:
                pins = inputs.new if position < index else inputs.old
                replacement = inputs.table(source, pins[source], alias)
            table.replace(replacement)
        weight = exp.column(WEIGHT, table=delta_alias, quoted=True)
        term.set("expressions", [*term.expressions, exp.alias_(weight, WEIGHT, quoted=True)])
        terms.append(term)
    return terms


def _union_all(terms: list[exp.Select]) -> exp.Query | None:
    if not terms:
        return None
    combined: exp.Query = terms[0]
    for term in terms[1:]:
        combined = exp.union(combined, term, distinct=False)
    return combined


def needs_keyed_delta(analysis: MaintainableAnalysis, inputs: DeltaInputs) -> bool:
    """Whether the view's delta for these changed sources goes through affected keys."""
    keyed = analysis.keyed
    return keyed is not None and keyed.needs_keys(inputs.delta_views)


def touched_keys_query(query: exp.Query, inputs: DeltaInputs) -> exp.Query | None:
    """K: the key values of the changed sources' delta rows (duplicates kept).

    Every keyed table occurrence carries its key column in `meta[KEY_META]` (sql/keys.py);
    a changed occurrence read whole gives the keys of the rows its change rows reach.
    """
    touched: list[exp.Select] = []
    for table in query.find_all(exp.Table):
        source = _identifier(table)
        if source not in inputs.delta_views:
            continue
        changes = exp.Table(this=exp.to_identifier(inputs.delta_views[source], quoted=True))
        key = table.meta.get(KEY_META)
        if key is not None:
            column = exp.column(key, quoted=True)
            touched.append(exp.select(exp.alias_(column, KEY, quoted=True)).from_(changes))
        elif REACH_META in table.meta:
            touched.append(_reached_keys(table, changes, inputs))
        # else: read by a subquery no key bounds, whose value the plan found unchanged
    if not touched:
        return None
    keys: exp.Query = touched[0]
    for more in touched[1:]:
        keys = exp.union(keys, more, distinct=False)
    return keys


def _reached_keys(table: exp.Table, changes: exp.Table, inputs: DeltaInputs) -> exp.Select:
    """The keys the change rows of a table read whole reach: its rows joined along its
    reach (sql/key_check.py) to a keyed occurrence or derived relation, every table on the
    way at the new snapshot, null-safely (a superset of the `=` matches)."""
    here = "__icemv_r0"
    keys = exp.select().from_(changes.as_(here, quoted=True))
    step: exp.Table | exp.Subquery = table
    hop = 0
    while step.meta.get(KEY_META) is None:
        reach: Reach = step.meta[REACH_META]
        parent = _in_scope(step, reach.parent)
        hop += 1
        there = f"__icemv_r{hop}"
        on = exp.NullSafeEQ(
            this=exp.column(reach.column, table=here, quoted=True),
            expression=exp.column(reach.parent_column, table=there, quoted=True),
        )
        if isinstance(parent, exp.Subquery):  # a derived relation, at the new snapshots
            pinned = inputs.pinned(parent.this, inputs.new)
            relation: exp.Expr = exp.Subquery(
                this=pinned, alias=exp.TableAlias(this=exp.to_identifier(there, quoted=True))
            )
        else:
            source = _identifier(parent)
            relation = inputs.table(source, inputs.new[source], there)
        keys = keys.join(exp.Join(this=relation, on=on), copy=False)
        step, here = parent, there
    column = exp.column(step.meta[KEY_META], table=here, quoted=True)
    return keys.select(exp.alias_(column, KEY, quoted=True), copy=False)


def _in_scope(node: exp.Expr, alias: str) -> exp.Table | exp.Subquery:
    """The table occurrence or derived relation `alias` names, looked up from `node`'s own
    SELECT outwards (a subquery's reach is in the outer SELECT; the key check gives no reach
    whose parent alias the subquery's own table shadows)."""
    select = node.parent_select
    while select is not None:
        for found in select.find_all(exp.Table, exp.Subquery):
            if found.parent_select is select and found.alias_or_name == alias:
                assert isinstance(found, exp.Table | exp.Subquery)
                return found
        select = select.parent_select
    raise KeyError(alias)


def keyed_delta(query: exp.Query, inputs: DeltaInputs) -> exp.Query | None:
    """The query's rows for the touched keys at the new snapshots (+1) and the old (-1).

    K is `inputs.keys` when the refresh evaluated it, else a CTE over the delta views.
    """
    keys, inline = inputs.keys, None
    if keys is None:
        inline = touched_keys_query(query, inputs)
        if inline is None:
            return None
        keys = TouchedKeys(KEYS)
    sides = [_weighted(_restricted(query, inputs, inputs.new, keys), 1)]
    sides.append(_weighted(_restricted(query, inputs, inputs.old, keys), -1))
    delta = exp.union(sides[0], sides[1], distinct=False)
    keyed = exp.select(exp.Star()).from_(exp.Subquery(this=delta, alias=exp.TableAlias(
        this=exp.to_identifier("__icemv_keyed", quoted=True))))  # fmt: skip
    if inline is not None:
        keyed = keyed.with_(exp.to_identifier(KEYS, quoted=True), as_=inline)
    return keyed


def _restricted(
    query: exp.Query,
    inputs: DeltaInputs,
    pins: Mapping[Identifier, int | None],
    keys: TouchedKeys,
) -> exp.Query:
    """A copy reading each table at its pin, only the rows whose key is in K: an exact
    null-safe semi join, and the bounds (if any suit the column) for Iceberg to prune by.

    A table read by a subquery expression (scalar, EXISTS, IN) is read whole at its pin:
    the subquery's value for a kept row is then its value in the view, so the rows kept
    are exactly the view's rows with a key in K, as for the tables of the FROM clauses
    (restricting it too would only be cheaper, and Spark 3.5 fails to decorrelate a
    correlated subquery over a semi join: `key not found`)."""
    restricted = query.copy()
    for table in list(restricted.find_all(exp.Table)):
        source, alias, key = _identifier(table), table.alias_or_name, table.meta.get(KEY_META)
        if key is None or in_subquery_expression(table):
            table.replace(inputs.table(source, pins[source], alias))
            continue
        column = exp.column(key, table=alias, quoted=True)
        on = exp.NullSafeEQ(
            this=column.copy(), expression=exp.column(KEY, table=keys.view, quoted=True)
        )
        rows = (
            exp.select(exp.Column(this=exp.Star(), table=exp.to_identifier(alias, quoted=True)))
            .from_(inputs.table(source, pins[source], alias))
            .join(  # a Join node: given the type by text, sqlglot parses it per call
                exp.Join(
                    this=exp.Table(this=exp.to_identifier(keys.view, quoted=True)),
                    on=on,
                    side="LEFT",
                    kind="SEMI",
                )
            )
        )
        if keys.broadcast:
            hint = exp.Anonymous(
                this="BROADCAST", expressions=[exp.to_identifier(keys.view, quoted=True)]
            )
            rows.set("hint", exp.Hint(expressions=[hint]))
        if keys.bounds is not None and (source, key) in keys.bounded:
            rows = rows.where(keys.bounds.admits(column), copy=False)
        table.replace(
            exp.Subquery(
                this=rows, alias=exp.TableAlias(this=exp.to_identifier(alias, quoted=True))
            )
        )
    return restricted


def _weighted(query: exp.Query, weight: int) -> exp.Select:
    rows = exp.Subquery(this=query, alias=exp.TableAlias(this=exp.to_identifier("__icemv_q")))
    return exp.select(
        exp.Column(this=exp.Star(), table=exp.to_identifier("__icemv_q")),
        exp.alias_(exp.Literal.number(weight), WEIGHT, quoted=True),
    ).from_(rows)


def rows_delta(analysis: RowsAnalysis, inputs: DeltaInputs) -> exp.Query | None:
    """Weighted delta of a filter/project/join/UNION ALL view; None if none of its sources moved."""
    if needs_keyed_delta(analysis, inputs):
        return keyed_delta(analysis.query, inputs)
    return _union_all([t for s in selects_of(analysis.query) for t in _terms(s, inputs)])


def pre_aggregation_delta(analysis: AggregateAnalysis, inputs: DeltaInputs) -> exp.Query | None:
    """Weighted delta of the rows entering the GROUP BY: key values and aggregate arguments.

    None if none of its sources moved.
    """
    select = analysis.query.copy()
    projections = [
        exp.alias_(k.expression.copy(), key_column(i), quoted=True)
        for i, k in enumerate(analysis.keys)
    ]
    projections += [
        exp.alias_(a.argument.copy(), argument_column(i), quoted=True)
        for i, a in enumerate(analysis.aggregates)
        if a.argument is not None
    ]
    if not projections:
        projections = [exp.alias_(exp.true(), ANY, quoted=True)]
    select.set("expressions", projections)
    select.set("group", None)
    select.set("having", None)
    if needs_keyed_delta(analysis, inputs):
        return keyed_delta(select, inputs)
    if union_source(select) is not None:
        return _over_union_delta(select, inputs)
    return _union_all(_terms(select, inputs))


def _over_union_delta(select: exp.Select, inputs: DeltaInputs) -> exp.Query | None:
    """`select` over (B1 UNION ALL .. Bk) u is linear in u: the same select over the
    branches' delta terms, each renamed to the first branch's columns, weight carried."""
    derived = union_source(select)
    assert derived is not None
    branches = selects_of(derived.this)
    names = [p.alias_or_name for p in branches[0].expressions]
    terms = []
    for branch in branches:
        for term in _terms(branch, inputs):
            *values, weight = term.expressions
            renamed = [
                exp.alias_(v.this if isinstance(v, exp.Alias) else v, name, quoted=True)
                for v, name in zip(values, names, strict=True)
            ]
            term.set("expressions", [*renamed, weight])
            terms.append(term)
    delta = _union_all(terms)
    if delta is None:
        return None
    over = select.copy()
    over_source = union_source(over)
    assert over_source is not None
    over_source.set("this", delta)
    weight = exp.column(WEIGHT, table=derived.alias_or_name, quoted=True)
    return over.select(exp.alias_(weight, WEIGHT, quoted=True), copy=False)


def query_at(
    analysis: MaintainableAnalysis, catalog: str, pins: Mapping[Identifier, int | None]
) -> exp.Query:
    """The view query with every source read at the given snapshots."""
    return pin_tables(analysis.query, catalog, pins)
