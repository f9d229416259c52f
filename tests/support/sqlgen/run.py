"""Differential runs of generated views: many views share one random history; after every
step each is refreshed and its storage compared with Spark evaluating the view at the
recorded snapshots (tests/support/oracle.py). A failure is shrunk (fewer steps, fewer rows,
a smaller view) and printed as a reproducible test.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime  # noqa: F401  (reproducers' reprs name it)
import random
import re
import traceback
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal  # noqa: F401  (reproducers' reprs name it)
from typing import Any

from sqlglot import exp, parse_one

from icemv.catalog.namespaces import ensure_namespace
from icemv.errors import IcemvError
from icemv.identifiers import Identifier
from icemv.lakehouse import Lakehouse
from icemv.mv.lifecycle import create_mv, drop_mv
from icemv.refresh.policy import refresh_mv
from tests.support.oracle import oracle_difference
from tests.support.sqlgen.history import Step, history, initial_rows
from tests.support.sqlgen.schema import TABLES, values_sql
from tests.support.sqlgen.views import generate
from tests.support.tables import equality_delete


@dataclass(frozen=True)
class Setup:
    """The tables a history starts from, and how they are written."""

    rows: dict[str, list[tuple[Any, ...]]]
    write_mode: str = "merge-on-read"  # or copy-on-write
    format_version: int = 2
    storage_writes: str = "driver"  # or spark (every storage patch a Spark MERGE)
    arrow: bool = True  # the embedded engine on (refresh.embedded_max_rows at its default)
    policy: str = "incremental"


@dataclass(frozen=True)
class Case:
    """One view through one history: what a reproducer replays."""

    setup: Setup
    sql: str
    steps: tuple[Step, ...]


# Spark's own verdict on an error that is a bug in Spark or a plugin of it.
SPARK_BUG = "[INTERNAL_ERROR]"


class _SparkBug(Exception):
    """Spark failed on the view with an internal error: the view leaves the run."""


EXAMPLES = 5  # details kept per full-refresh reason


@dataclass
class Stats:
    views: int = 0
    invalid: int = 0  # generated views Spark or icemv rejected at create
    # Views Spark itself failed on with an internal error (a Spark bug, not a finding
    # about icemv): dropped from the run, counted, the first of them shown.
    spark_bugs: int = 0
    spark_bug_example: str = ""
    refreshes: int = 0  # refreshes checked against the oracle
    modes: Counter[str] = field(default_factory=Counter)
    # Modes of the refreshes after each view's first (a view is built in full once).
    later_modes: Counter[str] = field(default_factory=Counter)
    full_reasons: Counter[str] = field(default_factory=Counter)  # after the first refresh
    full_reason_examples: dict[str, list[str]] = field(default_factory=dict)  # a few details
    engines: Counter[str] = field(default_factory=Counter)
    # Why Spark computed a delta the embedded engine did not (the reason's first words).
    spark_reasons: Counter[str] = field(default_factory=Counter)
    spark_reason_examples: dict[str, str] = field(default_factory=dict)  # the whole reason
    refused_views: Counter[str] = field(default_factory=Counter)  # views never incremental
    failures: list[str] = field(default_factory=list)

    def add(self, other: Stats) -> None:
        self.views += other.views
        self.invalid += other.invalid
        self.spark_bugs += other.spark_bugs
        self.spark_bug_example = self.spark_bug_example or other.spark_bug_example
        self.refreshes += other.refreshes
        self.modes.update(other.modes)
        self.later_modes.update(other.later_modes)
        self.full_reasons.update(other.full_reasons)
        for reason, details in other.full_reason_examples.items():
            kept = self.full_reason_examples.setdefault(reason, [])
            kept += details[: max(0, EXAMPLES - len(kept))]
        self.engines.update(other.engines)
        self.spark_reasons.update(other.spark_reasons)
        for reason, example in other.spark_reason_examples.items():
            self.spark_reason_examples.setdefault(reason, example)
        self.refused_views.update(other.refused_views)
        self.failures += other.failures

    def kept_incremental(self) -> tuple[int, int]:
        """Refreshes after the first that were incremental or no-op, of those not skipped."""
        later = self.later_modes
        kept = later["incremental"] + later["no-op"]
        return kept, sum(later.values()) - later["skipped"]

    def summary(self) -> str:
        incremental = self.modes["incremental"] + self.modes["no-op"]
        share = incremental / self.refreshes if self.refreshes else 0.0
        kept, ran = self.kept_incremental()
        return (
            f"views {self.views} (invalid {self.invalid}), refreshes checked {self.refreshes}, "
            f"incremental or no-op {incremental} ({share:.0%}; of the {ran} not skipped after "
            f"the first: {kept}, {kept / ran if ran else 0.0:.0%}), modes {dict(self.modes)}, "
            f"engines {dict(self.engines)} (Spark because: {dict(self.spark_reasons)}), "
            f"full by reason {dict(self.full_reasons)}, "
            f"views never incremental by reason {dict(self.refused_views)}, "
            f"Spark internal errors {self.spark_bugs}"
            + (f" (e.g. {self.spark_bug_example})" if self.spark_bug_example else "")
            + f", failures {len(self.failures)}"
        )


def variant(lakehouse: Lakehouse, setup: Setup) -> Lakehouse:
    """The lakehouse with this setup's storage writes and embedded engine."""
    config = lakehouse.config
    updates: dict[str, Any] = {}
    if setup.storage_writes == "spark":
        updates["driver_commit_max_rows"] = 0
    if not setup.arrow:
        updates["embedded_max_rows"] = 0
    if not updates:
        return lakehouse
    refresh = config.refresh.model_copy(update=updates)
    return Lakehouse(config.model_copy(update={"refresh": refresh}))


