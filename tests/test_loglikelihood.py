"""Log-likelihood mode: the arithmetic on echoed logprobs, lm-eval's prompts and metrics, and evals of each multiple-choice benchmark."""

import json

import orjson
import pytest
from click.testing import CliRunner

from belvedir_cli.main import cli
from evals import benchmarks, loglikelihood
from evals.actions import create_eval, resume_eval
from evals.benchmarks import arc_challenge, hellaswag, mmlu, winogrande
from evals.loglikelihood import NO_PROMPT_LOGPROBS, Choice, Unusable, continuation_loglikelihood, likeliest
from evals.models import Deployment, Eval, Sample
from evals.subset import select_rows
from evals.tasks import run_eval

from .fakes.openai_server import BOS, FakeOpenAI

# The fake model servers listen on loopback, which production refuses (the suite's default).
pytestmark = pytest.mark.usefixtures("loopback_deployments")

MULTIPLE_CHOICE = ["mmlu", "arc_challenge", "hellaswag", "winogrande"]


def echoed(tokens: list[str], values: list, shift: int = 0) -> tuple[list[str], list, list[int]]:
    """The lists vLLM echoes for these prompt tokens: offsets are their running lengths (plus a BOS's, `shift`)."""
    offsets, at = [], shift
    for token in tokens:
        offsets.append(at)
        at += len(token)
    return tokens, values, offsets


# --- The arithmetic -------------------------------------------------------------------------------


def test_only_the_continuations_tokens_are_summed():
    tokens, values, offsets = echoed(["Question", ":", " 2+2", "?", "\nAnswer", ":", " 4"], [None, -1.0, -2.0, -0.5, -0.25, -0.125, -0.75])
    assert continuation_loglikelihood(tokens, values, offsets, 7, len(" 4")) == (-0.75, 1)
    # A longer continuation takes in the tokens it covers, and no more.
    assert continuation_loglikelihood(tokens, values, offsets, 7, len("\nAnswer: 4")) == (-1.125, 3)


def test_a_token_straddling_the_boundary_counts_for_the_continuation_whole():
    # The context "... so Sarah" and the continuation "'s turn" tokenized as " Sarah's" + " turn":
    # the merged token carries the continuation's first characters, so it is scored with it.
    tokens, values, offsets = echoed(["It", " was", " Sarah's", " turn"], [None, -1.0, -3.0, -0.5])
    assert continuation_loglikelihood(tokens, values, offsets, 4, len("'s turn")) == (-3.5, 2)
    # A token ending exactly at the boundary is the context's.
    assert continuation_loglikelihood(tokens, values, offsets, 4, len(" turn")) == (-0.5, 1)


def test_the_boundary_is_measured_from_the_prompts_end_so_an_echoed_bos_does_not_shift_it():
    # vLLM's first echoed token is the BOS, "<|begin_of_text|>", whose text is not in the prompt.
    bos = "<|begin_of_text|>"
    tokens, values, offsets = echoed([bos, "The", " sky", " is", " blue"], [None, -4.0, -2.0, -1.0, -0.5])
    assert continuation_loglikelihood(tokens, values, offsets, 5, len(" blue")) == (-0.5, 1)
    assert continuation_loglikelihood(tokens, values, offsets, 5, len(" is blue")) == (-1.5, 2)


def parsed(body: dict, continuation: str = " blue") -> loglikelihood.Loglikelihood:
    return loglikelihood.parse(orjson.dumps(body), Choice("A", "The sky is", continuation), 12.0)


def body_of(tokens, values, offsets, usage=None) -> dict:
    logprobs = {"tokens": tokens, "token_logprobs": values, "text_offset": offsets}
    return {"choices": [{"index": 0, "text": "".join(tokens), "logprobs": logprobs}], "usage": usage}


