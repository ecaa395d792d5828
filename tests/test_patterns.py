"""Users' regex patterns (the eval regex scorer, the evaluators' regex check) are bounded before they are compiled."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from evals.datasets.versions import create_dataset
from evals.models import Deployment, Eval
from evals.scoring.base import ScoringError
from evals.scoring.checks import regex
from evals.scoring.patterns import MAX_DEPTH, MAX_LENGTH, MAX_REPEAT, PatternError, compile_pattern
from traces.models import Evaluator

# 24 bytes that took a worker 540 MB to compile (the module's cache kept it there).
MULTIPLIED = "(?:(?:a{200}){200}){50}"
# Nested groups: RecursionError inside the engine's parser, a 500.
TOO_LONG = "(" * 3000 + "a" + ")" * 3000
TOO_DEEP = "(" * 400 + "a" + ")" * 400  # 801 characters, within the length limit

HOSTILE = [
    (MULTIPLIED, "is too large to compile: over 50,000 items"),
    (TOO_LONG, f"is too long: 6,001 characters (limit {MAX_LENGTH:,})"),
    (TOO_DEEP, f"nests groups more than {MAX_DEPTH} deep"),
    ("a{1001}", f"repeats 1,001 times (limit {MAX_REPEAT:,} for a counted repeat)"),
    ("(?x) a # comment [", "uses verbose mode (?x)"),
]


@pytest.fixture
def dataset(project, owner):
    return create_dataset(project, owner, "capitals", b'{"input": "Capital of France?", "expected": "Paris"}\n')


@pytest.mark.parametrize("pattern, message", HOSTILE)
@pytest.mark.django_db
def test_it_refuses_a_hostile_evaluator_pattern_with_a_400_naming_the_limit(api, pattern, message):
    response = api.post("/api/v1/evaluators", {"name": "hostile", "kind": "code", "config": {"check": "regex", "pattern": pattern}}, format="json")
    assert response.status_code == 400 and message in json.dumps(response.json()), response.content[:300]
    assert not Evaluator.objects.exists()


@pytest.mark.parametrize("pattern, message", HOSTILE)
@pytest.mark.django_db
def test_it_refuses_a_hostile_eval_scorer_pattern_with_a_400_naming_the_limit(api, project, dataset, pattern, message):
    Deployment.objects.create(project=project, name="fake", base_url="https://api.example.com/v1", model="m")
    scorers = [{"name": "regex", "options": {"pattern": pattern}}]
    response = api.post("/api/v1/evals", {"dataset_id": dataset.pk, "deployment": "fake", "scorers": scorers}, format="json")
    assert response.status_code == 400 and message in json.dumps(response.json()), response.content[:300]
    assert not Eval.objects.exists()


@pytest.mark.django_db
def test_ordinary_patterns_are_accepted_and_score(api, project, dataset):
    Deployment.objects.create(project=project, name="fake", base_url="https://api.example.com/v1", model="m")
    scorers = [{"name": "regex", "options": {"pattern": r"(?i)\b{expected}\b"}}]
    assert api.post("/api/v1/evals", {"dataset_id": dataset.pk, "deployment": "fake", "scorers": scorers}, format="json").status_code == 201
    created = api.post("/api/v1/evaluators", {"name": "paris", "kind": "code", "config": {"check": "regex", "pattern": r"\bParis\b"}}, format="json")
    assert created.status_code == 201

    assert regex("The capital is Paris.", "", pattern=r"\bParis\b") == 1.0
    assert regex("Parisian cafés", "", pattern=r"\bParis\b") == 0.0
    assert regex("It is PARIS.", "Paris", pattern=r"(?i)\b{expected}\b") == 1.0
    assert regex("It is PARIS.", "Paris", pattern=r"\b{expected}\b") == 0.0  # case-sensitive without (?i)
    assert regex("costs $1.50 (x2)", "$1.50 (x2)") == 1.0  # no pattern: the expected answer, escaped
    assert regex("100%", "", pattern=r"\d+(?=%)") == 1.0  # lookarounds are kept (the regex engine, not RE2)
    assert regex("a" * 1000, "", pattern="a{1000}") == 1.0  # a counted repeat up to the limit


def test_an_expected_answer_that_makes_the_pattern_too_large_errors_the_sample_clearly():
    with pytest.raises(ScoringError, match="too large to compile.*the sample was not scored"):
        regex("x", "y" * 100, pattern="(?:{expected}){1000}")


@pytest.mark.parametrize(
    "pattern",
    [
        "(?:a{1000})*{1000}",  # a count on an unbounded repeat still unrolls it
        "(?#[)a{1000}{1000}",  # a comment's [ does not hide what follows it
        "(?:(a){1000}){50}",  # capturing groups count: 34 MB without them counted
    ],
)
def test_the_measure_is_not_fooled(pattern):
    with pytest.raises(PatternError, match="too large"):
        compile_pattern(pattern)


def test_compiling_a_hostile_pattern_keeps_memory_bounded():
    # In a fresh interpreter, so the figure is this compile's and nothing else's.
    script = f"""
import resource, sys
sys.path.insert(0, {str(Path(__file__).resolve().parent.parent)!r})
from evals.scoring.patterns import PatternError, compile_pattern
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
refused = []
for pattern in {[MULTIPLIED, "(?:(?:a{300}){300}){100}", "a{4000000}", "(?:a{1000}){50}"]!r}:
    try:
        compile_pattern(pattern)
    except PatternError as exc:
        refused.append(pattern)
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before, len(refused))
"""
    grown_kb, refused = map(int, subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout.split())
    assert refused == 3  # the largest allowed, (?:a{1000}){50}, is compiled
    assert grown_kb < 50 * 1024