def random_setup(rng: random.Random) -> Setup:
    return Setup(
        rows=initial_rows(rng),
        write_mode=rng.choice(["merge-on-read", "copy-on-write"]),
        format_version=rng.choice([2, 2, 3]),
        # Spark writes and the embedded engine off both send every delta to Spark.
        storage_writes=rng.choice(["driver", "driver", "driver", "driver", "spark"]),
        arrow=rng.random() < 0.85,
        policy=rng.choice(["incremental", "incremental", "auto"]),
    )


def create_tables(lakehouse: Lakehouse, namespace: str, setup: Setup) -> None:
    spark = lakehouse.spark
    modes = ", ".join(
        f"'write.{op}.mode' = '{setup.write_mode}'" for op in ("delete", "update", "merge")
    )
    for name, spec in TABLES.items():
        quoted = lakehouse.quoted(Identifier((namespace,), name))
        spark.sql(
            f"CREATE TABLE {quoted} ({spec.ddl()}) USING iceberg TBLPROPERTIES "
            f"('format-version' = '{setup.format_version}', {modes})"
        )
        if setup.rows.get(name):
            spark.sql(f"INSERT INTO {quoted} VALUES {values_sql(spec, setup.rows[name])}")


def apply(lakehouse: Lakehouse, namespace: str, step: Step) -> None:
    if step.kind == "eqdelete":
        equality_delete(lakehouse, namespace, step.column, list(step.values), name=step.table)
        return
    quoted = lakehouse.quoted(Identifier((namespace,), step.table))
    sql = step.sql.replace("{t}", quoted).replace("{ns}", namespace)
    lakehouse.spark.sql(sql.replace("{name}", step.table))


@dataclass
class _Tracked:
    identifier: Identifier
    sql: str
    incremental: bool = False
    reasons: Counter[str] = field(default_factory=Counter)


