"""What one refresh will do, decided from catalog metadata before any data is read.

`RefreshPlan` is built once per refresh attempt from the tables that attempt loaded (each
once, `CatalogReads`): the storage snapshot to commit against, every source pinned at
one snapshot, and the refresh-state to record. `plan_incremental` adds what an
incremental refresh needs (analysis, per-source change classification, the size check)
or raises FullRefreshRequiredError with the reason; under policy `auto` the size check
weighs the change read's estimated rows against a full recompute's (refresh/cost.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import cached_property
from typing import TYPE_CHECKING

import structlog
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Snapshot
from sqlglot import exp

from icemv.engine.jvm import planning_failure
from icemv.errors import FullRefreshRequiredError
from icemv.format.quarantine import quarantine_of
from icemv.format.refresh_state import RefreshState
from icemv.format.summary import TOTAL_RECORDS, RefreshReason, summary_of
from icemv.identifiers import Identifier
from icemv.lakehouse import CatalogReads
from icemv.mv.history import RefreshRecord
from icemv.mv.layout import StorageLayout
from icemv.mv.model import MaterializedView
from icemv.refresh.changes.classify import SourceChange, classify_change
from icemv.refresh.changes.manifests import touched_files
from icemv.refresh.cost import CostEstimate, estimate
from icemv.sql.analysis import (
    AggregateAnalysis,
    AggregateStrategy,
    IvmAnalysis,
    MaintainableAnalysis,
    NotMaintainable,
    RowsAnalysis,
    analyse,
)
from icemv.sql.columns import ChangeRead, change_read, nets_at_once
from icemv.sql.delta import DeltaInputs
from icemv.sql.memo import Memo
from icemv.sql.parse import parse_query
from icemv.sql.pinning import PinnedQuery, pin_sources, pin_tables
from icemv.sql.state import StateColumn, state_query
from icemv.sql.subquery_filters import unchanged_checks

if TYPE_CHECKING:
    from icemv.refresh.embedded.route import EmbeddedRoute

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class RefreshPlan:
    mv: MaterializedView
    reads: CatalogReads
    started_ms: int  # before any source was read (the attempt's start)
    storage: Table  # as loaded for this attempt: its main is the commit's precondition
    pinned: PinnedQuery

    @property
    def namespace(self) -> tuple[str, ...]:
        """The namespace unqualified names in the view SQL resolve in."""
        return self.mv.version.default_namespace or self.mv.identifier.namespace

    @property
    def planned_from(self) -> Snapshot | None:
        return self.storage.current_snapshot()

    @property
    def state(self) -> RefreshState:
        return RefreshState(self.mv.version.version_id, self.started_ms, self.pinned.sources)

    @cached_property
    def analysis(self) -> IvmAnalysis:
        return analyse(self.reads, self.mv.sql, self.namespace)

    @cached_property
    def layout(self) -> StorageLayout:
        return StorageLayout.of(self.storage)

    @cached_property
    def state_columns(self) -> tuple[StateColumn, ...]:
        """The hidden state this refresh maintains (none for a state-free MV)."""
        return self.layout.state_of(self.analysis)

    def full_sql(self) -> str:
        """The query a full refresh writes: the view's columns, then its state columns."""
        if not self.layout.state_columns:
            return self.pinned.sql
        catalog = self.reads.catalog_name
        if self.state_columns:
            analysis = self.analysis
            assert isinstance(analysis, AggregateAnalysis)  # only those have state
            query = state_query(analysis, self.state_columns)
            return pin_tables(query, catalog, self.pinned.table_pins).sql(dialect="spark")
        # State this icemv cannot derive any more: written NULL, which incremental merges
        # treat as unknown (they recompute those groups).
        view = exp.Subquery(this=parse_query(self.pinned.sql), alias=exp.TableAlias(
            this=exp.to_identifier("v")))  # fmt: skip
        nulls = [
            exp.alias_(exp.cast(exp.null(), exp.DataType.build(sql_type, dialect="spark")),
                       name, quoted=True)
            for name, sql_type in self.layout.state_placeholders()
        ]  # fmt: skip
        star = exp.Column(this=exp.Star(), table=exp.to_identifier("v"))
        return exp.select(star, *nulls).from_(view).sql(dialect="spark")

    def source_records(self) -> int:
        """Records of every pinned source table at its pinned snapshot."""
        total = 0
        for source in self.pinned.sources:
            if source.type != "table" or source.snapshot_id is None:
                continue
            table = self.reads.load_table(Identifier(source.namespace, source.name))
            total += int(summary_of(table.snapshot_by_id(source.snapshot_id)).get(TOTAL_RECORDS, 0))
        return total


