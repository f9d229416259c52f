"""Who computed the deltas of a test's incremental refreshes: counted, and printed in the
test run's summary (the share the embedded engine takes is a target of its own)."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from icemv.refresh.result import RefreshResult

OFF = "embedded engine off"  # refresh/embedded/route.py's reason when a setup turns it off


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
            reason = re.sub(r"^reading [^:]+:", "reading <table>:", result.engine_reason)
            self.spark_because[" ".join(reason.split()[:4])] += 1

    def line(self) -> str:
        total = sum(self.engines.values())
        share = self.engines["duckdb"] / total if total else 0.0
        # The share the target is about: deltas of setups that leave the engine on.
        off = sum(n for why, n in self.spark_because.items() if why.startswith(OFF))
        on = total - off
        on_share = self.engines["duckdb"] / on if on else 0.0
        because = ", ".join(f"{n} {why}" for why, n in self.spark_because.most_common(6))
        return (
            f"{self.label}: {total} incremental refreshes with a delta, {share:.0%} on DuckDB "
            f"({dict(self.engines)}; {on_share:.0%} of the {on} with the engine on); "
            f"Spark because: {because or '-'}"
        )

    def report(self, config: pytest.Config) -> None:
        """The share so far (a module fixture may end once per catalog kind: the last
        report, over the whole module, is the one kept)."""
        if self.engines:
            summary_line(config, self.line(), key=self.label)


_SUMMARY = pytest.StashKey[dict[str, str]]()


def summary_line(config: pytest.Config, line: str, key: str | None = None) -> None:
    """A line for the run's terminal summary (tests/conftest.py prints them there: what a
    test or fixture writes to the terminal while it runs is captured); a later line of
    the same `key` replaces the earlier."""
    lines = config.stash.setdefault(_SUMMARY, {})
    lines[key if key is not None else f"#{len(lines)}"] = line


def summary_lines(config: pytest.Config) -> list[str]:
    return list(config.stash.get(_SUMMARY, {}).values())
