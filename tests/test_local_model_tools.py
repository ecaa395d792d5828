"""Reading tool calls out of a model's answer (belvedir/localmodel/tools.py): what parses is a call, anything else stays the model's text."""

import json

import pytest

from belvedir.localmodel import tools

KNOWN = {"shell"}


@pytest.mark.parametrize(
    "text",
    [
        '<tool_call>[{"name": "shell", "arguments": {"command": "ls"}}]</tool_call>',
        '<tool_call>\n{"name": "shell", "arguments": {"command": "ls"}}\n</tool_call>',
        # Cut off by max_tokens or a stop string after the JSON: still a call.
        '<tool_call>[{"name": "shell", "arguments": {"command": "ls"}}]',
    ],
)
def test_a_call_in_either_format_is_a_call(text):
    content, calls = tools.parse(text, KNOWN)
    assert content is None and [(c.name, json.loads(c.arguments)) for c in calls] == [("shell", {"command": "ls"})]
    assert calls[0].as_openai()["type"] == "function" and calls[0].id.startswith("call_")


def test_text_before_the_calls_is_the_content_and_every_block_counts():
    text = 'Let me look.\n<tool_call>[{"name": "shell", "arguments": {"command": "ls"}}]</tool_call>\n<tool_call>{"name": "shell", "arguments": {"command": "pwd"}}</tool_call>'
    content, calls = tools.parse(text, KNOWN)
    assert content == "Let me look." and [json.loads(c.arguments)["command"] for c in calls] == ["ls", "pwd"]


@pytest.mark.parametrize(
    "text",
    [
        "I would run ls.",
        '<tool_call>{"name": "shell", "arguments": </tool_call>',  # JSON that does not parse
        '<tool_call>[{"name": "rm_everything", "arguments": {}}]</tool_call>',  # a function it was not offered
        '<tool_call>["shell"]</tool_call>',
    ],
)
def test_anything_else_stays_the_models_text(text):
    assert tools.parse(text, KNOWN) == (text, [])


def test_a_past_call_and_its_result_go_back_as_the_model_writes_them():
    turn = tools.assistant_turn("", [{"name": "shell", "arguments": '{"command": "ls"}'}])
    assert tools.parse(turn, KNOWN)[1][0].arguments == '{"command": "ls"}'
    assert tools.tool_result("exit code 0") == "<tool_response>\nexit code 0\n</tool_response>"
    prompt = tools.system_prompt([{"name": "shell"}], "Be brief.")
    assert prompt.startswith("Be brief.\n\n") and '<tools>{"name": "shell"}</tools>' in prompt
