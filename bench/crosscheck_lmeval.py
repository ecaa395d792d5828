"""Belvedir's evals against lm-eval's on the same server, rows and generation settings (issue #41).

For each check (a benchmark in a mode) the first --limit rows of Belvedir's
split (mmlu: the first rows of each subject, --limit in all, so every
subject's description is sent) are scored twice: by Belvedir's engine in
this process, and by lm-eval 0.4.13 in its own virtualenv, given those rows
as a local JSON dataset under a task that `include:`s lm-eval's own task
YAML (its prompts, filters and metrics; only the data and task name are
replaced). Prints both scores, the share of rows where both took the same
answer (log-likelihood: the same argmax option, for each metric; and how
many requests were byte for byte the same text), and each row that differs.

lm-eval scores log-likelihoods with a tokenizer of its own: one is written
from the GGUF's vocabulary (its `tokenizer` subcommand, run in lm-eval's
virtualenv, needs `gguf` and `transformers` there), and requests go as text
(`tokenized_requests=False`), as this server takes no token ids.

Usage (the local model server running: manage.py serve_local_model --port 8011):
  .venv/bin/python bench/crosscheck_lmeval.py --limit 200 [--only arc_challenge:loglikelihood,mmlu:loglikelihood]
Uses a throwaway SQLite database under a temporary directory.
"""

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LETTERS = "ABCDEFGHIJ"
# check -> (Belvedir benchmark, mode, its options, lm-eval's task YAML it includes, relative to lm_eval/tasks).
CHECKS = {
    "arc_challenge:loglikelihood": ("arc_challenge", "loglikelihood", {}, "arc/arc_challenge.yaml"),
    "mmlu:loglikelihood": ("mmlu", "loglikelihood", {}, "mmlu/default/mmlu_{subject}.yaml"),
    "arc_challenge:generative": ("arc_challenge", "generative", {"lm_eval_prompt": True}, "arc/arc_challenge_chat.yaml"),
    "gsm8k:generative": ("gsm8k", "generative", {"lm_eval_prompt": True}, "gsm8k/gsm8k-cot-zeroshot.yaml"),
}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--base-url", default="http://127.0.0.1:8011/v1")
    parser.add_argument("--model", default="SmolLM2-135M-Instruct")
    parser.add_argument("--limit", type=int, default=200)
    parser.add_argument("--only", default=",".join(CHECKS), help=f"Checks, comma-separated: {', '.join(CHECKS)}.")
    parser.add_argument("--lmeval-python", default="/work/lmeval-venv/bin/python")
    parser.add_argument("--gguf", default=str(ROOT / "var" / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"))
    parser.add_argument("--workdir", default="", help="Where lm-eval's data, tasks and outputs go (default: a temporary directory).")
    parser.add_argument("--show", type=int, default=10, help="How many differing rows to print in full per check.")
    args = parser.parse_args()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="bv-crosscheck-"))
    work.mkdir(parents=True, exist_ok=True)
    setup_django()
    tokenizer = work / "tokenizer"
    if not (tokenizer / "tokenizer.json").exists():
        subprocess.run([args.lmeval_python, __file__, "tokenizer", args.gguf, str(tokenizer)], check=True)
    tasks_dir = Path(
        subprocess.check_output([args.lmeval_python, "-c", "import lm_eval.tasks, os; print(os.path.dirname(lm_eval.tasks.__file__))"], text=True).strip()
    )
    print(f"machine: {os.cpu_count()} CPUs; server {args.base_url} ({args.model}); lm-eval tasks from {tasks_dir}; work in {work}")
    for check in args.only.split(","):
        run_check(check, args, work / check.replace(":", "_"), tasks_dir, tokenizer)


def setup_django():
    os.environ.setdefault("BELVEDIR_BENCHMARK_DATA_DIR", str(ROOT / "var" / "benchmarks"))
    os.environ.update(
        BELVEDIR_VAR_DIR=tempfile.mkdtemp(prefix="bv-bench-"),
        DJANGO_SETTINGS_MODULE="belvedir.settings",
        LOG_LEVEL="WARNING",
        BELVEDIR_ALLOW_PRIVATE_DEPLOYMENTS="1",
    )
    os.environ.pop("DATABASE_URL", None)
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def selected_rows(name: str, rows, limit: int) -> list[int]:
    """The first `limit` rows; mmlu's first rows of each subject, round by round, so all 57 descriptions are sent."""
    if name != "mmlu":
        return list(range(min(limit, len(rows))))
    by_subject = defaultdict(list)
    for i, row in enumerate(rows):
        by_subject[row.categories["subject"]].append(i)
    per_subject = math.ceil(limit / len(by_subject))
    return sorted(i for indices in by_subject.values() for i in indices[:per_subject])


