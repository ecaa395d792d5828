"""The benchmark catalog: one module per benchmark, each a `Benchmark` (base.py), registered below.

Adding one: write `evals/benchmarks/<name>.py` with a subclass of
`Benchmark` and an instance named BENCHMARK, then add the module to MODULES.
docs/using/benchmarks.md ("Adding a benchmark") has an example.
"""

from . import arc_challenge, bfcl, gsm8k, hellaswag, humaneval, ifbench, math500, mbpp, mmlu, mt_bench, winogrande
from .base import Benchmark, DataMissing

MODULES = (gsm8k, humaneval, mmlu, arc_challenge, hellaswag, winogrande, math500, mbpp, bfcl, ifbench, mt_bench)
CATALOG: dict[str, Benchmark] = {module.BENCHMARK.name: module.BENCHMARK for module in MODULES}


def get(name: str) -> Benchmark | None:
    return CATALOG.get(name)


def describe(benchmark: Benchmark) -> dict:
    """Its catalog entry; a benchmark whose data is missing is listed with the reason instead of its rows."""
    try:
        return {**benchmark.describe(), "available": True, "problem": ""}
    except DataMissing as exc:
        return {**benchmark.metadata(), "rows": None, "version": None, "available": False, "problem": str(exc)}
