import copy
import json

from ..scoring.base import ScoringError
from . import bfcl_checker
from .base import Benchmark, Row, Score
from .data import BFCL_CATEGORIES, read_jsonl, version_of

QUESTIONS = "bfcl_eval/data/BFCL_v4_{}.json"
ANSWERS = "bfcl_eval/data/possible_answer/BFCL_v4_{}.json"
# Scored on whether a call is made at all: these have no possible answers.
RELEVANCE = ("irrelevance", "live_irrelevance", "live_relevance")
# What the official handler adds to every function doc (bfcl_eval/utils.py, _get_language_specific_hint).
PYTHON_HINT = " Note that the provided function is in Python 3 syntax."
# BFCL's types as JSON schema types (bfcl_eval/constants/type_mappings.py, GORILLA_TO_OPENAPI); any other is a string.
OPENAPI_TYPES = {
    "integer": "integer",
    "number": "number",
    "float": "number",
    "string": "string",
    "boolean": "boolean",
    "bool": "boolean",
    "array": "array",
    "list": "array",
    "dict": "object",
    "object": "object",
    "tuple": "array",
    "any": "string",
}


def files() -> list[str]:
    return [QUESTIONS.format(c) for c in BFCL_CATEGORIES] + [ANSWERS.format(c) for c in BFCL_CATEGORIES if c not in RELEVANCE]


def to_tool(function: dict) -> dict:
    """A BFCL function doc as an OpenAI `tools` entry, as BFCL's OpenAI FC handler converts it (model_handler/utils.py, convert_to_tool)."""
    item = copy.deepcopy(function)
    item["name"] = bfcl_checker.tool_name(item["name"])
    item["description"] = item.get("description", "") + PYTHON_HINT
    parameters = item.setdefault("parameters", {})
    parameters["type"] = "object"
    parameters["properties"] = _schema_types(parameters.get("properties", {}))
    return {"type": "function", "function": item}


def _schema_types(properties: dict) -> dict:
    # Two levels of items, as _cast_to_openai_type converts them (no BFCL doc nests deeper).
    for value in properties.values():
        if value.get("type") == "float":
            value["format"] = "float"
            value["description"] = value.get("description", "") + " This is a float type value."
        value["type"] = OPENAPI_TYPES.get(value.get("type"), "string")
        if value["type"] in ("array", "object"):
            if "properties" in value:
                value["properties"] = _schema_types(value["properties"])
            elif "items" in value:
                items = value["items"]
                items["type"] = OPENAPI_TYPES.get(items.get("type"), "string")
                if items["type"] == "array" and "items" in items:
                    items["items"]["type"] = OPENAPI_TYPES.get(items["items"].get("type"), "string")
                elif items["type"] == "object" and "properties" in items:
                    items["properties"] = _schema_types(items["properties"])
    return properties


def read_reply(output: str) -> tuple[str, list[dict]]:
    """The stored output of a tool-calling row (base.tool_reply): its content and its calls."""
    try:
        reply = json.loads(output)
        calls = [{"name": str(call["name"]), "arguments": call["arguments"]} for call in reply["tool_calls"]]
        return str(reply.get("content") or ""), calls
    except (ValueError, TypeError, KeyError) as exc:
        raise ScoringError(f"The stored reply is not a tool-call reply ({exc}).") from None


def shown(calls: list[dict]) -> str:
    """The calls as the eval page shows them: name(arguments), one after another."""
    if not calls:
        return "no tool call"
    return "; ".join(f"{call['name']}({call['arguments']})" for call in calls)


class BFCL(Benchmark):
    name = "bfcl"
    description = (
        "Berkeley Function Calling Leaderboard v4, single turn: 3,491 questions offering functions as OpenAI tools (simple, multiple, parallel, "
        "parallel_multiple and irrelevance, live and non-live), the calls scored by BFCL's AST match against the possible answers."
    )
    licence = "Apache 2.0"
    source = "BFCL v4's data and possible_answer/ keys (ShishirPatil/gorilla), as shipped in the bfcl-eval 2026.3.23 wheel"
    prompt_format = (
        "Chat with tools, as BFCL's OpenAI FC handler: the question's messages as they are (no system prompt added), its functions as "
        "`tools` (dots in names replaced by _, BFCL types as JSON schema, the Python 3 hint in each description); the reply's tool_calls scored."
    )
    categories = ("category", "group")
    generation = {"temperature": 0, "max_tokens": 1024}
    calls_tools = True

    def load(self):
        rows = []
        for category in BFCL_CATEGORIES:
            answers = {} if category in RELEVANCE else {item["id"]: item["ground_truth"] for item in read_jsonl(ANSWERS.format(category))}
            for item in read_jsonl(QUESTIONS.format(category)):
                messages = item["question"][0]
                rows.append(
                    Row(
                        id=item["id"],
                        input="\n\n".join(m["content"] for m in messages),
                        reference=_reference(category, answers.get(item["id"])),
                        categories={"category": category, "group": "live" if category.startswith("live_") else "non_live"},
                        extra={
                            "messages": messages,
                            "functions": item["function"],
                            "answers": answers.get(item["id"]),
                        },
                    )
                )
        return rows

    def version(self):
        return version_of(files())

    def prompt(self, row):
        return [dict(m) for m in row["messages"]]

    def request_fields(self, row):
        # Converted per request, not at load: a third of a millisecond each, but 1.2 s for all rows at once.
        return {"tools": [to_tool(f) for f in row["functions"]]} if row["functions"] else {}

    async def score(self, row, output, sandbox=None):
        _, calls = read_reply(output)
        verdict = bfcl_checker.check(row.categories["category"], row["functions"], calls, row["answers"])
        return Score(float(verdict.right), shown(calls), detail={"reason": verdict.reason} if verdict.reason else {})


def _reference(category: str, answers) -> str:
    if category in RELEVANCE:
        return "any tool call" if category == "live_relevance" else "no tool call"
    return json.dumps(answers, ensure_ascii=False)


BENCHMARK = BFCL()
