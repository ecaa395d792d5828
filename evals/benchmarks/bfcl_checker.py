"""BFCL's AST match: whether a reply's function calls are among a question's possible answers.

A port, for Python function docs, of the official checker of bfcl-eval
2026.3.23 (bfcl_eval/eval_checker/ast_eval/ast_checker.py, and the relevance
rules of eval_runner.py), read from its source and not imported: the
package's requirements pull in torch. Its rules, kept as they are so that
scores compare with the leaderboard's:

- the function's name as offered (dots replaced, see `tool_name`);
- every required parameter present, none the doc or the answer does not name,
  and a parameter left out only when "" is among its possible answers;
- each value of the doc's type (an int for a float; a bool is no int), and
  among the possible answers: strings compared without case, spaces and
  ",./-_*^", as are the strings in lists and dicts;
- simple: exactly one call; multiple: one call, of the right function;
  parallel: as many calls as answers, matched one to one in any order;
- irrelevance: right when no call decodes (no call, or arguments that are not
  a JSON object); relevance: right when one does.

One deviation: the official parallel checker matches greedily (each answer
takes the first call that fits), and so can refuse calls that fit the answers
one to one when a call fits two answers; here any one-to-one matching counts.
"""

import json
import re
from dataclasses import dataclass

PYTHON_TYPES = {"string": str, "integer": int, "float": float, "boolean": bool, "array": list, "tuple": list, "dict": dict, "any": str}
NESTED = ("array", "tuple")
PUNCTUATION = re.compile(r"[ \,\.\/\-\_\*\^]")


@dataclass(frozen=True)
class Verdict:
    right: bool
    reason: str = ""


class Mismatch(Exception):
    """Why a call is not one of the possible answers."""


def tool_name(name: str) -> str:
    """The name a function is offered under: OpenAI's names match ^[a-zA-Z0-9_-]{1,64}$, so BFCL's handler replaces the dots."""
    return name.replace(".", "_")


def decode(calls: list[dict]) -> list[dict] | None:
    """[{name: arguments}, ...] as BFCL's decode_ast reads OpenAI tool calls; None when one's arguments are not a JSON object."""
    decoded = []
    for call in calls:
        try:
            arguments = json.loads(call["arguments"])
        except (ValueError, TypeError):
            return None
        if type(arguments) is not dict:
            return None
        decoded.append({call["name"]: arguments})
    return decoded


def check(category: str, functions: list[dict], calls: list[dict], answers: list[dict] | None) -> Verdict:
    """The calls ({"name", "arguments"} each, arguments as JSON text) against a row's possible answers."""
    decoded = decode(calls)
    if "irrelevance" in category:
        return Verdict(True) if not decoded else Verdict(False, "A function was called; none fits the question.")
    if "relevance" in category:
        return Verdict(True) if decoded else Verdict(False, "No function was called.")
    if decoded is None:
        return Verdict(False, "A call's arguments are not a JSON object.")
    try:
        if "parallel" in category:
            _parallel(functions, decoded, answers)
        else:
            expected = len(answers) if "multiple" in category else 1
            if len(decoded) != expected:
                raise Mismatch(f"Wrong number of calls: {len(decoded)}, not {expected}.")
            _call(_doc(functions, answers[0]), decoded[0], answers[0])
    except Mismatch as exc:
        return Verdict(False, str(exc))
    return Verdict(True)


def _doc(functions: list[dict], answer: dict) -> dict:
    name = next(iter(answer))
    return next((f for f in functions if f["name"] == name), None) or {"name": name, "parameters": {"properties": {}}}


def _parallel(functions, decoded, answers):
    if len(decoded) != len(answers):
        raise Mismatch(f"Wrong number of calls: {len(decoded)}, not {len(answers)}.")
    fits = [[index for index, call in enumerate(decoded) if _fits(_doc(functions, answer), call, answer)] for answer in answers]
    taken: dict[int, int] = {}  # call index -> answer index

    def assign(answer: int, seen: set) -> bool:
        # Kuhn's augmenting paths: at most a few dozen calls, so quadratic is nothing.
        for index in fits[answer]:
            if index not in seen:
                seen.add(index)
                if index not in taken or assign(taken[index], seen):
                    taken[index] = answer
                    return True
        return False

    for answer in range(len(answers)):
        if not assign(answer, set()):
            raise Mismatch(f"No call matches the expected call to {next(iter(answers[answer]))}.")


def _fits(doc, call, answer) -> bool:
    try:
        _call(doc, call, answer)
    except Mismatch:
        return False
    return True