def belvedir_side(name, mode, options, indices, args):
    """Belvedir's samples of the rows (by row index), from its engine run in this process on exactly those rows."""
    from belvedir.core.actions import create_account
    from evals import benchmarks
    from evals.actions import plan_eval
    from evals.engine import EvalRun
    from evals.models import Deployment, Eval, Sample
    from evals.tasks import run_async, spec_for

    user = create_account(username=f"bench-{time.monotonic_ns()}", password=None)
    project = user.memberships.get().project
    style = Deployment.Style.COMPLETIONS if mode == "loglikelihood" else Deployment.Style.CHAT
    deployment = Deployment.objects.create(project=project, name="local", base_url=args.base_url, model=args.model, api_style=style, max_in_flight=4)
    # Planned as create_eval plans it, but never queued: this process runs it, on exactly these rows.
    fields = plan_eval(project, deployment=deployment, benchmark=name, mode=mode, benchmark_options=options)
    ev = Eval.objects.create(**{**fields, "status": Eval.Status.RUNNING, "total": len(indices)}, created_by=user)
    spec = spec_for(ev)
    rows = spec.rows()
    started = time.perf_counter()
    run_async(EvalRun(ev, spec, [(i, rows[i]) for i in indices]).run())
    wall = time.perf_counter() - started
    samples = {s.row_index: s for s in Sample.objects.filter(eval=ev)}
    return spec, benchmarks.get(name), samples, wall


def run_check(check, args, work, tasks_dir, tokenizer):
    name, mode, options, include = CHECKS[check]
    from evals import benchmarks

    work.mkdir(parents=True, exist_ok=True)
    rows = benchmarks.get(name).rows()
    indices = selected_rows(name, rows, args.limit)
    spec, _, samples, wall = belvedir_side(name, mode, options, indices, args)
    tasks = write_tasks(name, rows, indices, work, tasks_dir, include)
    started = time.perf_counter()
    logged = run_lmeval(mode, tasks, work, args, tokenizer)
    lm_wall = time.perf_counter() - started
    print(f"\n== {check} {options or ''}: {len(indices)} rows; Belvedir {wall:.0f} s, lm-eval {lm_wall:.0f} s")
    errors = [i for i in indices if samples.get(i) is None or samples[i].error]
    if errors:
        print(f"Belvedir errors on {len(errors)} rows, e.g. row {errors[0]}: {samples[errors[0]].error if errors[0] in samples else 'not stored'}")
    if mode == "loglikelihood":
        compare_loglikelihood(spec, rows, indices, samples, logged, args.show)
    else:
        compare_generative(name, spec, rows, indices, samples, logged, args.show)


# -- lm-eval's side ----------------------------------------------------------


def lm_eval_doc(name, row) -> dict:
    """A row in the schema of the HF dataset lm-eval's task reads."""
    if name == "arc_challenge":
        return {
            "id": row.id,
            "question": row["stem"],
            "choices": {"text": row["options"], "label": list(LETTERS[: len(row["options"])])},
            "answerKey": row.reference,
        }
    if name == "mmlu":
        return {"question": row["stem"], "subject": row.categories["subject"], "choices": row["options"], "answer": LETTERS.index(row.reference)}
    # lm-eval's gsm8k target is the whole solution; its exact_match drops everything up to '#### '.
    return {"question": row.input, "answer": f"#### {row.reference}"}


def write_tasks(name, rows, indices, work, tasks_dir, include) -> dict[str, list[int]]:
    """One task per lm-eval task included (mmlu: per subject), each with a JSON file of its rows; task name -> row indices in doc order."""
    groups = defaultdict(list)
    for i in indices:
        groups[rows[i].categories.get("subject", "")].append(i)
    tasks = {}
    for subject, members in groups.items():
        task = f"crosscheck_{name}" + (f"_{subject}" if subject else "")
        data = work / f"{task}.jsonl"
        data.write_text("".join(json.dumps(lm_eval_doc(name, rows[i])) + "\n" for i in members))
        config = {
            "include": str(tasks_dir / include.format(subject=subject)),
            "task": task,
            "tag": [],
            "dataset_path": "json",
            "dataset_name": None,
            "dataset_kwargs": {"data_files": {"test": str(data)}},
            "training_split": None,
            "validation_split": None,
            "fewshot_split": None,
            "test_split": "test",
            "num_fewshot": 0,
        }
        (work / f"{task}.yaml").write_text(json.dumps(config, indent=1))  # JSON is YAML
        tasks[task] = members
    return tasks


