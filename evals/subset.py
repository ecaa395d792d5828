import random


def select_rows(row_count: int, sample_limit: int | None, seed: int) -> list[int]:
    """The row indices an eval scores: the same for the same (count, limit, seed), forever.

    A resumed eval calls this again and gets exactly the rows it started with.
    """
    if not sample_limit or sample_limit >= row_count:
        return list(range(row_count))
    return sorted(random.Random(seed).sample(range(row_count), sample_limit))
