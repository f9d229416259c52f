"""`icemv demo`: the quickstart on the embedded default, end to end in one command.

Sets up `nyc.taxis` and the `nyc.pickup_agg` MV, starts the daemon (poll-driven: the
embedded default has no Kafka), and commits a batch to `nyc.taxis` every few seconds as
another writer would, printing how the MV follows.

The person watching reads a story on stdout: each commit, each refresh (mode, why, which
engine computed the delta, rows, seconds) and the MV's state and staleness. The daemon's
own log lines (JSON, at the configured levels) go to `<home>/demo.log`, named at the
end; stderr shows only warnings and errors (more with `--verbose` or `--debug`).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from icemv.cli.demo_data import PICKUP_AGG, PICKUP_AGG_SQL, append_taxis, ensure_taxis
from icemv.config import Config
from icemv.lakehouse import Lakehouse
from icemv.logs import json_lines_to
from icemv.mv.freshness import assess_freshness
from icemv.mv.history import latest_refresh, refresh_history
from icemv.mv.lifecycle import create_mv
from icemv.mv.model import load_materialized_view
from icemv.mv.report import mv_report, render_report, state_with_reason
from icemv.refresh.result import RefreshResult
from icemv.service.daemon import Daemon

BATCH_ROWS = 200


# After the writer stops, the MV gets this long to catch up before the summary.
FRESH_WAIT_SECONDS = 120.0
# Under `home`: the daemon's JSON log lines of the last demo.
LOG_FILE = "demo.log"
# Lines come from the main thread and from refresh workers (the refresh lines).
_say_lock = threading.Lock()


def say(text: str = "") -> None:
    with _say_lock:
        print(text, flush=True)


def refresh_line(result: RefreshResult) -> str | None:
    """One refresh, for people; None for a refresh that found the MV fresh already."""
    if result.mode == "skipped":
        return None
    engine = f", engine {result.engine}" if result.engine else ""
    return (
        f"{'':4}refresh of {result.mv}: {result.mode} ({result.reason}){engine}, "
        f"+{result.rows_inserted} -{result.rows_deleted} rows in "
        f"{result.duration_seconds:.2f} s"
    )


def _narrate_refresh(result: RefreshResult) -> None:
    line = refresh_line(result)
    if line is not None:
        say(line)


def _keep_writing(elapsed: float, seconds: float, max_seconds: float, shown: bool) -> bool:
    """Write for `seconds`, then on until an incremental refresh was shown, up to the cap.

    A slow machine's first full refresh can take longer than the whole planned run; the
    demo's point is the incremental one, so it waits for it (bounded). 0 seconds: forever.
    """
    if seconds <= 0:
        return True
    if elapsed < seconds:
        return True
    return not shown and elapsed < max(max_seconds, seconds)


def quiet_spark(config: Config) -> Config:
    """The demo's Spark says nothing below ERROR (no start-up WARN lines) unless the
    config names a level."""
    if "spark_level" in config.logging.model_fields_set:
        return config
    logging = config.logging.model_copy(update={"spark_level": "ERROR"})
    return config.model_copy(update={"logging": logging})


def _incremental_refreshes(lakehouse: Lakehouse) -> int:
    mv = load_materialized_view(lakehouse, PICKUP_AGG)
    storage = lakehouse.load_table(mv.storage)
    return sum(1 for record in refresh_history(storage) if record.mode == "incremental")


def _is_fresh(lakehouse: Lakehouse) -> bool:
    mv = load_materialized_view(lakehouse, PICKUP_AGG)
    return assess_freshness(lakehouse, mv).state == "fresh"


def run_demo(config: Config, seconds: float, interval: float, max_seconds: float = 300.0) -> int:
    config = quiet_spark(config)
    log_path = Path(config.home).resolve() / LOG_FILE
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with json_lines_to(log_path, config.logging):
        code = _run(config, seconds, interval, max_seconds)
    say(f"\nthe daemon's log (JSON lines): {log_path}")
    return code


def _run(config: Config, seconds: float, interval: float, max_seconds: float) -> int:
    lakehouse = Lakehouse(config)
    taxis = ensure_taxis(lakehouse)
    batch = len(taxis.snapshots())
    if batch == 0:
        append_taxis(lakehouse, rows=5_000, seed=1)
        batch = 1
        say("wrote 5000 rows to nyc.taxis")
    if not lakehouse.views.exists(PICKUP_AGG):
        create_mv(lakehouse, PICKUP_AGG, PICKUP_AGG_SQL, partition_by=["pickup_date"])
        say(f"created materialized view {PICKUP_AGG}")

    daemon_config = config.model_copy(
        update={
            "polling": config.polling.model_copy(
                update={"interval_seconds": min(config.polling.interval_seconds, 2.0)}
            ),
            "metrics": config.metrics.model_copy(update={"port": 0}),
        }
    )
    daemon = Daemon(daemon_config, lakehouse=lakehouse, on_refresh=_narrate_refresh)
    thread = threading.Thread(target=daemon.run, name="icemv-daemon", daemon=True)
    thread.start()
    if not daemon.ready.wait(180):
        say("the daemon did not become ready within 180 s")
        daemon.stop()
        return 1
    say(f"daemon running; metrics at http://{config.metrics.host}:{daemon.http_port}/metrics")
    say(
        f"committing {BATCH_ROWS} rows to nyc.taxis every {interval:g} s for {seconds:g} s "
        f"(longer, up to {max_seconds:g} s, until an incremental refresh has happened)\n"
    )
    say(_state_line(lakehouse))
    started = time.monotonic()
    incremental_before = _incremental_refreshes(lakehouse)
    try:
        while thread.is_alive() and _keep_writing(
            time.monotonic() - started,
            seconds,
            max_seconds,
            _incremental_refreshes(lakehouse) > incremental_before,
        ):
            batch += 1
            append_taxis(lakehouse, rows=BATCH_ROWS, seed=batch)
            say(f"commit #{batch - 1}: {BATCH_ROWS} rows to nyc.taxis")
            say(_state_line(lakehouse))
            daemon.stopping.wait(interval)
            say(_state_line(lakehouse))
        if _incremental_refreshes(lakehouse) == incremental_before:
            say(f"\nno incremental refresh within {max_seconds:g} s (a slow machine?)")
        say(f"\nwriter stopped; waiting up to {FRESH_WAIT_SECONDS:g} s for the MV to be fresh")
        fresh_by = time.monotonic() + FRESH_WAIT_SECONDS
        while thread.is_alive() and time.monotonic() < fresh_by:
            if _is_fresh(lakehouse):
                break
            daemon.stopping.wait(min(interval, 2.0))
        say(_state_line(lakehouse))
    except KeyboardInterrupt:
        pass
    finally:
        daemon.stop()
        thread.join(120)
    say()
    say(render_report(mv_report(lakehouse, load_materialized_view(lakehouse, PICKUP_AGG))))
    rows = (
        lakehouse.spark.table(lakehouse.quoted(PICKUP_AGG))
        .orderBy("pickup_date", "vendor_id")
        .limit(5)
        .collect()
    )
    say("\nfirst rows of the view, read by Spark:")
    for row in rows:
        say("  " + ", ".join(f"{k}={v}" for k, v in row.asDict().items()))
    return 0


def _state_line(lakehouse: Lakehouse) -> str:
    mv = load_materialized_view(lakehouse, PICKUP_AGG)
    freshness = assess_freshness(lakehouse, mv)
    record = latest_refresh(lakehouse.load_table(mv.storage))
    last = f"last refresh {record.mode} ({record.details.get('icemv.reason')})" if record else ""
    return (
        f"{'':4}{PICKUP_AGG} {state_with_reason(freshness.state, freshness.reason):5}  "
        f"staleness {freshness.staleness_seconds:5.1f} s  "
        f"pending {freshness.pending_snapshots}  {last}"
    )