def run_lmeval(mode, tasks, work, args, tokenizer) -> dict[int, list[dict]]:
    """lm-eval's logged samples by Belvedir row index (one per filter)."""
    out = work / "out"
    shutil.rmtree(out, ignore_errors=True)  # a reused --workdir: only this run's samples are read
    if mode == "loglikelihood":
        model = "local-completions"
        model_args = f"base_url={args.base_url}/completions,model={args.model},tokenizer={tokenizer},tokenizer_backend=huggingface,tokenized_requests=False"
        extra = []
    else:
        model = "local-chat-completions"
        model_args = f"base_url={args.base_url}/chat/completions,model={args.model},tokenizer_backend=none,tokenized_requests=False"
        extra = ["--apply_chat_template"]
    command = [
        args.lmeval_python, "-m", "lm_eval", "run", "--model", model, "--model_args", f"{model_args},num_concurrent=1,max_retries=3,timeout=600",
        "--tasks", ",".join(tasks), "--include_path", str(work), "--output_path", str(out), "--log_samples", "--batch_size", "1", *extra,
    ]  # fmt: skip
    env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_CACHE": str(work / "hf-cache")}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    log = work / "lm_eval.log"
    with log.open("w") as handle:
        if subprocess.run(command, env=env, stdout=handle, stderr=subprocess.STDOUT).returncode:
            sys.exit(f"lm-eval failed; its output: {log}\n" + log.read_text()[-3000:])
    logged = defaultdict(list)
    for task, members in tasks.items():
        (path,) = out.rglob(f"samples_{task}_*.jsonl")
        for line in path.read_text().splitlines():
            sample = json.loads(line)
            logged[members[sample["doc_id"]]].append(sample)
    return logged


# -- comparing ---------------------------------------------------------------


def argmax(values) -> int:
    return max(range(len(values)), key=lambda i: (values[i], -i))


def lm_eval_requests(sample) -> list[str]:
    """The texts lm-eval sent for a sample, whatever shape its log gives the arguments."""
    arguments = sample["arguments"]
    items = arguments.values() if isinstance(arguments, dict) else arguments
    texts = []
    for item in items:
        parts = list(item.values()) if isinstance(item, dict) else list(item)
        texts.append("".join(p for p in parts[:2] if isinstance(p, str)))
    return texts


def compare_loglikelihood(spec, rows, indices, samples, logged, show):
    same = {"acc": 0, "acc_norm": 0}
    right = {"belvedir": defaultdict(float), "lm-eval": defaultdict(float)}
    same_text, requests, worst, differing = 0, 0, 0.0, []
    metrics = spec.loglikelihood_metrics
    for i in indices:
        row, sample, (theirs,) = rows[i], samples[i], logged[i]
        ours = [c["loglikelihood"] for c in sample.scores["choices"]]
        lls = [float(r[0]) for r in theirs["filtered_resps"]]  # logged as text
        chars = [len(t) for t in row["options"]] if spec.name != "mmlu" else [1] * len(ours)
        picks = {
            "acc": (argmax(ours), argmax(lls)),
            "acc_norm": (argmax([v / n for v, n in zip(ours, chars, strict=True)]), argmax([v / n for v, n in zip(lls, chars, strict=True)])),
        }
        for metric in metrics:
            same[metric] += picks[metric][0] == picks[metric][1]
            right["belvedir"][metric] += sample.scores[metric]
            right["lm-eval"][metric] += theirs[metric]
        sent = [o.context + o.continuation for o in spec.choices(row)]
        requests += len(sent)
        same_text += sum(a == b for a, b in zip(sent, lm_eval_requests(theirs), strict=True))
        worst = max(worst, *(abs(a - b) for a, b in zip(ours, lls, strict=True)))
        if any(picks[m][0] != picks[m][1] for m in metrics):
            differing.append((i, row, ours, lls, picks))
    n = len(indices)
    for metric in metrics:
        b, t = right["belvedir"][metric] / n * 100, right["lm-eval"][metric] / n * 100
        print(f"{metric:8}  Belvedir {b:6.2f}   lm-eval {t:6.2f}   diff {b - t:+.2f} pts   same argmax {same[metric]}/{n} = {same[metric] / n:.1%}")
    print(f"requests with the same text: {same_text}/{requests}; largest |loglikelihood difference| {worst:.4f}")
    for i, row, ours, lls, picks in differing[:show]:
        print(f"  row {i} ({row.id}), answer {row.reference}: picks {picks}")
        print(f"    Belvedir {[round(v, 4) for v in ours]}\n    lm-eval  {[round(v, 4) for v in lls]}")


