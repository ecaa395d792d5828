"""The training export's benchmark check: planted gsm8k, MMLU and MBPP rows left out, counted and listed; what it cannot catch; the canary line."""

import json
from datetime import timedelta

import pytest
import time_machine
from django.utils import timezone

from evals import benchmarks, contamination
from evals.benchmarks.base import Benchmark, Row
from traces.models import TaskGroup
from traces.segmentation import process_quiet_sessions
from traces.training import CANARY_QUESTION, canary_answer

from .otlp_builders import body, new_id, span
from .test_training_export import messages_attrs, support_session

pytestmark = pytest.mark.django_db


def row(benchmark: str, row_id: str) -> Row:
    return next(r for r in benchmarks.CATALOG[benchmark].rows() if r.id == row_id)


JANET = row("gsm8k", "0")
GEOGRAPHY = row("mmlu", "high_school_geography/0")
REMOVE_OCC = row("mbpp", "MBPP/11")
STEM = GEOGRAPHY.input.split("\n\n")[1]

# The same questions reworded by hand, keeping no 13 words in a row of the benchmark's text.
JANET_REWORDED = (
    "Each day Janet's ducks produce 16 eggs. Three go into her breakfast and four into muffins she bakes for friends. "
    "She sells whatever is left at the market for $2 an egg. How many dollars does she earn per day?"
)
GEOGRAPHY_REWORDED = "Why do subsistence economies struggle to grow? Mostly because they have no: (a) money (b) good transport links (c) government (d) banks"

# Session id -> (user message, assistant answer); the verbatim ones first.
PLANTED = {
    # The question as the benchmark has it, in other case and spacing: a normalised exact match.
    "gsm8k-verbatim": (JANET.input.upper().replace(" ", "   "), JANET.reference),
    # Inside a prompt of the agent's own: 13 words in a row.
    "gsm8k-in-a-prompt": (f"Help me with my homework, please: {JANET.input} Show your working.", "She makes $18 every day."),
    # The prompt an eval sends, letter answer and all.
    "mmlu-verbatim": (GEOGRAPHY.input, GEOGRAPHY.reference),
    "mmlu-stem": (f"Quick quiz! {STEM}... money, roads, government or banks?", "Roads."),
    # A benchmark's reference solution as the answer.
    "mbpp-answer": ("Can you give me a function that drops a character's first and last appearance in a string?", REMOVE_OCC.reference),
    "gsm8k-reworded": (JANET_REWORDED, "18"),
    "mmlu-reworded": (GEOGRAPHY_REWORDED, "B"),
    # Short answers that are some benchmark's reference ("18" is gsm8k's above, "B" MMLU's): not overlaps.
    "clean": ("How many items are in my cart right now, and which is the cheapest?", "18"),
}
CAUGHT = {"gsm8k-verbatim", "gsm8k-in-a-prompt", "mmlu-verbatim", "mmlu-stem", "mbpp-answer"}
NOT_CAUGHT = {"gsm8k-reworded", "mmlu-reworded", "clean"}


def exchange(session_id, user, answer, start_s):
    """One `tutor` workflow task of one LLM call."""
    trace = new_id(32)
    root = span("tutor.workflow", session_id=session_id, trace_id=trace, kind="workflow", start_s=start_s, duration_s=5)
    attributes = {**messages_attrs("prompt", [("user", user)]), **messages_attrs("completion", [("assistant", answer)])}
    return [root, span("openai.chat", session_id=session_id, trace_id=trace, parent=root["spanId"], start_s=start_s + 1, attributes=attributes)]


def post_segmented(api, make_spans):
    """Spans made from now (`make_spans(now)`), sent, and segmented into tasks once their sessions are quiet."""
    base = timezone.now().timestamp()
    with time_machine.travel(timezone.now(), tick=False) as clock:
        spans = make_spans(base)
        assert api.generic("POST", "/api/v1/traces", body(spans), content_type="application/json").status_code == 200
        clock.shift(timedelta(seconds=max(int(s["endTimeUnixNano"]) for s in spans) / 1e9 - base + 31))
        process_quiet_sessions()


