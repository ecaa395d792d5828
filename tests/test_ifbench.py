"""IFBench: its rows and version, each checker path against hand-made replies, the authors' four accuracies, and a full eval in the API, page and CLI."""

import asyncio
import hashlib
import json
import shutil
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest
from click.testing import CliRunner
from django.conf import settings

from belvedir_cli.main import cli
from evals import statistics
from evals.actions import create_eval
from evals.benchmarks import ifbench, instruction_following
from evals.benchmarks.instruction_following import CHECKER_FILES, PUNKT_ENGLISH, UNCHECKABLE, Followed, check_reply, loose_variants
from evals.models import Deployment
from evals.scoring.base import ScoringError
from evals.tasks import run_eval

from .fakes.openai_server import FakeOpenAI

# The fake model servers listen on loopback, which production refuses (the suite's default).
pytestmark = pytest.mark.usefixtures("loopback_deployments")

BENCHMARK = ifbench.BENCHMARK
ROWS = {row.input: row for row in BENCHMARK.rows()}


def followed(ids: list[str], reply: str, kwargs=None) -> list[tuple[bool, bool]]:
    return [(f.strict, f.loose) for f in check_reply("a prompt", ids, kwargs or [{}] * len(ids), reply)]


def test_it_has_the_294_prompts_less_the_18_whose_checkers_need_nltk_data_no_index_ships():
    raw = [json.loads(line) for line in (settings.BENCHMARK_DATA_DIR / ifbench.FILE).read_text().splitlines()]
    assert len(raw) == 294
    left_out = [item for item in raw if UNCHECKABLE.keys() & set(item["instruction_id_list"])]
    assert len(left_out) == 18
    rows = BENCHMARK.rows()
    assert len(rows) == 276 == BENCHMARK.row_count() and len({row.id for row in rows}) == 276
    assert {row.id for row in rows} == {item["key"] for item in raw} - {item["key"] for item in left_out}
    assert sum(len(row["instruction_ids"]) for row in rows) == 311
    assert not any(UNCHECKABLE.keys() & set(row["instruction_ids"]) for row in rows)
    assert all(row.reference == ", ".join(row["instruction_ids"]) for row in rows)


def test_its_version_covers_the_prompts_the_checkers_and_the_punkt_model():
    names = [ifbench.FILE, *CHECKER_FILES, PUNKT_ENGLISH]
    digests = "".join(f"{name} {hashlib.sha256((settings.BENCHMARK_DATA_DIR / name).read_bytes()).hexdigest()}\n" for name in names)
    assert BENCHMARK.version() == "sha256:" + hashlib.sha256(digests.encode()).hexdigest()
    assert BENCHMARK.describe()["categories"] == ["instruction group"]


def test_the_prompt_is_the_only_user_message():
    row = next(iter(ROWS.values()))
    assert BENCHMARK.prompt(row) == [{"role": "user", "content": row.input}]


def test_a_constraint_kept_and_broken():
    kwargs = [{"keyword1": "kaleidoscope", "keyword2": "nebula", "keyword3": "whisper", "keyword4": "labyrinth", "keyword5": "paradox"}]
    kept = "kaleidoscope " + "nebula " * 2 + "whisper " * 3 + "labyrinth " * 5 + "paradox " * 7
    assert followed(["count:keywords_multiple"], kept, kwargs) == [(True, True)]
    assert followed(["count:keywords_multiple"], kept.replace("paradox ", "", 1), kwargs) == [(False, False)]


def test_a_reply_that_follows_only_once_its_first_line_is_dropped_is_loose_not_strict():
    assert followed(["format:title_case"], "A Title Case Reply\nIn Every Word") == [(True, True)]
    assert followed(["format:title_case"], "Sure, here it is:\nA Title Case Reply\nIn Every Word") == [(False, True)]
    assert followed(["format:title_case"], "sure, here it is:\nnot title case\nat all") == [(False, False)]


def test_a_reply_that_follows_only_without_its_markdown_asterisks_is_loose_not_strict():
    # Each "*" starts a bullet that needs a "-" sub-bullet: bold text's asterisks count as bullets unless removed.
    assert followed(["format:sub-bullets"], "* Apples\n  - red") == [(True, True)]
    assert followed(["format:sub-bullets"], "* **Apples**\n  - red") == [(False, True)]


def test_the_loose_variants_are_the_authors_eight_in_their_order():
    assert loose_variants("*Sure*\nbody\n*end*") == [
        "*Sure*\nbody\n*end*",
        "Sure\nbody\nend",
        "body\n*end*",
        "*Sure*\nbody",
        "body",
        "body\nend",
        "Sure\nbody",
        "body",
    ]


