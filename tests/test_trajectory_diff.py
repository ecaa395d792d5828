"""Two trajectories side by side: the alignment on hand-made step sequences, then sessions through the page, the API and scoping."""

import pytest

from traces.diff import align

from .test_trajectory import llm_span, post, tool_span

LLM = ("llm", "")


def tool(name):
    return ("tool", name)


AGENT = [LLM, tool("read"), LLM, tool("edit"), LLM, tool("test"), LLM]


def test_identical_trajectories_align_step_for_step():
    assert align(AGENT, AGENT) == [(i, i) for i in range(len(AGENT))]


def test_a_step_inserted_on_one_side_leaves_the_rest_aligned():
    rerun = AGENT[:3] + [tool("grep"), LLM] + AGENT[3:]
    pairs = align(AGENT, rerun)
    assert pairs == [(0, 0), (1, 1), (2, 2), (None, 3), (None, 4), (3, 5), (4, 6), (5, 7), (6, 8)]


def test_a_step_deleted_on_one_side_leaves_the_rest_aligned():
    shorter = AGENT[:1] + AGENT[3:]  # the read and the LLM call after it are gone
    assert align(AGENT, shorter) == [(0, 0), (1, None), (2, None), (3, 1), (4, 2), (5, 3), (6, 4)]


def test_another_tool_at_the_same_place_is_a_change_and_a_tool_never_pairs_with_an_llm_call():
    swapped = [LLM, tool("read"), LLM, tool("bash"), LLM, tool("test"), LLM]
    assert align(AGENT, swapped) == [(i, i) for i in range(len(AGENT))]
    # Alignment by index would pair the first tool with the second LLM call.
    assert align([LLM, tool("read"), LLM], [tool("read"), LLM]) == [(0, None), (1, 0), (2, 1)]


def test_among_equal_keys_the_step_with_the_same_content_is_the_one_aligned():
    asked, answered, extra = ("llm", "", "asked"), ("llm", "", "answered"), ("llm", "", "one more")
    assert align([asked, answered], [asked, answered, extra]) == [(0, 0), (1, 1), (None, 2)]
    assert align([asked, answered], [asked, extra, answered]) == [(0, 0), (None, 1), (1, 2)]
    # Content never outweighs the keys: a changed answer still pairs rather than open two gaps.
    assert align([asked, answered], [asked, extra]) == [(0, 0), (1, 1)]


def test_two_long_repetitive_trajectories_align_with_the_best_score():
    import random

    rng = random.Random(7)
    keys = [LLM, tool("a"), tool("b"), tool("c")]
    a = [rng.choice(keys) for _ in range(60)]
    b = [rng.choice(keys) for _ in range(45)]

    def score(pairs):
        return sum(-1 if None in (i, j) else 2 if a[i] == b[j] else 0 if a[i][0] == b[j][0] else -3 for i, j in pairs)

    best = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]  # the textbook recurrence, cell by cell
    for i in range(len(a) + 1):
        for j in range(len(b) + 1):
            if not i or not j:
                best[i][j] = -(i + j)
                continue
            pair = 2 if a[i - 1] == b[j - 1] else 0 if a[i - 1][0] == b[j - 1][0] else -3
            best[i][j] = max(best[i - 1][j - 1] + pair, best[i - 1][j] - 1, best[i][j - 1] - 1)
    pairs = align(a, b)
    assert score(pairs) == best[-1][-1]
    assert [i for i, _ in pairs if i is not None] == list(range(len(a))) and [j for _, j in pairs if j is not None] == list(range(len(b)))


def run_of(session_id, *, city="Oslo", extra_tool=False, answer="It is snowing."):
    start = 1_700_000_000.0
    spans = [llm_span(session_id, start, call_arguments=f'{{"city": "{city}"}}'), tool_span(session_id, start + 1, arguments=f'{{"city": "{city}"}}')]
    if extra_tool:
        spans.append(tool_span(session_id, start + 2, name="get_forecast", result="More snow"))
    spans.append(llm_span(session_id, start + 3, answer=answer, call_arguments=None))
    return spans


@pytest.mark.django_db
def test_the_diff_marks_the_first_divergence_and_what_changed_per_step(api, owner_client):
    post(api, run_of("A"))
    post(api, run_of("B", city="Bergen", extra_tool=True, answer="It is raining."))
    body = api.get("/api/v1/session-diff", {"a": "A", "b": "B"}).json()
    assert [(r["status"], r["changes"]) for r in body["rows"]] == [
        ("changed", ["arguments"]),
        ("changed", ["arguments"]),
        ("only_b", []),
        ("changed", ["message"]),
    ]
    assert body["first_divergence"] == 0
    assert (body["a"]["steps"], body["b"]["steps"], body["a"]["tool_calls"], body["b"]["tool_calls"]) == (3, 4, 1, 2)
    assert body["b"]["tokens"] == 300 and body["a"]["outcome"] == "" and body["a"]["duration_ms"] == 3500.0
    assert api.get("/api/v1/session-diff", {"a": "A", "b": "A"}).json()["first_divergence"] is None
    # A rerun that thought once more before answering: that call is the extra one, not the answer both gave.
    post(api, run_of("C") + [llm_span("C", 1_700_000_002.5, answer="Let me think again.", call_arguments=None)])
    longer = api.get("/api/v1/session-diff", {"a": "A", "b": "C"}).json()
    assert [r["status"] for r in longer["rows"]] == ["same", "same", "only_b", "same"] and longer["first_divergence"] == 2
    page = owner_client.get("/traces/diff/", {"s": ["A", "B"]}).content.decode()
    assert 'class="diff-row changed first-divergence"' in page and "They diverge at" in page
    assert "only in B" in page and "<strong>get_forecast</strong>" in page and "Bergen" in page
    assert "The two trajectories take the same steps." in owner_client.get("/traces/diff/", {"s": ["A", "A"]}).content.decode()
    assert owner_client.get("/traces/diff/", {"s": ["A"]}).status_code == 400
    assert api.get("/api/v1/session-diff", {"a": "A"}).status_code == 400
    # The session list offers the pick.
    listing = owner_client.get("/traces/").content.decode()
    assert 'name="s" value="A"' in listing and "Compare the two ticked sessions" in listing
