"""The safety net and the clock: periodic catalog polls, freshness targets and schedules.

A poll compares every MV's recorded sources with the current ones (no events needed),
refreshes what is stale and refreshes the metrics. It loads each table and view once,
however many MVs read it, and on a JDBC catalog starts with one query listing metadata
locations (every view's, the tables' of the namespaces MVs read): what did not change
since the last poll is not loaded again (`lakehouse.reads.PollReads`;
`icemv_catalog_loads_total` counts loads and reuses). A freshness-target check between
polls starts with its own listing the same way.

An MV with `icemv.max-staleness` is also checked every half of its target, so it is
refreshed before breaching it; one with `icemv.refresh-interval` or `icemv.refresh-cron`
gets a refresh request on that schedule. Polls request refreshes in dependency order (an
MV before the MVs that read it).

A poll that takes longer than the interval is an overrun: the scheduled polls it overlaps
are skipped (APScheduler's line saying so is not logged), each overrunning poll counts in
`icemv_poll_overruns_total`, and a run of consecutive ones (an episode) is logged once, by
its first poll, as `poll_overrun` with that poll's duration.

With several replicas, each checks and schedules only the MVs it owns
(service/ownership.py); the index it rebuilds still covers every MV, since events route
through it. A replica that gains MVs (a rebalance) polls again at once (`poll_soon`).

Storage upkeep runs here too, every `maintenance.interval_seconds`: leftover refresh
branches, snapshot expiry and unreferenced files, with pyiceberg only, so a service that
runs for months keeps its storage metadata (and commit times) bounded; a storage table
whose history outgrows `maintenance.max_snapshots` between passes gets a pass of its own
right away (`maintain_soon`, asked by the daemon from a refresh's result). So does the audit,
every `maintenance.verify_interval_seconds` (off by default): each owned MV's storage
table compared with its SQL (mv/verify.py), a difference counted, logged and repaired.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Collection
from concurrent.futures import Future
from datetime import datetime
from functools import partial
from typing import Any

import structlog
from apscheduler.schedulers import SchedulerNotRunningError
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger

from icemv.config import MaintenanceConfig
from icemv.errors import DurationError
from icemv.format.durations import parse_duration
from icemv.format.summary import TOTAL_RECORDS, summary_of
from icemv.identifiers import Identifier
from icemv.lakehouse import CatalogReads, Lakehouse, PollReads
from icemv.mv.freshness import Freshness, assess_freshness
from icemv.mv.history import RefreshRecord
from icemv.mv.maintenance import maintain_storage
from icemv.mv.maintenance.branches import remove_leftover_branches
from icemv.mv.model import (
    MAX_STALENESS_PROPERTY,
    REFRESH_CRON_PROPERTY,
    REFRESH_INTERVAL_PROPERTY,
    MaterializedView,
    load_materialized_view,
)
from icemv.mv.verify import VerifyError, verify_mv
from icemv.refresh.result import RefreshResult
from icemv.service.metrics import Metrics
from icemv.service.source_index import SourceIndex, dependency_order

log = structlog.get_logger(__name__)


class _NoSkippedRunLines(logging.Filter):
    """Drops APScheduler's "skipped: maximum number of running instances reached" record,
    which it writes on every interval a job overlaps its previous run. The Reconciler
    counts and logs a poll's overruns itself, once per episode; a per-MV check or schedule
    skipped so is covered by its run still going."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "maximum number of running instances reached" not in str(record.msg)


# The job scheduler's own logger: a child of `apscheduler`, so `logging.levels` for it apply.
JOBS_LOGGER = logging.getLogger("apscheduler.scheduler.icemv")
JOBS_LOGGER.addFilter(_NoSkippedRunLines())


def max_staleness_seconds(mv: MaterializedView) -> float | None:
    text = mv.properties.get(MAX_STALENESS_PROPERTY)
    if text is None:
        return None
    try:
        return parse_duration(text)
    except DurationError as exc:
        log.warning(
            "mv_property_invalid",
            mv=str(mv.identifier),
            property=MAX_STALENESS_PROPERTY,
            error=str(exc),
        )
        return None


