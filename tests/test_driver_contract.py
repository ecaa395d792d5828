"""A contract lint of every shipped driver: what its preset runs exists, writes results.json,
flushes its traces, fails loudly, and its README names the upstream and its version."""

import ast
import importlib
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harnesses import drivers

SHARED = drivers.SOURCE / "_shared"
PRESETS = [
    *importlib.import_module("harnesses.migrations.0006_presets_use_shipped_drivers").PRESETS,
    importlib.import_module("harnesses.migrations.0012_local_model").PRESET,
]
FIRST_PARTY = {"reference-agent", "local-model"}
PINNED = re.compile(r"==\d|@\d|\bv\d+\.\d+|commit\s+`?[0-9a-f]{40}|version \d")


def driver_of(preset) -> Path:
    return drivers.SOURCE / preset["repo_url"].removeprefix("{drivers}/").removesuffix(".git")


def files_named(command: str, directory: Path) -> list[Path]:
    return [directory / word for word in command.split() if re.fullmatch(r"[\w.-]+\.(py|sh|js)", word)]


def checkout(preset, tmp_path) -> Path:
    """The driver as its repository holds it: its folder plus the shared helpers."""
    dest = tmp_path / preset["slug"]
    shutil.copytree(driver_of(preset), dest, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(SHARED / "belvedir_driver.py", dest)
    return dest


@pytest.mark.parametrize("preset", PRESETS, ids=lambda p: p["slug"])
def test_it_has_what_its_preset_runs(preset):
    directory = driver_of(preset)
    assert directory.is_dir(), f"no driver for {preset['name']}"
    for command in (preset["install_command"], preset["run_command"]):
        named = files_named(command, directory)
        assert named, f"{command!r} names no script of the driver"
        for path in named:
            assert path.is_file() or (SHARED / path.name).is_file(), f"{command!r}: {path.name} is missing"


@pytest.mark.parametrize("preset", PRESETS, ids=lambda p: p["slug"])
def test_its_run_script_writes_results_and_flushes_traces_with_the_standard_library_only(preset):
    script = files_named(preset["run_command"], driver_of(preset))[0]
    source = script.read_text()
    tree = ast.parse(source)
    called = {
        n.func.id if isinstance(n.func, ast.Name) else n.func.attr
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, (ast.Name, ast.Attribute))
    }
    assert "Tracer" in called, "it traces under the run's session"
    assert "finish" in called or {"write_results", "flush"} <= called, "it writes results.json and flushes its spans"
    # It runs on the sandbox's own python3 (upstream tools live in .venv): nothing beyond stdlib.
    local = {p.stem for p in script.parent.glob("*.py")} | {"belvedir_driver"}
    for node in ast.walk(tree):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module] if isinstance(node, ast.ImportFrom) else []
        for name in names:
            top = name.split(".")[0]
            assert top in sys.stdlib_module_names or top in local, f"{script.name} imports {name}, not in the standard library"


def test_the_shared_finish_writes_results_json_and_flushes():
    tree = ast.parse((SHARED / "belvedir_driver.py").read_text())
    finish = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "finish")
    calls = {
        n.func.id if isinstance(n.func, ast.Name) else n.func.attr
        for n in ast.walk(finish)
        if isinstance(n, ast.Call) and isinstance(n.func, (ast.Name, ast.Attribute))
    }
    assert {"write_results", "flush", "exit"} <= calls


@pytest.mark.parametrize("preset", PRESETS, ids=lambda p: p["slug"])
def test_its_readme_names_the_upstream_version_env_vars_and_the_cheap_subset(preset):
    readme = (driver_of(preset) / "README.md").read_text()
    upstream = next((line for line in readme.splitlines() if line.startswith("Upstream:")), "")
    assert upstream, "README has an 'Upstream:' line"
    paragraph = readme[readme.index("Upstream:") :].split("\n\n")[0]
    assert PINNED.search(paragraph), f"the upstream's version is pinned in: {paragraph!r}"
    assert "BELVEDIR_LIMIT" in readme
    for name in preset["env_var_names"]:
        assert f"`{name}`" in readme, f"{name} is documented"


@pytest.mark.parametrize("preset", [p for p in PRESETS if p["slug"] not in FIRST_PARTY], ids=lambda p: p["slug"])
def test_an_internet_bound_driver_pins_its_install_and_tests_its_conversion(preset):
    directory = driver_of(preset)
    install = (directory / "install.sh").read_text()
    assert PINNED.search(install) or re.search(r"[0-9a-f]{40}", install), "install.sh pins the upstream"
    assert list(directory.glob("convert_*.py")), "a conversion module"
    assert list((directory / "tests").glob("test_convert_*.py")) and list((directory / "tests" / "samples").iterdir())


@pytest.mark.parametrize("preset", PRESETS, ids=lambda p: p["slug"])
def test_without_its_settings_it_exits_non_zero_and_says_why(preset, tmp_path):
    repo = checkout(preset, tmp_path)
    command = preset["run_command"].replace("python3", sys.executable.replace("\\", "/"), 1)
    done = subprocess.run(command, shell=True, cwd=repo, capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert done.returncode != 0
    assert "[belvedir]" in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert not (repo / "results.json").exists()
