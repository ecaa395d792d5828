import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from convert_openclaw import convert, parse_stream, task_row  # noqa: E402


def stream(name):
    return parse_stream((HERE / "samples" / name).read_text())


def test_it_reads_the_final_result_and_counts_tool_steps():
    parsed = stream("task-1.ndjson")
    assert parsed["ok"] and parsed["finished"] and parsed["steps"] == 2
    assert parsed["answer"].startswith('I wrote "hi"') and parsed["model"] == "gpt-4o"
    assert (parsed["input_tokens"], parsed["output_tokens"]) == (1830, 96)


def test_an_error_in_the_result_meta_fails_a_task_without_check():
    parsed = stream("task-2.ndjson")
    assert not parsed["ok"] and "429" in parsed["error"]
    row = task_row("fetch the data", None, parsed, exit_code=0)
    assert row["verdict"] == "failed" and "429" in row["reason"] and row["steps"] == 1


def test_stream_json_results_are_understood_too():
    parsed = stream("task-3-stream-json.ndjson")
    assert parsed["ok"] and parsed["steps"] == 2 and parsed["answer"] == "There is one file, notes.txt."
    assert (parsed["input_tokens"], parsed["output_tokens"]) == (2210, 85)


def test_a_check_command_decides_over_the_agents_own_result():
    ok = stream("task-1.ndjson")
    assert task_row("t", "test -f hello.txt", ok, 0, check_passed=False, check_output="no file")["verdict"] == "failed"
    assert task_row("t", "test -f hello.txt", stream("task-2.ndjson"), 0, check_passed=True)["verdict"] == "solved"


def test_output_without_a_final_result_fails():
    parsed = parse_stream('{"type":"run_start"}\nSegmentation fault\n')
    assert not parsed["finished"] and task_row("t", None, parsed, 139)["verdict"] == "failed"


def test_the_run_scores_the_fraction_solved():
    runs = [stream("task-1.ndjson"), stream("task-2.ndjson"), stream("task-3-stream-json.ndjson")]
    rows = [task_row("a", "true", runs[0], 0, True), task_row("b", None, runs[1], 0), task_row("c", None, runs[2], 0)]
    results = convert(rows, "", runs)
    assert results["score"] == 2 / 3 and (results["total"], results["solved"], results["failed"]) == (3, 2, 1)
    assert results["model"] == "gpt-4o" and results["input_tokens"] == 1830 + 1201 + 2210
    assert [t["verdict"] for t in results["tasks"]] == ["solved", "failed", "solved"]