def run_views(
    lakehouse: Lakehouse, setup: Setup, sqls: list[str], steps: list[Step]
) -> tuple[Stats, list[tuple[Case, str]]]:
    """Create the tables and one MV per view, then after each step refresh every MV and
    compare it with the oracle. Failures come back as cases with what went wrong."""
    stats, failures = Stats(), []
    lakehouse = variant(lakehouse, setup)
    namespace = f"fz_{uuid.uuid4().hex[:10]}"
    ensure_namespace(lakehouse.catalog, (namespace,))
    create_tables(lakehouse, namespace, setup)
    tracked: list[_Tracked] = []
    for index, sql in enumerate(sqls):
        stats.views += 1
        identifier = Identifier((namespace,), f"v{index}")
        try:
            create_mv(lakehouse, identifier, sql, properties={
                "icemv.refresh-policy": setup.policy})  # fmt: skip
        except IcemvError:
            stats.invalid += 1
            continue
        view = _Tracked(identifier, sql)
        try:
            problem = _refresh_and_check(lakehouse, view, stats, first=True)
        except _SparkBug:
            continue
        if problem is not None:
            failures.append((Case(setup, sql, ()), problem))
            continue
        tracked.append(view)
    done: list[Step] = []
    for step in steps:
        apply(lakehouse, namespace, step)
        done.append(step)
        for view in list(tracked):
            try:
                problem = _refresh_and_check(lakehouse, view, stats, first=False)
            except _SparkBug:
                tracked.remove(view)
                continue
            if problem is not None:
                failures.append((Case(setup, view.sql, tuple(done)), problem))
                tracked.remove(view)
    for view in tracked:
        if not view.incremental:
            reason = view.reasons.most_common(1)[0][0] if view.reasons else "no-change"
            stats.refused_views[reason] += 1
    for index in range(len(sqls)):
        with contextlib.suppress(IcemvError):
            drop_mv(lakehouse, Identifier((namespace,), f"v{index}"))
    stats.failures += [f"{case.sql}\n  {problem}" for case, problem in failures]
    return stats, failures


def _refresh_and_check(
    lakehouse: Lakehouse, view: _Tracked, stats: Stats, first: bool
) -> str | None:
    try:
        result = refresh_mv(lakehouse, view.identifier)
    except Exception as error:  # a refresh that fails is a finding too
        if SPARK_BUG in str(error):
            stats.spark_bugs += 1
            stats.spark_bug_example = stats.spark_bug_example or view.sql
            raise _SparkBug from error
        return "refresh raised:\n" + traceback.format_exc()
    stats.refreshes += 1
    stats.modes[str(result.mode.value)] += 1
    if result.engine:
        stats.engines[result.engine] += 1
    if result.engine == "spark" and result.engine_reason:
        # The first words, a table's name masked (`reading fz_1a2b.e: ...`): one count each.
        words = re.sub(r"\bfz_[0-9a-f]+\.\w+", "<table>", result.engine_reason).split()
        reason = " ".join(words[:4])
        stats.spark_reasons[reason] += 1
        stats.spark_reason_examples.setdefault(reason, result.engine_reason[:300])
    if not first:
        stats.later_modes[str(result.mode.value)] += 1
        if result.mode in ("incremental", "no-op"):
            view.incremental = True
        elif result.mode == "full":
            reason = str(getattr(result.reason, "value", result.reason))
            stats.full_reasons[reason] += 1
            examples = stats.full_reason_examples.setdefault(reason, [])
            if len(examples) < EXAMPLES and result.fallback_detail:
                examples.append(result.fallback_detail[:300])
            view.reasons[reason] += 1
    difference = oracle_difference(lakehouse, view.identifier)
    if difference is None:
        return None
    return f"after a {result.mode} refresh ({result.reason}, engine {result.engine}): {difference}"


def fails(lakehouse: Lakehouse, case: Case) -> str | None:
    """Replay one case; what went wrong, or None."""
    _, failures = run_views(lakehouse, case.setup, [case.sql], list(case.steps))
    return failures[0][1] if failures else None


def replay(lakehouse: Lakehouse, case: Case) -> None:
    """For reproducers: the case must match the oracle after every step."""
    problem = fails(lakehouse, case)
    assert problem is None, problem


# -- shrinking ---------------------------------------------------------------------------


