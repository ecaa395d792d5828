import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from convert_mtbench import convert, read_jsonl  # noqa: E402


def sample():
    return read_jsonl((HERE / "samples" / "gpt-4o_single.jsonl").read_text())


def test_it_scores_the_mean_rating_of_the_answered_model_only():
    results = convert(sample(), "candidate", "my-finetune-v2")
    assert results["score"] == (8 + 3 + 9) / 3
    assert results["model"] == "my-finetune-v2" and results["judge"] == "gpt-4o"
    assert (results["total"], results["judgments"], results["unrated"]) == (2, 3, 1)
    assert results["turns"] == {"1": 8.5, "2": 3.0}


def test_each_question_keeps_its_turn_ratings():
    questions = convert(sample(), "candidate")["questions"]
    assert questions == [{"question_id": 81, "turn_1": 8, "turn_2": 3}, {"question_id": 82, "turn_1": 9}]


def test_without_a_label_the_answering_model_is_reported():
    assert convert(sample(), "vicuna-13b-v1.3")["model"] == "vicuna-13b-v1.3"
    assert convert(sample(), "vicuna-13b-v1.3")["score"] == 6
