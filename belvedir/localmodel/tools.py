"""Function tools for a model that has no tool-call tokens: described in the prompt, called in `<tool_call>` blocks.

The format is the one SmolLM2-Instruct's model card gives (its function-calling
data, APIGen's): the tools' JSON schemas inside `<tools></tools>` in the system
message, and the calls as a JSON list, `<tool_call>[{"name": …, "arguments":
{…}}]</tool_call>`, in the answer (one object per block, as Hermes and vLLM's
`hermes` parser write it, is read too). Past calls and their results go back
into the prompt in the same shape, so the model sees its trajectory as it
wrote it. The 135M model mostly answers in prose (measured: none of three
shell tasks got a call at temperature 0): that is its real answer and stays
text, as vLLM leaves it.
"""

import json
import re
import uuid
from dataclasses import dataclass

OPEN, CLOSE = "<tool_call>", "</tool_call>"
# Each block, closed or cut off by the end of the answer (max_tokens, a stop string).
_BLOCK = re.compile(re.escape(OPEN) + r"\s*(.*?)\s*(?:" + re.escape(CLOSE) + r"|$)", re.DOTALL)
INSTRUCTIONS = (
    "You are an expert in composing functions. You are given a question and a set of possible functions. Based on the question, "
    "you will need to make one or more function/tool calls to achieve the purpose. If none of the functions can be used, point it out.\n\n"
    "You have access to the following tools:\n<tools>{tools}</tools>\n\n"
    "To call functions, answer in this format, the parameter types correct:\n"
    '<tool_call>[\n{{"name": "func_name1", "arguments": {{"argument1": "value1", "argument2": "value2"}}}},\n... (more tool calls as required)\n]</tool_call>'
)


@dataclass(frozen=True)
class Call:
    id: str
    name: str
    arguments: str  # JSON text, as OpenAI sends it

    def as_openai(self) -> dict:
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


def system_prompt(functions: list[dict], system: str) -> str:
    """The system message with the tools described after it."""
    described = INSTRUCTIONS.format(tools="\n".join(json.dumps(function, ensure_ascii=False) for function in functions))
    return f"{system}\n\n{described}" if system else described


def assistant_turn(content: str, calls: list[dict]) -> str:
    """A past assistant turn that called tools, written back as the model would have written it."""
    block = OPEN + json.dumps([{"name": call["name"], "arguments": _arguments(call["arguments"])} for call in calls], ensure_ascii=False) + CLOSE
    return f"{content}\n{block}" if content else block


def tool_result(content: str) -> str:
    return f"<tool_response>\n{content}\n</tool_response>"


def parse(text: str, known: set[str]) -> tuple[str | None, list[Call]]:
    """(content before the calls, the calls) when every block is a call of a known function; (text, []) otherwise."""
    if OPEN not in text:
        return text, []
    blocks = _BLOCK.findall(text)
    calls = []
    for block in blocks:
        try:
            value = json.loads(block)
        except ValueError:
            return text, []
        for item in value if isinstance(value, list) else [value]:
            if not isinstance(item, dict) or item.get("name") not in known:
                return text, []
            arguments = item.get("arguments", {})
            calls.append(Call(f"call_{uuid.uuid4().hex[:24]}", item["name"], json.dumps(arguments if isinstance(arguments, dict) else {}, ensure_ascii=False)))
    if not calls:
        return text, []
    content = text[: text.index(OPEN)].strip()
    return content or None, calls


def _arguments(value) -> dict:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return value if isinstance(value, dict) else {}
