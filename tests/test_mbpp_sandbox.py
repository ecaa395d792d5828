"""MBPP scoring in real containers: reference solutions pass, wrong and hostile completions fail alone,
test_setup_code runs, and the challenge_tests option changes which asserts run."""

from concurrent.futures import ThreadPoolExecutor

import pytest

from belvedir.sandbox.models import SandboxHost
from bench.standalone_sandboxes import standalone_code_sandbox, standalone_code_sandboxes
from evals.actions import create_eval
from evals.benchmarks import mbpp
from evals.benchmarks.base import Row
from evals.models import Deployment, Sample
from evals.subset import select_rows
from evals.tasks import run_eval

from .fakes.openai_server import FakeOpenAI

pytestmark = [pytest.mark.docker, pytest.mark.usefixtures("loopback_deployments")]

ROWS = {row.id: row for row in mbpp.rows()}
REFERENCE = {row.input: row.reference for row in mbpp.rows()}
REMOVE_OCC = ROWS["MBPP/11"]  # remove_Occ(s, ch): the first and last `ch` removed
# Passes the three asserts shown, not the challenge ones ("hellolloll" keeps its inner l's).
REPLACES_ALL = "def remove_Occ(s, ch):\n    return s.replace(ch, '')\n"
WRONG = "def remove_Occ(s, ch):\n    return s\n"

KILLS_OTHERS = (
    "import os, signal\nfor pid in os.listdir('/proc'):\n    if pid.isdigit() and int(pid) != os.getpid():\n"
    "        try:\n            os.kill(int(pid), signal.SIGKILL)\n        except OSError:\n            pass\n"
)


def hostile(host_file: str) -> dict[str, str]:
    """Completions of MBPP/11 that try to pass without solving it, or to break out; each must fail."""
    right = REMOVE_OCC.reference
    return {
        "loops forever": "def remove_Occ(s, ch):\n    while True:\n        pass\n",
        "fork bomb": "import os\nwhile True:\n    os.fork()\n",
        # Each of these solves it only once its probe succeeded.
        "reads the host": f"print(open({host_file!r}).read())\n{right}",
        "probes the network": f"import socket\nsocket.create_connection(('1.1.1.1', 53), timeout=2)\n{right}",
        "dials the docker socket": f"import socket\nsocket.socket(socket.AF_UNIX).connect('/var/run/docker.sock')\n{right}",
        "kills the other samples": KILLS_OTHERS + WRONG,
        "prints fake success": ("import os, sys\nprint('bv-mbpp-passed-' + '0' * 32)\nprint('All tests passed')\nsys.stdout.flush()\nos._exit(0)\n"),
        "sys.exit(0) before the asserts": "import sys\nsys.exit(0)\n",
        "os._exit(0) under the asserts": "def remove_Occ(s, ch):\n    import os\n    os._exit(0)\n",
        "patches assert-related builtins": (
            "import atexit, builtins, os, sys\n"
            "class Quiet(Exception):\n    pass\n"
            "builtins.AssertionError = Quiet\n__builtins__['AssertionError'] = Quiet\n"
            "builtins.isinstance = lambda *a: True\nbuiltins.print = lambda *a, **k: None\n"
            # What a harness of its own calls: an exec that runs nothing passes every assert.
            "builtins.exec = lambda *a, **k: None\nbuiltins.compile = lambda *a, **k: None\nbuiltins.BaseException = Quiet\n"
            "sys.excepthook = lambda *a: None\natexit.register(lambda: os._exit(0))\n"
            "def len(x):\n    return 0\n" + WRONG
        ),
    }


def honest(name: str, *, wrong: bool = False) -> tuple[mbpp.Check, bool]:
    """A reference solution (or a wrong one for MBPP/11) that runs a while, so hostile samples act beside it."""
    row = ROWS[name]
    code = "import time\ntime.sleep(1.5)\n" + (WRONG if wrong else row.reference)
    return mbpp.program(row, code, row["test_list"]), not wrong


@pytest.mark.parametrize("runtime", ["runc", "runsc"])
def test_hostile_completions_fail_alone_while_their_neighbours_pass(docker_backend, runtime, tmp_path):
    assert runtime in docker_backend.runtimes(), f"this engine has no {runtime}"
    host_file = tmp_path / "host-secret"
    host_file.write_text("a file of the host")
    bad = {name: mbpp.program(REMOVE_OCC, code, REMOVE_OCC["test_list"]) for name, code in hostile(str(host_file)).items()}
    # MBPP/126's function is named `sum` and MBPP/367's asserts need its test_setup_code.
    good = {f"{name} #{i}": honest(name) for i in range(2) for name in ("MBPP/11", "MBPP/12", "MBPP/126", "MBPP/367")}
    good |= {f"wrong #{i}": honest("MBPP/11", wrong=True) for i in range(3)}
    checks = {**{name: (check, False) for name, check in bad.items()}, **good}
    order = [name for pair in zip(good, bad, strict=False) for name in pair] + list(good)[len(bad) :] + list(bad)[len(good) :]
    with standalone_code_sandboxes("mbpp-hostile", docker_backend, slots=4, timeout=4, runtime=runtime) as scorer:
        with ThreadPoolExecutor(4) as pool:
            results = dict(zip(order, pool.map(lambda name: scorer.run(checks[name][0].source, proof=checks[name][0].proof), order), strict=True))
        for name, (_, should_pass) in checks.items():
            assert results[name][0] is should_pass, (name, results[name])
        assert "Timed out" in results["loops forever"][1]
        assert "FileNotFoundError" in results["reads the host"][1] and "a file of the host" not in results["reads the host"][1]
        for name in ("probes the network", "dials the docker socket"):
            assert "stopped before the tests" in results[name][1], results[name]
        assert "stopped before the tests: SystemExit" in results["sys.exit(0) before the asserts"][1]
        for name in ("prints fake success", "os._exit(0) under the asserts"):
            assert "exited 0 before its checks passed" in results[name][1], results[name]
        assert results["patches assert-related builtins"][1].startswith('Failed: assert remove_Occ("hello","l") == "heo" (AssertionError)')
        assert results["wrong #0"][1].startswith('Failed: assert remove_Occ("hello","l") == "heo"')
        # Every sandbox is still healthy, and nothing of the hostile samples lingers.
        for part in scorer.parts:
            check = mbpp.program(REMOVE_OCC, REMOVE_OCC.reference, REMOVE_OCC["test_list"])
            assert part.run(check.source, proof=check.proof) == (True, "")
            uids = [int(u) for u in part.sandbox.exec("ps -eo uid=", timeout=30).output.split()]
            per_uid = {uid: uids.count(uid) for uid in uids if uid >= 20000}
            assert per_uid and max(per_uid.values()) == 1, per_uid


