"""Where a refresh's time goes: wall time by phase, for the log line and the metric, and
the CPU time of the thread that ran it (the Python a phase costs, beside what it waited for:
catalog round trips, file I/O, Spark jobs).

The phases follow the refresh path: `plan` (freshness, pins, the incremental plan; in a
refresh's first attempt also its preparation: leftovers, source MVs, lost columns),
`changes` (the change rows of each moved source, as frames), `patch` (the view delta and
the storage patch: Spark evaluates lazily, so this is where the change rows are read),
`commit` (the storage commit; a full refresh recomputes the view here, as Spark runs the
query while it writes) and `record` (the refresh record read back from the commit).
"""

from __future__ import annotations

import time

PHASES = ("plan", "changes", "patch", "commit", "record")


class PhaseClock:
    """Wall time by phase: `end(name)` charges the time since the previous mark to `name`.

    `spans` keeps when each phase ran, in epoch seconds (from its first start to its last
    end), so refreshes running side by side can be shown to overlap.
    """

    def __init__(self, started: float | None = None) -> None:
        self.seconds: dict[str, float] = {}
        self.cpu_seconds: dict[str, float] = {}
        self.spans: dict[str, tuple[float, float]] = {}
        self._mark = time.perf_counter() if started is None else started
        # The epoch time of `_mark`; perf_counter measures, time.time places.
        self._wall_mark = time.time() - (time.perf_counter() - self._mark)
        self._cpu_mark = time.thread_time()

    def end(self, name: str) -> None:
        if name not in PHASES:
            raise ValueError(f"unknown refresh phase {name!r}")
        now = time.perf_counter()
        self.seconds[name] = round(self.seconds.get(name, 0.0) + now - self._mark, 3)
        cpu = time.thread_time()
        self.cpu_seconds[name] = round(self.cpu_seconds.get(name, 0.0) + cpu - self._cpu_mark, 4)
        self._cpu_mark = cpu
        wall_now = self._wall_mark + (now - self._mark)
        first = self.spans.get(name, (self._wall_mark, wall_now))[0]
        self.spans[name] = (first, wall_now)
        self._mark, self._wall_mark = now, wall_now
