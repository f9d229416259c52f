"""Generated views (tests/support/sqlgen: a SQLancer-style grammar) through random histories
(appends, DELETE, UPDATE of keys and measures, MERGE, compaction, equality deletes; CoW and
MoR, format v2 and v3), every refresh compared with Spark evaluating the view at the
recorded snapshots, on both catalog kinds.

`make test` runs a fixed-seed handful: one batch of ICEMV_FUZZ_SQL_VIEWS (8) views through
ICEMV_FUZZ_SQL_STEPS (5) steps per catalog kind. `make fuzz-sql` runs many batches
(ICEMV_FUZZ_SQL_BATCHES), shrinks each failure within ICEMV_FUZZ_SQL_SHRINK replays and
writes it under fuzz-results/ as a test to paste, with a JSON summary of what ran: views,
refreshes checked, the share kept incremental, full refreshes and never-incremental views
by reason, engines. Every other batch (the first on REST) runs with a cache too small to
keep any table whole, so the embedded engine reads each joined table the delta allows
restricted to the keys it can meet (refresh/embedded/restrict.py); the reads so made are
counted.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from icemv.lakehouse import Lakehouse
from icemv.refresh.embedded.reads import shared_cache
from tests.conftest import CATALOG_KINDS
from tests.support.engines import summary_line
from tests.support.sqlgen.run import Stats, batch, reproducer, run_views, shrink

pytestmark = [pytest.mark.spark, pytest.mark.postgres, CATALOG_KINDS]

BATCHES = int(os.environ.get("ICEMV_FUZZ_SQL_BATCHES", "1"))
VIEWS = int(os.environ.get("ICEMV_FUZZ_SQL_VIEWS", "8"))
STEPS = int(os.environ.get("ICEMV_FUZZ_SQL_STEPS", "5"))
SEED = int(os.environ.get("ICEMV_FUZZ_SQL_SEED", "1"))
SHRINK = int(os.environ.get("ICEMV_FUZZ_SQL_SHRINK", "0"))
RESULTS = Path(os.environ.get("ICEMV_FUZZ_SQL_OUT", "fuzz-results"))


def test_generated_views_match_the_oracle(
    lakehouse: Lakehouse, catalog_kind: str, request: pytest.FixtureRequest
) -> None:
    total = Stats()
    started = time.monotonic()
    restricted_reads = 0
    for number in range(BATCHES):
        seed = SEED + 2 * number + (catalog_kind == "rest")  # each kind its own batches
        setup, sqls, steps = batch(seed, VIEWS, STEPS)
        used = lakehouse
        if (number + (catalog_kind == "rest")) % 2:
            used = _restricting(lakehouse)
        before = shared_cache().tables_restricted
        stats, failures = run_views(used, setup, sqls, steps)
        restricted_reads += shared_cache().tables_restricted - before
        total.add(stats)
        for index, (case, problem) in enumerate(failures):
            if SHRINK:
                case, _ = shrink(used, case, SHRINK)
            RESULTS.mkdir(parents=True, exist_ok=True)
            name = f"{catalog_kind}_seed{seed}_{index}"
            (RESULTS / f"test_found_{name}.py").write_text(reproducer(case, name, problem))
        print(f"[{catalog_kind}] batch {number + 1}/{BATCHES} seed {seed} "
              f"({time.monotonic() - started:.0f} s): {total.summary()}; "
              f"{restricted_reads} restricted reads", flush=True)  # fmt: skip
    if BATCHES > 1 or total.failures:
        RESULTS.mkdir(parents=True, exist_ok=True)
        summary = {
            "catalog": catalog_kind,
            "views": total.views,
            "invalid": total.invalid,
            "refreshes_checked": total.refreshes,
            "modes": dict(total.modes),
            "modes_after_the_first": dict(total.later_modes),
            "kept_incremental_share": round(
                total.kept_incremental()[0] / max(1, total.kept_incremental()[1]), 3
            ),
            "engines": dict(total.engines),
            "restricted_reads": restricted_reads,
            "spark_because": dict(total.spark_reasons),
            "spark_because_examples": total.spark_reason_examples,
            "full_by_reason": dict(total.full_reasons),
            "full_by_reason_examples": total.full_reason_examples,
            "never_incremental_by_reason": dict(total.refused_views),
            "failures": total.failures,
            "seconds": round(time.monotonic() - started),
        }
        (RESULTS / f"sql-{catalog_kind}.json").write_text(json.dumps(summary, indent=2))
    # What ran, in the run's summary (coverage, engines, refusals).
    summary_line(request.config, f"generated views [{catalog_kind}]: {total.summary()}")
    assert not total.failures, "\n\n".join(total.failures)
    # The run checked something: most views are valid, and refreshes stayed incremental.
    assert total.invalid <= total.views // 4, total.summary()
    assert total.refreshes >= (total.views - total.invalid) * STEPS, total.summary()
    assert total.modes["incremental"] > 0, total.summary()


def _restricting(lakehouse: Lakehouse) -> Lakehouse:
    """The same lakehouse with a 1-byte cache: no joined table is kept whole, so every one
    the delta allows is read restricted to its keys."""
    config = lakehouse.config
    refresh = config.refresh.model_copy(update={"embedded_cache_bytes": 1})
    return Lakehouse(config.model_copy(update={"refresh": refresh}))