def test_sentences_are_split_with_nltks_punkt_model_installed_from_its_wheel_with_nothing_downloaded(monkeypatch):
    import nltk  # here: importing it costs seconds, which only the tests that use it should pay

    def refuse(*args, **kwargs):
        raise AssertionError("nothing is downloaded at run time")

    monkeypatch.setattr(nltk, "download", refuse)
    assert followed(["format:title_case"], "Mr. Smith Went Home. It Rained.") == [(True, True)]
    assert nltk.data.find("tokenizers/punkt_tab/english/").path.startswith(str(settings.BENCHMARK_DATA_DIR))
    # The model knows "Mr." as an abbreviation, so the first sentence does not end there.
    assert nltk.sent_tokenize("Mr. Smith went home. It rained.") == ["Mr. Smith went home.", "It rained."]
    assert nltk.word_tokenize("Mr. Smith went home. It rained.") == ["Mr.", "Smith", "went", "home", ".", "It", "rained", "."]


def test_the_punkt_model_written_by_threads_at_once_is_one_whole_directory():
    for written in settings.BENCHMARK_DATA_DIR.glob(f"{instruction_following.NLTK_DATA}*"):
        shutil.rmtree(written)
    with ThreadPoolExecutor(8) as pool:
        written = set(pool.map(lambda _: instruction_following.punkt_data(), range(8)))
    english = settings.BENCHMARK_DATA_DIR / instruction_following.NLTK_DATA / "tokenizers" / "punkt_tab" / "english"
    assert written == {str(settings.BENCHMARK_DATA_DIR / instruction_following.NLTK_DATA)}
    assert sorted(p.name for p in english.iterdir()) == ["abbrev_types.txt", "collocations.tab", "ortho_context.tab", "sent_starters.txt"]
    assert "mr" in (english / "abbrev_types.txt").read_text().split("\n")
    assert not list(settings.BENCHMARK_DATA_DIR.glob(f"{instruction_following.NLTK_DATA}.*"))


def test_the_checkers_are_the_installed_wheels_not_an_installed_package():
    module = instruction_following.checkers()["format:title_case"].__module__
    assert module == "if_verifiable.ifbench.instructions"
    assert sys.modules[module].__file__.startswith(str(settings.BENCHMARK_DATA_DIR))
    assert "datasets" not in sys.modules


def test_an_empty_reply_is_wrong_not_an_error():
    row = next(row for row in ROWS.values() if len(row["instruction_ids"]) == 2)
    score = asyncio.run(BENCHMARK.score(row, ""))
    assert score.value == 0.0 and score.detail["prompt_loose"] == 0.0
    assert [(p["strict"], p["loose"]) for p in score.detail["instructions"]] == [(False, False), (False, False)]


def test_a_reply_that_breaks_a_checker_is_wrong_not_an_error():
    # The authors' quote checker indexes the reply's last character after stripping punctuation: "." leaves nothing.
    assert followed(["format:quote_unquote"], ".") == [(False, False)]
    assert followed(["format:quote_unquote"], 'He said "yes" to it.') == [(True, True)]


def test_a_checker_missing_its_nltk_data_is_a_scoring_error_not_a_wrong_reply():
    class NeedsStopwords:
        def check_following(self, text):
            raise LookupError("Resource stopwords not found.")

    with pytest.raises(ScoringError, match="NLTK data"):
        instruction_following._follows(NeedsStopwords(), "a reply")


def test_a_prompt_scores_right_only_when_every_instruction_is_followed():
    score = ifbench.score_of([Followed("format:title_case", True, True), Followed("count:numbers", False, True)])
    assert score.value == 0.0 and score.detail["prompt_strict"] == 0.0 and score.detail["prompt_loose"] == 1.0
    assert score.extracted == "strict 1/2, loose 2/2"


def test_prompt_level_and_instruction_level_accuracy_aggregate_as_the_authors_do():
    prompts = [
        [Followed("format:title_case", True, True), Followed("count:numbers", True, True)],
        [Followed("format:list", True, True), Followed("count:pronouns", False, True)],
        [Followed("words:vowel", False, False)],
        [Followed("format:thesis", False, True)],
    ]
    figures = {m["name"]: m for m in ifbench.accuracies(prompts)}
    assert list(figures) == [
        "prompt-level strict accuracy",
        "prompt-level loose accuracy",
        "instruction-level strict accuracy",
        "instruction-level loose accuracy",
    ]
    assert figures["prompt-level strict accuracy"]["score"] == 1 / 4
    assert figures["prompt-level loose accuracy"]["score"] == 3 / 4
    # Pooled over the six instructions (3/6), not averaged per prompt ((1 + 1/2 + 0 + 0) / 4).
    assert figures["instruction-level strict accuracy"]["score"] == 3 / 6
    assert figures["instruction-level loose accuracy"]["score"] == 5 / 6
    assert [m["n"] for m in figures.values()] == [4, 4, 6, 6] and [m["unit"] for m in figures.values()] == [
        "prompts",
        "prompts",
        "instructions",
        "instructions",
    ]
    assert figures["prompt-level loose accuracy"]["score_ci"] == statistics.wilson(3, 4).as_list()
    assert figures["instruction-level strict accuracy"]["score_ci"] == statistics.pooled_proportion_interval([(2, 2), (1, 2), (0, 1), (0, 1)]).as_list()
    groups = {g["name"]: g for g in ifbench.group_accuracies(prompts)}
    assert {name: (g["score"], g["n"]) for name, g in groups.items()} == {"count": (1 / 2, 2), "format": (2 / 3, 3), "words": (0.0, 1)}


