"""`icemv mv show` as text (mv/report.py): fits 100 columns, times as local time and age,
history with engine, rows and duration, icemv's own properties only with --verbose."""

from __future__ import annotations

from typing import Any

from icemv.mv.report import age, columns, render_report

NOW = 1_795_855_000_000


def _report() -> dict[str, Any]:
    return {
        "name": "sales.orders_daily",
        "sql": "SELECT date(ordered_at) AS order_date, country, count(*) AS orders, "
        + "sum(amount) AS revenue, " * 8
        + "max(amount) AS top FROM sales.orders GROUP BY date(ordered_at), country",
        "view-version-id": 2,
        "storage-table": "sales.orders_daily__storage",
        "read-sql": "SELECT `order_date`, `country`, `orders`, `revenue`, `top` FROM "
        "`lake`.`sales`.`orders_daily__storage`",
        "properties": {
            "icemv.refresh-policy": "incremental",
            "icemv.storage-table": '{"namespace": ["sales"], "name": "orders_daily__storage"}',
        },
        "state": "fresh",
        "reason": None,
        "staleness-seconds": 0.0,
        "sources": [
            {
                "type": "table",
                "name": "sales.orders",
                "recorded": 7,
                "current": 7,
                "pending": 0,
                "problem": None,
            },
        ],
        "history": [
            {
                "snapshot-id": 5_123_456_789_012_345_678,
                "timestamp-ms": NOW - 190_000,
                "view-version-id": 2,
                "mode": "incremental",
                "reason": "source-changed",
                "engine": "duckdb",
                "rows-inserted": 12,
                "rows-deleted": 3,
                "duration-seconds": 0.412,
                "sources": {"sales.orders": 7},
            },
            {
                "snapshot-id": 4_123_456_789_012_345_678,
                "timestamp-ms": NOW - 7_200_000,
                "view-version-id": 2,
                "mode": "full",
                "reason": "never-refreshed",
                "engine": None,
                "rows-inserted": 40,
                "rows-deleted": 0,
                "duration-seconds": 9.5,
                "sources": {"sales.orders": 6},
            },
        ],
    }


def test_mv_show_fits_100_columns_with_ages_and_a_history_table() -> None:
    text = render_report(_report(), now_ms=NOW)
    lines = text.splitlines()
    assert all(len(line) <= 100 for line in lines), text
    assert "1795" not in text  # no epoch milliseconds
    assert "icemv.storage-table" not in text and "icemv.refresh-policy=incremental" in text
    header = lines.index("  refresh history (2, newest first):")
    assert lines[header + 1].split() == ["when", "mode", "(reason)", "engine", "rows", "took"]
    newest = lines[header + 2]
    assert ", 3m ago" in newest and "incremental (source-changed)" in newest
    assert "duckdb" in newest and "+12 -3" in newest and "0.4 s" in newest
    assert ", 2h ago" in lines[header + 3] and "full (never-refreshed)" in lines[header + 3]
    read = [i for i, line in enumerate(lines) if line.startswith("  read with     : SELECT")]
    assert read and lines[read[0] + 1].strip() == "`lake`.`sales`.`orders_daily__storage`"
    # The SQL wraps under its label.
    sql = [i for i, line in enumerate(lines) if line.startswith("  sql           : ")]
    assert sql and lines[sql[0] + 1].startswith(" " * 18) and lines[sql[0] + 1][18] != " "


def test_mv_show_verbose_adds_internal_properties_and_snapshot_ids() -> None:
    text = render_report(_report(), verbose=True, now_ms=NOW)
    assert "icemv.storage-table=" in text
    assert "5123456789012345678" in text


def test_ages_and_columns() -> None:
    assert [age(s) for s in (0, 59, 60, 3599, 3600, 86400 * 3)] == ["0s", "59s", "1m", "59m",
                                                                   "1h", "3d"]  # fmt: skip
    assert columns(["a", "bb"], [["xyz", "1"]]) == ["a    bb", "xyz  1"]
