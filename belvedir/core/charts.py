"""Small server-rendered SVG charts: no JavaScript, no CDN, readable without JS."""

import math
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

PALETTE = ["#3b5bdb", "#e8590c", "#2b8a3e", "#ae3ec9", "#1098ad", "#f59f00", "#c92a2a", "#5c940d"]


@dataclass
class Series:
    name: str
    # (x, value): x a datetime or date (placed by time, dates on the axis), a number (placed by value, e.g. seconds),
    # or a label (placed in order).
    points: list[tuple[object, float]]
    # Each point's 95% interval (low, high), drawn as a bar through it; None for a series without.
    intervals: list[tuple[float, float]] | None = None
    # What each point's hover names besides its x (an eval's or run's number); none by default.
    labels: list[str] | None = None


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round values covering [low, high], about `count` of them: steps of 1, 2, 2.5 or 5 times a power of ten, so an
    axis reads 0, 0.25, 0.5 rather than 0.375, 0.469."""
    if high <= low:
        high = low + 1
    raw = (high - low) / max(count - 1, 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw - 1e-12)
    first = math.floor(low / step + 1e-9) * step
    ticks = []
    value = first
    while value < high + step * 0.999:
        ticks.append(round(value, 10))
        value += step
    return ticks


def tick_text(value: float, ticks: list[float]) -> str:
    """A tick's label with as many decimals as its axis's step needs, and no more."""
    step = ticks[1] - ticks[0] if len(ticks) > 1 else 1
    decimals = max(0, -math.floor(math.log10(step) + 1e-9)) + (1 if round(step / 10 ** math.floor(math.log10(step)), 6) == 2.5 else 0)
    return f"{value:,.{decimals}f}"


def _time_ticks(first: datetime, last: datetime) -> tuple[list[datetime], str]:
    """Ticks at whole days (or hours, under two days) across [first, last], and the format to print them."""
    span = (last - first).total_seconds()
    if span >= 2 * 86400:
        days = max(1, math.ceil(span / 86400 / 5))
        start = first.replace(hour=0, minute=0, second=0, microsecond=0)
        ticks = [start + timedelta(days=days * i) for i in range(0, int(span / 86400 / days) + 2)]
        return [t for t in ticks if first <= t <= last] or [first], "%b %d"
    hours = next(h for h in (1, 2, 3, 6, 12, 24) if span / 3600 / h <= 5)
    start = first.replace(minute=0, second=0, microsecond=0)
    ticks = [start + timedelta(hours=hours * i) for i in range(0, int(span / 3600 / hours) + 2)]
    return [t for t in ticks if first <= t <= last] or [first], "%H:%M" if span > 0 else "%b %d %H:%M"


def _as_time(x) -> datetime:
    return x if isinstance(x, datetime) else datetime(x.year, x.month, x.day)


def line_chart(series: list[Series], *, width=720, height=220, y_label="score", x_label="", dots=True) -> SafeString:
    """A line per series, its axes labelled: y at round ticks with `y_label` (its unit), x by time with dates (or by
    value, labelled `x_label`, or in order). `dots` False for long series (a dot each, with its hover label, would
    weigh more than the lines)."""
    values = [v for s in series for _, v in s.points] + [bound for s in series for pair in (s.intervals or []) for bound in pair]
    if not values:
        return mark_safe('<p class="muted">No scores yet: the chart appears after the first scored run.</p>')
    y_ticks = nice_ticks(min(values + [0.0]), max(values))
    low, high = y_ticks[0], y_ticks[-1]
    xs = [x for s in series for x, _ in s.points]
    timed = all(isinstance(x, (datetime, date)) for x in xs)
    numeric = not timed and all(isinstance(x, (int, float)) for x in xs)
    left, right, top, bottom = 52, 16, 22, 34

    if timed:
        first, last = min(map(_as_time, xs)), max(map(_as_time, xs))
        whole = (last - first).total_seconds() or 1

        def place(i, x):
            return (_as_time(x) - first).total_seconds() / whole
    elif numeric:
        x_ticks = nice_ticks(min(xs), max(xs))

        def place(i, x):
            return (x - x_ticks[0]) / (x_ticks[-1] - x_ticks[0])
    else:
        longest = max(len(s.points) for s in series)

        def place(i, x):
            return i / max(longest - 1, 1)

    def px(fraction):
        return left + (width - left - right) * fraction

    def py(v):
        return height - bottom - (height - top - bottom) * ((v - low) / (high - low))

    parts = [format_html('<text x="4" y="12" font-size="11" fill="#475467">{}</text>', y_label)]
    for level in y_ticks:
        parts.append(
            format_html(
                '<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="#e4e7ec"/><text x="{}" y="{}" font-size="11" fill="#475467" text-anchor="end">{}</text>',
                left,
                f"{py(level):.1f}",
                width - right,
                f"{py(level):.1f}",
                left - 6,
                f"{py(level) + 4:.1f}",
                tick_text(level, y_ticks),
            )
        )
    if timed:
        ticks, fmt = _time_ticks(first, last)
        x_marks = [((t - first).total_seconds() / whole, t.strftime(fmt)) for t in ticks]
    elif numeric:
        x_marks = [((t - x_ticks[0]) / (x_ticks[-1] - x_ticks[0]), tick_text(t, x_ticks)) for t in x_ticks]
    else:
        ends = [s.points for s in series if s.points][0]
        x_marks = [(0, str(ends[0][0])), (1, str(ends[-1][0]))] if len(ends) > 1 else [(0, str(ends[0][0]))]
    for fraction, text in x_marks:
        parts.append(
            format_html('<text x="{}" y="{}" font-size="11" fill="#475467" text-anchor="middle">{}</text>', f"{px(fraction):.1f}", height - bottom + 16, text)
        )
    if x_label:
        parts.append(format_html('<text x="{}" y="{}" font-size="11" fill="#475467" text-anchor="end">{}</text>', width - right, height - 2, x_label))
    legend = []
    for n, s in enumerate(series):
        color = PALETTE[n % len(PALETTE)]
        coords = " ".join(f"{px(place(i, x)):.1f},{py(v):.1f}" for i, (x, v) in enumerate(s.points))
        parts.append(format_html('<polyline fill="none" stroke="{}" stroke-width="2" points="{}"/>', color, coords))
        parts += [
            format_html(
                '<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="{}" stroke-width="3" opacity="0.35"/>',
                f"{px(place(i, x)):.1f}",
                f"{py(lo):.1f}",
                f"{px(place(i, x)):.1f}",
                f"{py(hi):.1f}",
                color,
            )
            for i, ((x, _), (lo, hi)) in enumerate(zip(s.points, s.intervals or [], strict=False))
        ]
        parts += [
            format_html(
                '<circle cx="{}" cy="{}" r="3.5" fill="{}"><title>{}{}: {}</title></circle>',
                f"{px(place(i, x)):.1f}",
                f"{py(v):.1f}",
                color,
                f"{s.labels[i]} " if s.labels else "",
                x.strftime("%Y-%m-%d %H:%M") if isinstance(x, datetime) else x,
                f"{v:.4g}",
            )
            for i, (x, v) in enumerate(s.points if dots else [])
        ]
        legend.append((color, s.name))
    legend_html = format_html_join(" ", '<span class="legend"><i style="background:{}"></i>{}</span>', legend) if len(series) > 1 else ""
    over = "over time" if timed else f"by {x_label}" if x_label else "in order"
    return format_html(
        '<figure class="chart"><svg viewBox="0 0 {} {}" role="img" aria-label="{} {}">{}</svg><figcaption>{}</figcaption></figure>',
        width,
        height,
        y_label,
        over,
        mark_safe("".join(parts)),
        legend_html,
    )


@dataclass
class Estimate:
    label: str
    value: float
    low: float
    high: float
    color: str = PALETTE[0]
    # The score's own scale (MT-Bench's 1-10), drawn on the shared 0-1 axis as a share of it.
    scale: tuple[float, float] = (0.0, 1.0)

    def share(self, v: float) -> float:
        low, high = self.scale
        return (v - low) / (high - low)


SHARE_TICKS = [0, 0.25, 0.5, 0.75, 1]


def interval_chart(
    estimates: list[Estimate], *, width=720, label_width=220, row_height=18, title="score", legend: list[tuple[str, str]] | None = None
) -> SafeString:
    """One row per estimate: a dot at its value and a bar over its interval, on a 0-1 axis (scores by category; a
    suite's benchmarks, a colour per deployment, `legend` naming them). An estimate on another scale is drawn as a share of it."""
    if not estimates:
        return mark_safe("")
    height = row_height * len(estimates) + 24
    span = width - label_width - 16

    def x(v):
        return label_width + span * min(max(v, 0.0), 1.0)

    parts = [
        format_html(
            '<line x1="{}" y1="0" x2="{}" y2="{}" stroke="#e4e7ec"/><text x="{}" y="{}" font-size="11" fill="#475467" text-anchor="middle">{}</text>',
            x(t),
            x(t),
            height - 18,
            x(t),
            height - 4,
            tick_text(t, SHARE_TICKS),
        )
        for t in SHARE_TICKS
    ]
    for i, e in enumerate(estimates):
        y = row_height * i + row_height / 2
        parts.append(
            format_html(
                '<g><title>{}: {} (95% CI {}–{})</title><text x="{}" y="{}" font-size="11" text-anchor="end">{}</text>'
                '<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="{}" stroke-width="3" opacity="0.35"/><circle cx="{}" cy="{}" r="4" fill="{}"/></g>',
                e.label,
                f"{e.value:.3f}",
                f"{e.low:.3f}",
                f"{e.high:.3f}",
                label_width - 8,
                f"{y + 4:.1f}",
                e.label,
                f"{x(e.share(e.low)):.1f}",
                f"{y:.1f}",
                f"{x(e.share(e.high)):.1f}",
                f"{y:.1f}",
                e.color,
                f"{x(e.share(e.value)):.1f}",
                f"{y:.1f}",
                e.color,
            )
        )
    legend_html = format_html_join(" ", '<span class="legend"><i style="background:{}"></i>{}</span>', legend) if legend else ""
    return format_html(
        '<figure class="chart"><svg viewBox="0 0 {} {}" role="img" aria-label="{} with 95% intervals">{}</svg><figcaption>{}</figcaption></figure>',
        width,
        height,
        title,
        mark_safe("".join(parts)),
        legend_html,
    )


VERDICT_COLORS = {"better": "#237032", "worse": "#c92a2a"}


def interval_bar(value, bounds, *, scale=(0.0, 1.0), mark=None, mark_label="", color=PALETTE[0], width=320, height=40) -> SafeString:
    """One estimate drawn on its scale: the interval as a bar, the value as a dot, the scale's ends and middle as ticks,
    and `mark` (chance, zero) as a dashed line named `mark_label`."""
    if value is None:
        return mark_safe("")
    low_end, high_end = scale
    pad = 12

    def x(v):
        share = (min(max(v, low_end), high_end) - low_end) / ((high_end - low_end) or 1)
        return pad + (width - 2 * pad) * share

    ticks = nice_ticks(low_end, high_end, 3)
    parts = [format_html('<line x1="{}" y1="18" x2="{}" y2="18" stroke="#e4e7ec" stroke-width="6" stroke-linecap="round"/>', x(low_end), x(high_end))]
    parts += [
        format_html('<text x="{}" y="{}" font-size="10" fill="#475467" text-anchor="middle">{}</text>', f"{x(t):.1f}", height - 2, tick_text(t, ticks))
        for t in ticks
        if low_end <= t <= high_end
    ]
    if mark is not None:
        parts.append(
            format_html(
                '<line x1="{0}" y1="6" x2="{0}" y2="30" stroke="#475467" stroke-dasharray="3 2"><title>{1} {2}</title></line>',
                f"{x(mark):.1f}",
                mark_label,
                f"{mark:.3g}",
            )
        )
    if bounds and bounds[0] is not None:
        parts.append(
            format_html(
                '<line x1="{}" y1="18" x2="{}" y2="18" stroke="{}" stroke-width="6" stroke-linecap="round" opacity="0.45"/>',
                f"{x(bounds[0]):.1f}",
                f"{x(bounds[1]):.1f}",
                color,
            )
        )
    parts.append(format_html('<circle cx="{}" cy="18" r="6" fill="{}"/>', f"{x(value):.1f}", color))
    said = f"{value:.3f}" + (f", 95% interval {bounds[0]:.3f} to {bounds[1]:.3f}" if bounds and bounds[0] is not None else "")
    said += f", {mark_label} {mark:.3g}" if mark is not None else ""
    return format_html(
        '<svg class="interval-bar" viewBox="0 0 {} {}" width="{}" height="{}" role="img" aria-label="{}">{}</svg>',
        width,
        height,
        width,
        height,
        said,
        mark_safe("".join(parts)),
    )


def delta_bar(delta, bounds, verdict: str, *, width=320) -> SafeString:
    """A paired delta and its interval on an axis symmetric about zero, zero marked, coloured by the verdict."""
    if delta is None:
        return mark_safe("")
    reach = max([abs(delta), *(abs(b) for b in (bounds or []) if b is not None), 0.01])
    ticks = nice_ticks(0, reach, 3)
    end = ticks[-1]
    return interval_bar(delta, bounds, scale=(-end, end), mark=0.0, mark_label="no difference", color=VERDICT_COLORS.get(verdict, "#667085"), width=width)
