"""Small server-rendered SVG charts: no JavaScript, no CDN, readable without JS."""

from dataclasses import dataclass

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

PALETTE = ["#3b5bdb", "#e8590c", "#2b8a3e", "#ae3ec9", "#1098ad", "#f59f00", "#c92a2a", "#5c940d"]


@dataclass
class Series:
    name: str
    points: list[tuple[str, float]]  # (label shown on hover, value)
    # Each point's 95% interval (low, high), drawn as a bar through it; None for a series without.
    intervals: list[tuple[float, float]] | None = None


def line_chart(series: list[Series], *, width=720, height=220, y_label="score", dots=True) -> SafeString:
    """A line per series over the points' order; `dots` False for long series (a dot each, with its hover
    label, would weigh more than the lines)."""
    values = [v for s in series for _, v in s.points] + [bound for s in series for pair in (s.intervals or []) for bound in pair]
    if not values:
        return mark_safe('<p class="muted">No scores yet: the chart appears after the first scored run.</p>')
    low, high = min(values + [0.0]), max(values)
    if high == low:
        high = low + 1
    pad, longest = 36, max(len(s.points) for s in series)

    def x(i):
        return pad + (width - 2 * pad) * (i / max(longest - 1, 1))

    def y(v):
        return height - pad - (height - 2 * pad) * ((v - low) / (high - low))

    parts = [
        format_html('<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="#e4e7ec"/>', pad, f"{y(level):.1f}", width - pad, f"{y(level):.1f}")
        for level in (low, (low + high) / 2, high)
    ]
    parts += [
        format_html('<text x="4" y="{}" font-size="11" fill="#667085">{}</text>', f"{y(level) + 4:.1f}", f"{level:.3g}")
        for level in (low, (low + high) / 2, high)
    ]
    legend = []
    for n, s in enumerate(series):
        color = PALETTE[n % len(PALETTE)]
        coords = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, (_, v) in enumerate(s.points))
        parts.append(format_html('<polyline fill="none" stroke="{}" stroke-width="2" points="{}"/>', color, coords))
        parts += [
            format_html(
                '<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="{}" stroke-width="2" opacity="0.35"/>',
                f"{x(i):.1f}",
                f"{y(low):.1f}",
                f"{x(i):.1f}",
                f"{y(high):.1f}",
                color,
            )
            for i, (low, high) in enumerate(s.intervals or [])
        ]
        parts += [
            format_html('<circle cx="{}" cy="{}" r="3.5" fill="{}"><title>{}: {}</title></circle>', f"{x(i):.1f}", f"{y(v):.1f}", color, label, f"{v:.4g}")
            for i, (label, v) in enumerate(s.points if dots else [])
        ]
        legend.append((color, s.name))
    legend_html = format_html_join(" ", '<span class="legend"><i style="background:{}"></i>{}</span>', legend) if len(series) > 1 else ""
    return format_html(
        '<figure class="chart"><svg viewBox="0 0 {} {}" role="img" aria-label="{} over time">{}</svg><figcaption>{}</figcaption></figure>',
        width,
        height,
        y_label,
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
            '<line x1="{}" y1="0" x2="{}" y2="{}" stroke="#e4e7ec"/><text x="{}" y="{}" font-size="11" fill="#667085">{}</text>',
            x(t),
            x(t),
            height - 18,
            x(t) - 6,
            height - 4,
            t,
        )
        for t in (0, 0.5, 1)
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
