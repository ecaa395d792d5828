"""How an amount in cents is written, everywhere: pages, messages, admin, API and exports."""


def dollars(cents) -> str:
    """1234 → '$12.34', 123456 → '$1,234.56', -50 → '−$0.50' (a true minus sign); None → ''."""
    if cents is None or cents == "":
        return ""
    cents = int(cents)
    sign = "−" if cents < 0 else ""
    return f"{sign}${abs(cents) / 100:,.2f}"


def plain_dollars(cents) -> str:
    """1234 → '12.34': the API's decimal string, a CSV cell or a form value (no sign of currency, no separators)."""
    return f"{int(cents) / 100:.2f}"