def plant(api) -> TaskGroup:
    """Sessions holding the planted exchanges, segmented into the `tutor` group."""
    post_segmented(
        api, lambda base: [s for n, (session_id, (user, answer)) in enumerate(PLANTED.items()) for s in exchange(session_id, user, answer, base + 10 * n)]
    )
    return TaskGroup.objects.get(name="tutor")


@pytest.fixture
def tutor(api):
    return plant(api)


def read(response) -> list[dict]:
    assert response.status_code == 200, response.content
    return [json.loads(line) for line in b"".join(response.streaming_content).decode().splitlines()]


def user_text(line) -> str:
    return next(m["content"] for m in line["messages"] if m["role"] == "user")


def test_the_planted_rows_are_what_they_say():
    assert "Janet’s ducks lay 16 eggs per day" in JANET.input and JANET.reference == "18"
    assert STEM == "The main factor preventing subsistence economies from advancing economically is the lack of"
    assert REMOVE_OCC.reference.startswith("def remove_Occ(s,ch):")


def test_verbatim_gsm8k_mmlu_and_mbpp_rows_are_left_out_and_counted_by_benchmark(api, tutor):
    *examples, canary = read(api.get(f"/api/v1/task-groups/{tutor.pk}/training-data"))
    assert sorted(map(user_text, examples)) == sorted(PLANTED[s][0] for s in NOT_CAUGHT)
    check = canary["metadata"]["benchmark_check"]
    assert check["left_out"] == 5 and check["left_out_by_benchmark"] == {"gsm8k": 2, "mbpp": 1, "mmlu": 2}
    assert check["included_marked"] == 0 and canary["metadata"]["lines"] == 3
    assert check["overlaps"] == f"/api/v1/task-groups/{tutor.pk}/training-data?show=overlaps"
    assert check["index"] == contamination.current().key


def test_reworded_questions_are_not_caught(api, tutor):
    # The check's limit, said plainly: the same gsm8k and MMLU questions in other words share no 13 words in a row, so they are exported.
    index = contamination.current()
    assert index.find([("user", JANET_REWORDED)]) is None
    assert index.find([("user", GEOGRAPHY_REWORDED)]) is None
    exported = {user_text(line) for line in read(api.get(f"/api/v1/task-groups/{tutor.pk}/training-data"))[:-1]}
    assert {JANET_REWORDED, GEOGRAPHY_REWORDED} <= exported


def test_show_overlaps_lists_each_with_its_benchmark_row_and_match(api, owner_client, tutor):
    listed = read(api.get(f"/api/v1/task-groups/{tutor.pk}/training-data", {"show": "overlaps"}))
    found = {o["session_id"]: (o["benchmark"], o["row"], o["match"], o["role"]) for o in listed}
    assert found == {
        "gsm8k-verbatim": ("gsm8k", "0", "exact", "user"),
        "gsm8k-in-a-prompt": ("gsm8k", "0", "13-gram", "user"),
        "mmlu-verbatim": ("mmlu", "high_school_geography/0", "exact", "user"),
        "mmlu-stem": ("mmlu", "high_school_geography/0", "13-gram", "user"),
        "mbpp-answer": ("mbpp", "MBPP/11", "exact", "assistant"),
    }
    # The 13 words that matched, as normalised.
    stem = next(o for o in listed if o["session_id"] == "mmlu-stem")
    assert stem["text"] == "the main factor preventing subsistence economies from advancing economically is the lack of"
    response = owner_client.get(f"/traces/groups/{tutor.pk}/training-data.jsonl", {"show": "overlaps"})
    assert response["Content-Disposition"] == f'attachment; filename="group-{tutor.pk}-overlaps.jsonl"'
    assert read(response) == listed


