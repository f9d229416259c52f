"""SIGKILL `icemv refresh` and `icemv run` at random moments, on both write paths, and check
what is left.

After each kill, one refresh that completes (in this process) must leave: storage equal to
the oracle, a refresh-state on every storage snapshot, no private `icemv_*` branch, and no
refresh state applied twice. The kill hits the process and every descendant (Python and
its Spark JVM, which runs in a session of its own), as an OOM kill or a node loss would.

`ICEMV_KILL_LOOP_KILLS` sets the kills per write path of `icemv refresh`, and half as many
(at least 2) of the daemon (`make chaos` raises it).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from icemv.format.refresh_state import REFRESH_STATE_KEY
from icemv.identifiers import Identifier
from icemv.lakehouse import Lakehouse
from icemv.mv.history import refresh_history
from icemv.mv.lifecycle import create_mv
from icemv.mv.maintenance import maintain_storage
from icemv.mv.maintenance.branches import private_branches
from icemv.mv.maintenance.expiry import reachable_files
from icemv.mv.model import load_materialized_view
from icemv.refresh.policy import refresh_mv
from icemv.refresh.record import REFRESH_ID_KEY
from tests.support.oracle import assert_matches_oracle
from tests.support.tables import append_trips, create_trips
from tests.test_maintenance import with_maintenance

pytestmark = [pytest.mark.spark, pytest.mark.postgres]

KILLS = int(os.environ.get("ICEMV_KILL_LOOP_KILLS", "5"))
DAEMON_KILLS = max(2, KILLS // 2)
D1 = dt.date(2024, 1, 1)
SQL = "SELECT vendor, count(*) AS n, sum(fare) AS s FROM trips GROUP BY vendor"
DEADLINE_SECONDS = 300.0
BRANCH_TRIGGERS = ("branch-created", "branch-written", "random")
DRIVER_TRIGGERS = ("data-written", "random")


def _config_file(lakehouse: Lakehouse, tmp_path: Path, driver_max_rows: int | None) -> Path:
    config = lakehouse.config
    raw: dict[str, Any] = {
        "home": config.home,
        "catalog": {"uri": config.catalog.uri},
        "warehouse": {"location": config.warehouse.location},
        "spark": {"master": "local[1]", "driver_memory": "1g", "shuffle_partitions": 2},
        "logging": {"format": "json", "level": "INFO"},
    }
    if driver_max_rows is not None:
        raw["refresh"] = {"driver_commit_max_rows": driver_max_rows}
    # `icemv run`: poll-driven (no Kafka), on a free metrics port, no upkeep of its own.
    raw["polling"] = {"interval_seconds": 0.5}
    raw["metrics"] = {"port": 0}
    raw["maintenance"] = {"enabled": False}
    path = tmp_path / f"icemv-{driver_max_rows}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def _start(
    config: Path, mv: Identifier, cwd: Path, command: str = "refresh"
) -> subprocess.Popen[bytes]:
    args = ["refresh", mv.dotted] if command == "refresh" else ["run"]
    return subprocess.Popen(
        [sys.executable, "-m", "icemv.cli.main", "--config", str(config), *args],
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its own process group: the kill takes the JVM too
    )


def _descendants(pid: int) -> list[int]:
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return []
    return [d for child in map(int, children) for d in (child, *_descendants(child))]


def _kill(process: subprocess.Popen[bytes]) -> bool:
    """SIGKILL the process group and every descendant (the JVM has a session of its own);
    False if the refresh had finished already."""
    if process.poll() is not None:
        return False
    descendants = _descendants(process.pid)
    os.killpg(process.pid, signal.SIGKILL)
    for pid in descendants:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    process.wait(timeout=30)
    return True


def _wait_for_branch(
    lakehouse: Lakehouse, storage: Identifier, process: subprocess.Popen[bytes], written: bool
) -> bool:
    """Poll until the refresh made its private branch (`written`: and wrote on it), or
    exited; True if it got there."""
    deadline = time.monotonic() + DEADLINE_SECONDS
    while time.monotonic() < deadline and process.poll() is None:
        branches = private_branches(lakehouse.load_table(storage))
        if any(b.written for b in branches) if written else branches:
            return True
        time.sleep(0.01)
    return False


def _wait_for_new_file(root: Path, process: subprocess.Popen[bytes]) -> bool:
    """Poll until a data file appears under `root` that was not there before, or exit."""
    before = set(root.rglob("*.parquet"))
    deadline = time.monotonic() + DEADLINE_SECONDS
    while time.monotonic() < deadline and process.poll() is None:
        if set(root.rglob("*.parquet")) - before:
            return True
        time.sleep(0.01)
    return False


def _phase(lakehouse: Lakehouse, storage: Identifier, head_before: int | None) -> str:
    table = lakehouse.load_table(storage)
    head = table.current_snapshot()
    if head is not None and head.snapshot_id != head_before:
        return "after-commit"
    branches = private_branches(table)
    if any(b.written for b in branches):
        return "written-not-published"
    if branches:
        return "branch-made-not-written"
    return "before-write"


def _check(lakehouse: Lakehouse, mv: Identifier, storage: Identifier) -> None:
    table = lakehouse.load_table(storage)
    for snapshot in table.snapshots():
        summary = snapshot.summary.additional_properties if snapshot.summary else {}
        assert REFRESH_STATE_KEY in summary, f"snapshot {snapshot.snapshot_id} has no record"
    assert private_branches(table) == []
    history = refresh_history(table)
    refresh_ids = [r.details.get(REFRESH_ID_KEY) for r in history]
    assert len(refresh_ids) == len(set(refresh_ids))
    recorded = [tuple(s.snapshot_id for s in r.state.tables()) for r in history]
    assert len(recorded) == len(set(recorded)), f"a source state was applied twice: {recorded}"
    assert_matches_oracle(lakehouse, mv)


@pytest.mark.parametrize("command", ["refresh", "run"])
@pytest.mark.parametrize("path", ["branch", "driver"])
def test_killed_refreshes_leave_nothing_behind(
    lakehouse: Lakehouse, namespace: str, tmp_path: Path, path: str, command: str
) -> None:
    kills = KILLS if command == "refresh" else DAEMON_KILLS
    rng = random.Random(int(os.environ.get("ICEMV_KILL_LOOP_SEED", "0")) or None)
    config = _config_file(lakehouse, tmp_path, 0 if path == "branch" else None)
    cleanup = with_maintenance(lakehouse, branch_min_age_seconds=0)
    create_trips(lakehouse, namespace, rows=[(1, "a", 1.0, D1)])
    mv = Identifier((namespace,), "agg")
    create_mv(lakehouse, mv, SQL, properties={"icemv.refresh-policy": "incremental"})
    storage = Identifier((namespace,), "agg__storage")

    started = time.monotonic()
    calibration = _start(config, mv, tmp_path)
    assert calibration.wait(timeout=DEADLINE_SECONDS) == 0
    duration = time.monotonic() - started
    location = lakehouse.load_table(storage).location()
    data_dir = Path(location.removeprefix("file://").removeprefix("file:")) / "data"
    phases: Counter[str] = Counter()
    outcomes: Counter[str] = Counter()
    next_id = 100
    reached = False
    for kill in range(kills):
        rows = [(next_id + j, rng.choice("abcd"), float(j), D1) for j in range(rng.randint(1, 4))]
        next_id += len(rows)
        append_trips(lakehouse, namespace, rows)
        head = lakehouse.load_table(storage).current_snapshot()
        process = _start(config, mv, tmp_path, command)
        # Branch path: kill right after the branch appears, right after the write to it
        # (before the publish), or at a random moment; driver path: at a random moment.
        # Driver path: kill as soon as the commit's data file is written, or at random.
        triggers = BRANCH_TRIGGERS if path == "branch" else DRIVER_TRIGGERS
        trigger = triggers[kill % len(triggers)]
        if trigger == "data-written":
            reached = _wait_for_new_file(data_dir, process)
        elif trigger != "random":
            written = trigger == "branch-written"
            reached = _wait_for_branch(lakehouse, storage, process, written)
        if trigger != "random" and reached:
            time.sleep(rng.uniform(0.0, 0.3))
        else:
            deadline = time.monotonic() + rng.uniform(0.7, 1.1) * duration
            while time.monotonic() < deadline and process.poll() is None:
                time.sleep(0.02)
        killed = _kill(process)
        phase = _phase(lakehouse, storage, head.snapshot_id if head else None)
        phases[f"{trigger}: {phase if killed else 'finished-before-kill'}"] += 1
        result = refresh_mv(cleanup, mv)
        outcomes[f"{result.mode} ({result.reason})"] += 1
        _check(lakehouse, mv, storage)

    # What the killed writes left on disk goes with one upkeep pass.
    quick = cleanup.config.maintenance.model_copy(update={"orphan_file_age_seconds": 0})
    maintain_storage(lakehouse, load_materialized_view(lakehouse, mv), quick)
    table = lakehouse.load_table(storage)
    root = Path(table.location().removeprefix("file://").removeprefix("file:"))
    on_disk = {str(p) for p in root.rglob("*") if p.is_file()}
    referenced = {p.removeprefix("file://").removeprefix("file:") for p in reachable_files(table)}
    assert on_disk <= referenced, f"unreferenced files left: {sorted(on_disk - referenced)[:5]}"
    _check(lakehouse, mv, storage)
    summary = {
        "command": command,
        "path": path,
        "kills": kills,
        "calibration_seconds": round(duration, 1),
        "phases": dict(phases),
        "completing_refreshes": dict(outcomes),
    }
    print("KILL-LOOP", json.dumps(summary))
    assert sum(phases.values()) == kills