def _call(doc: dict, call: dict, answer: dict):
    """simple_function_checker: one call against one function's possible answers."""
    possible = next(iter(answer.values()))
    details = doc["parameters"].get("properties", {})
    name = tool_name(doc["name"])
    if name not in call:
        raise Mismatch(f"Function {name!r} not called (called {', '.join(map(repr, call))}).")
    arguments = call[name]
    for param in doc["parameters"].get("required", []):
        if param not in arguments:
            raise Mismatch(f"Missing required parameter {param!r}.")
    for param, value in arguments.items():
        if param not in details or param not in possible:
            raise Mismatch(f"Unexpected parameter {param!r}.")
        _value(param, value, details[param], possible[param])
    for param, values in possible.items():
        if param not in arguments and "" not in values:
            raise Mismatch(f"Parameter {param!r} left out, and it is not optional.")


def _value(param: str, value, detail: dict, possible: list):
    described = detail.get("type", "string")
    expected = PYTHON_TYPES.get(described, str)
    nested = PYTHON_TYPES.get(detail.get("items", {}).get("type")) if described in NESTED else None
    if described == "float" and type(value) is int:
        value = float(value)
    is_variable = _type_check(param, value, possible, expected, nested)
    # An answer of another type than the doc's (a variable's name, say) is matched as it is.
    if not is_variable:
        if expected is dict:
            return _dict(param, value, possible)
        if expected is list and nested is dict:
            return _list_of_dicts(param, value, possible)
        if expected is str:
            if standardize(value) not in [standardize(a) for a in possible if type(a) is str]:
                raise Mismatch(f"Invalid value for {param!r}: {value!r}; expected one of {possible!r}.")
            return
        if expected is list:
            if _standard_list(value) not in [_standard_list(a) for a in possible if isinstance(a, list | str)]:
                raise Mismatch(f"Invalid value for {param!r}: {value!r}; expected one of {possible!r}.")
            return
    if value not in possible:
        raise Mismatch(f"Invalid value for {param!r}: {value!r}; expected one of {possible!r}.")


def _answer_type(possible: list):
    return next((type(answer) for answer in possible if answer != ""), None)


def _type_check(param, value, possible, expected, nested) -> bool:
    """type_checker: the value is of the doc's type (lists one level deep); True when the answers are of another type (a variable)."""
    answer_type = _answer_type(possible)
    is_variable = answer_type is not None and answer_type is not expected
    if type(value) is expected:
        if nested is None:
            return is_variable
        for answer in possible:
            # An answer that is no list ("" for optional) sets no item type: the official checker lets it pass.
            if type(answer) is not list or all(_item_fits(param, item, answer, nested) for item in value):
                return is_variable
        raise Mismatch(f"An item of {param!r} is not of type {nested.__name__}: {value!r}.")
    if answer_type is not None and type(value) is answer_type:
        return True
    raise Mismatch(f"Wrong type for {param!r}: {type(value).__name__}, not {expected.__name__} ({value!r}).")


def _item_fits(param, item, answer, nested) -> bool:
    try:
        _type_check(param, item, answer, nested, None)
    except Mismatch:
        return False
    return True


def standardize(text: str) -> str:
    """BFCL's string normalisation: "April 1, 2024" and "april 1 2024" are the same answer."""
    return PUNCTUATION.sub("", text).lower().replace("'", '"')


def _standard(value):
    return standardize(value) if type(value) is str else value


def _standard_list(values) -> list:
    return [_standard(v) for v in values]


def _dict(param: str, value: dict, possible: list):
    """dict_checker: the keys given are among an answer's, each value among its possible values, and no key left out that is not optional."""
    reason = f"Invalid value for {param!r}: {value!r}."
    if not isinstance(value, dict):
        raise Mismatch(reason)
    for answer in possible:
        if not isinstance(answer, dict):
            continue
        unknown = next((key for key in value if key not in answer), None)
        wrong = next((key for key in value if key in answer and _standard(value[key]) not in _standard_list(answer[key])), None)
        missing = next((key for key, values in answer.items() if key not in value and "" not in values), None)
        if unknown is None and wrong is None and missing is None:
            return
        if unknown is not None:
            reason = f"Unexpected key {unknown!r} in {param!r}."
        elif wrong is not None:
            reason = f"Invalid value for {param!r}[{wrong!r}]: {value[wrong]!r}; expected one of {answer[wrong]!r}."
        else:
            reason = f"Key {missing!r} of {param!r} left out, and it is not optional."
    raise Mismatch(reason)


def _list_of_dicts(param: str, value: list, possible: list):
    """list_dict_checker: the dicts in the answer's order, each as _dict checks it."""
    reason = f"Invalid value for {param!r}: {value!r}."
    for answer in possible:
        # "" (the parameter is optional) reads as no dicts, as the official checker's len("") does.
        answer = [] if answer == "" else answer
        if not isinstance(answer, list) or len(value) != len(answer):
            reason = f"Wrong number of items in {param!r}: {len(value)}."
            continue
        try:
            for item, expected in zip(value, answer, strict=True):
                _dict(param, item, [expected])
        except Mismatch as exc:
            reason = str(exc)
            continue
        return
    raise Mismatch(reason)
