"""The local model server (belvedir/localmodel/), against the real SmolLM2-135M-Instruct weights through the official openai client.

One server serves the module (a second one, for the tests that need two
processes or a short queue). The weights come from `manage.py
install_local_model`, which scripts/test.sh runs before the suite. The
model is weak: tests check shapes, consistency and determinism, never what
it says. Completions stay short (max_tokens <= 32) to keep the module fast.
"""

import json
import threading

import openai
import pytest
import requests
from django.core.management import CommandError, call_command

from belvedir.localmodel import files

from .servers import free_port, local_model_server

MODEL = files.MODEL_ID
QUESTION = [{"role": "user", "content": "What is the capital of France?"}]
PROMPT = "The three primary colors are"
processes = pytest.mark.processes


@pytest.fixture(scope="module")
def server():
    with local_model_server() as url:
        yield url


@pytest.fixture(scope="module")
def other_server():
    """A second process, with room for one waiting request."""
    with local_model_server("--queue", "1") as url:
        yield url


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server, api_key="unused", max_retries=0)


def post(url: str, path: str, body: str) -> requests.Response:
    return requests.post(f"{url}/{path}", data=body, headers={"Content-Type": "application/json"}, timeout=60)


@processes
def test_it_lists_the_model(client):
    assert [model.id for model in client.models.list()] == [MODEL]


@processes
def test_it_answers_a_chat(client):
    reply = client.chat.completions.create(model=MODEL, messages=QUESTION, temperature=0, max_tokens=16)
    choice = reply.choices[0]
    # An empty answer is the model's own (end of turn first), not an error.
    assert choice.message.role == "assistant" and isinstance(choice.message.content, str)
    assert choice.finish_reason in ("stop", "length") and reply.model == MODEL
    assert reply.usage.prompt_tokens > 5 and reply.usage.completion_tokens <= 16
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + reply.usage.completion_tokens


@processes
def test_it_completes_a_prompt_until_max_tokens(client):
    reply = client.completions.create(model=MODEL, prompt="1, 2, 3, 4, 5,", temperature=0, max_tokens=6)
    choice = reply.choices[0]
    assert choice.finish_reason == "length" and reply.usage.completion_tokens == 6 and choice.text
    assert reply.usage.prompt_tokens > 0 and choice.logprobs is None


@processes
def test_a_streamed_chat_is_the_same_text_in_chunks(client):
    whole = client.chat.completions.create(model=MODEL, messages=QUESTION, temperature=0, max_tokens=24)
    chunks = list(
        client.chat.completions.create(model=MODEL, messages=QUESTION, temperature=0, max_tokens=24, stream=True, stream_options={"include_usage": True})
    )
    assert chunks[0].choices[0].delta.role == "assistant" and chunks[0].object == "chat.completion.chunk"
    assert "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices) == whole.choices[0].message.content
    assert chunks[-2].choices[0].finish_reason == whole.choices[0].finish_reason
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == whole.usage.completion_tokens
    assert len({chunk.id for chunk in chunks}) == 1


@processes
def test_a_stream_ends_with_done(server):
    body = json.dumps({"model": MODEL, "prompt": PROMPT, "max_tokens": 4, "temperature": 0, "stream": True})
    events = [line for line in post(server, "completions", body).text.split("\n\n") if line]
    assert events[-1] == "data: [DONE]"
    chunks = [json.loads(event.removeprefix("data: ")) for event in events[:-1]]
    assert all(chunk["object"] == "text_completion" for chunk in chunks)
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"


@processes
def test_echo_with_logprobs_scores_every_prompt_token(client):
    reply = client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=0, echo=True, logprobs=3, temperature=0)
    choice = reply.choices[0]
    logprobs = choice.logprobs
    assert choice.text == PROMPT and choice.finish_reason == "length" and reply.usage.completion_tokens == 0
    assert "".join(logprobs.tokens) == PROMPT and len(logprobs.tokens) == reply.usage.prompt_tokens
    assert logprobs.token_logprobs[0] is None and logprobs.top_logprobs[0] is None
    assert all(value <= 0 for value in logprobs.token_logprobs[1:])
    assert logprobs.text_offset == [sum(len(token) for token in logprobs.tokens[:index]) for index in range(len(logprobs.tokens))]
    for token, value, top in zip(logprobs.tokens[1:], logprobs.token_logprobs[1:], logprobs.top_logprobs[1:], strict=True):
        # The top 3, and the prompt's own token when it is not among them.
        assert 3 <= len(top) <= 4 and top[token] == value and all(alternative <= 0 for alternative in top.values())


