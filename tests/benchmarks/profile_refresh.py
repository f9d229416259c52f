"""Where a small refresh's driver CPU goes: `make profile-refresh`.

    python -m tests.benchmarks.profile_refresh --rows 200000 --mvs 7 --commits 12

The fleet bench's source, dimension and MV shapes (tests/benchmarks/bench_fleet.py), `--mvs`
MVs, refreshed one after the other in this process (no daemon, no workers: the CPU is the
refresh's own) after each of `--commits` appends of `--append` rows by another writer
(pyiceberg). The first `--warm` commits are left out: the first refresh after an MV is
made is a full one, the next meets the MV's trees for the first time. The measured commits
take turns: timed alone (cProfile's overhead would double the times), then profiled.
Prints the median CPU time of a refresh by phase beside its total and wall time, per
shape and over all (the timed commits), and the functions that took most of the
refreshes' CPU (the profiled ones; cumulative and own time), so a change to the refresh
path can be weighed by what it saves.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import pstats
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from icemv.identifiers import Identifier
from icemv.logs import configure_logging
from icemv.refresh.phases import PHASES
from icemv.refresh.policy import refresh_mv
from icemv.refresh.result import RefreshResult
from tests.benchmarks.bench_concurrency import _lakehouse
from tests.benchmarks.bench_fleet import SHAPE_NAMES, Fleet
from tests.benchmarks.bench_latency import append_batch
from tests.benchmarks.bench_refresh import machine


def _median_ms(values: list[float]) -> float:
    return statistics.median(values) * 1000 if values else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--mvs", type=int, default=7)
    parser.add_argument("--commits", type=int, default=12)
    parser.add_argument("--warm", type=int, default=2, help="first commits left out")
    parser.add_argument("--append", type=int, default=1000)
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--dump", default="bench-results/profile-refresh.prof",
                        help="cProfile's data, for pstats")  # fmt: skip
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="icemv-profile-"))
    print(f"machine: {machine()}")
    with contextlib.ExitStack() as cleanup:
        from tests.conftest import ADMIN_URL, create_database, drop_database

        catalog = create_database(ADMIN_URL)
        cleanup.callback(drop_database, ADMIN_URL, catalog)
        lakehouse = _lakehouse(catalog, workdir, args.master, fifo=False)
        configure_logging(lakehouse.config.logging)
        fleet = Fleet(lakehouse, args.rows)
        fleet.grow(args.mvs)
        mvs = list(fleet.storage)
        profile = cProfile.Profile()
        results: dict[str, list[RefreshResult]] = defaultdict(list)
        walls: dict[str, list[float]] = defaultdict(list)
        for commit in range(args.commits):
            append_batch(lakehouse, fleet.base, fleet.next_id, args.append, None)
            fleet.next_id += args.append
            for mv in mvs:
                shape = _shape(mv)
                started = time.perf_counter()
                # measured commits in turn: timed alone, then profiled (cProfile's own
                # overhead would double the times)
                profiled = commit >= args.warm and (commit - args.warm) % 2 == 1
                if profiled:
                    profile.enable()
                result = refresh_mv(lakehouse, mv)
                if profiled:
                    profile.disable()
                elif commit >= args.warm:
                    results[shape].append(result)
                    walls[shape].append(time.perf_counter() - started)
                assert result.engine in (None, "duckdb"), (mv, result.engine_reason)
        from icemv.engine.spark import stop_spark

        stop_spark()
    _print_phases(results, walls)
    Path(args.dump).parent.mkdir(parents=True, exist_ok=True)
    profile.dump_stats(args.dump)
    text = io.StringIO()
    stats = pstats.Stats(profile, stream=text).strip_dirs()
    stats.sort_stats("cumulative").print_stats(args.top)
    stats.sort_stats("tottime").print_stats(args.top)
    print(text.getvalue())


def _shape(mv: Identifier) -> str:
    name = mv.name.split("_", 1)[1]  # mv007_by_hour
    assert name in SHAPE_NAMES, mv
    return name


def _print_phases(results: dict[str, list[RefreshResult]], walls: dict[str, list[float]]) -> None:
    print("\nmedian per refresh, ms: CPU by phase, CPU total, wall")
    print(f"{'shape':16} {'n':>3} " + " ".join(f"{p:>7}" for p in PHASES) + "    CPU   wall")
    every: list[RefreshResult] = []
    for shape, done in sorted(results.items()):
        every += done
        _print_row(shape, done, walls[shape])
    _print_row("all", every, [w for ws in walls.values() for w in ws])


def _print_row(name: str, done: list[RefreshResult], walls: list[float]) -> None:
    phases = [_median_ms([r.phase_cpu_seconds.get(p, 0.0) for r in done]) for p in PHASES]
    total = _median_ms([sum(r.phase_cpu_seconds.values()) for r in done])
    print(
        f"{name:16} {len(done):>3} "
        + " ".join(f"{ms:>7.1f}" for ms in phases)
        + f" {total:>6.1f} {_median_ms(walls):>6.1f}"
    )


if __name__ == "__main__":
    main()