def test_the_generated_token_is_left_out_by_the_usages_prompt_count_or_as_the_last():
    tokens, values, offsets = echoed(["The", " sky", " is", " blue", " and"], [None, -2.0, -1.0, -0.5, -9.0])
    with_usage = parsed(body_of(tokens, values, offsets, {"prompt_tokens": 4, "completion_tokens": 1}))
    assert (with_usage.value, with_usage.tokens, with_usage.prompt_tokens, with_usage.completion_tokens) == (-0.5, 1, 4, 1)
    assert parsed(body_of(tokens, values, offsets)).value == -0.5


@pytest.mark.parametrize(
    "body",
    [
        {"choices": [{"index": 0, "text": " and"}]},  # no logprobs at all
        {"choices": [{"index": 0, "text": " and", "logprobs": None}]},
        body_of([" and"], [-9.0], [0], {"prompt_tokens": 4, "completion_tokens": 1}),  # echo ignored: only the generated token
        body_of(["The", " sky", " is", " blue"], [None, None, None, None], [0, 3, 7, 10]),  # prompt logprobs missing
        body_of(["The", " sky"], [None, -1.0], [0, 3, 7]),  # lists that do not line up
    ],
)
def test_a_response_without_prompt_logprobs_is_unusable_not_a_score(body):
    with pytest.raises(Unusable, match="returned no prompt logprobs: log-likelihood mode needs a server that serves echo"):
        parsed(body)


def test_a_continuation_reaching_the_first_token_is_unusable():
    tokens, values, offsets = echoed(["The", " sky", " is", " blue", " and"], [None, -2.0, -1.0, -0.5, -9.0])
    with pytest.raises(Unusable, match="do not cover the continuation"):
        parsed(body_of(tokens, values, offsets), continuation="The sky is blue")


def test_normalisation_by_characters_can_change_the_pick():
    # A short option with a better sum against a long one with a better mean per character.
    assert likeliest([-6.0, -9.0]) == 0
    assert likeliest([-6.0, -9.0], [4, 30]) == 1
    assert likeliest([-1.0, -1.0]) == 0  # a tie goes to the first, as numpy's argmax


def test_hellaswag_scores_acc_norm_as_its_headline_and_reports_acc_too():
    row = hellaswag.BENCHMARK.rows()[0]  # the answer is D, its ending the longest but one
    lengths = [len(o.continuation) - 1 for o in hellaswag.BENCHMARK.choices(row)]
    assert row.reference == "D" and lengths == [37, 27, 26, 36]
    # D has the best mean per character, B the best sum.
    score = hellaswag.BENCHMARK.score_loglikelihoods(row, [-20.0, -10.0, -12.0, -10.5])
    assert (score.value, score.extracted) == (1.0, "D")
    assert (score.detail["acc_norm"], score.detail["acc"]) == (1.0, 0.0)
    assert [c["option"] for c in score.detail["choices"]] == ["A", "B", "C", "D"] and score.detail["choices"][3]["chars"] == 36


def test_mmlu_and_winogrande_report_acc_alone():
    row = mmlu.BENCHMARK.rows()[0]
    score = mmlu.BENCHMARK.score_loglikelihoods(row, [-3.0, -1.0, -2.0, -4.0])
    assert (score.value, score.extracted) == (float(row.reference == "B"), "B")
    assert set(score.detail) == {"acc", "choices"}
    wino = winogrande.BENCHMARK.rows()[0]
    assert set(winogrande.BENCHMARK.score_loglikelihoods(wino, [-5.0, -4.0]).detail) == {"acc", "choices"}


# --- lm-eval's prompts ----------------------------------------------------------------------------