def test_the_setup_code_runs_and_a_wrong_solution_fails_naming_its_assert(docker_backend):
    tree = ROWS["MBPP/367"]
    without_setup = Row(tree.id, tree.input, tree.reference, extra={**tree.extra, "test_setup_code": ""})
    failing_setup = Row(tree.id, tree.input, tree.reference, extra={**tree.extra, "test_setup_code": "root = Node(1) / 0"})
    with standalone_code_sandbox("mbpp-setup", docker_backend, slots=2, timeout=10) as sandbox:

        def run(row, code, tests):
            check = mbpp.program(row, code, tests)
            return sandbox.run(check.source, proof=check.proof)

        assert run(tree, tree.reference, tree["test_list"]) == (True, "")  # its asserts use the trees the setup builds
        passed, detail = run(without_setup, tree.reference, tree["test_list"])
        assert passed is False and "NameError: name 'root' is not defined" in detail
        passed, detail = run(failing_setup, tree.reference, tree["test_list"])
        assert passed is False and detail.startswith("test_setup_code failed: TypeError")
        passed, detail = run(REMOVE_OCC, WRONG, REMOVE_OCC["test_list"])
        assert passed is False and detail == 'Failed: assert remove_Occ("hello","l") == "heo" (AssertionError)'
        passed, detail = run(REMOVE_OCC, "def remove_Occ(s, ch)\n    return s\n", REMOVE_OCC["test_list"])
        assert passed is False and "stopped before the tests: SyntaxError" in detail


def oracle(prompt: str) -> str:
    return f"Here it is:\n```python\n{REFERENCE[prompt]}\n```\n"


@pytest.mark.django_db(transaction=True)
def test_reference_solutions_pass_through_an_eval(project, owner, settings):
    """A fixed sample of 60 rows, with their code in a fence as a chat model writes it (all 500: bench/mbpp_sandbox.py)."""
    SandboxHost.objects.get_or_create(name="local", defaults={"url": settings.SANDBOX_DOCKER_URL, "capacity": 4})
    with FakeOpenAI(answer=oracle) as fake:
        deployment = Deployment.objects.create(project=project, name="oracle", base_url=fake.url, model="oracle")
        ev = create_eval(project, owner, deployment=deployment, benchmark="mbpp", sample_limit=60, seed=7)
        run_eval(ev.pk)
    ev.refresh_from_db()
    assert (ev.status, ev.total, ev.done_count, ev.error_count, ev.score) == ("succeeded", 60, 60, 0, 1.0)
    assert [s for s in Sample.objects.filter(eval=ev).values_list("scores", flat=True) if s != {"asserts": 3}] == []


@pytest.mark.django_db(transaction=True)
def test_the_challenge_tests_option_runs_the_challenge_asserts_too(project, owner, settings):
    SandboxHost.objects.get_or_create(name="local", defaults={"url": settings.SANDBOX_DOCKER_URL, "capacity": 4})
    # Four rows with MBPP/11 (row 0) among them, drawn as any eval's rows are.
    seed = next(seed for seed in range(1000) if 0 in select_rows(500, 4, seed))

    def answer(prompt):
        return REPLACES_ALL if prompt == REMOVE_OCC.input else oracle(prompt)

    scored = {}
    with FakeOpenAI(answer=answer) as fake:
        deployment = Deployment.objects.create(project=project, name="replacer", base_url=fake.url, model="replacer")
        for challenge in (False, True):
            ev = create_eval(
                project, owner, deployment=deployment, benchmark="mbpp", sample_limit=4, seed=seed, benchmark_options={"challenge_tests": challenge}
            )
            run_eval(ev.pk)
            ev.refresh_from_db()
            scored[challenge] = (ev, Sample.objects.get(eval=ev, row_index=0))
    plain, challenged = scored[False], scored[True]
    assert (plain[0].status, plain[0].score, plain[1].score, plain[1].scores) == ("succeeded", 1.0, 1.0, {"asserts": 3})
    assert (challenged[0].status, challenged[0].score, challenged[1].score, challenged[1].scores) == ("succeeded", 0.75, 0.0, {"asserts": 5})
    assert challenged[1].extracted.startswith('Failed: assert remove_Occ("hellolloll","l") == "helollol"')
