from django import template

register = template.Library()


@register.filter
def dollars(cents) -> str:
    """1234 → '$12.34'; -50 → '−$0.50'."""
    if cents is None or cents == "":
        return ""
    cents = int(cents)
    sign = "−" if cents < 0 else ""
    return f"{sign}${abs(cents) / 100:,.2f}"


@register.filter
def dollars_plain(cents) -> str:
    """1000 → '10.00', for form values."""
    return f"{int(cents) / 100:.2f}"
