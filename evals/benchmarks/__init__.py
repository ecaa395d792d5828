"""The benchmark catalog. Adding a benchmark is one module here, registered below.

Each module exposes NAME, DESCRIPTION, METRIC, GENERATION (default generation
settings), rows() (the full split, in a fixed order), prompt(row) (chat
messages), and score(row, output) -> (score, extracted). A benchmark whose
scoring runs code sets SANDBOXED = True and scores through a CodeSandbox.
"""

from . import gsm8k, humaneval

CATALOG = {module.NAME: module for module in (gsm8k, humaneval)}


def get(name: str):
    return CATALOG.get(name)


def describe(module) -> dict:
    return {
        "name": module.NAME,
        "description": module.DESCRIPTION,
        "rows": len(module.rows()),
        "metric": module.METRIC,
        "generation": module.GENERATION,
    }
