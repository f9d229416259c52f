"""Who computed the deltas of a test's incremental refreshes: counted, and printed in the
test run's summary (the share the embedded engine takes is a target of its own)."""

from __future__ import annotations

from collections import Counter

import pytest

from icemv.refresh.result import RefreshResult


class EngineShare:
    def __init__(self, label: str) -> None:
        self.label = label
        self.engines: Counter[str] = Counter()
        self.spark_because: Counter[str] = Counter()

    def add(self, result: RefreshResult) -> None:
        if result.mode != "incremental" or result.engine is None:
            return
        self.engines[result.engine] += 1
        if result.engine == "spark" and result.engine_reason:
            self.spark_because[" ".join(result.engine_reason.split()[:4])] += 1

    def line(self) -> str:
        total = sum(self.engines.values())
        share = self.engines["duckdb"] / total if total else 0.0
        because = ", ".join(f"{n} {why}" for why, n in self.spark_because.most_common(6))
        return (
            f"{self.label}: {total} incremental refreshes with a delta, {share:.0%} on DuckDB "
            f"({dict(self.engines)}); Spark because: {because or '-'}"
        )

    def report(self, config: pytest.Config) -> None:
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None and self.engines:
            reporter.write_line(self.line())