@processes
def test_an_end_of_turn_is_listed_last_in_the_logprobs_as_vllm_lists_it(client):
    # lm-eval sums token_logprobs[ctxlen:-1], the last entry taken for the generated token: without the
    # end of turn listed, a one-token answer ("heart") scored 0 and longer ones lost their last token.
    prompt = "Question: Which of the following organs in fish has the same function as the human lung?\nAnswer: heart"
    reply = client.completions.create(model=MODEL, prompt=prompt, max_tokens=1, echo=True, logprobs=1, temperature=0)
    choice = reply.choices[0]
    assert choice.text == prompt and choice.finish_reason == "stop" and reply.usage.completion_tokens == 0
    assert len(choice.logprobs.tokens) == reply.usage.prompt_tokens + 1 and choice.logprobs.tokens[-1] == ""
    assert choice.logprobs.tokens[-2] == " heart" and choice.logprobs.token_logprobs[-1] <= 0
    # Chat's logprobs are the text's tokens alone, as OpenAI's.
    chat = client.chat.completions.create(model=MODEL, messages=QUESTION, temperature=0, max_tokens=64, logprobs=True)
    assert "".join(entry.token for entry in chat.choices[0].logprobs.content) == chat.choices[0].message.content


@processes
def test_echo_puts_the_prompt_before_the_completion(client):
    plain = client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=5, temperature=0, logprobs=1)
    echoed = client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=5, temperature=0, logprobs=1, echo=True)
    assert echoed.choices[0].text == PROMPT + plain.choices[0].text
    assert echoed.choices[0].logprobs.tokens[-len(plain.choices[0].logprobs.tokens) :] == plain.choices[0].logprobs.tokens
    assert plain.choices[0].logprobs.text_offset[0] == len(PROMPT)