class Reconciler:
    def __init__(
        self,
        lakehouse: Lakehouse,
        index: SourceIndex,
        metrics: Metrics,
        request: Callable[[Identifier, str], Future[RefreshResult]],
        interval_seconds: float,
        maintenance: MaintenanceConfig | None = None,
        owns: Callable[[Identifier], bool] | None = None,
        busy: Callable[[], Collection[Identifier]] | None = None,
        repair: Callable[[Identifier, str], object] | None = None,
    ) -> None:
        """`owns(mv)`: whether this replica polls and schedules `mv` (default: every MV);
        `busy()`: MVs with a refresh queued, running or retrying, which a poll leaves alone
        (the daemon checks an MV again as each refresh ends, so nothing is missed, and a
        request now would only add a second attempt after the running one)."""
        self._lakehouse = lakehouse
        self._index = index
        self._metrics = metrics
        self._request = request
        self._interval = interval_seconds
        self._maintenance = maintenance
        self._owns = owns or (lambda _mv: True)
        self._busy = busy or frozenset
        # `repair(mv, diff)`: a full refresh that keeps a verification's diff summary.
        self._repair = repair
        self._verify_runs = 0
        self._published: set[Identifier] = set()  # MVs whose freshness series we export
        self._jobs = BackgroundScheduler(daemon=True, logger=JOBS_LOGGER)
        self._mv_jobs: dict[str, str] = {}  # job id -> trigger description
        self._known: set[Identifier] = set()
        self._reads = PollReads(lakehouse)
        self.polls = 0
        # Whether the last scheduled poll overran its interval (an episode is under way).
        self._overrunning = False
        # Set by stop(): a maintenance or verification pass under way ends at the next MV.
        self._stopping = threading.Event()
        # MVs whose early upkeep pass (maintain_soon) is queued or running.
        self._early: set[Identifier] = set()
        self._early_lock = threading.Lock()

    def start(self) -> None:
        self._jobs.add_job(
            self.scheduled_poll,
            IntervalTrigger(seconds=self._interval),
            id="poll",
            max_instances=1,
            coalesce=True,
        )
        upkeep = self._maintenance
        if upkeep is not None and upkeep.enabled and upkeep.interval_seconds > 0:
            self._jobs.add_job(
                self.maintain,
                IntervalTrigger(seconds=upkeep.interval_seconds),
                id="maintenance",
                max_instances=1,
                coalesce=True,
            )
        if upkeep is not None and upkeep.enabled and upkeep.verify_interval_seconds > 0:
            self._jobs.add_job(
                self.verify,
                IntervalTrigger(seconds=upkeep.verify_interval_seconds),
                id="verify",
                max_instances=1,
                coalesce=True,
            )
        self._jobs.start()

    def stop(self) -> None:
        """Stop the scheduled jobs; also when they never started (the daemon's start
        failed before them and its shutdown must report that failure, not this)."""
        self._stopping.set()
        if self._jobs.running:
            self._jobs.shutdown(wait=False)

    def poll(self) -> None:
        """One reconciliation pass over every MV."""
        reads: CatalogReads | None = None
        try:
            reads = self._reads.begin()
            snapshot = self._index.rebuild(reads)
            owned = [mv for mv in dependency_order(snapshot) if self._owns(mv)]
            busy = self._busy()
            for identifier in owned:
                if identifier not in busy:
                    self.check(snapshot.mvs[identifier], reads)
            self._reads.finish(reads)
            for gone in self._known - set(snapshot.mvs):
                self._metrics.forget_mv(gone.dotted)
            for moved in self._published - set(owned):
                self._metrics.forget_freshness(moved.dotted)
            self._published = set(owned)
            self._metrics.set_owned_mvs(len(owned))
            self._known = set(snapshot.mvs)
            self._sync_mv_jobs(list(snapshot.mvs.values()))
            self.polls += 1
        except Exception as exc:  # noqa: BLE001 (catalog unreachable: report, try again next time)
            log.warning("poll_failed", error=f"{type(exc).__name__}: {exc}")
        finally:
            if reads is not None:
                self._metrics.record_catalog_loads(reads)

    def poll_soon(self) -> None:
        """Run the interval poll now (this replica gained MVs); skipped if one is running."""
        # Not started (a poll follows at start) or stopping: nothing to do.
        with contextlib.suppress(LookupError, RuntimeError):
            self._jobs.modify_job("poll", next_run_time=datetime.now().astimezone())

    def scheduled_poll(self) -> None:
        """A poll on the interval, timed: an overrun is counted, and logged once per episode."""
        started = time.monotonic()
        self.poll()
        self.poll_finished(time.monotonic() - started)

    def poll_finished(self, seconds: float) -> None:
        overran = seconds > self._interval
        log.debug("poll_finished", duration_seconds=round(seconds, 3), overran=overran)
        if overran:
            self._metrics.record_poll_overrun()
            if not self._overrunning:
                log.warning(
                    "poll_overrun",
                    duration_seconds=round(seconds, 3),
                    interval_seconds=self._interval,
                    note="polls in the meantime are skipped; until a poll finishes within "
                    "the interval, further overruns only count in icemv_poll_overruns_total",
                )
        self._overrunning = overran

    def maintain_soon(self, identifier: Identifier) -> None:
        """An upkeep pass over `identifier`'s storage table as a job of its own, now (its
        history outgrew `maintenance.max_snapshots`); nothing if one is already queued or
        running for it."""
        with self._early_lock:
            if identifier in self._early or not self._jobs.running:
                return
            self._early.add(identifier)
        try:
            self._jobs.add_job(self._maintain_early, args=(identifier,))
        except SchedulerNotRunningError:  # shutting down: the next start's passes do it
            with self._early_lock:
                self._early.discard(identifier)

    def _maintain_early(self, identifier: Identifier) -> None:
        try:
            self.maintain([identifier])
        finally:
            with self._early_lock:
                self._early.discard(identifier)

    def maintain(self, mvs: Collection[Identifier] | None = None) -> int:
        """One upkeep pass over the storage table of every MV this replica owns (or of
        these); how many MVs it maintained."""
        config = self._maintenance
        if config is None or not config.enabled:
            return 0
        snapshot = self._index.snapshot
        done = 0
        for identifier in dependency_order(snapshot) if mvs is None else mvs:
            if self._stopping.is_set():
                break
            if not self._owns(identifier) or identifier not in snapshot.mvs:
                continue
            mv = snapshot.mvs[identifier]
            readers = [
                snapshot.mvs[r]
                for r in snapshot.dependents.get(identifier, ())
                if r in snapshot.mvs
            ]
            try:
                result = maintain_storage(self._lakehouse, mv, config, readers)
            except Exception as exc:  # noqa: BLE001 (one table's trouble must not stop the others)
                log.warning(
                    "maintenance_failed", mv=str(identifier), error=f"{type(exc).__name__}: {exc}"
                )
                continue
            done += 1
            log.info(
                "storage_maintained",
                mv=str(identifier),
                snapshots_before=result.snapshots_before,
                snapshots_after=result.snapshots_after,
                files_deleted=result.files_deleted,
                branches_removed=list(result.branches_removed),
            )
        return done

    def verify(self, mvs: Collection[Identifier] | None = None) -> int:
        """One verification pass over every MV this replica owns (or these), one at a
        time (the budget: `verify_sample` of the slices each, MVs over
        `verify_max_source_rows` skipped); a difference is counted, logged and repaired.
        How many differed."""
        config = self._maintenance
        if config is None or not config.enabled:
            return 0
        self._verify_runs += 1
        differed = 0
        for identifier in mvs if mvs is not None else dependency_order(self._index.snapshot):
            if self._stopping.is_set():
                break
            if not self._owns(identifier):
                continue
            mv = identifier.dotted
            if self._over_budget(identifier, config.verify_max_source_rows):
                self._metrics.record_verify(mv, "skipped")
                continue
            try:
                report = verify_mv(
                    self._lakehouse,
                    identifier,
                    slices=config.verify_slices,
                    sample=config.verify_sample,
                    seed=self._verify_runs,
                )
            except VerifyError:
                self._metrics.record_verify(mv, "skipped")  # never refreshed yet
                continue
            except Exception as exc:  # noqa: BLE001 (one MV's trouble must not stop the others)
                self._metrics.record_verify(mv, "error")
                log.warning("verify_failed", mv=mv, error=f"{type(exc).__name__}: {exc}")
                continue
            if report.clean:
                self._metrics.record_verify(mv, "clean", at_seconds=time.time())
                log.info("verified", mv=mv, summary=report.summary(),
                         seconds=round(report.seconds, 3))  # fmt: skip
                continue
            differed += 1
            self._metrics.record_verify(mv, "mismatch", len(report.differing_slices))
            log.error(
                "verify_mismatch",
                mv=mv,
                summary=report.summary(),
                storage_snapshot_id=report.storage_snapshot_id,
                sample_only_in_storage=[repr(r)[:200] for r in report.samples_storage],
                sample_only_in_view=[repr(r)[:200] for r in report.samples_view],
                action="repairing with a full refresh",
            )
            if self._repair is not None:
                self._repair(identifier, report.summary())
        return differed

    def _over_budget(self, identifier: Identifier, max_rows: int) -> bool:
        if max_rows <= 0:
            return False
        readers = self._index.snapshot.readers
        total = 0
        for source in (table for table, mvs in readers.items() if identifier in mvs):
            try:
                table = self._lakehouse.load_table(source)
            except Exception:  # noqa: BLE001 (a source that does not load: not over budget)
                continue
            total += int(summary_of(table.current_snapshot()).get(TOTAL_RECORDS, 0))
        return total > max_rows

    def remove_leftover_branches(self) -> list[str]:
        """At start-up: private branches that refreshes killed before this start left."""
        config = self._maintenance
        if config is None or not config.enabled:
            return []
        removed = []
        for mv in self._index.snapshot.mvs.values():
            try:
                table = self._lakehouse.load_table(mv.storage)
                removed += remove_leftover_branches(table, config.branch_min_age_seconds)
            except Exception as exc:  # noqa: BLE001 (one MV's trouble must not stop the others)
                log.warning("branch_cleanup_failed", mv=str(mv.identifier), error=str(exc))
        return removed

    def check(
        self,
        mv: MaterializedView,
        reads: CatalogReads | None = None,
        record: RefreshRecord | None = None,
    ) -> Freshness:
        """Publish `mv`'s freshness and request a refresh unless fresh; loads through
        `reads` (a poll's) when given, else straight from the catalog; `record`: the
        storage's latest refresh record, when known (a refresh's result)."""
        freshness = assess_freshness(self._lakehouse, mv, reads=reads, record=record)
        self._metrics.record_freshness(mv.identifier.dotted, freshness, max_staleness_seconds(mv))
        if freshness.state != "fresh":
            self._request(mv.identifier, "poll")
        return freshness

    def check_by_name(self, identifier: Identifier) -> None:
        """A freshness-target check between polls: on JDBC one listing query, reusing the
        last poll's loads of what did not change."""
        if not self._owns(identifier) or identifier in self._busy():
            return
        reads: CatalogReads | None = None
        try:
            reads = self._reads.begin()
            self.check(load_materialized_view(self._lakehouse, identifier, reads), reads)
        except Exception as exc:  # noqa: BLE001 (the next poll checks again)
            log.warning(
                "freshness_check_failed", mv=str(identifier), error=f"{type(exc).__name__}: {exc}"
            )
        finally:
            if reads is not None:
                self._metrics.record_catalog_loads(reads)

    def _scheduled(self, identifier: Identifier) -> None:
        if self._owns(identifier):
            self._request(identifier, "schedule")

    def _sync_mv_jobs(self, mvs: list[MaterializedView]) -> None:
        wanted: dict[str, tuple[str, Any, Callable[[], None]]] = {}
        for mv in mvs:
            identifier = mv.identifier
            target = max_staleness_seconds(mv)
            if target is not None and target / 2 < self._interval:
                trigger = IntervalTrigger(seconds=max(1.0, target / 2))
                wanted[f"target:{identifier.dotted}"] = (
                    f"every {max(1.0, target / 2)}s",
                    trigger,
                    partial(self.check_by_name, identifier),
                )
            interval = mv.properties.get(REFRESH_INTERVAL_PROPERTY)
            cron = mv.properties.get(REFRESH_CRON_PROPERTY)
            try:
                if interval:
                    seconds = parse_duration(interval)
                    wanted[f"schedule:{identifier.dotted}"] = (
                        f"interval {seconds}",
                        IntervalTrigger(seconds=seconds),
                        partial(self._scheduled, identifier),
                    )
                elif cron:
                    wanted[f"schedule:{identifier.dotted}"] = (
                        f"cron {cron}",
                        CronTrigger.from_crontab(cron),
                        partial(self._scheduled, identifier),
                    )
            except (DurationError, ValueError) as exc:
                log.warning("mv_schedule_invalid", mv=identifier.dotted, error=str(exc))
        for job_id in set(self._mv_jobs) - set(wanted):
            self._jobs.remove_job(job_id)
            del self._mv_jobs[job_id]
        for job_id, (description, trigger, action) in wanted.items():
            if self._mv_jobs.get(job_id) == description:
                continue
            self._jobs.add_job(
                action, trigger, id=job_id, replace_existing=True, max_instances=1, coalesce=True
            )
            self._mv_jobs[job_id] = description
