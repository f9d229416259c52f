"""An SVG chart of `make bench` results: incremental and full time against base rows.

One panel per write mode (rows) and delta (columns); in each, one colour per MV shape,
the incremental refresh a solid line with dots and the full recompute a dashed line, both
axes logarithmic. Plain SVG text, no plotting library, so `make bench` needs nothing more.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any
from xml.sax.saxutils import escape

COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf"]
PANEL_W, PANEL_H = 260, 200
TITLE = "icemv refresh: incremental (solid, dots) vs full recompute (dashed, rings)"
MARGIN_L, MARGIN_T, GAP_X, GAP_Y = 60, 70, 80, 60
PAD = 0.08  # of a panel's width, left and right of the first and last size


def _log_range(values: Iterable[float]) -> tuple[float, float]:
    logs = [math.log10(v) for v in values if v > 0]
    low, high = math.floor(min(logs)), math.ceil(max(logs))
    return (low, high) if high > low else (low, low + 1)


def _rows_label(rows: int) -> str:
    return f"{rows // 1_000_000}M" if rows >= 1_000_000 else f"{rows // 1000}k"


def _seconds_label(power: int) -> str:
    return f"{10.0**power:g} s"


def refresh_chart(results: Sequence[dict[str, Any]], title: str = "") -> str:
    """The SVG text for `results` (rows of bench_refresh's JSON)."""
    modes = list(dict.fromkeys(r["write_mode"] for r in results))
    deltas = list(dict.fromkeys(r["delta"] for r in results))
    shapes = list(dict.fromkeys(r["shape"] for r in results))
    sizes = sorted({int(r["base_rows"]) for r in results})
    seconds = [r["incremental_seconds"] for r in results] + [r["full_seconds"] for r in results]
    y_low, y_high = _log_range(seconds)
    x_low, x_high = math.log10(sizes[0]), math.log10(sizes[-1])
    x_span = (x_high - x_low) or 1.0
    width = MARGIN_L + len(deltas) * (PANEL_W + GAP_X)
    height = MARGIN_T + len(modes) * (PANEL_H + GAP_Y)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="sans-serif" font-size="11">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{MARGIN_L}" y="18" font-size="14">{escape(title or TITLE)}</text>',
    ]
    for i, shape in enumerate(shapes):  # legend
        x = MARGIN_L + i * 170
        colour = COLOURS[i % len(COLOURS)]
        out.append(f'<line x1="{x}" y1="34" x2="{x + 20}" y2="34" stroke="{colour}" '
                   'stroke-width="2"/>')  # fmt: skip
        out.append(f'<text x="{x + 24}" y="38">{escape(shape)}</text>')
    for row, mode in enumerate(modes):
        for col, delta in enumerate(deltas):
            left = MARGIN_L + col * (PANEL_W + GAP_X)
            top = MARGIN_T + row * (PANEL_H + GAP_Y)

            def px(rows: int, left: int = left) -> float:
                share = PAD + (math.log10(rows) - x_low) / x_span * (1 - 2 * PAD)
                return left + share * PANEL_W

            def py(value: float, top: int = top) -> float:
                share = (math.log10(max(value, 10.0**y_low)) - y_low) / (y_high - y_low)
                return top + PANEL_H - share * PANEL_H

            out.append(f'<rect x="{left}" y="{top}" width="{PANEL_W}" height="{PANEL_H}" '
                       'fill="none" stroke="#999"/>')  # fmt: skip
            out.append(f'<text x="{left}" y="{top - 6}">{escape(mode)}, {escape(delta)}</text>')
            for power in range(y_low, y_high + 1):
                y = py(10.0**power)
                out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + PANEL_W}" '
                           f'y2="{y:.1f}" stroke="#eee"/>')  # fmt: skip
                out.append(f'<text x="{left - 4}" y="{y + 4:.1f}" text-anchor="end">'
                           f"{_seconds_label(power)}</text>")  # fmt: skip
            for rows in sizes:
                out.append(f'<text x="{px(rows):.1f}" y="{top + PANEL_H + 14}" '
                           f'text-anchor="middle">{_rows_label(rows)} rows</text>')  # fmt: skip
            for i, shape in enumerate(shapes):
                colour = COLOURS[i % len(COLOURS)]
                points = sorted(
                    (int(r["base_rows"]), r["incremental_seconds"], r["full_seconds"])
                    for r in results
                    if r["write_mode"] == mode and r["delta"] == delta and r["shape"] == shape
                )
                for index, dash in ((1, ""), (2, ' stroke-dasharray="5,3"')):
                    line = " ".join(f"{px(p[0]):.1f},{py(p[index]):.1f}" for p in points)
                    out.append(f'<polyline points="{line}" fill="none" stroke="{colour}" '
                               f'stroke-width="1.5"{dash}/>')  # fmt: skip
                for p in points:  # incremental filled, full hollow
                    out.append(f'<circle cx="{px(p[0]):.1f}" cy="{py(p[1]):.1f}" r="2.5" '
                               f'fill="{colour}"/>')  # fmt: skip
                    out.append(f'<circle cx="{px(p[0]):.1f}" cy="{py(p[2]):.1f}" r="3" '
                               f'fill="white" stroke="{colour}"/>')  # fmt: skip
    out.append("</svg>")
    return "\n".join(out) + "\n"