@processes
def test_a_stop_string_ends_the_text_before_it(client):
    full = client.completions.create(model=MODEL, prompt="1, 2, 3, 4, 5,", temperature=0, max_tokens=12).choices[0].text
    stop = full[len(full) // 2 :][:3]
    stopped = client.completions.create(model=MODEL, prompt="1, 2, 3, 4, 5,", temperature=0, max_tokens=12, stop=[stop])
    assert stopped.choices[0].text == full[: full.index(stop)] and stopped.choices[0].finish_reason == "stop"


@processes
def test_chat_logprobs_cover_every_generated_token(client):
    reply = client.chat.completions.create(model=MODEL, messages=QUESTION, temperature=0, max_tokens=8, logprobs=True, top_logprobs=2)
    content = reply.choices[0].logprobs.content
    assert "".join(entry.token for entry in content) == reply.choices[0].message.content and len(content) == reply.usage.completion_tokens
    # At temperature 0 the chosen token is the most likely one.
    assert all(len(entry.top_logprobs) == 2 and entry.top_logprobs[0].logprob == entry.logprob <= 0 for entry in content)


SHELL = {
    "type": "function",
    "function": {"name": "shell", "description": "Run a bash command.", "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}},
}


@processes
def test_tools_are_offered_and_a_whole_tool_conversation_is_taken(client):
    # What an agent sends (the reference agent's shape): tools, then its call and the tool's result fed back.
    asked = [{"role": "user", "content": "List the files here."}]
    first = client.chat.completions.create(model=MODEL, messages=asked, tools=[SHELL], temperature=0, max_tokens=48)
    bare = client.chat.completions.create(model=MODEL, messages=asked, temperature=0, max_tokens=48)
    repeated = client.chat.completions.create(model=MODEL, messages=asked, tools=[SHELL], temperature=0, max_tokens=48)
    # The tools reached the prompt: the same question with them is longer by the tool's description at least.
    assert first.usage.prompt_tokens > bare.usage.prompt_tokens + len(SHELL["function"]["description"].split())
    # Greedy decoding is byte-stable on this server: the first answer, and how it ended, come back the same.
    assert (repeated.choices[0].message.content, repeated.choices[0].finish_reason) == (first.choices[0].message.content, first.choices[0].finish_reason)
    assert first.choices[0].message.content != bare.choices[0].message.content or first.usage.prompt_tokens != bare.usage.prompt_tokens
    call = {"id": "call_1", "type": "function", "function": {"name": "shell", "arguments": '{"command": "ls"}'}}
    turns = [
        {"role": "user", "content": "List the files here."},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "exit code 0\nhello.txt"},
    ]
    later = client.chat.completions.create(model=MODEL, messages=turns, tools=[SHELL], temperature=0, max_tokens=32)
    again = client.chat.completions.create(model=MODEL, messages=turns, tools=[SHELL], temperature=0, max_tokens=32)
    assert later.usage.prompt_tokens > first.usage.prompt_tokens
    assert later.choices[0].message.content == again.choices[0].message.content


@processes
@pytest.mark.parametrize(
    ("extra", "param"),
    [({"tool_choice": "required"}, "tool_choice"), ({"stream": True}, "stream"), ({"tools": [{"type": "function", "function": {"name": "a b"}}]}, "tools[0]")],
)
def test_what_this_server_cannot_do_with_tools_is_400(server, extra, param):
    body = {"model": MODEL, "messages": QUESTION, "tools": [SHELL], **extra}
    response = post(server, "chat/completions", json.dumps(body))
    assert response.status_code == 400 and response.json()["error"]["param"] == param


@processes
def test_an_unknown_model_is_404(client):
    with pytest.raises(openai.NotFoundError) as raised:
        client.chat.completions.create(model="smollm2-135m-instruct", messages=QUESTION)
    assert raised.value.body["code"] == "model_not_found"


@processes
def test_a_negative_max_tokens_is_400(client):
    with pytest.raises(openai.BadRequestError) as raised:
        client.chat.completions.create(model=MODEL, messages=QUESTION, max_tokens=-1)
    assert raised.value.body["type"] == "invalid_request_error" and raised.value.body["param"] == "max_tokens"


@processes
@pytest.mark.parametrize("value", ["NaN", "Infinity", "1e999", "2.5", '"hot"'])
def test_a_temperature_that_is_not_a_number_in_range_is_400(server, value):
    response = post(server, "chat/completions", f'{{"model": "{MODEL}", "messages": {json.dumps(QUESTION)}, "temperature": {value}}}')
    assert response.status_code == 400 and response.json()["error"]["param"] == "temperature"


@processes
def test_a_prompt_longer_than_the_context_is_400_context_length_exceeded(client):
    with pytest.raises(openai.BadRequestError) as raised:
        client.completions.create(model=MODEL, prompt="hello " * 9000, max_tokens=1)
    assert raised.value.body["code"] == "context_length_exceeded" and raised.value.body["param"] == "prompt"
    assert "maximum context length is 8192 tokens" in raised.value.body["message"]


@processes
def test_the_models_whole_context_is_served(client):
    # math500 and IFBench ask for 2,048 tokens after their prompt: a 2,048-token context refused every one of their rows.
    completion = client.completions.create(model=MODEL, prompt="hello " * 3000, max_tokens=1, temperature=0)
    assert completion.usage.prompt_tokens > 3000 - 1 and completion.usage.completion_tokens <= 1
    chat = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Say hi."}], max_tokens=2048, stop=["\n", "."], temperature=0)
    assert chat.choices[0].finish_reason == "stop"


@processes
def test_a_10_mb_prompt_is_refused_unread(client):
    with pytest.raises(openai.APIStatusError) as raised:
        client.completions.create(model=MODEL, prompt="a" * 10_000_000, max_tokens=1)
    assert raised.value.status_code == 413


@processes
def test_malformed_json_is_400(server):
    response = post(server, "completions", '{"model": ')
    assert response.status_code == 400 and response.json()["error"]["type"] == "invalid_request_error"


@processes
def test_temperature_zero_gives_the_same_text_in_another_process(client, other_server):
    other = openai.OpenAI(base_url=other_server, api_key="unused", max_retries=0)
    request = {"model": MODEL, "messages": [{"role": "user", "content": "Write a short poem about the sea."}], "temperature": 0, "max_tokens": 32}
    first, second = (c.chat.completions.create(**request).choices[0].message.content for c in (client, other))
    assert first.encode() == second.encode() and first
    # A seed repeats sampling too.
    seeded = {**request, "temperature": 0.9, "seed": 7}
    assert client.chat.completions.create(**seeded).choices[0].message.content == other.chat.completions.create(**seeded).choices[0].message.content


@processes
def test_a_full_queue_answers_429_with_retry_after(other_server):
    # One request runs, one waits (--queue 1): of six at once, some are refused, without waiting.
    body = json.dumps({"model": MODEL, "prompt": "1, 2, 3, 4, 5,", "max_tokens": 32, "temperature": 0})
    responses = []
    threads = [threading.Thread(target=lambda: responses.append(post(other_server, "completions", body))) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    refused = [response for response in responses if response.status_code == 429]
    assert refused and {response.status_code for response in responses} == {200, 429}
    assert all(response.headers["Retry-After"] == "1" and response.json()["error"]["code"] == "rate_limit_exceeded" for response in refused)


def test_missing_weights_name_the_fix(tmp_path):
    with pytest.raises(files.ModelFileError, match=r"is missing\): run `python manage.py install_local_model`"):
        files.verify(files.model_path(tmp_path))


def test_weights_that_are_not_gguf_name_the_fix(tmp_path):
    files.model_path(tmp_path).write_bytes(b"<html>not found</html>")
    with pytest.raises(files.ModelFileError, match="is not a GGUF file .* run `python manage.py install_local_model`"):
        files.verify(files.model_path(tmp_path))


def test_changed_weights_name_the_fix(tmp_path):
    files.model_path(tmp_path).write_bytes(b"GGUF" + bytes(100))
    with pytest.raises(files.ModelFileError, match="changed since it was installed .* run `python manage.py install_local_model`"):
        files.verify(files.model_path(tmp_path))


def test_the_server_refuses_to_start_without_its_weights(settings, tmp_path):
    settings.LOCAL_MODEL_DIR = tmp_path
    with pytest.raises(CommandError, match="install_local_model"):
        call_command("serve_local_model", "--port", str(free_port()))


@processes
def test_installing_again_is_a_no_op(capsys):
    # The full tier's setup installed the weights (scripts/test.sh); a second install only checks them.
    call_command("install_local_model")
    assert "already installed" in capsys.readouterr().out
