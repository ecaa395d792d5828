"""The house's import rules, checked on the source so they hold as it grows.

- belvedir/ is the ground floor: nothing in it imports an app but the root
  URL conf (the top floor, workspace, composes them); belvedir.core imports
  not even the sandbox package.
- Outside the sandbox package, code imports only its public modules
  (belvedir.sandbox.PUBLIC), never a backend: the door is the only way in.
- Only the Docker backend's two modules import the `docker` library.
- No module-level import circle anywhere in the project, and no circle at
  all between the project's apps and packages.
"""

import ast
from pathlib import Path

from django.conf import settings

import evals
from belvedir import sandbox

ROOT = Path(settings.BASE_DIR)
PACKAGES = ("belvedir", "agent_tasks", "billing", "evals", "finetunes", "harnesses", "traces", "workspace", "belvedir_cli")
APPS = ("belvedir.sandbox", "agent_tasks", "workspace", "billing", "evals", "finetunes", "harnesses", "traces")
# The apps above the ground floor (belvedir/), whose only importer there is the root URL conf.
ABOVE_THE_GROUND_FLOOR = ("agent_tasks", "billing", "evals", "finetunes", "harnesses", "traces", "workspace")


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
    return {m for m in imported_names(name, path, known, module_level=module_level) if m in known and m != name}


def imported_names(name: str, path: Path, known, *, module_level: bool) -> set[str]:
    """Every module `name` imports, the project's and others' (`docker`), relative imports resolved."""
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
    return found


def test_core_imports_no_app_anywhere_in_it():
    known = modules()
    offenders = {
        name: sorted(m for m in imported(name, path, known, module_level=False) if m.startswith(APPS))
        for name, path in known.items()
        if name.startswith("belvedir.core")
    }
    assert {name: found for name, found in offenders.items() if found} == {}


def test_nothing_under_belvedir_imports_an_app_but_the_root_url_conf():
    """At any level: the settings name apps as strings, which imports none of them."""
    known = modules()
    offenders = {
        name: sorted(m for m in imported(name, path, known, module_level=False) if m.split(".")[0] in ABOVE_THE_GROUND_FLOOR)
        for name, path in known.items()
        if (name == "belvedir" or name.startswith("belvedir.")) and name != "belvedir.urls"
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


def test_outside_the_sandbox_package_only_its_public_modules_are_imported():
    known = modules()
    assert set(sandbox.PUBLIC) <= set(known)
    offenders = {
        name: sorted(m for m in imported(name, path, known, module_level=False) if m.startswith("belvedir.sandbox.") and m not in sandbox.PUBLIC)
        for name, path in known.items()
        if not name.startswith("belvedir.sandbox")
    }
    assert {name: found for name, found in offenders.items() if found} == {}
    assert not [m for m in sandbox.PUBLIC if m.startswith("belvedir.sandbox.backends")]


def test_traces_harnesses_finetunes_and_agent_tasks_import_only_evals_public_modules():
    """As the sandbox's door: evals' inside (the engine, the client, a benchmark, a scorer's checks) can move without them."""
    known = modules()
    assert set(evals.PUBLIC) <= set(known)
    offenders = {
        name: sorted(m for m in imported(name, path, known, module_level=False) if unit_of(m) == "evals" and m not in evals.PUBLIC)
        for name, path in known.items()
        if unit_of(name) in ("traces", "harnesses", "finetunes", "agent_tasks")
    }
    assert {name: found for name, found in offenders.items() if found} == {}


def test_only_the_docker_backend_imports_the_docker_library():
    known = modules()
    importers = {
        name for name, path in known.items() if any(m == "docker" or m.startswith("docker.") for m in imported_names(name, path, known, module_level=False))
    }
    assert importers == {"belvedir.sandbox.backends.docker_engine", "belvedir.sandbox.backends.docker_sandbox"}


# The project's apps and packages, each a unit of the circle check below.
UNITS = ("belvedir.core", "belvedir.sandbox", "workspace", "billing", "evals", "finetunes", "harnesses", "traces", "agent_tasks", "belvedir_cli")


def unit_of(name: str) -> str | None:
    return next((unit for unit in UNITS if name == unit or name.startswith(unit + ".")), None)


def test_no_import_circle_between_the_apps_and_packages():
    """At any level (inside functions too): a circle between apps is a tangle even when no import-time error shows it.

    Where a lower app needs an answer from a higher one, the higher registers
    it (trace ingest asks harnesses about runs, and agent_tasks about trials, through traces.workload_keys).
    """
    known = modules()
    graph = {unit: set() for unit in UNITS}
    for name, path in known.items():
        if (unit := unit_of(name)) is not None:
            graph[unit] |= {other for m in imported(name, path, known, module_level=False) if (other := unit_of(m)) not in (None, unit)}
    assert circles(graph) == []
    # The sandbox package is the floor above core: it imports no app at all.
    assert graph["belvedir.sandbox"] == {"belvedir.core"}


def test_a_runs_model_and_its_redaction_make_no_circle_at_any_level():
    """The redaction reads runs' rows; the model names where its secrets were found (Place) itself, and imports no redaction even inside a function."""
    known = modules()
    graph = {name: imported(name, path, known, module_level=False) for name, path in known.items()}
    assert "harnesses.models" in graph["harnesses.redaction"]
    reached, todo = set(), ["harnesses.models"]
    while todo:
        for other in graph[todo.pop()] - reached:
            reached.add(other)
            todo.append(other)
    assert "harnesses.redaction" not in reached


def test_the_rules_find_what_they_look_for():
    # A circle of three, as belvedir_cli's main -> traces -> main was, and an app import from a real module.
    assert circles({"main": {"traces"}, "traces": {"terminal", "main"}, "terminal": set()}) == [["main", "traces", "main"]]
    known = modules()
    assert "billing.models" in imported("workspace.overview", known["workspace.overview"], known, module_level=True)
    # Relative imports resolve: `from . import actions` in workspace.views.
    assert "workspace.actions" in imported("workspace.views", known["workspace.views"], known, module_level=True)
    # The root URL conf is seen importing the top floor, which the ground floor's rule lets it alone do.
    assert "workspace.views" in imported("belvedir.urls", known["belvedir.urls"], known, module_level=True)
    # A package imported by name (`from evals.scoring import calibration`) is seen as its module, which evals.PUBLIC must name.
    assert "evals.scoring.calibration" in imported("traces.apps", known["traces.apps"], known, module_level=False)
    # The door's own way to its backends is seen, as an app's would be; and so is the docker library.
    assert "belvedir.sandbox.backends" in imported("belvedir.sandbox.launch", known["belvedir.sandbox.launch"], known, module_level=True)
    engine = "belvedir.sandbox.backends.docker_engine"
    assert "docker" in imported_names(engine, known[engine], known, module_level=True)
