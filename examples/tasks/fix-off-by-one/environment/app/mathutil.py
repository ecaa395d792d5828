def total(n):
    """The sum of 1..n, n included."""
    return sum(range(1, n))