def plan_refresh(reads: CatalogReads, mv: MaterializedView, started_ms: int) -> RefreshPlan:
    """Pin every source now (at the snapshots `reads` loaded)."""
    storage = reads.load_table(mv.storage)
    namespace = mv.version.default_namespace or mv.identifier.namespace
    pinned = pin_sources(reads, mv.sql, namespace)
    return RefreshPlan(mv, reads, started_ms, storage, pinned)


@dataclass(frozen=True)
class IncrementalPlan:
    base: RefreshPlan
    analysis: MaintainableAnalysis
    planned_from: Snapshot
    changes: Mapping[Identifier, SourceChange]  # every source table
    moved: Mapping[Identifier, SourceChange]  # those with a logical change
    # Policy auto kept it incremental only for the embedded engine's cheaper read: why Spark's
    # would not be (should the embedded engine refuse once reading, a full recompute is cheaper).
    embedded_only: str | None = None
    # The route policy auto's estimate chose (refresh/embedded/route.py), kept for the
    # refresh: decided once. None: not decided yet.
    route: EmbeddedRoute | str | None = None
    # Policy auto: the patch merges but may recompute the groups a delete takes the extreme
    # of (`may_recompute_groups`), which on Spark reads every source whole besides the
    # change and would cost more than a full recompute: why. Spark then recomputes fully.
    reread_too_dear: str | None = None

    @property
    def keyed(self) -> bool:
        """Whether the delta replaces the touched keys' rows (sql/keys.py)."""
        keys = self.analysis.keyed
        return keys is not None and keys.needs_keys(self.moved)

    @property
    def rule(self) -> str:
        """The delta rule this refresh uses: what a wrong delta quarantines
        (format/quarantine.py)."""
        if self.keyed:
            return "affected-keys"
        analysis = self.analysis
        if isinstance(analysis, RowsAnalysis):
            return "top-n" if analysis.top_n is not None else "row-deltas"
        return f"aggregate-{self.aggregate_strategy()}"

    @property
    def rereads_sources(self) -> bool:
        """Whether Spark's delta reads every source whole besides the change: recomputing
        the touched groups evaluates the view at the new snapshots, semi-joined to their
        keys (refresh/patch/aggregates.py), which scans what a full recompute scans."""
        return (
            isinstance(self.analysis, AggregateAnalysis)
            and self.aggregate_strategy() == "recompute-groups"
        )

    @property
    def may_recompute_groups(self) -> bool:
        """Whether the patch may recompute touched groups from the sources: its strategy
        says so, or it merges MIN/MAX under deletes, which recomputes the groups a delete
        takes the extreme of (refresh/patch/aggregate_rules.py)."""
        analysis = self.analysis
        if not isinstance(analysis, AggregateAnalysis):
            return False
        if self.aggregate_strategy() != "merge-aggregates":
            return True
        return self.with_deletes and any(a.func in ("min", "max") for a in analysis.aggregates)

    def aggregate_strategy(self) -> AggregateStrategy:
        """How an aggregate view's delta is applied, for this refresh's changes and the
        storage table's state columns and types."""
        analysis = self.analysis
        assert isinstance(analysis, AggregateAnalysis)
        return analysis.aggregate_strategy(
            self.with_deletes,
            stateful=bool(self.base.state_columns),
            floating=self.base.layout.floating_sums(analysis),
        )

    @property
    def with_deletes(self) -> bool:
        """Whether the view delta may remove rows: a source lost rows, or the delta is keyed."""
        return self.keyed or any(c.kind == "general" for c in self.moved.values())

    @property
    def insert_only(self) -> bool:
        return not self.keyed and all(c.kind == "append-only" for c in self.moved.values())

    def change_read(self, source: Identifier) -> ChangeRead:
        """The columns and rows of `source` the delta needs (sql/columns.py); kept per
        process by what it is a function of (`_change_reads`)."""
        table = self.base.reads.load_table(source)
        columns = tuple(f.name for f in table.schema().fields)
        analysis, keyed = self.analysis, self.analysis.keyed is not None
        recomputes = self.rereads_sources
        key = None
        if analysis.memo_key is not None:
            key = (analysis.memo_key, source, columns, recomputes)
            kept = _change_reads.get(key)
            if kept is not None:
                return kept
        read = change_read(analysis.query, source, columns, keyed)
        # A top-N's reach test reads the delta's rows as they come: cancel a rewrite's
        # unchanged rows first, or a kept row of the top n looks lost (patch/top_n.py).
        top_n = isinstance(analysis, RowsAnalysis) and analysis.top_n is not None
        nets = nets_at_once(analysis.query, keyed, recomputes) and not top_n
        read = replace(read, cancel=not nets)
        if key is not None:
            _change_reads.put(key, read)
        return read


