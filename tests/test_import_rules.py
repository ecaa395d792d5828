"""The house's import rules, checked on the source so they hold as it grows.

- belvedir.core is the ground floor: it imports no app (the top floor,
  belvedir.workspace, composes them).
- No module-level import circle anywhere in the project.
"""

import ast
from pathlib import Path

from django.conf import settings

ROOT = Path(settings.BASE_DIR)
PACKAGES = ("belvedir", "billing", "evals", "finetunes", "harnesses", "traces", "belvedir_cli")
APPS = ("belvedir.sandbox", "belvedir.workspace", "billing", "evals", "finetunes", "harnesses", "traces")


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
            found[name] = path
    return found


def imported(name: str, path: Path, known, *, module_level: bool) -> set[str]:
    """The project modules `name` imports: at module level only (an import inside a function runs later, and cannot make a circle at import time), or all."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text())
    nodes = ast.iter_child_nodes(tree) if module_level else ast.walk(tree)
    found = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            for alias in node.names:
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base)
    return {m for m in found if m in known and m != name}


def test_core_imports_no_app_anywhere_in_it():
    known = modules()
    offenders = {
        name: sorted(m for m in imported(name, path, known, module_level=False) if m.startswith(APPS))
        for name, path in known.items()
        if name.startswith("belvedir.core")
    }
    assert {name: found for name, found in offenders.items() if found} == {}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every import circle a depth-first walk meets, each as the trail that closes it."""
    found, done = [], set()

    def visit(name, trail):
        if name in trail:
            found.append(trail[trail.index(name) :] + [name])
            return
        if name in done:
            return
        for other in sorted(graph[name]):
            visit(other, [*trail, name])
        done.add(name)

    for name in sorted(graph):
        visit(name, [])
    return found


def test_no_module_level_import_circle():
    known = modules()
    assert circles({name: imported(name, path, known, module_level=True) for name, path in known.items()}) == []


def test_the_rules_find_what_they_look_for():
    # A circle of three, as belvedir_cli's main -> traces -> main was, and an app import from a real module.
    assert circles({"main": {"traces"}, "traces": {"terminal", "main"}, "terminal": set()}) == [["main", "traces", "main"]]
    known = modules()
    assert "billing.models" in imported("belvedir.workspace.overview", known["belvedir.workspace.overview"], known, module_level=True)
    # Relative imports resolve: `from . import actions` in workspace.views.
    assert "belvedir.workspace.actions" in imported("belvedir.workspace.views", known["belvedir.workspace.views"], known, module_level=True)