def test_each_benchmark_builds_lm_evals_zero_shot_prompt():
    row = mmlu.BENCHMARK.rows()[0]
    options = mmlu.BENCHMARK.choices(row)
    assert options[0].context == (
        "The following are multiple choice questions (with answers) about abstract algebra.\n\n"
        "Find the degree for the given field extension Q(sqrt(2), sqrt(3), sqrt(18)) over Q.\nA. 0\nB. 4\nC. 2\nD. 6\nAnswer:"
    )
    assert [o.continuation for o in options] == [" A", " B", " C", " D"] and len({o.context for o in options}) == 1
    arc = arc_challenge.BENCHMARK.choices(arc_challenge.BENCHMARK.rows()[0])
    assert arc[0].context == (
        "Question: An astronomer observes that a planet rotates faster after a meteorite impact. "
        "Which is the most likely effect of this increase in rotation?\nAnswer:"
    )
    assert arc[2].continuation == " Planetary days will become shorter."
    hella = hellaswag.BENCHMARK.choices(hellaswag.BENCHMARK.rows()[0])
    assert hella[0].context == "Roof shingle removal: A man is sitting on a roof. He"
    assert hella[3].continuation == " starts pulling up roofing on a roof."
    # Winogrande's partial evaluation: the option in the context, the rest of the sentence shared.
    wino = winogrande.BENCHMARK.choices(winogrande.BENCHMARK.rows()[0])
    assert [o.context for o in wino] == ["Sarah was a much better surgeon than Maria so Sarah", "Sarah was a much better surgeon than Maria so Maria"]
    assert {o.continuation for o in wino} == {" always got the easier cases."}


def test_the_catalog_states_each_benchmarks_modes_and_log_likelihood_format(api):
    catalog = {b["name"]: b for b in api.get("/api/v1/benchmarks").json()}
    for name in MULTIPLE_CHOICE:
        assert catalog[name]["modes"] == ["generative", "loglikelihood"]
        assert catalog[name]["loglikelihood"]["prompt_format"].startswith(f"Zero-shot, lm-eval's {name}")
    assert {name: catalog[name]["loglikelihood"]["metrics"] for name in MULTIPLE_CHOICE} == {
        "mmlu": ["acc"],
        "arc_challenge": ["acc_norm", "acc"],
        "hellaswag": ["acc_norm", "acc"],
        "winogrande": ["acc"],
    }
    assert (catalog["gsm8k"]["modes"], catalog["gsm8k"]["loglikelihood"]) == (["generative"], None)


def test_the_catalog_page_states_the_log_likelihood_format(owner_client):
    page = owner_client.get("/evals/benchmarks/").content.decode()
    assert "Log-likelihood (acc_norm, acc; headline acc_norm): Zero-shot, lm-eval&#x27;s hellaswag" in page
    assert "Modes: generative, loglikelihood" in page and "Modes: generative<" in page


# --- Evals against a fake vLLM --------------------------------------------------------------------


def right_prompts(name: str, limit: int, seed: int) -> set[str]:
    """The prompts of the right options of the rows an eval of `limit` rows with `seed` draws."""
    benchmark = benchmarks.get(name)
    rows = benchmark.rows()
    prompts = set()
    for i in select_rows(len(rows), limit, seed):
        option = next(o for o in benchmark.choices(rows[i]) if o.label == rows[i].reference)
        prompts.add(option.context + option.continuation)
    return prompts


@pytest.fixture
def vllm():
    # Every prompt token equally likely until a test says otherwise.
    with FakeOpenAI(prompt_logprob=lambda prompt: -1.0) as server:
        yield server


@pytest.fixture
def completions(project, vllm):
    return Deployment.objects.create(
        project=project, name="base", base_url=vllm.url, model="base-model", api_style="completions", input_price_per_million=2, output_price_per_million=4
    )


