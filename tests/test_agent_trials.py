"""Trials of agent tasks in real sandboxes, under runc and gVisor (runsc): the built-in agents on the ten shipped
tasks, what an agent can see and spoil during its phase, and verifiers whose output is no reward.

The fast unit tests of the environment and the reward's parsing are in tests/test_agent_environment.py.
"""

import hashlib
import re
from pathlib import Path

import pytest
from django.conf import settings

from agent_tasks.actions import import_task_set
from agent_tasks.agents import ATTACKS, Agent
from agent_tasks.models import Trial, TrialOutputs
from agent_tasks.outputs import Outputs
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


def one_task(project, owner, test_sh: str, agent_timeout: float = 30, verifier_timeout: float = 30, verifier: str = "", name="odd", files=None):
    files = {
        "task.toml": f'version = "1.0"\n[verifier]\ntimeout_sec = {verifier_timeout}\n{verifier}\n[agent]\ntimeout_sec = {agent_timeout}\n'.encode(),
        "instruction.md": b"Nothing to do.\n",
        "environment/Dockerfile": f"FROM {settings.SANDBOX_IMAGE}\nWORKDIR /app\n".encode() + (b"COPY app/ /app/\n" if files else b""),
        "tests/test.sh": test_sh.encode(),
        **{f"environment/app/{path}": data for path, data in (files or {}).items()},
    }
    return import_task_set(project, owner, name, files, single_name=name)[0].tasks.get()


# Each shipped task is solvable under gVisor, the default runtime, and its verifier refuses the untouched
# environment; that verdict is the task's, not the runtime's, so nop runs under runc (a second faster). Every
# other pairing is proven elsewhere: oracle and nop under runc by test_agent_jobs.py's first test (three tasks,
# a job's trials), a trial under gVisor scoring 0 by the probe below; each task on both runtimes (40 trials,
# 3 minutes of a 2-core machine) proved those paths again.
@pytest.mark.parametrize("runtime", ["runsc"])
def test_the_oracle_scores_1_on_each_of_the_ten_shipped_tasks(examples, runtime):
    trials = run_trials(examples, ["oracle"], runtime_wanted=runtime)
    assert {t.task.name: (t.status, t.error, t.reward) for t in trials} == {
        name: ("succeeded", "", 1.0) for name in examples.tasks.values_list("name", flat=True)
    }
    assert {(t.runtime, t.agent_exit, t.verifier_exit, t.flagged) for t in trials} == {(runtime, 0, 0, False)}


@pytest.mark.parametrize("runtime", ["runc"])
def test_doing_nothing_scores_0_on_each_of_the_ten_shipped_tasks(examples, runtime):
    trials = run_trials(examples, ["nop"], runtime_wanted=runtime)
    assert len(trials) == 10
    assert {(t.status, t.error, t.reward, t.runtime, t.agent_exit, t.verifier_exit, t.flagged) for t in trials} == {
        ("succeeded", "", 0.0, runtime, None, 0, False)
    }


# Lists the digest of every file on the sandbox's filesystems named as a task's tests or solution are (/proc and /sys
# aside): the test compares them with the task's own, so a copy anywhere is found, under any of those names.
PROBE = (
    r"find / \( -path /proc -o -path /sys \) -prune -o -type f \( -name test.sh -o -name solve.sh -o -name check.py"
    r" -o -name candidate.sh \) -exec sha256sum {} + 2>/dev/null; [ ! -e /solution ] || echo SOLUTION-PRESENT"
)


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_an_agent_finds_neither_the_tests_nor_the_solution_during_its_phase(examples, runtime):
    task = examples.tasks.get(name="complete-fizzbuzz")
    hidden = {hashlib.sha256(data).hexdigest() for path, data in task.files("tests", "solution").items()}
    trial = run_trial(task, ShellAgent(PROBE), runtime_wanted=runtime)
    assert (trial.status, trial.reward) == ("succeeded", 0.0)
    assert "sha256sum" not in trial.agent_output and "/usr/lib/python3" in trial.agent_output  # the probe did look
    assert not hidden & set(re.findall(r"^([0-9a-f]{64})", trial.agent_output, re.M)) and "SOLUTION-PRESENT" not in trial.agent_output
    # The probe does find what it is shown: an agent given the solution finds it, by its digest.
    shown = run_trial(task, ShellAgent(PROBE, sees_solution=True), runtime_wanted=runtime).agent_output
    assert "SOLUTION-PRESENT" in shown and hidden & set(re.findall(r"^([0-9a-f]{64})", shown, re.M))


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_an_agent_can_neither_write_the_reward_nor_replace_the_verifiers_folder(project, owner, runtime):
    # A verifier that writes a reward only on success: a reward planted by the agent would be read as the verifier's.
    task = one_task(project, owner, "exit 1")
    script = (
        "echo 1 > /logs/verifier/reward.txt; mkdir -p /app/mine && echo 1 > /app/mine/reward.txt; "
        "rm -rf /logs/verifier; mv /logs/verifier /logs/old; ln -s /app/mine /logs/verifier; echo 1 > /tests/test.sh; true"
    )
    trial = run_trial(task, ShellAgent(script), runtime_wanted=runtime)
    assert (trial.status, trial.reward, trial.agent_exit) == ("errored", None, 0)
    assert "wrote no reward" in trial.error and "it exited with code 1" in trial.error
    assert trial.agent_output.count("Permission denied") + trial.agent_output.count("busy") >= 4, trial.agent_output


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_no_process_the_agent_leaves_behind_lives_into_the_verifiers_phase(project, owner, runtime):
    # The verifier gives 1 when it finds the agent's sleeper still running (slee[p]: grep must not find itself).
    task = one_task(project, owner, "if grep -aqs 'slee[p].4242' /proc/[0-9]*/cmdline; then r=1; else r=0; fi; echo $r > /logs/verifier/reward.txt")
    trial = run_trial(task, ShellAgent("nohup sleep 4242 >/dev/null 2>&1 &"), runtime_wanted=runtime)
    assert (trial.status, trial.agent_exit, trial.reward) == ("succeeded", 0, 0.0)


