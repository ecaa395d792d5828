"""A task's environment without a build (agent_tasks/environment.py) and a verifier's reward (verifier.parse_reward)."""

from pathlib import Path

import pytest
from django.conf import settings

from agent_tasks.actions import import_task_set
from agent_tasks.environment import EnvironmentRefused, resolve
from agent_tasks.models import Trial
from agent_tasks.trials import run_trial
from agent_tasks.verifier import RewardError, parse_reward
from belvedir.sandbox.images import Run
from belvedir.sandbox.models import SandboxHost

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "tasks"
IMAGE = settings.SANDBOX_IMAGE


def env_files(dockerfile: str, **context: bytes) -> dict[str, bytes]:
    return {"environment/Dockerfile": dockerfile.encode(), **{f"environment/{k.replace('__', '/')}": v for k, v in context.items()}}


@pytest.mark.parametrize("name", sorted(p.name for p in EXAMPLES.iterdir()))
def test_it_resolves_each_shipped_task_to_the_sandbox_image_app_and_its_files(name):
    folder = EXAMPLES / name / "environment"
    files = {f"environment/{p.relative_to(folder).as_posix()}": p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    env = resolve(files)
    assert (env.image, env.workdir, env.env, env.folders) == (IMAGE, "/app", {}, ("/app",))
    assert env.files == {f"/app/{p.relative_to(folder / 'app').as_posix()}": p.read_bytes() for p in (folder / "app").rglob("*") if p.is_file()}


def test_it_reads_env_copy_forms_comments_and_continuations():
    dockerfile = f"""# a task
FROM {IMAGE}
WORKDIR /srv2
WORKDIR work
ENV A=1 B="two words"
ENV LEGACY value with spaces
COPY a.txt /data/
COPY a.txt \\
     /data/renamed.txt
COPY dir/ .
"""
    env = resolve(env_files(dockerfile, **{"a.txt": b"a", "dir__x.py": b"x", "dir__sub__y.py": b"y"}))
    assert env.workdir == "/srv2/work"
    assert env.env == {"A": "1", "B": "two words", "LEGACY": "value with spaces"}
    assert env.files == {"/data/a.txt": b"a", "/data/renamed.txt": b"a", "/srv2/work/x.py": b"x", "/srv2/work/sub/y.py": b"y"}
    assert env.folders == ("/data", "/srv2")


def test_a_task_without_workdir_works_in_the_sandbox_home():
    assert resolve(env_files(f"FROM {IMAGE}\n")).workdir == "/home/sandbox"


@pytest.mark.parametrize(
    "dockerfile, message",
    [
        (
            "FROM ubuntu:22.04\n",
            f"environment/Dockerfile: line 1: FROM ubuntu:22.04 cannot be pulled here and nothing stands in for it: the platform's image {IMAGE}",
        ),
        ("FROM python:3.13-slim\n", "resolves debian:bookworm[-slim], debian:12[-slim], python:3.11"),
        ("FROM debian:trixie\n", "FROM debian:trixie cannot be pulled here"),
        ("FROM python:3.11-alpine\n", "FROM python:3.11-alpine cannot be pulled here"),
        (f"FROM {IMAGE}\nADD app.tar /app\n", "line 2: ADD is not supported: FROM, WORKDIR, ENV, ARG, COPY and RUN"),
        (f"FROM {IMAGE}\nUSER root\n", "line 2: USER is not supported"),
        (f"FROM {IMAGE} AS build\n", "line 1: FROM ... AS: multi-stage builds are not supported"),
        (f"FROM {IMAGE}\nFROM {IMAGE}\n", "line 2: a second FROM"),
        ("WORKDIR /app\n", "line 1: WORKDIR before FROM"),
        ("# nothing\n", "environment/Dockerfile: has no FROM"),
        (f"FROM {IMAGE}\nCOPY missing.txt /app/\n", "line 2: COPY missing.txt: no such file or folder in environment/"),
        (f"FROM {IMAGE}\nCOPY ../task.toml /app/\n", "line 2: COPY ../task.toml: a source must be a plain path inside environment/"),
        (f"FROM {IMAGE}\nCOPY --from=build /x /app/\n", "line 2: COPY --from=build /x /app/: options"),
        (f"FROM {IMAGE}\nCOPY a.txt /usr/local/bin/a\n", "line 2: '/usr/local/bin/a': /usr is the image's own"),
        (f"FROM {IMAGE}\nWORKDIR /logs\n", "line 2: '/logs': /logs is where a trial puts the verifier"),
        (f"FROM {IMAGE}\nWORKDIR /\n", "the root itself is read-only"),
        (f"FROM {IMAGE}\nRUN --mount=type=cache,target=/root/.cache pip install x\n", "line 2: RUN --mount=type=cache"),
        (f"FROM {IMAGE}\nRUN <<EOF\n", "line 2: RUN with a heredoc is not supported"),
        (f'FROM {IMAGE}\nRUN ["echo", 1]\n', 'line 2: RUN ["echo", 1]: the exec form is a JSON list of strings'),
        (f"FROM {IMAGE}\nRUN\n", "line 2: RUN names no command"),
        (f"FROM {IMAGE}\nARG 1X=2\n", "line 2: ARG '1X=2': write NAME or NAME=value"),
        (f"FROM {IMAGE}\nRUN true\nCOPY a.txt /tests/a\n", "line 3: '/tests/a': /tests is where a trial puts the verifier"),
    ],
)
def test_what_cannot_be_built_here_is_refused_naming_the_line_and_the_reason(dockerfile, message):
    with pytest.raises(EnvironmentRefused) as refused:
        resolve(env_files(dockerfile, **{"a.txt": b"a"}))
    assert message in str(refused.value)


@pytest.mark.parametrize(
    "named",
    [
        "debian:bookworm",
        "debian:bookworm-slim",
        "debian:12.8-slim",
        "python:3.11",
        "python:3.11.11-slim-bookworm",
        "docker.io/library/python:3.11-slim",
        "python:3.11-trixie",
        "buildpack-deps:bookworm@sha256:" + "a" * 64,
    ],
)
def test_a_public_image_of_the_same_debian_and_python_resolves_to_the_platforms_and_says_so(named):
    env = resolve(env_files(f"FROM {named}\nWORKDIR /app\n"))
    assert (env.image, env.named) == (IMAGE, named)
    assert env.resolution.startswith(f"FROM {named} is built on {IMAGE}: ")
    # Nothing to build: the platform's image answers to `python` as Docker's python images do.
    assert env.recipe(60) is None
    assert resolve(env_files(f"FROM {IMAGE}\n")).resolution == ""


def test_run_lines_make_a_recipe_of_every_step_in_order_with_the_args_and_env_each_one_saw():
    dockerfile = f"""FROM {IMAGE}
ARG MODE=fast
WORKDIR /app
COPY a.txt ./
ENV LEVEL=2
RUN python3 make.py "$MODE"
COPY a.txt /usr/local/share/a.txt
COPY a.txt /home/sandbox/.config/a.txt
RUN ["sh", "-c", "echo done"]
"""
    env = resolve(env_files(dockerfile, **{"a.txt": b"a"}))
    recipe = env.recipe(120)
    assert [type(step).__name__ for step in recipe.steps] == ["Copy", "Run", "Copy", "Copy", "Run"]
    assert recipe.steps[1] == Run('python3 make.py "$MODE"', (("MODE", "fast"), ("LEVEL", "2")), "/app", 6)
    assert recipe.steps[4].command == ("sh", "-c", "echo done")
    # A built image may hold files in its own folders (read-only in the sandbox); the task's folders are writable and
    # seeded from the image; what lands in the home, mounted empty over the image, is also put at the start.
    assert (recipe.seed, env.folders) == (("/app",), ("/app",))
    assert env.files == {"/home/sandbox/.config/a.txt": b"a"}
    assert env.env == {"LEVEL": "2"} and "MODE" not in env.env
    # No RUN, no build: the files go in at the start as before.
    assert resolve(env_files(f"FROM {IMAGE}\nCOPY a.txt /app/\n", **{"a.txt": b"a"})).recipe(120) is None


def test_the_image_is_named_by_the_hash_of_its_build_context(settings):
    def tag(dockerfile=f"FROM {IMAGE}\nCOPY a.txt /app/\nRUN cat /app/a.txt\n", a=b"a", timeout=120):
        return resolve(env_files(dockerfile, **{"a.txt": a})).recipe(timeout).tag_on("sha256:base")

    assert tag() == tag() and tag().startswith("belvedir-built:")
    # A rebuilt base is another image to build on.
    assert resolve(env_files(f"FROM {IMAGE}\nCOPY a.txt /app/\nRUN cat /app/a.txt\n", **{"a.txt": b"a"})).recipe(120).tag_on("sha256:rebuilt") != tag()
    # Any change to what the build reads is another image; its time limit is not (held to the platform's most).
    assert (
        len(
            {
                tag(),
                tag(a=b"b"),
                tag(dockerfile=f"FROM {IMAGE}\nCOPY a.txt /app/\nRUN cat /app/a.txt && true\n"),
                tag(dockerfile=f"FROM {IMAGE}\nCOPY a.txt /srv/\nRUN true\n"),
            }
        )
        == 4
    )
    assert tag(timeout=5) == tag(timeout=500)
    settings.SANDBOX_BUILD_MAX_SECONDS = 60
    assert resolve(env_files(f"FROM {IMAGE}\nRUN true\n")).recipe(600).timeout == 60


def test_a_task_with_no_dockerfile_is_refused():
    with pytest.raises(EnvironmentRefused, match="only a Dockerfile environment"):
        resolve({})


@pytest.mark.django_db
def test_a_trial_of_a_task_that_cannot_be_built_is_refused_before_anything_is_stored(project, owner):
    files = {
        "task.toml": b'version = "1.0"\n',
        "instruction.md": b"Do it.\n",
        "tests/test.sh": b"echo 1 > /logs/verifier/reward.txt\n",
        "environment/Dockerfile": b"FROM ubuntu:22.04\nRUN apt-get update\n",
    }
    task = import_task_set(project, owner, "ubuntu", files, single_name="ubuntu")[0].tasks.get()
    with pytest.raises(EnvironmentRefused, match="FROM ubuntu:22.04 cannot be pulled here"):
        run_trial(task, "oracle")
    assert not Trial.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_task_to_build_on_a_host_that_builds_no_images_errors_as_the_platforms_fault(project, owner):
    SandboxHost.objects.update(enabled=False)
    SandboxHost.objects.create(name="fake", backend="fake", url="fake://builds", capacity=2)
    files = {
        "task.toml": b'version = "1.0"\n',
        "instruction.md": b"Do it.\n",
        "tests/test.sh": b"echo 1 > /logs/verifier/reward.txt\n",
        "environment/Dockerfile": f"FROM {IMAGE}\nRUN true\n".encode(),
    }
    task = import_task_set(project, owner, "built", files, single_name="built")[0].tasks.get()
    trial = run_trial(task, "nop")
    assert (trial.status, trial.platform_fault, trial.reward) == ("errored", True, None)
    assert "fake backend builds no images" in trial.error


@pytest.mark.parametrize(
    "raw, source, reward",
    [
        (b"1\n", "reward.txt", 1.0),
        (b" 0 ", "reward.txt", 0.0),
        (b"0.5", "reward.txt", 0.5),
        (b'{"reward": 1}', "reward.json", 1.0),
        (b'{"reward": 0.75, "x": 2}', "reward.json", 0.75),
    ],
)
def test_a_reward_is_a_number_from_0_to_1(raw, source, reward):
    assert parse_reward(raw, source) == reward


@pytest.mark.parametrize(
    "raw, source, reason",
    [
        (b"abc", "reward.txt", "reward.txt holds 'abc', not a number"),
        (b"1.5", "reward.txt", "reward.txt holds '1.5', outside [0, 1]"),
        (b"-0.1", "reward.txt", "outside [0, 1]"),
        (b"nan", "reward.txt", "outside [0, 1]"),
        (b"inf", "reward.txt", "outside [0, 1]"),
        (b"", "reward.txt", "holds '', not a number"),
        (b"\xff", "reward.txt", "is not UTF-8"),
        (b"[1]", "reward.json", 'has no "reward" key'),
        (b'{"reward": true}', "reward.json", "is not a number"),
        (b'{"reward": "1"}', "reward.json", "is not a number"),
        (b'{"reward": 2}', "reward.json", "outside [0, 1]"),
        (b"{", "reward.json", "is not JSON"),
    ],
)
def test_anything_else_is_no_reward_and_says_why(raw, source, reason):
    with pytest.raises(RewardError, match=None) as error:
        parse_reward(raw, source)
    assert reason in str(error.value)