@pytest.fixture
def chat(project, vllm):
    return Deployment.objects.create(project=project, name="chat", base_url=vllm.url, model="chat-model")


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("name", MULTIPLE_CHOICE)
def test_a_loglikelihood_eval_picks_the_option_the_model_finds_likeliest(name, project, owner, vllm, completions):
    right = right_prompts(name, 4, seed=3)
    vllm.prompt_logprob = lambda prompt: -0.1 if prompt in right else -2.0
    ev = create_eval(project, owner, deployment=completions, benchmark=name, sample_limit=4, seed=3, mode="loglikelihood")
    run_eval(ev.pk)
    ev.refresh_from_db()
    assert (ev.status, ev.mode, ev.done_count, ev.error_count, ev.score) == ("succeeded", "loglikelihood", 4, 0, 1.0)
    samples = list(Sample.objects.filter(eval=ev))
    assert all(s.extracted == s.reference and s.scores["choices"] for s in samples)
    options = sum(len(s.scores["choices"]) for s in samples)
    # One request per option, each as lm-eval sends it; tokens and cost counted from every one.
    assert len(vllm.requests) == options
    assert all(r["path"] == "/v1/completions" and r["body"]["echo"] is True and r["body"]["logprobs"] == 1 for r in vllm.requests)
    assert {r["body"]["max_tokens"] for r in vllm.requests} == {1} and right <= {r["body"]["prompt"] for r in vllm.requests}
    assert ev.completion_tokens == options and ev.prompt_tokens == sum(len(r["body"]["prompt"].split()) + 1 for r in vllm.requests)
    assert ev.cost == completions.cost(ev.prompt_tokens, ev.completion_tokens) and ev.cost > 0
    assert samples[0].output.startswith("A: -")


@pytest.mark.django_db(transaction=True)
def test_the_score_follows_the_option_the_model_favours(project, owner, vllm, completions):
    # A model that always finds option A likeliest scores the rows whose answer is A.
    rows = arc_challenge.BENCHMARK.rows()
    favoured = {o.context + o.continuation for i in select_rows(len(rows), 6, 5) for o in arc_challenge.BENCHMARK.choices(rows[i]) if o.label == "A"}
    vllm.prompt_logprob = lambda prompt: -0.01 if prompt in favoured else -3.0
    ev = create_eval(project, owner, deployment=completions, benchmark="arc_challenge", sample_limit=6, seed=5, mode="loglikelihood")
    run_eval(ev.pk)
    ev.refresh_from_db()
    answers = [rows[i].reference for i in select_rows(len(rows), 6, 5)]
    assert ev.score == answers.count("A") / 6 < 1
    assert set(Sample.objects.filter(eval=ev).values_list("extracted", flat=True)) == {"A"}


@pytest.mark.django_db(transaction=True)
def test_a_deployment_returning_no_prompt_logprobs_gives_row_errors_not_wrong_answers(project, owner, vllm, completions):
    vllm.prompt_logprob = None  # echo and logprobs ignored, as by a server that cannot serve them
    ev = create_eval(project, owner, deployment=completions, benchmark="mmlu", sample_limit=3, mode="loglikelihood")
    run_eval(ev.pk)
    ev.refresh_from_db()
    assert (ev.status, ev.done_count, ev.error_count, ev.score) == ("failed", 3, 3, None)
    assert set(Sample.objects.filter(eval=ev).values_list("error", flat=True)) == {NO_PROMPT_LOGPROBS}
    assert NO_PROMPT_LOGPROBS in ev.status_message  # the eval says why, as a chat-only server's would
    assert len(vllm.requests) == 3  # the first option's answer decides the row: not retried, no other option asked


@pytest.mark.django_db(transaction=True)
def test_a_failed_option_request_is_retried_then_a_resumed_eval_asks_only_for_its_missing_rows(project, owner, vllm, completions, settings):
    settings.EVAL_RETRY_BASE_SECONDS = 0.01
    rows = winogrande.BENCHMARK.rows()
    indices = select_rows(len(rows), 4, 9)
    flaky = winogrande.BENCHMARK.choices(rows[indices[0]])[1]
    vllm.fail_statuses[flaky.context + flaky.continuation] = [503, 429]
    # Bypassing the response cache, which would answer the resumed rows without asking (tests/test_response_cache.py).
    ev = create_eval(project, owner, deployment=completions, benchmark="winogrande", sample_limit=4, seed=9, mode="loglikelihood", cache="bypass")
    run_eval(ev.pk)
    ev.refresh_from_db()
    assert (ev.done_count, ev.error_count) == (4, 0) and len(vllm.requests) == 4 * 2 + 2
    Sample.objects.filter(eval=ev, row_index__in=indices[:2]).delete()
    Eval.objects.filter(pk=ev.pk).update(status=Eval.Status.FAILED)
    vllm.requests.clear()
    assert resume_eval(Eval.objects.get(pk=ev.pk))
    run_eval(ev.pk)
    ev.refresh_from_db()
    assert (ev.status, ev.done_count) == ("succeeded", 4)
    asked = {r["body"]["prompt"] for r in vllm.requests}
    assert asked == {o.context + o.continuation for i in indices[:2] for o in winogrande.BENCHMARK.choices(rows[i])}


