"""What one daemon poll costs the catalog: requests, metadata reads and time per poll.

    python -m tests.benchmarks.bench_poll --mvs 20 --polls 5 [--catalog postgresql://...]

Creates two base tables and `--mvs` MVs over them (every third MV joins both), refreshes
them all (Spark), then runs the daemon's poll (`Reconciler.poll`, refresh requests only
recorded) `--polls` times with nothing changing, then once after a commit to one table.
Counted per poll: SQL statements on the catalog database (JDBC) or HTTP requests (REST),
table and view metadata files read, wall time. `BENCH_CATALOG=rest` runs it on the
tests' REST catalog server.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from pyiceberg.serializers import FromInputFile

import icemv.catalog.jdbc_views
import icemv.catalog.rest_views
from icemv.catalog.namespaces import ensure_namespace
from icemv.identifiers import Identifier
from icemv.lakehouse import Lakehouse
from icemv.mv.lifecycle import create_mv
from icemv.refresh.policy import refresh_mv
from icemv.refresh.result import RefreshResult
from icemv.service.metrics import Metrics
from icemv.service.poller import Reconciler
from icemv.service.source_index import SourceIndex
from tests.benchmarks.bench_refresh import _lakehouse, _rest_catalog
from tests.support.tables import append_trips, create_trips

NAMESPACE = "polls"
ROWS = [(i, f"v{i % 3}", float(i), None) for i in range(20)]


def mv_sql(i: int) -> str:
    if i % 3 == 2:
        return (
            f"SELECT a.vendor, count(*) AS n FROM a JOIN b ON a.id = b.id "
            f"WHERE a.fare >= {i} GROUP BY a.vendor"
        )
    table = "a" if i % 3 == 0 else "b"
    return (
        f"SELECT vendor, count(*) AS n, sum(fare) AS s FROM {table} "
        f"WHERE fare >= {i} GROUP BY vendor"
    )


class Counts:
    """Catalog work, counted below icemv: SQL statements, HTTP requests, metadata reads."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    @contextlib.contextmanager
    def installed(self, lakehouse: Lakehouse) -> Iterator[None]:
        undo: list[Any] = []
        catalog: Any = lakehouse.catalog
        # Both of a JDBC catalog's engines: pyiceberg's and the autocommit one.
        engines = [getattr(catalog, name, None) for name in ("engine", "statements")]
        for engine in [e for e in engines if e is not None]:
            from sqlalchemy import event

            def statement(*_: Any) -> None:
                self.counts["sql"] += 1

            event.listen(engine, "before_cursor_execute", statement)
            undo.append(lambda e=engine, s=statement: event.remove(e, "before_cursor_execute", s))
        session = getattr(catalog, "_session", None)
        if session is not None:

            def response(r: Any, *_: Any, **__: Any) -> Any:
                self.counts["http"] += 1
                self.counts[f"http_{r.status_code}"] += 1
                return r

            session.hooks["response"].append(response)
            undo.append(lambda: session.hooks["response"].remove(response))
        original = FromInputFile.table_metadata

        def table_metadata(*args: Any, **kwargs: Any) -> Any:
            self.counts["table_metadata_reads"] += 1
            return original(*args, **kwargs)

        FromInputFile.table_metadata = staticmethod(table_metadata)  # type: ignore[method-assign]
        undo.append(lambda: setattr(FromInputFile, "table_metadata", staticmethod(original)))
        for module in (icemv.catalog.jdbc_views, icemv.catalog.rest_views):
            decode = getattr(module, "decode_view_metadata", None)
            if decode is None:
                continue

            def counted(*args: Any, _decode: Any = decode, **kwargs: Any) -> Any:
                self.counts["view_metadata_reads"] += 1
                return _decode(*args, **kwargs)

            module.decode_view_metadata = counted  # type: ignore[attr-defined]
            undo.append(lambda m=module, d=decode: setattr(m, "decode_view_metadata", d))
        try:
            yield
        finally:
            for action in reversed(undo):
                action()

    def take(self) -> dict[str, int]:
        taken = dict(self.counts)
        self.counts.clear()
        return taken


def setup(lakehouse: Lakehouse, mvs: int) -> None:
    ensure_namespace(lakehouse.catalog, (NAMESPACE,))
    create_trips(lakehouse, NAMESPACE, "a", ROWS)
    create_trips(lakehouse, NAMESPACE, "b", ROWS)
    for i in range(mvs):
        identifier = Identifier((NAMESPACE,), f"mv{i:02d}")
        create_mv(lakehouse, identifier, mv_sql(i))
        refresh_mv(lakehouse, identifier)


def run(lakehouse: Lakehouse, mvs: int, polls: int) -> dict[str, Any]:
    setup(lakehouse, mvs)
    requested: list[str] = []

    def request(mv: Identifier, reason: str) -> Future[RefreshResult]:
        requested.append(mv.dotted)
        return Future()

    reconciler = Reconciler(lakehouse, SourceIndex(lakehouse), Metrics(), request, 2.0)
    counts = Counts()
    rows: list[dict[str, Any]] = []
    with counts.installed(lakehouse):
        for i in range(polls + 1):
            if i == polls:
                append_trips(lakehouse, NAMESPACE, [(1000, "v9", 1000.0, None)], name="a")
                counts.take()  # the commit's own catalog work is not the poll's
            started = time.perf_counter()
            reconciler.poll()
            seconds = time.perf_counter() - started
            rows.append(
                {
                    "poll": "after commit" if i == polls else f"idle {i + 1}",
                    "seconds": round(seconds, 3),
                    "refreshes_requested": len(requested),
                    **counts.take(),
                }
            )
            requested.clear()
    idle = [r for r in rows if r["poll"].startswith("idle")][1:] or rows[:1]
    return {
        "mvs": mvs,
        "polls": rows,
        "idle_median_seconds": round(statistics.median(r["seconds"] for r in idle), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mvs", type=int, default=20)
    parser.add_argument("--polls", type=int, default=5)
    parser.add_argument("--catalog", default=None, help="JDBC catalog URI (default: embedded)")
    parser.add_argument("--out", default="bench-results/poll.json")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="icemv-bench-poll-"))
    kind = os.environ.get("BENCH_CATALOG", "jdbc")
    with contextlib.ExitStack() as cleanup:
        catalog = (
            _rest_catalog(workdir, cleanup)
            if kind == "rest"
            else {"uri": args.catalog or "embedded"}
        )
        os.environ.setdefault("ICEMV_BENCH_DRIVER_MEMORY", "1g")
        lakehouse = _lakehouse(catalog, workdir)
        result = {"catalog": kind, **run(lakehouse, args.mvs, args.polls)}
        from icemv.engine.spark import stop_spark

        stop_spark()
    keys = sorted({k for row in result["polls"] for k in row} - {"poll"})
    print(f"{kind}, {args.mvs} MVs over 2 tables")
    print("poll          " + "  ".join(f"{k:>20}" for k in keys))
    for row in result["polls"]:
        print(f"{row['poll']:<14}" + "  ".join(f"{row.get(k, 0)!s:>20}" for k in keys))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