def answer(prompt: str) -> str:
    """A reply per kind of prompt: loose-only passes, a checker-breaking ".", empty replies, and plain text."""
    ids = ROWS[prompt]["instruction_ids"]
    if ids == ("format:title_case",):
        return "Sure, here it is:\nA Title Case Reply"
    if ids == ("format:sub-bullets",):
        return "* **Apples**\n  - red"
    if "format:quote_unquote" in ids:
        return "."
    if int(ROWS[prompt].id) % 5 == 0:
        return ""
    return "A plain reply. It has two sentences."


@pytest.fixture
def ifbench_eval(project, owner):
    with FakeOpenAI(answer=answer) as server:
        deployment = Deployment.objects.create(project=project, name="fake", base_url=server.url, model="fake-model")
        ev = create_eval(project, owner, deployment=deployment, benchmark="ifbench")
        run_eval(ev.pk)
    ev.refresh_from_db()
    return ev


def expected_figures() -> dict:
    """The four accuracies by plain arithmetic over each row's checked reply."""
    checked = [check_reply(row.input, row["instruction_ids"], row["kwargs"], answer(row.input)) for row in ROWS.values()]
    instructions = [f for parts in checked for f in parts]
    return {
        "prompt-level strict accuracy": sum(all(f.strict for f in parts) for parts in checked) / len(checked),
        "prompt-level loose accuracy": sum(all(f.loose for f in parts) for parts in checked) / len(checked),
        "instruction-level strict accuracy": sum(f.strict for f in instructions) / len(instructions),
        "instruction-level loose accuracy": sum(f.loose for f in instructions) / len(instructions),
    }


@pytest.mark.django_db(transaction=True)
def test_a_full_eval_shows_the_four_accuracies_and_the_instruction_groups_in_the_api(api, ifbench_eval):
    body = api.get(f"/api/v1/evals/{ifbench_eval.pk}").json()
    assert body["status"] == "succeeded" and body["done_count"] == 276 and body["error_count"] == 0
    figures = {m["name"]: m for m in body["metrics"]}
    expected = expected_figures()
    assert {name: m["score"] for name, m in figures.items()} == pytest.approx(expected)
    # Loose passes what strict does not (title case after a preamble, sub-bullets in bold).
    assert expected["prompt-level loose accuracy"] > expected["prompt-level strict accuracy"] > 0
    headline = figures["prompt-level strict accuracy"]
    assert body["score"] == pytest.approx(headline["score"]) and body["score_ci"] == pytest.approx(headline["score_ci"], abs=1e-6)
    assert figures["instruction-level strict accuracy"]["n"] == 311 and figures["prompt-level loose accuracy"]["n"] == 276
    assert all(m["score_ci"][0] <= m["score"] <= m["score_ci"][1] for m in figures.values())
    groups = body["categories"]["instruction group"]
    assert [g["name"] for g in groups] == ["count", "custom", "format", "ratio", "repeat", "sentence", "words"]
    assert sum(g["n"] for g in groups) == 311
    sample = api.get(f"/api/v1/evals/{ifbench_eval.pk}/samples").json()["results"][0]
    assert set(sample["scores"]) == {"prompt_strict", "prompt_loose", "instructions"}


@pytest.mark.django_db(transaction=True)
def test_the_eval_page_and_bv_evals_show_list_the_four_accuracies(owner_client, live_server, api_key, ifbench_eval, tmp_path, monkeypatch):
    page = owner_client.get(ifbench_eval.get_absolute_url()).content.decode()
    assert 'id="metrics"' in page and 'id="by-instruction-group"' in page
    headline, *others = expected_figures()
    assert f"<td>{headline} (headline)</td>" in page
    for name in others:
        assert f"<td>{name}</td>" in page
    assert "311 instructions" in page
    monkeypatch.setenv("HOME", str(tmp_path))
    env = {"BELVEDIR_API_KEY": api_key, "BELVEDIR_BASE_URL": live_server.url, "COLUMNS": "200"}
    shown = CliRunner().invoke(cli, ["evals", "show", str(ifbench_eval.pk)], env=env, obj={})
    assert shown.exit_code == 0, shown.output
    assert "Metrics" in shown.output and "Score by instruction group" in shown.output
    for name in ("prompt-level loose accuracy", "instruction-level strict accuracy", "instruction-level loose accuracy", "311 instructions"):
        assert name in shown.output
