"""Per operator of a maintained view: the rule that maintains it, for `icemv mv explain`.

A reading of the analysed tree (sql/analysis.py), one line per table occurrence, join,
window and aggregate, naming the rule whose delta covers it and what a change costs there.
Pure: no I/O.
"""

from __future__ import annotations

from sqlglot import exp

from icemv.identifiers import Identifier
from icemv.sql.analysis import AggregateAnalysis, MaintainableAnalysis
from icemv.sql.keys import KEY_META, REACH_META


def _text(node: exp.Expr, width: int = 60) -> str:
    text = node.sql(dialect="spark").replace("`", "")
    return text if len(text) <= width else text[: width - 3] + "..."


def _table(table: exp.Table) -> str:
    return f"{table.alias_or_name} ({table.db}.{table.name})"


def operator_rules(analysis: MaintainableAnalysis) -> list[str]:
    """One line per operator: tables, joins, windows, aggregates, each with its rule."""
    keyed = analysis.keyed is not None
    lines = []
    for table in analysis.query.find_all(exp.Table):
        key, reach = table.meta.get(KEY_META), table.meta.get(REACH_META)
        if key is not None:
            lines.append(f"table {_table(table)}: rows of the touched keys of {key}")
        elif reach is not None:
            lines.append(
                f"table {_table(table)}: read whole; its changes reach the key through "
                f"{table.alias_or_name}.{reach.column} = {reach.parent}.{reach.parent_column}"
            )
        elif Identifier((table.db,), table.name) in analysis.recompute_on and (
            keyed or table.find_ancestor(exp.Subquery, exp.Exists) is not None
        ):
            lines.append(f"table {_table(table)}: read whole; a change to it recomputes the view")
        else:
            lines.append(f"table {_table(table)}: delta rows (linear)")
    for join in analysis.query.find_all(exp.Join):
        side, kind = (join.side or "").upper(), (join.kind or "").upper()
        name = " ".join(p for p in (side, kind, "JOIN") if p)
        if side or kind in ("SEMI", "ANTI"):
            rule = "affected keys: both snapshots' rows of the touched keys, padded rows included"
        else:
            rule = "inner join: one delta term per changed side" + (
                " (within the affected keys)" if keyed else ""
            )
        lines.append(f"{name} {_text(join.this, 40)}: {rule}")
    for window in analysis.query.find_all(exp.Window):
        partition = ", ".join(_text(p, 30) for p in window.args.get("partition_by") or [])
        lines.append(
            f"window {_text(window.this, 30)} OVER (PARTITION BY {partition}): the touched "
            "partitions recomputed whole (any function, any frame)"
        )
    if analysis.keyed is not None:  # inner aggregates (derived tables, groups as rows)
        for select in analysis.query.find_all(exp.Select):
            group = select.args.get("group")
            if select is not analysis.query and group is not None:
                keys = ", ".join(_text(k, 30) for k in group.expressions)
                lines.append(f"GROUP BY {keys} (inner): the touched groups recomputed")
    if isinstance(analysis, AggregateAnalysis):
        merges = analysis.aggregate_strategy(False, stateful=True) == "merge-aggregates"
        for aggregate in analysis.aggregates:
            if not merges:
                how = "the touched groups recomputed (the view's strategy below)"
            elif aggregate.func in ("min", "max"):
                how = "merged; a delete that takes the extreme recomputes the touched groups"
            else:
                how = "merged from the delta (floating-point sums within their error bound)"
            lines.append(f"aggregate {aggregate.func}: {how}")
    return lines
