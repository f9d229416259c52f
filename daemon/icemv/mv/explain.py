"""`icemv mv explain`: whether an MV is maintained incrementally, how, or exactly why not."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Any

from sqlglot import exp

from icemv.lakehouse import CatalogReads, Lakehouse
from icemv.mv.layout import StorageLayout
from icemv.mv.model import REFRESH_POLICY_PROPERTY, MaterializedView
from icemv.mv.operators import operator_rules
from icemv.mv.report import quarantined_rule
from icemv.sql.analysis import (
    IvmAnalysis,
    MaintainableAnalysis,
    NotMaintainable,
    RowsAnalysis,
    analyse,
)
from icemv.sql.state import StateColumn

CHANGE_SETS = (
    "append snapshots: rows of the added data files; replace (compaction): skipped; "
    "overwrite/delete: files touched (added, removed, hit by position deletes) read at the "
    "old and new snapshot and diffed as multisets"
)


def explain_analysis(
    analysis: IvmAnalysis,
    policy: str,
    state: Sequence[StateColumn] = (),
    floating: bool = False,
) -> dict[str, Any]:
    """`state`: the hidden state columns the storage table keeps for the view;
    `floating`: its sums add floating-point values (mv/layout.py)."""
    report: dict[str, Any] = {
        "incremental": analysis.maintainable and policy != "full",
        "policy": policy,
        "sources": [s.dotted for s in analysis.sources],
    }
    if analysis.rewrites:
        report["normalised"] = list(analysis.rewrites)
    if isinstance(analysis, NotMaintainable):
        report["reasons"] = list(analysis.reasons)
        report["details"] = list(analysis.details)
        return report
    report["shape"] = analysis.shape
    report["change-sets"] = CHANGE_SETS
    rules = construct_rules(analysis)
    if rules:
        report["rules"] = rules
    report["operators"] = operator_rules(analysis)
    if analysis.keyed is not None:
        report["keys"] = (
            f"affected keys ({analysis.keyed.describe()}): the "
            + ("view's rows" if isinstance(analysis, RowsAnalysis) else "grouped input rows")
            + " for the key values the changes touch, read at the old and new snapshots"
        )
    if isinstance(analysis, RowsAnalysis):
        report["strategy"] = (
            "inserted rows appended; deleted row images removed one copy per deleted base row"
            + (
                " (one delta term per changed table occurrence)"
                if len(analysis.sources) > 1
                else ""
            )
        )
    else:
        stateful = bool(state)
        report["strategy"] = {
            "insert-only": analysis.aggregate_strategy(False, stateful),
            "with-deletes": analysis.aggregate_strategy(True, stateful, floating),
        }
        if analysis.grouping_sets:
            report["grouping-sets"] = (
                "a union of groupings: the touched groups of every grouping set recomputed, "
                "told apart by the hidden grouping id"
            )
        if state:
            report["state-columns"] = [column.name for column in state]
    return report


# What a normalisation rewrite (sql/normalise.py) means for the refresh, by rule.
_REWRITE_RULES = {
    "UNION as": "union: multiplicity (a GROUP BY over the branches' UNION ALL; the hidden "
    "_icemv_rows counts each row's copies, a row goes with its last copy)",
    "INTERSECT as": "intersect: touched rows recomputed (a GROUP BY over both sides tagged "
    "by side; a row stays while both sides have a copy)",
    "EXCEPT as": "except: touched rows recomputed (a GROUP BY over both sides tagged by "
    "side; a row stays while only the left side has a copy)",
    "NOT IN (SELECT)": "not-in: NOT EXISTS conjuncts that keep NOT IN's NULL semantics",
}


def construct_rules(analysis: MaintainableAnalysis) -> list[str]:
    """The rule maintaining each set operation, NOT IN, subquery filter and top-N."""
    rules = [
        rule
        for prefix, rule in _REWRITE_RULES.items()
        if any(r.startswith(prefix) for r in analysis.rewrites)
    ]
    if isinstance(analysis.query, exp.Union):
        rules.append("union all: the delta of each branch, unioned")
    if analysis.recompute_on:
        names = ", ".join(sorted(str(i) for i in analysis.recompute_on))
        rules.append(
            f"subqueries no key bounds: a change to {names} recomputes the view "
            "(subquery-source-changed), unless every EXISTS or scalar subquery reading it "
            "has the same value at both snapshots (checked at plan time)"
        )
    if isinstance(analysis, RowsAnalysis) and analysis.top_n is not None:
        rules.append(
            f"top-n ({analysis.top_n.describe()}): view rows gained or lost that sort after "
            "the stored n-th row write nothing (top-n-unreached); reaching or tying it "
            "recomputes the view (top-n-reached)"
        )
    return rules


def explain(lakehouse: Lakehouse, mv: MaterializedView) -> dict[str, Any]:
    reads = CatalogReads(lakehouse)
    analysis = analyse(reads, mv.sql, mv.version.default_namespace or mv.identifier.namespace)
    policy = mv.properties.get(REFRESH_POLICY_PROPERTY, "auto")
    layout = StorageLayout.of(reads.load_table(mv.storage))
    state, floating = layout.state_of(analysis), layout.floating_sums(analysis)
    report = {"name": mv.identifier.dotted, **explain_analysis(analysis, policy, state, floating)}
    quarantine = quarantined_rule(reads, mv)
    if quarantine is not None:
        report["quarantined"] = quarantine
    return report


def render_explain(report: dict[str, Any]) -> str:
    name = report.get("name", "the view")
    if not report["incremental"]:
        why = (
            "policy is full"
            if report.get("policy") == "full" and "reasons" not in report
            else ", ".join(report.get("reasons", []))
        )
        lines = [f"{name}: full refresh only ({why})"]
        lines += [f"  {detail}" for detail in report.get("details", [])]
        lines += _normalised(report)
        return _wrapped(lines)
    lines = [
        f"{name}: incremental ({report['shape']}), policy {report['policy']}",
        f"  sources: {', '.join(report['sources']) or '(none)'}",
        *_normalised(report),
    ]
    for part in ("keys", "grouping-sets"):
        if report.get(part):
            lines.append(f"  {report[part]}")
    lines += [f"  {rule}" for rule in report.get("rules", [])]
    if report.get("operators"):
        lines.append("  operators:")
        lines += [f"    {line}" for line in report["operators"]]
    strategy = report["strategy"]
    if isinstance(strategy, dict):
        labels = {"insert-only": "insert-only deltas", "with-deletes": "deltas with deletes"}
        lines += [f"  {labels.get(kind, kind)}: {how}" for kind, how in strategy.items()]
    else:
        lines.append(f"  {strategy}")
    if report.get("state-columns"):
        lines.append(f"  hidden state columns: {', '.join(report['state-columns'])}")
    lines.append(f"  change sets: {report['change-sets']}")
    if report.get("joined-reads"):
        lines.append(
            "  joined tables on the embedded engine (restricted when one would not stay in "
            "the cache whole):"
        )
        lines += [f"    {line}" for line in report["joined-reads"]]
    quarantine = report.get("quarantined")
    if quarantine:
        lines.append(
            f"  QUARANTINED: rule {quarantine['rule']} gave a wrong delta "
            f"({quarantine['detail']}); refreshes using it are full until `icemv mv clear`"
        )
    return _wrapped(lines)


def _wrapped(lines: list[str], width: int = 100) -> str:
    """Each line within `width` columns, a long one continued under its own indent."""
    out: list[str] = []
    for line in lines:
        indent = " " * (len(line) - len(line.lstrip()))
        out += textwrap.wrap(
            line, width, subsequent_indent=indent + "    ", break_on_hyphens=False
        ) or [line]
    return "\n".join(out)


def _normalised(report: dict[str, Any]) -> list[str]:
    rewrites = report.get("normalised")
    return [f"  normalised first: {'; '.join(rewrites)}"] if rewrites else []