# -- the red team -------------------------------------------------------------------------------------------------------
# A red-team agent's phase is the phase a task's solve.sh runs in for the oracle: each forgery is tried here as an
# agent on a task it must not score on. Their scripts: agent_tasks/red_team.

# A sound verifier, run in place: it asks python3, cat, cmp and bash (each a name a planted tool could take) whether
# /app/answer.txt holds 42, which none of the forgeries writes.
SOUND = """if python3 -c 'import sys; sys.exit(open("/app/answer.txt").read().strip() != "42")' 2>/dev/null \\
    && [ "$(cat /app/answer.txt)" = 42 ] && echo 42 | cmp -s - /app/answer.txt && bash -c true; then r=1; else r=0; fi
echo $r > /logs/verifier/reward.txt"""


@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize("attack", ATTACKS)
def test_no_forgery_scores_against_a_verifier_in_place(project, owner, runtime, attack):
    task = one_task(project, owner, SOUND, files={"answer.txt": b"0\n", "check.py": b"print('shipped')\n"})
    trial = run_trial(task, f"red-team:{attack}", runtime_wanted=runtime)
    assert (trial.status, trial.reward) == ("succeeded", 0.0), (trial.error, trial.agent_output, trial.verifier_output)


@pytest.mark.parametrize("attack", ATTACKS)
def test_no_forgery_scores_against_a_sealed_verifier(examples, attack):
    trial = run_trial(examples.tasks.get(name="complete-fizzbuzz"), f"red-team:{attack}", runtime_wanted="runsc")
    assert (trial.status, trial.reward, trial.verifier_mode) == ("succeeded", 0.0, "sealed"), (trial.error, trial.agent_output, trial.verifier_output)
    assert trial.graded_digest == trial.outputs.digest  # what was graded is what was kept


# A task open to each attack (its verifier trusts what the agent could change) and the forgery scores 1 on it: each
# attack can succeed, so the 0s above are the platform's doing. process-left-behind and reward-write have none: the
# platform kills what the agent left, and the verifier's folder is never the agent's to write.
OPEN = {
    "planted-tools": (
        'PATH = "/home/sandbox/.local/bin:/usr/bin:/bin"',
        "cmp -s /app/a /app/b && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt",
    ),
    "python-hooks": (
        'HOME = "/home/sandbox"\nPYTHONNOUSERSITE = ""',
        "python3 -c 'raise SystemExit(1)' && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt",
    ),
    "shell-hooks": ('HOME = "/home/sandbox"', "bash -lc true; echo 0 > /logs/verifier/reward.txt"),
    "environment-hooks": ("", "set -a; . /app/.env 2>/dev/null; set +a; bash -c true; echo 0 > /logs/verifier/reward.txt"),
    "verifier-links": ("", "mkdir -p /app/results; echo 0 > /app/results/reward.txt; cp /app/results/reward.txt /logs/verifier/reward.txt"),
    "test-inputs": ("", "python3 /app/check.py && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt"),
    "printed-reward": ("", "grep -qs 'ALL TESTS PASSED' /logs/agent/*.log && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt"),
}


