"""The `make bench` chart: one panel per write mode and delta, two lines per shape."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from tests.benchmarks.chart import refresh_chart

SVG = "{http://www.w3.org/2000/svg}"


def _row(rows: int, mode: str, shape: str, delta: str, incr: float, full: float) -> dict:
    return {
        "base_rows": rows,
        "write_mode": mode,
        "shape": shape,
        "delta": delta,
        "incremental_seconds": incr,
        "full_seconds": full,
    }


def test_chart_draws_incremental_and_full_per_shape_panel_and_size() -> None:
    results = [
        _row(rows, mode, shape, delta, 0.1 * rows / 1e6, 1.0 * rows / 1e6)
        for rows in (1_000_000, 10_000_000)
        for mode in ("merge-on-read", "copy-on-write")
        for shape in ("filter", "dedup")
        for delta in ("append 0.1%", "delete 0.1%", "update 0.1%")
    ]
    root = ET.fromstring(refresh_chart(results))
    lines = root.findall(f"{SVG}polyline")
    assert len(lines) == 2 * 3 * 2 * 2  # modes x deltas x shapes x (incremental, full)
    dashed = [line for line in lines if line.get("stroke-dasharray")]
    assert len(dashed) == len(lines) // 2
    for line in lines:
        points = [tuple(map(float, p.split(","))) for p in line.get("points", "").split()]
        assert len(points) == 2
        assert points[0][0] < points[1][0]  # more rows further right
        assert points[0][1] > points[1][1]  # more seconds higher up (SVG y grows down)
    titles = {t.text for t in root.findall(f"{SVG}text")}
    assert {"merge-on-read, delete 0.1%", "copy-on-write, append 0.1%", "10M rows"} <= titles


def test_full_line_lies_above_a_faster_incremental_line() -> None:
    results = [_row(1_000_000, "merge-on-read", "aggregate", "append 0.1%", 0.05, 0.5),
               _row(50_000_000, "merge-on-read", "aggregate", "append 0.1%", 0.1, 5.0)]  # fmt: skip
    root = ET.fromstring(refresh_chart(results))
    incremental, full = root.findall(f"{SVG}polyline")
    assert full.get("stroke-dasharray") and not incremental.get("stroke-dasharray")

    def ys(line: ET.Element) -> list[float]:
        return [float(p.split(",")[1]) for p in line.get("points", "").split()]

    assert all(f < i for f, i in zip(ys(full), ys(incremental), strict=True))
