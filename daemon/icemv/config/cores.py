"""The cores this process may use: what `refresh.max_concurrent` and `refresh.processes`
default to.

`os.cpu_count()` is the host's count; in a container it overstates what the process gets.
Two limits apply: the CPU affinity mask (a cpuset, `taskset`) and the cgroup's CPU quota
(Kubernetes' `resources.limits.cpu`: cgroup v2 `cpu.max`, v1 `cpu.cfs_quota_us` over
`cpu.cfs_period_us`), rounded up. A pod with only a CPU request has no quota: its count is
the node's (mask) cores, so a chart that requests CPU also sets both settings.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

CGROUP = Path("/sys/fs/cgroup")


def available_cores(cgroup: Path = CGROUP) -> int:
    """The affinity mask's cores, capped by the cgroup's CPU quota; at least 1."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    quota = cpu_quota(cgroup)
    if quota is not None:
        cores = min(cores, math.ceil(quota))
    return max(1, cores)


def cpu_quota(cgroup: Path = CGROUP) -> float | None:
    """The CPU quota in cores (2.5 for `250000 100000`); None: no quota, or none readable."""
    try:
        v2 = (cgroup / "cpu.max").read_text().split()
    except OSError:
        v2 = []
    if len(v2) == 2:
        return _ratio(v2[0], v2[1])
    try:
        quota = (cgroup / "cpu" / "cpu.cfs_quota_us").read_text().strip()
        period = (cgroup / "cpu" / "cpu.cfs_period_us").read_text().strip()
    except OSError:
        return None
    return _ratio(quota, period)


def _ratio(quota: str, period: str) -> float | None:
    try:
        value, every = int(quota), int(period)
    except ValueError:  # "max": no quota
        return None
    return value / every if value > 0 and every > 0 else None