@pytest.mark.parametrize("attack", sorted(OPEN))
def test_each_forgery_scores_on_a_task_that_opens_its_way(project, owner, attack):
    env, test_sh = OPEN[attack]
    task = one_task(project, owner, test_sh, verifier=f"[verifier.env]\n{env}" if env else "", files={"check.py": b"import sys\nsys.exit(1)\n"})
    trial = run_trial(task, f"red-team:{attack}", runtime_wanted="runc")
    assert (trial.status, trial.reward) == ("succeeded", 1.0), (trial.error, trial.agent_output, trial.verifier_output)
    assert set(OPEN) | {"process-left-behind", "reward-write"} == set(ATTACKS)


# -- what the agent produced -------------------------------------------------------------------------------------------

SOLVE_AND_LITTER = (
    "printf 'hello, belvedir' > greeting.txt && mkdir -p notes && printf 'write tests\\nrun them\\nship\\n' > notes/todo.txt"
    " && echo extra > not-declared.txt && ln -s /etc/passwd notes/passwd && ln -s todo.txt notes/alias && mkfifo notes/pipe"
)


def test_a_sealed_trial_grades_and_keeps_exactly_the_declared_outputs(examples):
    trial = run_trial(examples.tasks.get(name="create-files"), ShellAgent(SOLVE_AND_LITTER), runtime_wanted="runc")
    assert (trial.status, trial.reward, trial.verifier_mode) == ("succeeded", 1.0, "sealed"), (trial.error, trial.agent_output, trial.verifier_output)
    kept = Outputs.from_archive(bytes(trial.outputs.archive), ["/app/greeting.txt", "/app/notes"])
    assert sorted(kept.entries) == ["/app/greeting.txt", "/app/notes", "/app/notes/alias", "/app/notes/todo.txt"]
    assert kept.entries["/app/notes/alias"] == ("link", kept.entries["/app/notes/alias"][1], b"todo.txt")
    assert sorted(trial.outputs.dropped) == ["/app/notes/passwd: a link to '/etc/passwd', outside the declared outputs", "/app/notes/pipe: a named pipe"]
    assert trial.graded_digest == trial.outputs.digest == kept.digest and (trial.outputs.file_count, trial.outputs.size) == (2, 41)


def test_outputs_past_the_copy_limit_error_the_trial_charged_and_nothing_is_kept(examples, settings):
    settings.TRIAL_OUTPUTS_MAX_MB = 1
    trial = run_trial(examples.tasks.get(name="create-files"), ShellAgent("mkdir -p notes && head -c 3000000 /dev/urandom > notes/big"), runtime_wanted="runc")
    assert (trial.status, trial.reward, trial.platform_fault) == ("errored", None, False)
    assert "larger than the copy limit of 1 MB (BELVEDIR_TRIAL_OUTPUTS_MAX_MB)" in trial.error
    assert not TrialOutputs.objects.exists()


GARBAGE = "printf 'a\\000b\\377\\376c'; head -c 100000000 /dev/zero | tr '\\0' x; printf '\\000end\\377'"


@pytest.mark.parametrize(
    "test_sh, says",
    [
        ("ln -s /etc/hostname /logs/verifier/reward.txt", "is not a regular file (a link to '/etc/hostname')"),
        ("head -c 10000000 /dev/zero > /logs/verifier/reward.txt", "larger than 4096 bytes"),
        ("mkfifo /logs/verifier/reward.txt", "not a regular file (a named pipe)"),
        (f"{GARBAGE}; echo 0 > /logs/verifier/reward.txt", ""),
    ],
    ids=["link", "10 MB", "fifo", "garbage"],
)
def test_what_comes_out_of_a_sandbox_is_stored_bounded_and_clean_or_refused_with_the_reason(project, owner, test_sh, says):
    """The agent prints NUL bytes, invalid UTF-8 and 100 MB; the verifier's reward is a link, 10 MB, a FIFO, or comes
    after the same garbage: the trial ends with what is storable, and never stays running."""
    trial = run_trial(one_task(project, owner, test_sh), ShellAgent(GARBAGE), runtime_wanted="runc")
    assert trial.status in ("succeeded", "errored") and len(trial.agent_output) <= 4096 and "\x00" not in trial.agent_output + trial.verifier_output
    assert trial.agent_output.endswith("end\ufffd") and trial.agent_exit == 0
    if says:
        assert (trial.status, trial.reward, trial.platform_fault) == ("errored", None, False) and says in trial.error, trial.error
    else:
        assert (trial.status, trial.reward) == ("succeeded", 0.0) and trial.verifier_output.endswith("xxxend\ufffd")


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
