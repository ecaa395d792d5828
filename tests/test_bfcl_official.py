"""bfcl's port of BFCL's AST checker against the official one: the same verdict on every possible answer of every scored
category, for the reference call and for calls changed one parameter at a time.

The official checker is imported from the bfcl-eval wheel that install_benchmark_data downloads (zipimport, nothing
installed). Its module imports bfcl_eval.constants.model_config only for one lookup, whether a model's function names
had their dots replaced by underscores; that module imports every model handler (torch, vLLM, the vendors' SDKs), so
a stand-in answers "yes", as BFCL's OpenAI FC handler does.
"""

import copy
import json
import sys
import types

import pytest

from evals.benchmarks import bfcl
from evals.benchmarks.bfcl_checker import check, tool_name
from evals.benchmarks.data import BFCL_EVAL, download

# The port's one documented deviation (bfcl_checker's docstring): the official parallel checker matches greedily, so
# calls that fit the answers one to one are refused when an earlier answer takes a call a later one needed. Here the
# first answer accepts Microsoft or Apple in January, and the calls come Apple first.
GREEDY = {("parallel_178", "in reverse order")}


@pytest.fixture(scope="module")
def official():
    wheel = str(download(BFCL_EVAL, print))
    stand_in = types.ModuleType("bfcl_eval.constants.model_config")
    stand_in.MODEL_CONFIG_MAPPING = {"belvedir": types.SimpleNamespace(underscore_to_dot=True)}
    sys.path.insert(0, wheel)
    sys.modules["bfcl_eval.constants.model_config"] = stand_in
    try:
        from bfcl_eval.constants.enums import Language
        from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker

        yield lambda category, functions, decoded, answers: ast_checker(
            copy.deepcopy(functions), copy.deepcopy(decoded), copy.deepcopy(answers), Language.PYTHON, category, "belvedir"
        )["valid"]
    finally:
        sys.path.remove(wheel)
        for name in [name for name in sys.modules if name == "bfcl_eval" or name.startswith("bfcl_eval.")]:
            del sys.modules[name]


def first(values):
    return next(build(v) for v in values if v != "")


def build(value):
    if isinstance(value, dict) and all(isinstance(v, list) for v in value.values()):
        return {key: first(values) for key, values in value.items() if any(v != "" for v in values)}
    return [build(v) for v in value] if isinstance(value, list) else value


def changed(value) -> list:
    """Other values for a parameter: off by a little, of another type, in another case, emptied, grown, reordered."""
    if isinstance(value, bool):
        return [not value, str(value)]
    if isinstance(value, int):
        return [value + 1, float(value), str(value)]
    if isinstance(value, float):
        return [value + 0.5, int(value) if value == int(value) else str(value)]
    if isinstance(value, str):
        return [value + "x", value.upper(), 7]
    if isinstance(value, list):
        return [[], value + value[:1], [str(item) for item in value] or ["x"], value[::-1]]
    if isinstance(value, dict):
        return [{}, {**value, "extra": 1}, {key: changed(item)[0] for key, item in value.items()}]
    return ["x"]


def candidates(answers: list[dict]):
    """(label, decoded calls): the reference call, then each call changed in one way, the others kept."""
    reference = [
        {tool_name(name): {p: first(v) for p, v in params.items() if any(x != "" for x in v)}} for answer in answers for name, params in answer.items()
    ]
    yield "reference", reference
    if len(reference) > 1:
        yield "in reverse order", reference[::-1]
    yield "no call", []
    yield "one call too many", reference + reference[:1]
    for i, call in enumerate(reference):
        ((name, arguments),) = call.items()

        def instead(new, i=i):
            return [*reference[:i], new, *reference[i + 1 :]]

        yield f"call {i} renamed", instead({name + "x": arguments})
        yield f"call {i} with an unknown parameter", instead({name: {**arguments, "zzz_unknown": 1}})
        for param, value in arguments.items():
            yield f"call {i} without {param}", instead({name: {k: v for k, v in arguments.items() if k != param}})
            for n, other in enumerate(changed(value)):
                yield f"call {i} with {param} changed ({n})", instead({name: {**arguments, param: other}})
        ((_, possible),) = answers[i].items()
        for param, values in possible.items():
            for n, other in enumerate(values[1:]):
                if other != "":
                    yield f"call {i} with {param} as its possible answer {n + 1}", instead({name: {**arguments, param: build(other)}})


def test_the_port_gives_the_official_checkers_verdict_on_every_possible_answer_and_its_variations(official):
    compared, verdicts, differences = 0, {True: 0, False: 0}, set()
    for row in bfcl.BENCHMARK.rows():
        category = row.categories["category"]
        if category in bfcl.RELEVANCE:
            continue  # no possible answers: right on whether a call decodes (test_bfcl)
        for label, decoded in candidates(row["answers"]):
            calls = [{"name": name, "arguments": json.dumps(arguments)} for call in decoded for name, arguments in call.items()]
            ours = check(category, row["functions"], calls, row["answers"]).right
            compared += 1
            verdicts[ours] += 1
            if ours != official(category, row["functions"], decoded, row["answers"]):
                differences.add((row.id, label))
    assert differences == GREEDY
    # Every scored row, and both verdicts well represented: the variations are not all refused.
    assert compared > 50_000 and verdicts[True] > 5_000 and verdicts[False] > 30_000, (compared, verdicts)
