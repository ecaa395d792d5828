"""FastChat's MT-Bench single-answer judgments into Belvedir's results.json.

`gen_judgment.py --mode single` appends to `data/mt_bench/model_judgment/<judge>_single.jsonl`
one line per (question, turn): `question_id`, `model`, `judge` ([judge model, prompt name]),
`judgment` (the judge's text ending "Rating: [[N]]"), `score` (N, or -1 when no rating was
found), `turn`, `tstamp`. The score is the mean rating, 1-10, as FastChat's show_result reports it.
"""

import json


def read_jsonl(text):
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def convert(judgments, answered_model, label=""):
    mine = [j for j in judgments if j.get("model") == answered_model]
    rated = [j for j in mine if isinstance(j.get("score"), (int, float)) and j["score"] >= 0]
    by_turn = {}
    for j in rated:
        by_turn.setdefault(j.get("turn", 1), []).append(j["score"])
    questions = {}
    for j in rated:
        questions.setdefault(j["question_id"], {})[f"turn_{j.get('turn', 1)}"] = j["score"]
    judge = (mine[0].get("judge") or [""])[0] if mine else ""
    return {
        "score": sum(j["score"] for j in rated) / len(rated) if rated else 0.0,
        "model": label or answered_model,
        "judge": judge,
        "total": len({j["question_id"] for j in mine}),
        "judgments": len(rated),
        "unrated": len(mine) - len(rated),
        "turns": {str(t): sum(s) / len(s) for t, s in sorted(by_turn.items())},
        "questions": [{"question_id": q, **scores} for q, scores in sorted(questions.items())],
    }