# Change reads by the analysis (its memo key: the view, its sources as they resolve,
# whence its key class and top-N), the source, its columns and whether the touched
# groups are recomputed: read only (a filter is only rendered).
_change_reads: Memo[ChangeRead] = Memo(2048)


def estimate_cost(
    base: RefreshPlan, moved: Mapping[Identifier, SourceChange], arrow: bool = False
) -> CostEstimate:
    """The change read's rows (from the moved sources' manifests) against a full scan's;
    `arrow`: read on the driver for the embedded engine."""
    appended = [c.changed_records for c in moved.values() if c.kind == "append-only"]
    rewritten = [
        touched_files(base.reads.load_table(i), c)
        for i, c in moved.items()
        if c.kind != "append-only"
    ]
    return estimate(appended, rewritten, base.source_records(), arrow)


def plan_incremental(
    base: RefreshPlan,
    record: RefreshRecord,
    cost_factor: float | None,
    embedded_route: Callable[[IncrementalPlan], EmbeddedRoute | str] | None = None,
) -> IncrementalPlan:
    """Check the recorded refresh can be carried forward, and classify every change.

    `cost_factor`: recompute fully when the change read, its rows weighted by this factor,
    would scan more than a full recompute (`auto` policy, refresh/cost.py); None: never
    for size. `embedded_route`: the embedded engine's route of a plan's delta (or why not),
    whose cheaper read is weighed when Spark's would be too dear; kept on the plan.
    """
    analysis = base.analysis
    if isinstance(analysis, NotMaintainable):
        raise FullRefreshRequiredError(analysis.reasons[0], "; ".join(analysis.details))
    planned_from = base.planned_from
    if planned_from is None:
        raise FullRefreshRequiredError(RefreshReason.NEVER_REFRESHED)
    if base.layout.state_columns and not base.state_columns:
        raise FullRefreshRequiredError(
            RefreshReason.STATE_UNKNOWN,
            "the storage table holds other state columns than this icemv derives",
        )
    recorded = {s.key: s for s in record.state.source_states}
    current = {s.key: s for s in base.pinned.sources}
    if recorded.keys() != current.keys():
        raise FullRefreshRequiredError(
            RefreshReason.SOURCES_CHANGED, "the view reads other tables than recorded"
        )
    changes: dict[Identifier, SourceChange] = {}
    for key, source in current.items():
        if source.type != "table":
            continue
        identifier = Identifier(source.namespace, source.name)
        table = base.reads.load_table(identifier)
        changes[identifier] = classify_change(table, recorded[key], source.snapshot_id)
    moved = {i: c for i, c in changes.items() if c.kind in ("append-only", "general")}
    moved, unchanged = _unless_unchanged_subqueries(base, analysis, moved)
    _check_rule_limits(analysis, moved, unchanged)
    plan = IncrementalPlan(base, analysis, planned_from, changes, moved)
    quarantine = quarantine_of(base.storage.properties)
    if quarantine is not None and quarantine.applies(base.mv.version.version_id, plan.rule):
        raise FullRefreshRequiredError(
            RefreshReason.RULE_QUARANTINED,
            f"rule {quarantine.rule} gave this MV a wrong delta ({quarantine.detail}); "
            "`icemv mv clear` resumes it",
        )
    if cost_factor is not None and moved:
        cost = estimate_cost(base, moved)
        rereads = plan.rereads_sources
        # Recomputing touched groups on Spark reads every source whole besides the change.
        reread = replace(cost, change_rows=cost.change_rows + cost.full_rows)
        if rereads:  # always
            cost = reread
        elif plan.may_recompute_groups and not reread.incremental(cost_factor):  # maybe
            plan = replace(plan, reread_too_dear=reread.describe(cost_factor))
        if not cost.incremental(cost_factor):
            detail = cost.describe(cost_factor)
            if rereads:
                detail += " (recomputing the touched groups reads every source)"
            if embedded_route is not None and (
                rereads or any(c.kind != "append-only" for c in moved.values())
            ):
                arrow = estimate_cost(base, moved, arrow=True)
                if arrow.incremental(cost_factor):
                    route = embedded_route(plan)
                    if not isinstance(route, str):
                        return replace(plan, embedded_only=detail, route=route)
                detail += f"; by the embedded engine {arrow.describe(cost_factor)}"
            raise FullRefreshRequiredError(RefreshReason.DELTA_TOO_LARGE, detail)
    return plan


