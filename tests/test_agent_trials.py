"""Trials of agent tasks in real sandboxes, under runc and gVisor (runsc): the built-in agents on the ten shipped
tasks, what an agent can see and spoil during its phase, and verifiers whose output is no reward.

The fast unit tests of the environment and the reward's parsing are in tests/test_agent_environment.py.
"""

from pathlib import Path

import pytest
from django.conf import settings

from agent_tasks.actions import import_task_set
from agent_tasks.agents import Agent
from agent_tasks.models import Trial
from agent_tasks.trials import run_trial, run_trials
from belvedir.sandbox.models import SandboxHost

pytestmark = [pytest.mark.docker, pytest.mark.django_db]

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "tasks"
RUNTIMES = ["runc", "runsc"]


class ShellAgent(Agent):
    """An agent of the test's own: its phase runs `script`. A typed agent, not a switch in run_trial for tests."""

    def __init__(self, script: str, *, sees_solution: bool = False):
        self.name, self.script, self.sees_solution = "shell", script, sees_solution

    def command(self, task):
        return self.script


@pytest.fixture(scope="module")
def example_files() -> dict[str, bytes]:
    return {f"tasks/{p.relative_to(EXAMPLES).as_posix()}": p.read_bytes() for p in sorted(EXAMPLES.rglob("*")) if p.is_file() and "__pycache__" not in p.parts}


@pytest.fixture(autouse=True)
def local_host(db):
    SandboxHost.objects.get_or_create(name="local", defaults={"url": settings.SANDBOX_DOCKER_URL})


@pytest.fixture
def examples(project, owner, example_files):
    return import_task_set(project, owner, "examples", example_files)[0]


def one_task(project, owner, test_sh: str, agent_timeout: float = 30, verifier_timeout: float = 30):
    files = {
        "task.toml": f'version = "1.0"\n[verifier]\ntimeout_sec = {verifier_timeout}\n[agent]\ntimeout_sec = {agent_timeout}\n'.encode(),
        "instruction.md": b"Nothing to do.\n",
        "environment/Dockerfile": f"FROM {settings.SANDBOX_IMAGE}\nWORKDIR /app\n".encode(),
        "tests/test.sh": test_sh.encode(),
    }
    return import_task_set(project, owner, "odd", files, single_name="odd")[0].tasks.get()


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_the_oracle_scores_1_on_each_of_the_ten_shipped_tasks(examples, runtime):
    trials = run_trials(examples, ["oracle"], runtime_wanted=runtime)
    assert {t.task.name: (t.status, t.error, t.reward) for t in trials} == {
        name: ("succeeded", "", 1.0) for name in examples.tasks.values_list("name", flat=True)
    }
    assert {(t.runtime, t.agent_exit, t.verifier_exit, t.flagged) for t in trials} == {(runtime, 0, 0, False)}


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_doing_nothing_scores_0_on_each_of_the_ten_shipped_tasks(examples, runtime):
    trials = run_trials(examples, ["nop"], runtime_wanted=runtime)
    assert len(trials) == 10
    assert {(t.status, t.error, t.reward, t.runtime, t.agent_exit, t.verifier_exit, t.flagged) for t in trials} == {
        ("succeeded", "", 0.0, runtime, None, 0, False)
    }


