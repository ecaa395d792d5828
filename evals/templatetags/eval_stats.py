"""How scores, intervals and deltas print on pages: one format everywhere."""

from django import template

from belvedir.core import charts

register = template.Library()


@register.filter
def interval(bounds, digits: int = 3) -> str:
    """[low, high] → '0.598–0.858' ('-0.410 to -0.077' when negative); empty when there is no interval yet."""
    if not bounds or bounds[0] is None:
        return ""
    return f"{bounds[0]:.{digits}f}{' to ' if bounds[0] < 0 else '–'}{bounds[1]:.{digits}f}"


@register.filter
def signed(value, digits: int = 3) -> str:
    return "—" if value is None else f"{value:+.{digits}f}"


@register.filter
def pvalue(value) -> str:
    if value is None:
        return "—"
    return "< 0.0001" if value < 0.0001 else f"{value:.4f}"


@register.filter
def p_is(value) -> str:
    """A p-value in a sentence: 'p < 0.0001' or 'p = 0.0123' (never 'p = < 0.0001')."""
    if value is None:
        return "p —"
    return "p < 0.0001" if value < 0.0001 else f"p = {value:.4f}"


@register.simple_tag
def score_bar(value, bounds, chance=None, scale=(0.0, 1.0)):
    """The score card's drawing: the score and its 95% interval on its scale, chance marked where it is known."""
    return charts.interval_bar(value, bounds, scale=scale, mark=chance, mark_label="chance")


@register.simple_tag
def delta_bar(delta, bounds, verdict):
    """A comparison's delta and its 95% interval drawn against zero, coloured by the verdict."""
    return charts.delta_bar(delta, bounds, verdict)


@register.filter
def lookup(mapping, key):
    """mapping[key] in a template (a row's labels, attempts), or None."""
    return mapping.get(key) if mapping else None


@register.filter
def ttl(seconds) -> str:
    """A time to live in its largest whole unit: 604800 → '7 days', 5400 → '90 min'."""
    for size, unit in ((86400, "day"), (3600, "hour"), (60, "min")):
        if seconds >= size and seconds % size == 0:
            count = seconds // size
            return f"{count} {unit}{'s' if count != 1 and unit != 'min' else ''}"
    return f"{seconds} s"