def compare_generative(name, spec, rows, indices, samples, logged, show):
    from evals.scoring.extraction import normalize_number

    n, same_output, same_answer, same_messages, ours_right, differing = len(indices), 0, 0, 0, 0.0, []
    theirs_right = defaultdict(float)
    # gsm8k: Belvedir's answer (the number after '####', else the last) against lm-eval's flexible-extract (the last number-like run).
    answer_filter = "flexible-extract" if name == "gsm8k" else "remove_whitespace"
    for i in indices:
        sample, by_filter = samples[i], {s.get("filter", ""): s for s in logged[i]}
        theirs = by_filter[answer_filter]
        for key, s in by_filter.items():
            theirs_right[key] += s["exact_match"]
        ours_right += sample.score or 0
        their_text = theirs["resps"][0][0]
        their_answer = theirs["filtered_resps"][0]
        if name == "gsm8k":
            agree = normalize_number(sample.extracted or "") == normalize_number(their_answer)
        else:
            agree = sample.extracted == their_answer.strip()
        sent_messages, sent_settings = theirs["arguments"]["gen_args_0"]["arg_0"], theirs["arguments"]["gen_args_0"]["arg_1"]
        same_messages += json.loads(sent_messages[0]) == spec.prompt(rows[i])
        same_output += sample.output == their_text
        same_answer += agree
        if not agree or sample.output != their_text:
            differing.append((i, rows[i], sample, their_text, their_answer, agree))
    print(f"score     Belvedir {ours_right / n * 100:6.2f}   " + "   ".join(f"lm-eval {k} {v / n * 100:6.2f}" for k, v in theirs_right.items()))
    print(f"same messages sent {same_messages}/{n}; generation: Belvedir {spec.generation_for(rows[indices[0]])}, lm-eval {sent_settings}")
    print(f"same output text {same_output}/{n} = {same_output / n:.1%}; same answer ({answer_filter}) {same_answer}/{n} = {same_answer / n:.1%}")
    for i, row, sample, their_text, their_answer, agree in differing[:show]:
        print(f"  row {i} ({row.id}), reference {row.reference!r}, {'same answer' if agree else 'answers differ'}:")
        print(f"    Belvedir {sample.extracted!r} from {sample.output[:300]!r}\n    lm-eval  {their_answer!r} from {their_text[:300]!r}")


# -- the tokenizer, in lm-eval's virtualenv ----------------------------------


def write_tokenizer(gguf_path: str, out: str):
    """A Hugging Face tokenizer of the GGUF's own vocabulary: llama.cpp's 'smollm' pre-tokenizer is GPT-2's byte-level BPE with digits split one by one."""
    from gguf import GGUFReader
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    fields = GGUFReader(gguf_path).fields

    def value(key):
        return fields[key].contents()

    assert value("tokenizer.ggml.model") == "gpt2" and value("tokenizer.ggml.pre") == "smollm", "only SmolLM2's GPT-2-style vocabulary is written"
    tokens, types = value("tokenizer.ggml.tokens"), value("tokenizer.ggml.token_type")
    merges = [tuple(m.split(" ", 1)) for m in value("tokenizer.ggml.merges")]
    tokenizer = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges, fuse_unk=False))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)]
    )
    tokenizer.decoder = decoders.ByteLevel()
    # Control tokens (type 3) are matched whole, as llama.cpp parses special tokens in a prompt.
    tokenizer.add_special_tokens([t for t, kind in zip(tokens, types, strict=True) if kind == 3])
    Path(out).mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(Path(out) / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": tokens[value("tokenizer.ggml.bos_token_id")],
        "eos_token": tokens[value("tokenizer.ggml.eos_token_id")],
        "unk_token": tokens[value("tokenizer.ggml.unknown_token_id")],
        "add_bos_token": bool(value("tokenizer.ggml.add_bos_token")),
        "model_max_length": 8192,
    }
    (Path(out) / "tokenizer_config.json").write_text(json.dumps(config, indent=1))


if __name__ == "__main__":
    if sys.argv[1:2] == ["tokenizer"]:
        write_tokenizer(*sys.argv[2:4])
    else:
        main()
