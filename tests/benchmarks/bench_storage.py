"""One incremental refresh with the warehouse on local disk or on S3 (moto), same data.

    python -m tests.benchmarks.bench_storage --storage s3 --rows 10000000

A merge-on-read base table of `rows` rows, the GROUP BY aggregate MV of bench_refresh,
one 0.1% append, then one timed incremental refresh (and one full refresh for scale).
Moto keeps objects in memory in this process: it measures the S3 code path (S3FileIO,
S3A, request counts), not a real object store's latency.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from icemv.catalog.namespaces import ensure_namespace
from icemv.config import parse_config
from icemv.identifiers import Identifier
from icemv.lakehouse import Lakehouse
from icemv.mv.lifecycle import create_mv
from icemv.refresh.policy import refresh_mv
from tests.benchmarks.bench_refresh import SHAPES, _write_rows, incremental_then_full
from tests.conftest import ADMIN_URL, create_database, drop_database
from tests.support.s3 import s3_test_jars, start_moto


def run(storage: str, rows: int) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="icemv-bench-storage-"))
    warehouse: dict[str, Any] = {"location": str(workdir / "warehouse")}
    moto = None
    if storage == "s3":
        server, moto = start_moto()
        warehouse = server.warehouse(server.create_bucket())
    database = create_database(ADMIN_URL)
    try:
        config = parse_config(
            {
                "home": str(workdir / "home"),
                "catalog": {"uri": database},
                "warehouse": warehouse,
                "spark": {
                    "driver_memory": os.environ.get("ICEMV_BENCH_DRIVER_MEMORY", "4g"),
                    "shuffle_partitions": 8,
                    "extra_jars": s3_test_jars(),
                },
                "logging": {"level": "WARNING"},
            }
        )
        lakehouse = Lakehouse(config)
        namespace = f"bench_{uuid.uuid4().hex[:6]}"
        ensure_namespace(lakehouse.catalog, (namespace,))
        base = lakehouse.quoted(Identifier((namespace,), "base"))
        started = time.time()
        _write_rows(lakehouse, base, 0, rows, "merge-on-read")
        write_s = time.time() - started
        mv = Identifier((namespace,), "aggregate")
        create_mv(
            lakehouse, mv, SHAPES["aggregate"], properties={"icemv.refresh-policy": "incremental"}
        )
        refresh_mv(lakehouse, mv)
        _write_rows(lakehouse, base, rows, rows // 1000, None)
        incremental_s, full_s, incremental, _ = incremental_then_full(lakehouse, mv)
        return {
            "storage": storage,
            "rows": rows,
            "base_write_seconds": round(write_s, 1),
            "incremental_mode": incremental.mode,
            "incremental_seconds": round(incremental_s, 2),
            "full_seconds": round(full_s, 2),
        }
    finally:
        from icemv.engine.spark import stop_spark

        stop_spark()
        drop_database(ADMIN_URL, database)
        if moto is not None:
            moto.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--storage", choices=["local", "s3"], default="local")
    parser.add_argument("--rows", type=int, default=10_000_000)
    args = parser.parse_args()
    print(json.dumps(run(args.storage, args.rows)), flush=True)


if __name__ == "__main__":
    main()