@pytest.mark.django_db(transaction=True)
def test_the_in_flight_limit_holds_across_the_options_of_every_row(project, owner, vllm, completions):
    vllm.latency = 0.05
    completions.max_in_flight = 3
    completions.save()
    ev = create_eval(project, owner, deployment=completions, benchmark="mmlu", sample_limit=6, mode="loglikelihood")
    run_eval(ev.pk)
    assert len(vllm.requests) == 24 and vllm.peak_in_flight == 3


# --- What is refused, and where the mode shows ----------------------------------------------------


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"benchmark": "gsm8k", "deployment": "base", "mode": "loglikelihood"}, "Benchmark gsm8k runs in generative mode only"),
        ({"benchmark": "mmlu", "deployment": "base", "mode": "greedy"}, "Unknown mode 'greedy'; choose generative or loglikelihood."),
        ({"benchmark": "mmlu", "deployment": "base", "mode": "loglikelihood", "generation": {"temperature": 1}}, "leave generation settings unset"),
    ],
)
def test_a_mode_the_benchmark_or_deployment_cannot_serve_is_refused_with_the_reason(api, chat, completions, fields, message):
    response = api.post("/api/v1/evals", fields, format="json")
    assert response.status_code == 400 and message in response.json()["detail"]
    assert not Eval.objects.exists()


def test_a_dataset_eval_is_generative_only(api, project, owner, completions):
    from evals.datasets.versions import create_dataset

    dataset = create_dataset(project, owner, "qa", b'{"input": "a", "expected": "1"}\n')
    body = {"dataset_id": dataset.pk, "scorers": ["exact_match"], "deployment": "base", "mode": "loglikelihood"}
    response = api.post("/api/v1/evals", body, format="json")
    assert response.status_code == 400 and "A dataset eval runs in generative mode only" in response.json()["detail"]
    assert not Eval.objects.exists()


def test_the_new_eval_page_refuses_a_generative_benchmark_as_a_form_error_and_the_eval_page_shows_the_mode(owner_client, chat, completions):
    page = owner_client.get("/evals/new/benchmark/").content.decode()
    assert 'value="loglikelihood"' in page
    refused = owner_client.post("/evals/new/benchmark/", {"benchmark": "gsm8k", "deployment": chat.pk, "mode": "loglikelihood"})
    assert refused.status_code == 200 and "Benchmark gsm8k runs in generative mode only" in refused.content.decode()
    assert not Eval.objects.exists()
    # A chat deployment serves log-likelihood too: its server's /completions is asked.
    created = owner_client.post("/evals/new/benchmark/", {"benchmark": "hellaswag", "deployment": chat.pk, "mode": "loglikelihood", "sample_limit": 2})
    ev = Eval.objects.get()
    assert created.status_code == 302 and ev.mode == "loglikelihood"
    assert "log-likelihood mode" in owner_client.get(f"/evals/{ev.pk}/").content.decode()


def test_a_rerun_on_the_same_rows_keeps_the_mode_on_any_deployment(project, owner, chat, completions):
    ev = create_eval(project, owner, deployment=completions, benchmark="mmlu", sample_limit=2, mode="loglikelihood")
    assert create_eval(project, owner, deployment=completions, same_rows_as=ev).mode == "loglikelihood"
    assert create_eval(project, owner, deployment=chat, same_rows_as=ev).mode == "loglikelihood"
    assert create_eval(project, owner, deployment=chat, same_rows_as=ev, mode="generative").mode == "generative"