def _smaller_setups(setup: Setup) -> Iterator[Setup]:
    for name, made in setup.rows.items():
        if len(made) > 1:
            half = {**setup.rows, name: made[: len(made) // 2]}
            yield dataclasses.replace(setup, rows=half)
            yield dataclasses.replace(setup, rows={**setup.rows, name: made[len(made) // 2 :]})
    if setup.storage_writes != "driver":
        yield dataclasses.replace(setup, storage_writes="driver")
    if setup.arrow:
        yield dataclasses.replace(setup, arrow=False)


def _smaller_sqls(sql: str) -> Iterator[str]:
    """The view with one part taken out or made trivial, smallest changes last."""
    tree = parse_one(sql, read="spark")
    nodes = list(tree.walk())
    for index, node in enumerate(nodes):
        candidates: list[Callable[[exp.Expr], exp.Expr | None]] = []
        if isinstance(node, exp.And | exp.Or):
            candidates += [lambda n: n.this, lambda n: n.expression]
        if isinstance(node, exp.Where | exp.Having):
            candidates.append(lambda n: None)
        if isinstance(node, exp.Not | exp.Paren):
            candidates.append(lambda n: n.this)
        if isinstance(node, exp.Exists | exp.In | exp.Case | exp.Predicate):
            candidates += [lambda n: exp.true(), lambda n: exp.false()]
        simplifiable = isinstance(node, exp.Binary | exp.Func) and isinstance(node.this, exp.Expr)
        if simplifiable and not isinstance(node, exp.Predicate):
            candidates.append(lambda n: n.this)
        parent = node.parent
        if (
            isinstance(node, exp.Alias)
            and isinstance(parent, exp.Select)
            and len(parent.expressions) > 1
        ):
            candidates.append(lambda n: None)
        if isinstance(node, exp.Join):
            candidates.append(lambda n: None)
        for make in candidates:
            copy = tree.copy()
            target = list(copy.walk())[index]
            replacement = make(target)
            if replacement is None:
                target.pop()
            else:
                target.replace(replacement.copy())
            yield copy.sql(dialect="spark")


def shrink(lakehouse: Lakehouse, case: Case, budget: int) -> tuple[Case, int]:
    """A smaller case that still fails (fewer steps, rows, a smaller view), within
    `budget` replays; the replays used."""
    used = 0

    def still_fails(candidate: Case) -> bool:
        nonlocal used
        used += 1
        return fails(lakehouse, candidate) is not None

    progress = True
    while progress and used < budget:
        progress = False
        for position in reversed(range(len(case.steps))):
            if used >= budget:
                break
            steps = case.steps[:position] + case.steps[position + 1 :]
            candidate = dataclasses.replace(case, steps=steps)
            if position < len(case.steps) and still_fails(candidate):
                case, progress = candidate, True
        for setup in _smaller_setups(case.setup):
            if used >= budget:
                break
            candidate = dataclasses.replace(case, setup=setup)
            if still_fails(candidate):
                case, progress = candidate, True
                break
        for sql in _smaller_sqls(case.sql):
            if used >= budget:
                break
            if len(sql) >= len(case.sql):
                continue
            candidate = dataclasses.replace(case, sql=sql)
            if still_fails(candidate):
                case, progress = candidate, True
                break
    return case, used


def reproducer(case: Case, name: str, problem: str) -> str:
    """A test module that replays the case (paste it under tests/)."""
    comment = "\n".join(f"# {line}" for line in problem.splitlines()[:12])
    return (
        '"""A generated view the oracle disagreed with (tests/support/sqlgen), shrunk."""\n\n'
        "import datetime  # noqa: F401\n"
        "from decimal import Decimal  # noqa: F401\n\n"
        "import pytest\n\n"
        "from tests.support.sqlgen.history import Step  # noqa: F401\n"
        "from tests.support.sqlgen.run import Case, Setup, replay  # noqa: F401\n\n"
        "pytestmark = [pytest.mark.spark, pytest.mark.postgres]\n\n"
        f"{comment}\n"
        f"CASE = {case!r}\n\n\n"
        f"def test_{name}(lakehouse):\n"
        "    replay(lakehouse, CASE)\n"
    )


def batch(seed: int, views: int, steps: int) -> tuple[Setup, list[str], list[Step]]:
    """The setup, views and history of batch `seed` (the same on every machine)."""
    rng = random.Random(seed)
    setup = random_setup(rng)
    return setup, [generate(seed * 10_000 + i) for i in range(views)], history(rng, steps)
