"""Small server-rendered SVG charts: no JavaScript, nothing fetched by the browser.

Every data point is drawn as an element with class ``mark``; labels are escaped here, because
the result is inserted into the page as markup.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

import numpy as np

WIDTH, HEIGHT = 560, 300
LEFT, RIGHT, TOP, BOTTOM = 60, 150, 16, 44  # room for the axes and the legend
COLORS = ("#1f6fb2", "#d9480f", "#2b8a3e", "#862e9c", "#c92a2a", "#5f3dc4", "#e67700", "#0b7285")


@dataclass(frozen=True)
class Point:
    x: float
    y: float
    err: float = 0.0  # half-height of the error bar
    title: str = ""  # tooltip


@dataclass(frozen=True)
class Series:
    name: str
    points: Sequence[Point]
    line: bool = True


@dataclass(frozen=True)
class Rule:
    """A horizontal or vertical reference line, such as the baseline or a latency target."""

    label: str
    value: float
    vertical: bool = False


def _ticks(low: float, high: float) -> list[float]:
    if high <= low:
        high = low + 1.0
    step = 10 ** np.floor(np.log10((high - low) / 4))
    for factor in (1, 2, 5, 10):
        if (high - low) / (step * factor) <= 6:
            step *= factor
            break
    values = np.arange(np.ceil(low / step) * step, high + step / 2, step)
    return [round(float(v), 10) for v in values if v <= high + step * 1e-9]


def _fmt(value: float) -> str:
    return f"{value:g}" if abs(value) < 1e4 else f"{value:.3g}"


def xy_chart(chart_id: str, series: Sequence[Series], x_label: str, y_label: str,
             rules: Sequence[Rule] = (), y_from_zero: bool = False) -> str:
    """A line/scatter chart with error bars; an empty chart says so instead of drawing axes."""
    points = [p for s in series for p in s.points]
    if not points:
        return (f'<svg id="{chart_id}" class="chart" viewBox="0 0 {WIDTH} 60" role="img">'
                f'<text x="10" y="35">no data yet</text></svg>')
    xs = [p.x for p in points] + [r.value for r in rules if r.vertical]
    ys = ([p.y - p.err for p in points] + [p.y + p.err for p in points]
          + [r.value for r in rules if not r.vertical] + ([0.0] if y_from_zero else []))
    x_lo, x_hi = min(xs), max(xs)
    pad = (x_hi - x_lo) * 0.05 or 0.5
    x_lo, x_hi = x_lo - pad, x_hi + pad
    y_lo, y_hi = min(ys), max(ys)
    pad = (y_hi - y_lo) * 0.08 or abs(y_hi) * 0.1 or 1.0
    y_lo, y_hi = (0.0 if y_from_zero else y_lo - pad), y_hi + pad
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def sx(x: float) -> float:
        return LEFT + (x - x_lo) / (x_hi - x_lo) * plot_w

    def sy(y: float) -> float:
        return TOP + (1 - (y - y_lo) / (y_hi - y_lo)) * plot_h

    out = [f'<svg id="{chart_id}" class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
           f'aria-label="{escape(y_label)} by {escape(x_label)}">']
    for t in _ticks(y_lo, y_hi):
        out.append(f'<line class="grid" x1="{LEFT}" x2="{LEFT + plot_w}" y1="{sy(t):.1f}" y2="{sy(t):.1f}"/>'
                   f'<text class="tick" x="{LEFT - 6}" y="{sy(t) + 4:.1f}" text-anchor="end">{_fmt(t)}</text>')
    whole_x = all(float(p.x).is_integer() for p in points)  # k, positions, study numbers
    for t in _ticks(x_lo, x_hi):
        if whole_x and not t.is_integer():
            continue
        out.append(f'<text class="tick" x="{sx(t):.1f}" y="{TOP + plot_h + 16}" text-anchor="middle">{_fmt(t)}</text>')
    out.append(f'<line class="axis" x1="{LEFT}" x2="{LEFT + plot_w}" y1="{TOP + plot_h}" y2="{TOP + plot_h}"/>'
               f'<line class="axis" x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{TOP + plot_h}"/>'
               f'<text class="label" x="{LEFT + plot_w / 2}" y="{HEIGHT - 6}" text-anchor="middle">{escape(x_label)}</text>'
               f'<text class="label" transform="translate(14 {TOP + plot_h / 2}) rotate(-90)" '
               f'text-anchor="middle">{escape(y_label)}</text>')
    for rule in rules:
        if rule.vertical:
            x = sx(rule.value)
            out.append(f'<line class="rule" x1="{x:.1f}" x2="{x:.1f}" y1="{TOP}" y2="{TOP + plot_h}"/>'
                       f'<text class="rule-label" x="{x + 3:.1f}" y="{TOP + 10}">{escape(rule.label)}</text>')
        else:
            y = sy(rule.value)
            out.append(f'<line class="rule" x1="{LEFT}" x2="{LEFT + plot_w}" y1="{y:.1f}" y2="{y:.1f}"/>'
                       f'<text class="rule-label" x="{LEFT + 4}" y="{y - 4:.1f}">{escape(rule.label)}</text>')
    for i, s in enumerate(series):
        color = COLORS[i % len(COLORS)]
        ordered = sorted(s.points, key=lambda p: p.x)
        if s.line and len(ordered) > 1:
            path = " ".join(f"{sx(p.x):.1f},{sy(p.y):.1f}" for p in ordered)
            out.append(f'<polyline class="series" fill="none" stroke="{color}" points="{path}"/>')
        for p in ordered:
            if p.err:
                out.append(f'<line class="errbar" stroke="{color}" x1="{sx(p.x):.1f}" x2="{sx(p.x):.1f}" '
                           f'y1="{sy(p.y - p.err):.1f}" y2="{sy(p.y + p.err):.1f}"/>')
            out.append(f'<circle class="mark" r="4" fill="{color}" cx="{sx(p.x):.1f}" cy="{sy(p.y):.1f}">'
                       f'<title>{escape(p.title or f"{s.name}: {_fmt(p.y)}")}</title></circle>')
        y_legend = TOP + 14 + 18 * i
        out.append(f'<rect x="{LEFT + plot_w + 12}" y="{y_legend - 9}" width="10" height="10" fill="{color}"/>'
                   f'<text class="legend" x="{LEFT + plot_w + 26}" y="{y_legend}">{escape(s.name[:22])}</text>')
    out.append("</svg>")
    return "".join(out)