def test_allow_benchmark_overlap_includes_them_marked(api, owner_client, tutor):
    *examples, canary = read(api.get(f"/api/v1/task-groups/{tutor.pk}/training-data", {"allow_benchmark_overlap": "1"}))
    assert len(examples) == len(PLANTED)
    marked = {user_text(line): line["benchmark_overlap"] for line in examples if "benchmark_overlap" in line}
    assert set(marked) == {PLANTED[s][0] for s in CAUGHT}
    assert marked[PLANTED["mmlu-verbatim"][0]] == {
        "benchmark": "mmlu",
        "row": "high_school_geography/0",
        "match": "exact",
        "role": "user",
        "text": contamination.normalise(GEOGRAPHY.input)[: contamination.QUOTE_CHARS],
    }
    check = canary["metadata"]["benchmark_check"]
    assert check["left_out"] == 0 and check["included_marked"] == 5 and check["included_marked_by_benchmark"] == {"gsm8k": 2, "mbpp": 1, "mmlu": 2}
    # The page's checkbox sends the same.
    page = read(owner_client.get(f"/traces/groups/{tutor.pk}/training-data.jsonl", {"allow_benchmark_overlap": "1"}))
    assert sum("benchmark_overlap" in line for line in page) == 5


def test_the_groups_page_offers_the_check_and_the_overlaps_page_counts_them(owner_client, tutor):
    groups = owner_client.get("/traces/groups/").content.decode()
    assert 'name="allow_benchmark_overlap"' in groups and f'formaction="/traces/groups/{tutor.pk}/overlaps/"' in groups
    response = owner_client.get(f"/traces/groups/{tutor.pk}/overlaps/")
    page = response.content.decode()
    assert response.status_code == 200
    assert "Checked 8 tasks of the export" in page and "5 overlap a benchmark" in page and "(gsm8k 2, mbpp 1, mmlu 2)" in page
    assert "high_school_geography/0" in page and "MBPP/11" in page and "/traces/sessions/mmlu-stem/?task=" in page
    assert f"/traces/groups/{tutor.pk}/training-data.jsonl?show=overlaps" in page


def test_the_overlaps_page_of_a_clean_group_says_so(api, owner_client):
    post_segmented(api, lambda base: support_session("a", "order 1", base) + support_session("b", "order 2", base + 10))
    page = owner_client.get(f"/traces/groups/{TaskGroup.objects.get(name='support').pk}/overlaps/").content.decode()
    assert "Checked 2 tasks of the export" in page and "none overlaps a benchmark" in page


def test_short_answers_and_prompt_templates_are_not_overlaps():
    index = contamination.current()
    # gsm8k's and MMLU's references, and MBPP's prompt header (in all 500 of its rows: a template, not a row).
    for text in ("18", "B", "The answer is 18.", "You are an expert Python programmer, and here is your task: Write a python function to parse my logs."):
        assert index.find([("assistant", text), ("user", text)]) is None, text
    # A row's own sentence after the same header is still caught.
    assert index.find([("user", "Write a python function to remove first and last occurrence of a given character from the string.")]) is not None


def test_the_canary_line_is_a_valid_example_and_the_same_in_every_export(api, project, tutor):
    url = f"/api/v1/task-groups/{tutor.pk}/training-data"
    first, second = read(api.get(url))[-1], read(api.get(url, {"allow_benchmark_overlap": "1"}))[-1]
    assert (
        first["messages"]
        == second["messages"]
        == [
            {"role": "user", "content": CANARY_QUESTION},
            {"role": "assistant", "content": f"BELVEDIR TRAINING DATA canary GUID {tutor.canary}"},
        ]
    )
    assert first["metadata"]["belvedir_canary"] == str(tutor.canary) and first["metadata"]["task_group"] == tutor.pk
    other = TaskGroup.objects.create(project=project, key="workflow:other", name="other")
    assert other.canary != tutor.canary and canary_answer(other) != canary_answer(tutor)
    # Only the group's tasks: an empty group's export is its canary line alone.
    (only,) = read(api.get(f"/api/v1/task-groups/{other.pk}/training-data"))
    assert only["metadata"]["belvedir_canary"] == str(other.canary) and only["metadata"]["lines"] == 0