def _unless_unchanged_subqueries(
    base: RefreshPlan, analysis: MaintainableAnalysis, moved: dict[Identifier, SourceChange]
) -> tuple[dict[Identifier, SourceChange], frozenset[Identifier]]:
    """The moved sources the delta reads and those of `analysis.recompute_on` among them it
    may read although no key bounds their changes: when each subquery that reads them so
    has the same value at the old and the new snapshots (one Spark query; why that leaves
    the view's rows as they were: sql/subquery_filters.py). Not keyed, those sources are
    then left out of the moved ones. Otherwise `moved` and nothing: `_check_rule_limits`
    recomputes the view."""
    blocked = frozenset(i for i in analysis.recompute_on if i in moved)
    if not blocked:
        return moved, frozenset()
    keyed = analysis.keyed is not None
    checks = unchanged_checks(analysis.query, blocked, frozenset(moved), keyed)
    if not checks:
        return moved, frozenset()
    pins = dict(base.pinned.table_pins)
    old_pins = {**pins, **{i: c.old_snapshot_id for i, c in moved.items()}}
    new_pins = {**pins, **{i: c.new_snapshot_id for i, c in moved.items()}}
    inputs = DeltaInputs(base.reads.catalog_name, {}, old_pins, new_pins)

    def shown(check: exp.Query, pins: dict[Identifier, int | None]) -> exp.Expr:
        # As text: `<=>` would call 0.0 and -0.0 the same, which the view
        # may tell apart (`CAST(x AS STRING)`, `signum`); a double's text is unique to it.
        value = exp.Subquery(this=inputs.pinned(check, pins))
        return exp.Cast(this=value, to=exp.DataType.build("STRING"))

    same = exp.select(
        *(
            exp.alias_(
                exp.NullSafeEQ(this=shown(check, old_pins), expression=shown(check, new_pins)),
                f"same_{n}",
                quoted=True,
            )
            for n, check in enumerate(checks)
        )
    )
    try:
        row = base.reads.lakehouse.spark.sql(same.sql(dialect="spark")).collect()[0]
    except Exception as error:  # Spark failing to plan the check: the recompute it saves
        failure = planning_failure(error)
        if failure is None:
            raise
        log.warning("subquery_check_failed", error=failure[:200])
        return moved, frozenset()
    if not all(row):
        return moved, frozenset()
    log.info("subqueries_unchanged", sources=sorted(str(i) for i in blocked), checks=len(checks))
    if keyed:
        return moved, blocked
    return {i: c for i, c in moved.items() if i not in blocked}, frozenset()


def _check_rule_limits(
    analysis: MaintainableAnalysis,
    moved: Mapping[Identifier, SourceChange],
    unchanged: frozenset[Identifier] = frozenset(),
) -> None:
    """Changes the view's rule does not carry forward: sources of subqueries no key bounds
    that moved (sql/subquery_filters.py), unless shown `unchanged`."""
    blocked = sorted(str(i) for i in analysis.recompute_on - unchanged if i in moved)
    if blocked:
        raise FullRefreshRequiredError(
            RefreshReason.SUBQUERY_SOURCE_CHANGED,
            f"{', '.join(blocked)} changed: a WHERE subquery reads it, and the rows whose "
            "filter flips are not bounded by a key",
        )