@pytest.mark.django_db(transaction=True)
def test_a_chat_deployment_is_scored_by_log_likelihood_through_its_servers_completions(project, owner, vllm, chat):
    right = right_prompts("winogrande", 4, seed=9)
    vllm.prompt_logprob = lambda prompt: -0.1 if prompt in right else -2.0
    ev = create_eval(project, owner, deployment=chat, benchmark="winogrande", sample_limit=4, seed=9, mode="loglikelihood")
    run_eval(ev.pk)
    ev.refresh_from_db()
    assert (ev.status, ev.error_count, ev.score) == ("succeeded", 0, 1.0)


@pytest.mark.django_db(transaction=True)
def test_the_api_page_and_bv_show_the_mode_and_both_metrics(api, owner_client, project, owner, vllm, completions, live_server, api_key):
    right = right_prompts("hellaswag", 3, seed=1)
    vllm.prompt_logprob = lambda prompt: -0.1 if prompt in right else -2.0
    ev = create_eval(project, owner, deployment=completions, benchmark="hellaswag", sample_limit=3, seed=1, mode="loglikelihood")
    run_eval(ev.pk)
    shown = api.get(f"/api/v1/evals/{ev.pk}").json()
    assert shown["mode"] == "loglikelihood"
    assert [(m["name"], m["headline"], m["n"], m["score"]) for m in shown["metrics"]] == [("acc_norm", True, 3, 1.0), ("acc", False, 3, 1.0)]
    assert api.get("/api/v1/evals").json()["results"][0]["mode"] == "loglikelihood"
    page = owner_client.get(f"/evals/{ev.pk}/").content.decode()
    assert 'id="metrics"' in page and "acc_norm (headline)" in page
    env = {"BELVEDIR_API_KEY": api_key, "BELVEDIR_BASE_URL": live_server.url}
    printed = CliRunner().invoke(cli, ["evals", "show", str(ev.pk)], env=env, obj={})
    assert printed.exit_code == 0 and "mode: loglikelihood" in printed.output and "acc_norm (headline)" in printed.output
    refused = CliRunner().invoke(cli, ["evals", "run", "gsm8k", "--deployment", "base", "--mode", "loglikelihood", "--json"], env=env, obj={})
    assert refused.exit_code == 2 and "runs in generative mode only" in refused.output
    ran = CliRunner().invoke(cli, ["evals", "run", "winogrande", "--deployment", "base", "--n", "2", "--mode", "loglikelihood", "--json"], env=env, obj={})
    assert ran.exit_code == 0 and json.loads(ran.stdout)["mode"] == "loglikelihood"
    listed = CliRunner().invoke(cli, ["benchmarks", "list"], env={**env, "COLUMNS": "300"}, obj={})
    assert listed.exit_code == 0 and "generative, loglikelihood" in listed.output


def test_the_fake_echoes_as_vllm_does():
    """The fake's echo has vLLM's shape (BOS first, offsets its running lengths), so the evals above test the real arithmetic."""
    import urllib.request

    with FakeOpenAI(prompt_logprob=lambda prompt: -1.0) as server:
        request = urllib.request.Request(
            server.url + "/completions", data=json.dumps({"prompt": "a b", "echo": True, "logprobs": 1, "max_tokens": 1}).encode(), method="POST"
        )
        request.add_header("Content-Type", "application/json")
        body = json.loads(urllib.request.urlopen(request).read())
    logprobs = body["choices"][0]["logprobs"]
    assert logprobs["tokens"][0] == BOS and logprobs["text_offset"][:3] == [0, 3, 4] and logprobs["token_logprobs"][:3] == [None, -1.0, -1.0]
    assert body["usage"] == {"prompt_tokens": 3, "completion_tokens": 1}