def test_bad_parameters_are_refused(api, owner_client, tutor):
    url = f"/api/v1/task-groups/{tutor.pk}/training-data"
    response = api.get(url, {"allow_benchmark_overlap": "maybe"})
    assert response.status_code == 400 and "allow_benchmark_overlap takes 1 or 0" in response.json()["detail"]
    response = api.get(url, {"show": "everything"})
    assert response.status_code == 400 and "show takes 'overlaps'" in response.json()["detail"]
    page = owner_client.get(f"/traces/groups/{tutor.pk}/training-data.jsonl", {"show": "everything"})
    assert page.status_code == 400 and "show takes 'overlaps'" in page.content.decode()


def test_without_the_catalogs_data_the_export_is_refused_with_the_fix(api, owner_client, tutor, settings, tmp_path):
    settings.BENCHMARK_DATA_DIR = tmp_path / "nothing-installed"
    response = api.get(f"/api/v1/task-groups/{tutor.pk}/training-data")
    assert response.status_code == 503 and "install_benchmark_data" in response.json()["detail"]
    page = owner_client.get(f"/traces/groups/{tutor.pk}/overlaps/")
    assert page.status_code == 503 and "benchmark check cannot run" in page.content.decode()


class Tiny(Benchmark):
    name = "tiny"
    data_version = "v1"

    def load(self):
        return [
            Row("a", "the quick brown fox jumps over the lazy dog near the quiet river bank today", "a fox"),
            Row("b", "what colour is the sky on a clear summer afternoon", "the sky is blue on a clear day"),
        ]

    def version(self):
        return self.data_version


def test_the_index_is_built_once_per_catalog_version_and_reused(settings, tmp_path, monkeypatch):
    settings.BENCHMARK_DATA_DIR = tmp_path / "benchmarks"
    tiny = Tiny()
    monkeypatch.setattr(benchmarks, "CATALOG", {"tiny": tiny})
    first, built = contamination.ensure_built()
    assert built and first.parent == tmp_path / "benchmarks" / "overlap-index"
    assert contamination.ensure_built() == (first, False)
    index = contamination.current()
    assert contamination.current() is index
    assert index.find([("user", "Tell me: THE QUICK BROWN FOX JUMPS OVER THE LAZY DOG NEAR THE QUIET RIVER BANK today, fast.")]) == contamination.Overlap(
        "tiny", "a", "13-gram", "user", "the quick brown fox jumps over the lazy dog near the quiet river"
    )
    # Under 13 words: only the whole text counts, and only from five words and twenty characters.
    assert index.find([("assistant", "The sky is blue on a clear day!")]).as_dict()["match"] == "exact"
    assert index.find([("assistant", "a fox")]) is None
    assert index.find([("user", "what colour is the sky on a clear summer afternoon in Paris")]) is None
    # New data: a new index, and the old one removed.
    tiny.data_version = "v2"
    second = contamination.current()
    assert second is not index and second.directory != first and not first.exists()


class Twenty(Tiny):
    name = "twenty"

    def load(self):
        return [Row("words", " ".join(WORDS), "")]


WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa quebec romeo sierra tango".split()


def test_thirteen_words_in_a_row_are_an_overlap_and_twelve_are_not(settings, tmp_path, monkeypatch):
    settings.BENCHMARK_DATA_DIR = tmp_path / "benchmarks"
    monkeypatch.setattr(benchmarks, "CATALOG", {"twenty": Twenty()})
    index = contamination.current()

    def around(words):
        return f"before {' '.join(words)} after"  # other words either side: only the run itself can match

    for start in (0, 7):  # at the row's start, and inside it up to its last word
        assert index.find([("user", around(WORDS[start : start + 12]))]) is None
        assert index.find([("user", around(WORDS[start : start + 13]))]) == contamination.Overlap(
            "twenty", "words", "13-gram", "user", " ".join(WORDS[start : start + 13])
        )
    # Two runs of twelve that together hold every word of the row, broken by one word: no 13 in a row.
    assert index.find([("user", around([*WORDS[:12], "zulu", *WORDS[12:]]))]) is None
    # Thirteen words split between two messages are no run: a 13-gram never spans two texts.
    assert index.find([("user", " ".join(WORDS[:7])), ("assistant", " ".join(WORDS[7:13]))]) is None