# Exits 0 only when nothing of the verifier or the solution is in reach: /tests empty, no /solution, no copy elsewhere.
# find, not ls: under the platform's gVisor ls fails (statx), and a failure must not read as "nothing there".
PROBE = """
[ -z "$(find /tests -mindepth 1 2>&1)" ] || exit 3
[ ! -e /solution ] || exit 4
[ -z "$(find /app /home /tmp /logs /tests \\( -name test.sh -o -name solve.sh -o -name check.py \\) 2>/dev/null)" ] || exit 5
"""


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_an_agent_finds_neither_the_tests_nor_the_solution_during_its_phase(examples, runtime):
    task = examples.tasks.get(name="complete-fizzbuzz")
    trial = run_trial(task, ShellAgent(PROBE), runtime_wanted=runtime)
    assert (trial.status, trial.agent_exit, trial.reward, trial.flagged) == ("succeeded", 0, 0.0, False)
    # The probe does see what it is shown: an agent given the solution finds it.
    assert run_trial(task, ShellAgent(PROBE, sees_solution=True), runtime_wanted=runtime).agent_exit == 4


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_an_agent_that_writes_the_reward_gets_the_verifiers_and_is_flagged(examples, runtime):
    script = "mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt"
    trial = run_trial(examples.tasks.get(name="upper-names"), ShellAgent(script), runtime_wanted=runtime)
    assert (trial.status, trial.reward, trial.agent_exit, trial.flagged) == ("succeeded", 0.0, 0, True)
    assert "/logs/verifier/reward.txt" in trial.flag_reasons[0]


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_an_agent_that_links_the_verifiers_folder_to_its_own_reward_gets_nothing_from_it_and_is_flagged(project, owner, runtime):
    # A verifier that writes a reward only on success: a reward planted by the agent would be read as the verifier's.
    task = one_task(project, owner, "exit 1")
    script = "mkdir -p /app/mine && echo 1 > /app/mine/reward.txt && rm -rf /logs/verifier && ln -s /app/mine /logs/verifier"
    trial = run_trial(task, ShellAgent(script), runtime_wanted=runtime)
    assert (trial.status, trial.reward, trial.agent_exit, trial.flagged) == ("errored", None, 0, True)
    assert "wrote no reward" in trial.error and "/logs/verifier" in trial.flag_reasons[0]


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_no_process_the_agent_leaves_behind_lives_into_the_verifiers_phase(project, owner, runtime):
    # The verifier gives 1 when it finds the agent's sleeper still running (slee[p]: grep must not find itself).
    task = one_task(project, owner, "if grep -aqs 'slee[p].4242' /proc/[0-9]*/cmdline; then r=1; else r=0; fi; echo $r > /logs/verifier/reward.txt")
    trial = run_trial(task, ShellAgent("nohup sleep 4242 >/dev/null 2>&1 &"), runtime_wanted=runtime)
    assert (trial.status, trial.agent_exit, trial.reward) == ("succeeded", 0, 0.0)


@pytest.mark.parametrize(
    "test_sh, error",
    [
        ("echo abc > /logs/verifier/reward.txt", "/logs/verifier/reward.txt holds 'abc', not a number"),
        ("echo 1.5 > /logs/verifier/reward.txt", "/logs/verifier/reward.txt holds '1.5', outside [0, 1]"),
        ("echo '{\"score\": 1}' > /logs/verifier/reward.json", '/logs/verifier/reward.json has no "reward" key'),
        ("exit 2", "The verifier wrote no reward (/logs/verifier/reward.txt or reward.json); it exited with code 2."),
    ],
)
def test_a_verifier_whose_output_is_no_reward_errors_the_trial_with_the_reason(project, owner, test_sh, error):
    trial = run_trial(one_task(project, owner, test_sh), "nop", runtime_wanted="runc")
    assert (trial.status, trial.reward) == ("errored", None)
    assert error in trial.error


def test_a_verifier_reward_in_json_is_read(project, owner):
    trial = run_trial(one_task(project, owner, "echo '{\"reward\": 0.25}' > /logs/verifier/reward.json"), "nop", runtime_wanted="runc")
    assert (trial.status, trial.reward, trial.error) == ("succeeded", 0.25, "")


def test_a_platform_failure_errors_the_trial_to_retry_never_a_reward_of_0(project, owner):
    SandboxHost.objects.update(url="unix:///tmp/no-docker-here.sock")
    trial = run_trial(one_task(project, owner, "echo 1 > /logs/verifier/reward.txt"), "nop", runtime_wanted="runc")
    assert (trial.status, trial.reward) == ("errored", None)
    assert trial.error.startswith("The platform failed; retry this trial:")
    assert not Trial.objects.filter(status="running").exists()


def test_an_agent_past_its_time_limit_is_stopped_and_the_verifier_still_runs(project, owner):
    task = one_task(project, owner, "echo 0 > /logs/verifier/reward.txt", agent_timeout=1)
    trial = run_trial(task, ShellAgent("sleep 60"), runtime_wanted="runc")
    assert (trial.status, trial.agent_exit, trial.reward) == ("succeeded", 124, 0.0)
    assert trial.agent_seconds < 10


def test_a_verifier_past_its_time_limit_errors_the_trial(project, owner):
    trial = run_trial(one_task(project, owner, "sleep 60", verifier_timeout=1), "nop", runtime_wanted="runc")
    assert (trial.status, trial.reward) == ("errored", None)
    assert trial.error == "The verifier ran past the task's verifier time limit of 1 s; no reward was read."
