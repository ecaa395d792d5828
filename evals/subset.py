import hashlib
import random


def select_rows(row_count: int, sample_limit: int | None, seed: int) -> list[int]:
    """The row indices an eval scores: the same for the same (count, limit, seed), forever.

    A resumed eval calls this again and gets exactly the rows it started with.
    """
    if not sample_limit or sample_limit >= row_count:
        return list(range(row_count))
    return sorted(random.Random(seed).sample(range(row_count), sample_limit))


def run_order(indices) -> list[int]:
    """The order an eval sends its rows in: one fixed shuffle of every row index, the same for every eval.

    So what an eval has stored is about a prefix of this order, and two evals of the
    same rows share theirs: a comparison can stop on it (evals/sequential.py), and
    a cancelled or budget-stopped eval is a random sample of its rows instead of the
    first subjects of a file sorted by subject (MMLU). A hash of the index, not the
    eval's seed, so that two evals of the full split (each its own seed) agree, and
    any subset of rows keeps the order of the whole.
    """
    return sorted(indices, key=_rank)


def _rank(index: int) -> bytes:
    return hashlib.blake2b(index.to_bytes(8, "little"), digest_size=8, person=b"bv-order").digest()
