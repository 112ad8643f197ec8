"""A stacked bar chart as inline SVG: one bar per logical day, stacked by operation and outcome, a
mark over days with a failed run. Plain SVG needs no script and no library, so the page renders the
same in the Airflow UI's frame, in a screenshot and with JavaScript off."""

from __future__ import annotations

from html import escape

from airflow_reverse_etl.ui.summary import OPERATIONS, OUTCOMES, Day

#: stack colours, bottom to top; shared with the page's legend
COLOURS = {"inserted": "#2f9e44", "updated": "#1c7ed6", "deleted": "#868e96", "rejected": "#e03131"}
BAR, GAP, HEIGHT, AXIS, TOP, LEFT = 26, 12, 120, 18, 16, 44


def _tick(value: int) -> str:
    return f"{value / 1000:.1f}k" if value >= 10_000 else str(value)


def stacked_bars(days: list[Day]) -> str:
    """The chart of ``days`` as an ``<svg>`` element (an empty-state note when there are none)."""
    if not days:
        return '<p class="empty">No deliveries yet.</p>'
    series = OPERATIONS + OUTCOMES
    peak = max(1, *(sum(getattr(day, s) for s in series) for day in days))
    width = LEFT + len(days) * (BAR + GAP) + GAP
    height = TOP + HEIGHT + AXIS
    scale = HEIGHT / peak
    parts = [
        (f'<svg class="chart" role="img" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
         'xmlns="http://www.w3.org/2000/svg">'),
        f'<text class="tick" x="{LEFT - 6}" y="{TOP + 4}" text-anchor="end">{_tick(peak)}</text>',
        f'<text class="tick" x="{LEFT - 6}" y="{TOP + HEIGHT}" text-anchor="end">0</text>',
        f'<line x1="{LEFT}" y1="{TOP + HEIGHT}" x2="{width}" y2="{TOP + HEIGHT}" stroke="#ced4da"/>',
    ]
    for index, day in enumerate(days):
        x = LEFT + GAP + index * (BAR + GAP)
        y = TOP + HEIGHT
        summary = ", ".join(f"{getattr(day, s)} {s}" for s in series)
        parts.append(f'<g class="bar" data-day="{escape(day.day)}"><title>{escape(day.day)}: {summary}; '
                     f'{day.runs} run(s), {day.failed} failed</title>')
        for name in series:
            value = getattr(day, name)
            if value:
                h = max(value * scale, 1.0)
                y -= h
                parts.append(f'<rect x="{x}" y="{y:.1f}" width="{BAR}" height="{h:.1f}" fill="{COLOURS[name]}"/>')
        if day.failed:
            parts.append(f'<text class="failed" x="{x + BAR / 2}" y="{y - 3:.1f}" text-anchor="middle" '
                         f'fill="{COLOURS["rejected"]}">&#x2716;</text>')
        parts.append(f'<text class="tick" x="{x + BAR / 2}" y="{height - 4}" text-anchor="middle">'
                     f'{escape(day.day[5:])}</text></g>')
    parts.append("</svg>")
    return "".join(parts)
