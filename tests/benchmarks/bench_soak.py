"""Months of refreshes in minutes: does commit time stay flat and the metadata bounded?

    python -m tests.benchmarks.bench_soak --refreshes 2000 --maintain-every 100

One aggregate MV over a small table; before each refresh a few rows are appended (as
another writer would, with pyiceberg). Every `--maintain-every` refreshes the storage
table gets the daemon's upkeep pass (`maintain_storage`: leftover branches, expiry,
unreferenced files), and the source table's owner expires its own old snapshots (a
source's metadata is not icemv's to bound, but it would otherwise grow in this loop and
hide what the storage table does). Every 100 refreshes it prints the mean refresh time,
the mean commit phase, the storage snapshot count and the storage metadata file size.

Target: the last 100 refreshes take at most 1.5x the first 100; the metadata file stays
bounded. `--seconds` stops early (the figures say how far it got).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa

from icemv.config import parse_config
from icemv.identifiers import Identifier
from icemv.lakehouse import Lakehouse
from icemv.mv.lifecycle import create_mv
from icemv.mv.maintenance import maintain_storage
from icemv.mv.maintenance.expiry import Retention, expire_storage
from icemv.mv.model import load_materialized_view
from icemv.refresh.policy import refresh_mv

NAMESPACE = "soak"
MV_SQL = "SELECT vendor, count(*) AS n, sum(fare) AS s FROM trips GROUP BY vendor"
SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64()),
        pa.field("vendor", pa.string()),
        pa.field("fare", pa.float64()),
        pa.field("day", pa.date32()),
    ]
)
WINDOW = 100


def _rows(start: int, count: int, rng: random.Random) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {
                "id": start + i,
                "vendor": f"v{rng.randrange(20)}",
                "fare": round(rng.uniform(1, 50), 2),
                "day": dt.date(2024, 1, 1) + dt.timedelta(days=rng.randrange(30)),
            }
            for i in range(count)
        ],
        schema=SCHEMA,
    )


def _metadata_bytes(lakehouse: Lakehouse, identifier: Identifier) -> int:
    location = lakehouse.load_table(identifier).metadata_location
    return os.path.getsize(location.removeprefix("file://").removeprefix("file:"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--refreshes", type=int, default=2000)
    parser.add_argument("--maintain-every", type=int, default=100)
    parser.add_argument("--keep-snapshots", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=0.0, help="stop after (0: never)")
    parser.add_argument("--out", default="bench-results/soak.json")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="icemv-soak-"))
    config = parse_config(
        {
            "home": str(workdir / "home"),
            "catalog": {"uri": os.environ.get("ICEMV_SOAK_CATALOG", "embedded")},
            "warehouse": {"location": str(workdir / "warehouse")},
            "spark": {"driver_memory": "2g", "shuffle_partitions": 2},
            "logging": {"level": "WARNING"},
            "maintenance": {
                "keep_snapshots": args.keep_snapshots,
                "orphan_file_age_seconds": 0,
                "branch_min_age_seconds": 0,
            },
        }
    )
    lakehouse = Lakehouse(config)
    lakehouse.catalog.create_namespace(NAMESPACE)
    rng = random.Random(7)
    source = lakehouse.catalog.create_table(
        (NAMESPACE, "trips"), schema=SCHEMA, properties={"format-version": "2"}
    )
    source.append(_rows(0, 1000, rng))
    mv = Identifier((NAMESPACE,), "agg")
    create_mv(lakehouse, mv, MV_SQL, properties={"icemv.refresh-policy": "incremental"})
    refresh_mv(lakehouse, mv)
    loaded = load_materialized_view(lakehouse, mv)
    trips = Identifier((NAMESPACE,), "trips")

    started = time.monotonic()
    durations: list[float] = []
    commits: list[float] = []
    windows: list[dict[str, Any]] = []
    next_id = 1000
    for n in range(1, args.refreshes + 1):
        count = rng.randint(1, 5)
        lakehouse.load_table(trips).append(_rows(next_id, count, rng))
        next_id += count
        result = refresh_mv(lakehouse, mv)
        durations.append(result.duration_seconds)
        commits.append(result.phase_seconds.get("commit", 0.0))
        if args.maintain_every and n % args.maintain_every == 0:
            maintain_storage(lakehouse, loaded, config.maintenance)
            expire_storage(lakehouse.load_table(trips), Retention(keep_snapshots=50))
        if n % WINDOW == 0:
            window = {
                "refreshes": n,
                "mean_refresh_s": round(statistics.fmean(durations[-WINDOW:]), 4),
                "mean_commit_s": round(statistics.fmean(commits[-WINDOW:]), 4),
                "storage_snapshots": len(lakehouse.load_table(loaded.storage).snapshots()),
                "metadata_bytes": _metadata_bytes(lakehouse, loaded.storage),
                "elapsed_s": round(time.monotonic() - started, 1),
            }
            windows.append(window)
            print(json.dumps(window), flush=True)
        if args.seconds and time.monotonic() - started > args.seconds:
            break
    done = len(durations)
    first, last = durations[:WINDOW], durations[-WINDOW:]
    ratio = sum(last) / sum(first) if first and sum(first) > 0 else float("nan")
    sizes = [w["metadata_bytes"] for w in windows]
    summary = {
        "refreshes": done,
        "maintain_every": args.maintain_every,
        "keep_snapshots": args.keep_snapshots,
        "first_100_s": round(sum(first), 2),
        "last_100_s": round(sum(last), 2),
        "last_over_first": round(ratio, 3),
        "target_met": ratio <= 1.5 and done >= 2 * WINDOW,
        "metadata_bytes_first_window": sizes[0] if sizes else None,
        "metadata_bytes_max": max(sizes) if sizes else None,
        "windows": windows,
    }
    print(json.dumps({k: v for k, v in summary.items() if k != "windows"}), flush=True)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
