"""`icemv run`: the long-running service that keeps every MV fresh.

Kafka events and catalog polls feed one scheduler; refreshes commit atomically, so
stopping at any moment (SIGTERM) leaves no partial commit: intake stops, running
refreshes get the grace period, done events' offsets are committed, and the process
exits 0.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from pathlib import Path

import structlog

from icemv.catalog.event_scope import event_scope
from icemv.config import Config, load_config
from icemv.engine.spark import activate, session_ready, use_scheduler_pool
from icemv.errors import ConfigError, InvalidIdentifierError, NotAMaterializedViewError
from icemv.identifiers import Identifier
from icemv.lakehouse import CatalogReads, Lakehouse
from icemv.mv.lifecycle import apply_declared
from icemv.mv.model import load_materialized_view
from icemv.refresh.policy import refresh_mv
from icemv.refresh.result import RefreshResult
from icemv.service.after_refresh import AfterRefreshChecks, Round
from icemv.service.consumer import EventConsumer
from icemv.service.forwarding import RefreshForwarder
from icemv.service.heap import freeze_startup_heap
from icemv.service.http import HttpServer, RefreshRequestOutcome
from icemv.service.metrics import Metrics
from icemv.service.ownership import Ownership
from icemv.service.poller import Reconciler
from icemv.service.readiness import ReadinessMonitor
from icemv.service.refresh_workers import RefreshWorkers
from icemv.service.router import EventRouter
from icemv.service.scheduler import RefreshScheduler
from icemv.service.source_index import SourceIndex

log = structlog.get_logger(__name__)

HEARTBEAT_SECONDS = 1.0
# How often the rehearsals after start look again whether refreshes are pending.
REHEARSAL_WAIT_SECONDS = 0.05
LIVENESS_TIMEOUT_SECONDS = 30.0


class Daemon:
    def __init__(
        self,
        config: Config,
        config_path: str | None = None,
        lakehouse: Lakehouse | None = None,
        on_refresh: Callable[[RefreshResult], None] | None = None,
    ) -> None:
        """`on_refresh(result)`: told of every refresh that ended (`icemv demo` narrates
        them), on a refresh worker's thread, after the `refresh` log line."""
        self.config = config
        self._on_refresh = on_refresh
        self.config_path = config_path
        self.lakehouse = lakehouse or Lakehouse(config)
        self.metrics = Metrics()
        self.index = SourceIndex(self.lakehouse)
        # Replicas in one consumer group split the MVs by the first topic's partitions.
        kafka = config.kafka
        self.ownership = (
            Ownership(kafka.topics[0], fallback_seconds=kafka.session_timeout_ms / 1000)
            if kafka.enabled
            else Ownership.everything()
        )
        self.forwarder = (
            RefreshForwarder(kafka, kafka.topics[0], config.catalog.name) if kafka.enabled else None
        )
        # At most `max_concurrent` refreshes run in workers and at most that many in this
        # process; each worker has one more queued, so that it starts its next refresh
        # while this process handles the last one's result (measured on 2 cores: 100 MVs
        # fresh in 2.36 s against 2.60, 10 in 0.33 against 0.49; docs/benchmarks.md).
        processes = min(config.refresh.processes, config.refresh.max_concurrent)
        self.workers = (
            RefreshWorkers(
                config,
                processes,
                self.metrics.record_worker_handback,
                semantics=lambda: self.lakehouse.semantics,
            )
            if processes
            else None
        )
        self._in_process = threading.BoundedSemaphore(config.refresh.max_concurrent)
        self.scheduler = RefreshScheduler(
            self._refresh,
            config.refresh,
            on_result=self._on_result,
            on_failure=self._on_failure,
            dependents=self._owned_dependents,
            queue_ahead=processes,
        )
        self.reconciler = Reconciler(
            self.lakehouse,
            self.index,
            self.metrics,
            self.request,
            config.polling.interval_seconds,
            config.maintenance,
            owns=self.ownership.owns,
            busy=self.scheduler.pending,
            repair=self._repair,
        )
        self.after_refresh = AfterRefreshChecks(self._check_after_refresh)
        self.router = EventRouter(
            config.catalog.name,
            self.index,
            self.metrics,
            self.lakehouse.table_exists,
            self.request,
            self._definitions_changed,
            scope=event_scope(config, self.lakehouse.backend),
            ownership=self.ownership,
            forward=self.forwarder.forward if self.forwarder else None,
            group=kafka.group_id,
            is_mv=lambda mv: mv in self.index.snapshot.mvs,
        )
        self.consumer: EventConsumer | None = None
        if config.kafka.enabled:
            self.consumer = EventConsumer(
                config.kafka,
                self.router.handle,
                on_lag=self.metrics.set_lag,
                on_connected=self._kafka_connected,
                on_rejected=self.metrics.record_rejected_event,
                on_assigned=self._assigned,
            )
        # /readyz reads the catalog and Spark checks this keeps, never the catalog itself.
        self.health = ReadinessMonitor(
            self._catalog_reachable, self._spark_ready, on_checked=self._publish_readiness
        )
        self.http = HttpServer(
            config.metrics.host,
            config.metrics.port,
            self.metrics,
            self._alive,
            self._readiness,
            self._http_refresh,
        )
        self.stopping = threading.Event()
        self.ready = threading.Event()
        self.rehearsed = threading.Event()  # the MVs rehearsed after start (or none to do)
        self._heartbeat = time.monotonic()
        self._config_mtime = self._mtime()
        self.http_port: int | None = None
        self.refreshes_finished = True
        # MVs a verification found differing, with its diff summary: their next refresh
        # is a full one that records it.
        self._repairs: dict[Identifier, str] = {}
        self._repairs_lock = threading.Lock()

    # ---- lifecycle ---------------------------------------------------------------------

    def run(self) -> int:
        self._install_signal_handlers()
        self.http_port = self.http.start()
        log.info("daemon_starting", http_port=self.http_port, kafka=bool(self.consumer))
        self.health.start()
        try:
            self.lakehouse.spark  # start Spark before declaring readiness  # noqa: B018
            self._apply_declared()
            self.index.rebuild()
            log.info("heap_frozen", objects=freeze_startup_heap())  # service/heap.py
            self.reconciler.remove_leftover_branches()  # of refreshes killed before this start
            if self.workers is not None:
                self.workers.start()
            self.after_refresh.start()
            self.scheduler.start()
            self.reconciler.poll()
            self.reconciler.start()
            if self.consumer is not None:
                self.consumer.start()
            self.health.check_now()  # ready now: /readyz must not wait for the next round
            self.ready.set()
            self._publish_readiness()
            log.info("daemon_ready", mvs=len(self.index.snapshot.mvs))
            threading.Thread(
                target=self._rehearse_all, name="icemv-rehearsals", daemon=True
            ).start()
            while not self.stopping.wait(HEARTBEAT_SECONDS):
                self._heartbeat = time.monotonic()
                self._reload_config_if_changed()
        finally:
            self._shutdown()
        return 0

    def stop(self) -> None:
        self.stopping.set()

    def _rehearse_all(self) -> None:
        """Each MV this replica owns rehearsed once in its home worker, one at a time and
        only while no refresh is pending (refresh/rehearsal.py): the first commit after
        a start then finds its MVs' trees built and storage rows read, as later ones do.
        Sets `rehearsed` when done."""
        outcomes: Counter[str] = Counter()
        try:
            workers = self.workers
            while workers is not None and not self.ownership.known():  # Kafka's assignment
                if self.stopping.wait(REHEARSAL_WAIT_SECONDS):
                    return
            mvs = list(self.index.snapshot.mvs) if workers is not None else []
            for mv in mvs:
                assert workers is not None
                while not self.stopping.is_set() and self.ownership.owns(mv):
                    outcome = None if self.scheduler.pending() else workers.rehearse(mv)
                    if outcome is not None:
                        outcomes[outcome.split(":")[0]] += 1
                        break
                    self.stopping.wait(REHEARSAL_WAIT_SECONDS)  # refreshes come first
        except Exception:  # warming caches must never stop the daemon
            log.exception("refresh_rehearsals_failed")
        finally:
            self.rehearsed.set()
            log.info("refresh_rehearsals", **outcomes)

    def _shutdown(self) -> None:
        grace = self.config.refresh.shutdown_grace_seconds
        log.info("daemon_stopping", grace_seconds=grace)
        self.ready.clear()
        self.health.stop()
        self.metrics.set_ready(False)
        if self.consumer is not None:
            self.consumer.stop(timeout=5.0)  # intake first: no new work
        self.reconciler.stop()
        finished = self.scheduler.stop(grace)
        self.after_refresh.stop()
        if self.workers is not None:  # past the grace, a worker ends its refresh alone
            self.workers.close(wait=finished)
        if self.consumer is not None:
            self.consumer.stop(timeout=grace)
        if self.forwarder is not None:
            self.forwarder.close()
        self.http.stop()
        log.info("daemon_stopped", refreshes_finished=finished)
        self.refreshes_finished = finished

    def _install_signal_handlers(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: self.stop())

    # ---- refresh plumbing -------------------------------------------------------------

    def request(self, mv: Identifier, reason: str) -> Future[RefreshResult]:
        return self.scheduler.request(mv, reason)

    # ---- ownership ----------------------------------------------------------------------

    def _assigned(self, partitions: Sequence[tuple[str, int]], counts: Mapping[str, int]) -> None:
        """A rebalance (or leaving the group): take the new share and poll what it holds."""
        topic = self.ownership.topic
        if not partitions:
            self.ownership.revoke()
            return
        mine = sorted(p for t, p in partitions if t == topic)
        self.ownership.assign(mine, counts.get(topic or "", 0))
        log.info("ownership_changed", topic=topic, partitions=mine, count=counts.get(topic or ""))
        self.reconciler.poll_soon()

    def _kafka_connected(self, connected: bool) -> None:
        self.metrics.set_kafka_connected(connected)
        self.ownership.connected(connected)

    def _owned_dependents(self, mv: Identifier) -> Iterable[Identifier]:
        """MVs reading `mv` that this replica refreshes; the others' owners are asked to."""
        split = self.ownership.split(sorted(self.index.dependents_of(mv)))
        if split.elsewhere and self.forwarder is not None:
            try:
                self.forwarder.forward(split.elsewhere, "upstream-refreshed")
                self.metrics.record_forwarded(sum(len(m) for m in split.elsewhere.values()))
            except Exception as exc:  # noqa: BLE001 (their owners' polls find them stale)
                log.warning("refresh_forward_failed", mv=mv.dotted, error=str(exc))
        return split.mine

    def _refresh(self, mv: Identifier) -> RefreshResult:
        self.metrics.record_attempt(mv.dotted)
        with self._repairs_lock:
            repaired = mv in self._repairs
        if self.workers is not None and not repaired:  # a repair is a full refresh: Spark
            result = self.workers.refresh(mv)
            if result is not None:
                return result
        with self._in_process:  # handed back, or no workers
            return self._refresh_here(mv)

    def _refresh_here(self, mv: Identifier) -> RefreshResult:
        spark = self.lakehouse.spark
        # Scheduler threads have no JVM-side active session of their own.
        activate(spark)
        # A FAIR pool per worker thread: refreshes share the executors instead of queueing.
        use_scheduler_pool(spark, threading.current_thread().name)
        with self._repairs_lock:
            repair = self._repairs.pop(mv, None)
        try:
            return refresh_mv(self.lakehouse, mv, repair=repair)
        except BaseException:
            if repair is not None:  # the retry still repairs
                with self._repairs_lock:
                    self._repairs.setdefault(mv, repair)
            raise

    def _repair(self, mv: Identifier, diff: str) -> Future[RefreshResult]:
        """A full refresh of `mv` that records what a verification found differing."""
        with self._repairs_lock:
            self._repairs[mv] = diff
        return self.scheduler.request(mv, "verify-mismatch")

    def _on_result(self, result: RefreshResult) -> None:
        # The refresh computed its latencies and knows its record from what it loaded: the
        # check after it loads only the sources, shared with the results arriving with it.
        self.metrics.record_refresh(result, list(result.commit_to_fresh_seconds))
        log.info(
            "refresh",
            mv=result.mv.dotted,
            mode=result.mode,
            reason=result.reason,
            rows_inserted=result.rows_inserted,
            rows_deleted=result.rows_deleted,
            duration_seconds=round(result.duration_seconds, 3),
            storage_snapshot_id=result.storage_snapshot_id,
            source_snapshots={s.dotted: s.snapshot_id for s in result.sources if s.type == "table"},
            attempts=result.attempts,
            source_rows_read=result.source_rows_read,
            phase_seconds=dict(result.phase_seconds),
            engine=result.engine,
            engine_reason=result.engine_reason,
            worker_pid=result.worker_pid,
        )
        if self._on_refresh is not None:
            try:
                self._on_refresh(result)
            except Exception as exc:  # noqa: BLE001 (a listener must not fail the refresh's result)
                log.warning("refresh_listener_failed", error=type(exc).__name__)
        upkeep = self.config.maintenance
        bound = upkeep.max_snapshots if upkeep.enabled else 0
        if bound and (result.storage_snapshots or 0) > bound:
            self.reconciler.maintain_soon(result.mv)
        self.after_refresh.add(result.mv, result.record)

    def _check_after_refresh(self, refreshed: Round) -> None:
        """Publish the refreshed MVs' freshness, their sources loaded again once for all of
        them (service/after_refresh.py): one may have moved on since a refresh pinned it."""
        reads = CatalogReads(self.lakehouse)
        try:
            for identifier, record in refreshed.items():
                mv = self.index.snapshot.mvs.get(identifier)
                if mv is None:
                    continue
                try:
                    self.reconciler.check(mv, reads, record=record)
                except Exception as exc:  # noqa: BLE001 (the next round or poll checks again)
                    log.warning("freshness_check_failed", mv=identifier.dotted, error=str(exc))
        finally:
            self.metrics.record_catalog_loads(reads)

    def _on_failure(self, mv: Identifier, error: BaseException, attempt: int, delay: float) -> None:
        self.metrics.record_refresh_failure(mv.dotted, "unknown", error)
        log.warning(
            "refresh_failed",
            mv=mv.dotted,
            attempt=attempt,
            retry_in_seconds=round(delay, 1),
            error=f"{type(error).__name__}: {str(error)[:300]}",
        )

    def _definitions_changed(self) -> None:
        try:
            self.index.rebuild()
        except Exception as exc:  # noqa: BLE001 (the next poll rebuilds the index again)
            log.warning("index_rebuild_failed", error=str(exc))

    # ---- declarative MVs --------------------------------------------------------------

    def _apply_declared(self) -> None:
        if not self.config.materialized_views:
            return
        try:
            actions = apply_declared(self.lakehouse, self.config.materialized_views)
            log.info("declared_mvs_applied", actions=actions)
        except Exception as exc:  # noqa: BLE001 (a bad definition must not stop the other MVs)
            log.error("declared_mvs_failed", error=f"{type(exc).__name__}: {exc}")

    def _mtime(self) -> float | None:
        if self.config_path is None:
            return None
        try:
            return os.stat(self.config_path).st_mtime
        except OSError:
            return None

    def _reload_config_if_changed(self) -> None:
        mtime = self._mtime()
        if mtime is None or mtime == self._config_mtime:
            return
        self._config_mtime = mtime
        try:
            new = load_config(self.config_path)
        except ConfigError as exc:
            log.error("config_reload_rejected", error=str(exc))
            return
        if new.model_dump(exclude={"materialized_views"}) != self.config.model_dump(
            exclude={"materialized_views"}
        ):
            log.warning("config_changed_needs_restart", note="only materialized_views apply live")
        self.config = self.config.model_copy(update={"materialized_views": new.materialized_views})
        self._apply_declared()
        self._definitions_changed()

    # ---- health and HTTP --------------------------------------------------------------

    def _alive(self) -> bool:
        return time.monotonic() - self._heartbeat < LIVENESS_TIMEOUT_SECONDS

    def _readiness(self) -> dict[str, bool]:
        """From state kept in memory: a probe costs no catalog or JVM round trip."""
        checks = {
            "started": self.ready.is_set(),
            "catalog": self.health.catalog(),
            "spark": self.health.spark(),
        }
        if self.consumer is not None:
            checks["kafka"] = self.consumer.connected
        return checks

    def _publish_readiness(self) -> None:
        """`icemv_ready` follows the checks even when nothing probes."""
        self.metrics.set_ready(all(self._readiness().values()))

    def _catalog_reachable(self) -> bool:
        try:
            self.lakehouse.catalog.list_namespaces()
        except Exception:  # noqa: BLE001 (readiness probe: any failure means not reachable)
            return False
        return True

    def _spark_ready(self) -> bool:
        return session_ready()

    def _http_refresh(self, name: str) -> RefreshRequestOutcome:
        try:
            identifier = self.lakehouse.identifier(name)
        except InvalidIdentifierError:
            return RefreshRequestOutcome.INVALID_NAME
        if identifier not in self.index.snapshot.mvs:
            # One view loaded, not the whole index rebuilt, for a name that is no MV: a
            # rebuild loads every MV (seconds on REST with a hundred), per request.
            try:
                load_materialized_view(self.lakehouse, identifier)
            except NotAMaterializedViewError:
                return RefreshRequestOutcome.UNKNOWN_MV
            except Exception as exc:  # noqa: BLE001 (the catalog's trouble; the poll retries)
                log.warning("refresh_request_lookup_failed", mv=identifier.dotted,
                            error=type(exc).__name__)  # fmt: skip
                return RefreshRequestOutcome.UNKNOWN_MV
            self._definitions_changed()  # an MV created since the last poll
            if identifier not in self.index.snapshot.mvs:
                return RefreshRequestOutcome.UNKNOWN_MV
        self.request(identifier, "manual")
        return RefreshRequestOutcome.QUEUED


def run_daemon(config: Config, config_path: str | None) -> int:
    """`icemv run`: this process owns Spark, so it stops it once the daemon is done."""
    if config_path is not None and not Path(config_path).exists():
        raise ConfigError(f"config file {config_path} does not exist")
    daemon = Daemon(config, config_path)
    code = daemon.run()
    if not daemon.refreshes_finished:
        # A refresh outlived the grace: abandon it. Its commit is one atomic catalog swap
        # that has not happened; leaving now (without waiting for the refresh worker
        # thread, as interpreter exit would) lets the JVM die with us, so it never will.
        log.warning("refresh_abandoned_at_shutdown")
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    from icemv.engine.spark import stop_jvm, stop_spark

    stop_spark()
    stop_jvm()
    return code
