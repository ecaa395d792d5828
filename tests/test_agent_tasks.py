"""Agent task sets in Harbor's format: the examples, the parser's refusals, safe archives, versions, API, CLI, pages."""

import bz2
import gzip
import io
import json
import lzma
import os
import shutil
import subprocess
import tarfile
import tracemalloc
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from django.core.files.uploadedfile import SimpleUploadedFile

from agent_tasks.actions import import_task_set
from agent_tasks.archive import ArchiveError, read_archive
from agent_tasks.harbor_format import TaskFormatError, parse_task, parse_task_set
from agent_tasks.models import AgentTask, TaskSet, TaskSetVersion
from belvedir_cli.main import cli

pytestmark = pytest.mark.django_db

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples" / "tasks"
HARBOR_HELLO = REPO / "examples" / "harbor-format" / "hello"
EXAMPLE_NAMES = sorted(p.name for p in EXAMPLES.iterdir() if p.is_dir())


def folder_files(folder: Path, prefix: str = "") -> dict[str, bytes]:
    return {prefix + p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file() and "__pycache__" not in p.parts}


def minimal(toml: str = 'version = "1.0"\n', **extra: bytes) -> dict[str, bytes]:
    files = {
        "task.toml": toml.encode(),
        "instruction.md": b"Do it.\n",
        "tests/test.sh": b"echo 1 > /logs/verifier/reward.txt\n",
        "environment/Dockerfile": b"FROM x\n",
    }
    return {**files, **extra}


def tar_gz(members: list[tarfile.TarInfo | tuple[str, bytes]]) -> io.BytesIO:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for member in members:
            if isinstance(member, tarfile.TarInfo):
                tar.addfile(member)
            else:
                info = tarfile.TarInfo(member[0])
                info.size = len(member[1])
                tar.addfile(info, io.BytesIO(member[1]))
    out.seek(0)
    out.name = "set.tar.gz"
    return out


def upload(files: dict[str, bytes], name="set.tar.gz") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, tar_gz(list(files.items())).getvalue())


# The examples: ten of our own and one written from Harbor's documentation.


def test_it_ships_ten_example_tasks_each_with_a_solution():
    assert len(EXAMPLE_NAMES) == 10
    for name in EXAMPLE_NAMES:
        task = parse_task(name, folder_files(EXAMPLES / name))
        assert task.has_solution and task.unknown_keys == [], name
        assert b"FROM belvedir-sandbox:bookworm" in task.files["environment/Dockerfile"], name
        for script in ("tests/test.sh", "solution/solve.sh"):
            path = EXAMPLES / name / script
            assert path.read_text().startswith("#!/usr/bin/env bash") and os.access(path, os.X_OK), path


def test_the_harbor_format_example_parses_with_every_documented_key_known():
    task = parse_task("hello", folder_files(HARBOR_HELLO))
    assert task.unknown_keys == [] and task.agent_timeout_sec == 120.0 and task.verifier_timeout_sec == 120.0
    assert task.config["environment"]["memory_mb"] == 2048 and task.config["verifier"]["env"] == {"GREETING": "Hello, world!"}


@pytest.mark.parametrize("folder", [EXAMPLES / n for n in EXAMPLE_NAMES] + [HARBOR_HELLO], ids=lambda p: p.name)
def test_each_examples_solution_earns_1_and_doing_nothing_0(folder, tmp_path):
    """Run with bash on this machine, the task's /app and /logs/verifier pointed at a temporary folder: the fixtures
    are proven before any sandbox runs them."""

    def reward(root: Path) -> str:
        out, candidate = tmp_path / "verifier", tmp_path / "candidate"
        shutil.rmtree(out, ignore_errors=True)
        shutil.rmtree(candidate, ignore_errors=True)
        env = {**os.environ, "TASK_ROOT": str(root), "VERIFIER_DIR": str(out), "CANDIDATE_DIR": str(candidate), "GREETING": "Hello, world!"}
        if (folder / "tests" / "candidate.sh").exists():  # the candidate phase, before the verifier, as the platform runs it
            subprocess.run(["bash", str(folder / "tests" / "candidate.sh")], env=env, timeout=30)
        subprocess.run(["bash", str(folder / "tests" / "test.sh")], env=env, check=True, timeout=30)
        return (out / "reward.txt").read_text().strip()

    root = tmp_path / "app"
    if (folder / "environment" / "app").is_dir():
        shutil.copytree(folder / "environment" / "app", root)
    root.mkdir(exist_ok=True)
    assert reward(root) == "0"
    env = {**os.environ, "TASK_ROOT": str(root), "GREETING": "Hello, world!"}
    subprocess.run(["bash", str(folder / "solution" / "solve.sh")], env=env, check=True, timeout=30)
    assert reward(root) == "1"


def test_the_examples_import_as_one_set_of_ten(project, owner):
    version, created = import_task_set(project, owner, "examples", folder_files(EXAMPLES, "tasks/"))
    assert created and version.number == 1 and version.file_count == len(folder_files(EXAMPLES))
    assert sorted(version.tasks.values_list("name", flat=True)) == EXAMPLE_NAMES
    task = version.tasks.get(name="fix-off-by-one")
    assert task.has_solution and task.agent_timeout_sec == 300.0 and task.verifier_timeout_sec == 60.0
    # A trial takes the environment first, and the tests only after the agent's phase.
    assert set(task.files("environment")) == {"environment/Dockerfile", "environment/app/mathutil.py"}
    assert set(task.files("tests", "solution")) == {"tests/test.sh", "tests/check.py", "tests/candidate.sh", "solution/solve.sh"}


def test_a_folder_that_is_itself_a_task_is_a_set_of_one(project, owner):
    version, _ = import_task_set(project, owner, "hello", folder_files(HARBOR_HELLO), single_name="hello")
    assert [t.name for t in version.tasks.all()] == ["hello"]


# Versions.


def test_the_same_content_again_is_the_same_version_and_a_change_makes_the_next(project, owner):
    files = folder_files(EXAMPLES / "csv-totals", "csv-totals/")
    first, created = import_task_set(project, owner, "data", files)
    again, created_again = import_task_set(project, owner, "data", dict(reversed(files.items())))
    assert created and not created_again and again.pk == first.pk
    changed = {**files, "csv-totals/instruction.md": b"Total the sales, please.\n"}
    second, created = import_task_set(project, owner, "data", changed)
    assert created and second.number == 2 and second.digest != first.digest
    assert TaskSetVersion.objects.filter(task_set__name="data").count() == 2 and TaskSet.objects.count() == 1


# Harbor's schema: unknown keys kept, broken ones refused naming file, key and reason.


def test_unknown_keys_are_kept_and_listed(project, owner):
    toml = 'version = "1.0"\nflavour = "mint"\n[metadata]\nanything = 1\n[agent]\ntimeout_sec = 30\nmodel_hint = "big"\n[environment.tpu]\ntype = "v6e"\ncores = 8\n[extras]\nx = 1\n'
    version, _ = import_task_set(project, owner, "odd", minimal(toml), single_name="odd")
    task = version.tasks.get()
    assert task.unknown_keys == ["flavour", "agent.model_hint", "environment.tpu.cores", "extras"]
    assert task.config["agent"]["model_hint"] == "big" and task.config["extras"] == {"x": 1}
    assert task.agent_timeout_sec == 30 and task.verifier_timeout_sec == 600.0  # Harbor's default


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ('[agent]\ntimeout_sec = "soon"\n', "task.toml: [agent] timeout_sec: must be a positive number of seconds up to 86400, got 'soon'"),
        ("[verifier]\ntimeout_sec = -1\n", "task.toml: [verifier] timeout_sec: must be a positive number"),
        ("[environment]\ncpus = 1.5\n", "task.toml: [environment] cpus: must be a positive whole number up to 2147483647, got 1.5"),
        (f"[environment]\nmemory_mb = {10**29}\n", "task.toml: [environment] memory_mb: must be a positive whole number up to 2147483647"),
        ("[metadata]\nbig = 99999999999999999999\n", "task.toml: metadata.big: 99999999999999999999 is beyond a 64-bit integer"),
        ("a" + ".b" * 1000 + " = 1\n", "task.toml: nests tables or arrays deeper than 16 levels"),
        ("x = " + "[" * 300 + "]" * 300 + "\n", "task.toml: nests tables or arrays deeper than 16 levels"),
        ('[verifier]\nmode = "sideways"\noutputs = ["/app/x"]\n', "task.toml: [verifier] mode: must be"),
        ('[verifier]\noutputs = "/app/x"\n', "task.toml: [verifier] outputs: must be a list of strings"),
        ('[environment]\nallow_internet = "no"\n', "task.toml: [environment] allow_internet: must be true or false"),
        ('[environment]\nmemory = "lots"\n', 'task.toml: [environment] memory: must be a size such as "2G"'),
        ("[verifier]\nenv = { A = 1 }\n", "task.toml: [verifier] env: must be a table of strings"),
        ('agent = "fast"\n', "task.toml: [agent]: must be a table"),
        ("version = 1.0\n", "task.toml: version: must be a string, got 1.0"),
        ("[agent\n", "task.toml: is not valid TOML"),
        ('[metadata]\nnote = "a\\u0000b"\n', "task.toml: holds a NUL character"),
    ],
)
def test_a_task_that_breaks_the_schema_is_refused_naming_file_key_and_reason(toml, message):
    with pytest.raises(TaskFormatError) as refused:
        parse_task_set(minimal(toml), "t")
    assert str(refused.value).startswith(f"t/{message}")


@pytest.mark.parametrize(
    ("verifier", "message"),
    [
        ('mode = "sealed"', '[verifier] mode "sealed" grades the declared outputs: declare them with [verifier] outputs'),
        ('outputs = ["/etc/passwd"]', "[verifier] outputs: '/etc/passwd' is in no folder the agent can write; the task's are /app, /home/sandbox"),
        ('outputs = ["/app/../etc"]', "[verifier] outputs: '/app/../etc' is not an absolute path without '..'"),
        ('outputs = ["app/x"]', "[verifier] outputs: 'app/x' is not an absolute path without '..'"),
        ("outputs = []", "[verifier] outputs is a list of 1 to 100 absolute paths"),
    ],
)
def test_declared_outputs_must_be_inside_what_the_agent_can_write(project, owner, verifier, message):
    files = minimal(f'version = "1.0"\n[verifier]\n{verifier}\n', **{"environment/Dockerfile": b"FROM belvedir-sandbox:bookworm\nWORKDIR /app\n"})
    with pytest.raises(TaskFormatError) as refused:
        import_task_set(project, owner, "t", files, single_name="t")
    assert str(refused.value) == f"t/task.toml: {message}"


@pytest.mark.parametrize(
    ("drop", "message"),
    [
        ("instruction.md", "t/instruction.md: is missing"),
        ("tests/test.sh", "t/tests/test.sh: is missing"),
        ("environment/Dockerfile", "t/environment/Dockerfile: is missing"),
    ],
)
def test_a_task_missing_a_required_file_is_refused(drop, message):
    files = minimal()
    del files[drop]
    with pytest.raises(TaskFormatError, match=message):
        parse_task_set(files, "t")


def test_a_compose_file_or_a_prebuilt_image_stands_for_the_dockerfile_and_import_says_neither_can_run_here(project, owner):
    files = minimal()
    del files["environment/Dockerfile"]
    composed = parse_task("t", {**files, "environment/docker-compose.yaml": b"services: {}\n"})
    prebuilt = parse_task("t", {**files, "task.toml": b'[environment]\ndocker_image = "ubuntu:24.04"\n'})
    assert composed.config == {"version": "1.0"} and "environment/docker-compose.yaml" in composed.files
    assert prebuilt.config == {"environment": {"docker_image": "ubuntu:24.04"}} and prebuilt.unknown_keys == []
    for name, task_files in (
        ("composed", {**files, "environment/docker-compose.yaml": b"services: {}\n"}),
        ("prebuilt", {**files, "task.toml": b'[environment]\ndocker_image = "ubuntu:24.04"\n'}),
    ):
        task = import_task_set(project, owner, name, task_files, single_name=name)[0].tasks.get()
        assert "only a Dockerfile environment can be run here (no compose file, no prebuilt image)" in task.environment["refused"]


def test_an_oversized_task_toml_is_refused_before_parsing():
    with pytest.raises(TaskFormatError, match="task.toml: is 70,000 bytes"):
        parse_task("t", minimal("#" * 70_000))
    with pytest.raises(TaskFormatError, match="task.toml: nests arrays or tables too deeply"):
        parse_task("t", minimal("x = " + "[" * 30_000 + "]" * 30_000))


def test_one_broken_task_refuses_the_whole_set_and_stores_nothing(project, owner):
    files = {**folder_files(EXAMPLES / "csv-totals", "a/"), **{f"b/{k}": v for k, v in minimal("[agent]\ntimeout_sec = 0\n").items()}}
    with pytest.raises(TaskFormatError, match=r"b/task.toml: \[agent\] timeout_sec"):
        import_task_set(project, owner, "mixed", files)
    assert not TaskSet.objects.exists() and not AgentTask.objects.exists()


def test_nested_and_duplicate_task_names_are_refused():
    with pytest.raises(TaskFormatError, match="tasks cannot nest"):
        parse_task_set({**{f"a/{k}": v for k, v in minimal().items()}, **{f"a/sub/{k}": v for k, v in minimal().items()}}, "x")
    with pytest.raises(TaskFormatError, match="a second task named 'a'"):
        parse_task_set({**{f"x/a/{k}": v for k, v in minimal().items()}, **{f"y/a/{k}": v for k, v in minimal().items()}}, "x")


# Archives: nothing escapes, nothing inflates past the cap.


def test_a_tar_gz_and_a_zip_read_into_the_same_files():
    files = folder_files(HARBOR_HELLO, "hello/")
    zipped = io.BytesIO()
    with zipfile.ZipFile(zipped, "w") as z:
        for path, data in files.items():
            z.writestr(path, data)
    zipped.seek(0)
    assert read_archive(tar_gz(list(files.items()))) == read_archive(zipped) == files


def symlink(name: str, target: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = tarfile.SYMTYPE, target
    return info


@pytest.mark.parametrize(
    ("members", "message"),
    [
        ([("../evil/task.toml", b"x")], "'..' path"),
        ([("/etc/task.toml", b"x")], "an absolute path"),
        ([("C:\\tasks\\task.toml", b"x")], "an absolute path"),
        ([symlink("t/tests/test.sh", "/etc/passwd")], "links and special files are refused"),
        ([symlink("t/up", "../../..")], "links and special files are refused"),
    ],
)
def test_archives_that_could_escape_their_root_are_refused(members, message):
    with pytest.raises(ArchiveError, match=message):
        read_archive(tar_gz(members))


def test_an_archive_past_the_size_cap_is_refused_as_it_inflates(settings):
    settings.TASK_ARCHIVE_MAX_BYTES = 1000
    with pytest.raises(ArchiveError, match="inflates past"):
        read_archive(tar_gz([("t/a.bin", b"\0" * 600), ("t/b.bin", b"\0" * 600)]))


def test_an_archive_with_too_many_files_is_refused(monkeypatch):
    monkeypatch.setattr("agent_tasks.archive.MAX_FILES", 3)
    with pytest.raises(ArchiveError, match="more than 3 files"):
        read_archive(tar_gz([(f"t/{n}", b"x") for n in range(4)]))


def long_name_bomb(compress) -> io.BytesIO:
    """A tar whose one member has a GNU long name of 64 MB (zeros): well under a MB compressed. tarfile reads a long
    name's whole data before yielding its member, so a cap counted on members alone never sees it."""
    header = tarfile.TarInfo("././@LongLink")
    header.type, header.size = tarfile.GNUTYPE_LONGNAME, 64 * 2**20
    raw = io.BytesIO()
    raw.write(header.tobuf(format=tarfile.GNU_FORMAT))
    chunk = b"\0" * 2**20
    for _ in range(64):
        raw.write(chunk)
    raw.write(tarfile.TarInfo("t/x").tobuf(format=tarfile.GNU_FORMAT) + b"\0" * 1024)
    return io.BytesIO(compress(raw.getvalue()))


@pytest.mark.parametrize("compress", [gzip.compress, bz2.compress, lzma.compress], ids=["gzip", "bzip2", "xz"])
def test_a_header_that_inflates_past_the_cap_is_refused_before_it_is_held(settings, compress):
    settings.TASK_ARCHIVE_MAX_BYTES = 2**20
    bomb = long_name_bomb(compress)
    assert len(bomb.getvalue()) < 2**20  # small on the wire
    tracemalloc.start()
    try:
        with pytest.raises(ArchiveError, match="inflates past 1 MB"):
            read_archive(bomb)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 40 * 2**20  # the cap and its allowance for headers (11 MB here), never the 64 MB it names


def test_folders_count_against_the_cap_on_members():
    """20,480 empty folders (46 KB compressed) held a worker 1.7 s each upload; they count as members now."""
    folders = []
    for n in range(20_480):
        info = tarfile.TarInfo(f"t/d{n}")
        info.type = tarfile.DIRTYPE
        folders.append(info)
    with pytest.raises(ArchiveError, match="more than 10,000 files and folders"):
        read_archive(tar_gz(folders))


@pytest.mark.parametrize(
    "members",
    [[("../task.toml", b"x")], [("/abs/task.toml", b"x")], [symlink("t/task.toml", "/etc/passwd")], [("t/big", b"\0" * 5000)]],
    ids=["dotdot", "absolute", "symlink", "too-big"],
)
def test_a_refused_upload_stores_nothing(api, settings, members):
    settings.TASK_ARCHIVE_MAX_BYTES = 4000
    archive = tar_gz([*[(f"ok/{k}", v) for k, v in minimal().items()], *members])
    response = api.post("/api/v1/task-sets", {"name": "bad", "file": SimpleUploadedFile("bad.tar.gz", archive.getvalue())}, format="multipart")
    assert response.status_code == 400, response.content
    assert not TaskSet.objects.exists() and not AgentTask.objects.exists()


# The API, the CLI and the pages.


def test_the_api_uploads_lists_and_shows_a_set(api):
    files = {**folder_files(EXAMPLES / "count-errors", "count-errors/"), **{f"odd/{k}": v for k, v in minimal('[agent]\nspeed = "fast"\n').items()}}
    created = api.post("/api/v1/task-sets", {"name": "ops", "file": upload(files)}, format="multipart")
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["number"] == 1 and [t["name"] for t in body["tasks"]] == ["count-errors", "odd"]
    assert body["tasks"][1]["unknown_keys"] == ["agent.speed"] and body["tasks"][0]["has_solution"]
    again = api.post("/api/v1/task-sets", {"name": "ops", "file": upload(files)}, format="multipart")
    assert again.status_code == 200 and again.json()["digest"] == body["digest"]
    listed = api.get("/api/v1/task-sets").json()
    assert [(s["name"], s["latest_version"]) for s in listed] == [("ops", 1)]
    detail = api.get(f"/api/v1/task-sets/{listed[0]['id']}").json()
    assert detail["versions"][0]["tasks"][1]["config"]["agent"] == {"speed": "fast"}


def test_the_api_refuses_a_broken_task_naming_file_key_and_reason(api):
    response = api.post(
        "/api/v1/task-sets", {"name": "x", "file": upload({f"t/{k}": v for k, v in minimal('[agent]\ntimeout_sec = "soon"\n').items()})}, format="multipart"
    )
    assert response.status_code == 400
    assert response.json()["detail"] == "t/task.toml: [agent] timeout_sec: must be a positive number of seconds up to 86400, got 'soon'"


def test_another_projects_task_set_is_404(api, outsider_api, outsider_project, outsider):
    version, _ = import_task_set(outsider_project, outsider, "theirs", folder_files(HARBOR_HELLO), single_name="hello")
    assert api.get(f"/api/v1/task-sets/{version.task_set_id}").status_code == 404
    assert api.get("/api/v1/task-sets").json() == []
    assert outsider_api.get(f"/api/v1/task-sets/{version.task_set_id}").status_code == 200


def test_the_pages_list_show_and_upload(owner_client, project, owner, outsider_project, outsider):
    version, _ = import_task_set(
        project, owner, "mine", {**folder_files(EXAMPLES / "move-report", "move-report/"), **{f"odd/{k}": v for k, v in minimal("zany = 1\n").items()}}
    )
    listing = owner_client.get("/tasks/").content.decode()
    assert "mine" in listing and 'href="/tasks/"' in listing  # the nav links the page
    page = owner_client.get(f"/tasks/{version.task_set_id}/").content.decode()
    assert "move-report" in page and "300 s" in page and "<code>zany</code>" in page and version.digest in page
    theirs, _ = import_task_set(outsider_project, outsider, "theirs", folder_files(HARBOR_HELLO), single_name="hello")
    assert owner_client.get(f"/tasks/{theirs.task_set_id}/").status_code == 404
    posted = owner_client.post("/tasks/", {"name": "hello", "file": upload(folder_files(HARBOR_HELLO), name="hello.tar.gz")})
    assert posted.status_code == 302 and TaskSet.objects.get(name="hello").versions.get().tasks.get().name == "hello"
    refused = owner_client.post("/tasks/", {"name": "bad", "file": upload({f"t/{k}": v for k, v in minimal("x = ").items()}, name="bad.tar.gz")})
    assert refused.status_code == 200 and "is not valid TOML" in refused.content.decode()


def test_each_tasks_environment_is_read_at_import_and_shown_on_its_page_and_in_the_api(owner_client, api, project, owner):
    hello = import_task_set(project, owner, "hello", folder_files(HARBOR_HELLO), single_name="hello")[0].tasks.get()
    assert hello.environment["from"] == "python:3.11-slim" and hello.environment["build_steps"] == 1
    assert hello.environment["resolution"].startswith("FROM python:3.11-slim is built on belvedir-sandbox:bookworm: Python 3.11")
    plain = import_task_set(project, owner, "examples", folder_files(EXAMPLES, "tasks/"))[0].tasks.get(name="csv-totals")
    assert (plain.environment["from"], plain.environment["build_steps"]) == ("belvedir-sandbox:bookworm", 0)
    files = {**minimal(), "environment/Dockerfile": b"FROM ubuntu:24.04\n"}
    refused = import_task_set(project, owner, "ubuntu", files, single_name="ubuntu")[0]
    assert "FROM ubuntu:24.04 cannot be pulled here" in refused.tasks.get().environment["refused"]
    page = owner_client.get(f"/tasks/{hello.version.task_set_id}/").content.decode()
    assert "FROM python:3.11-slim" in page and "1 step, no network" in page and hello.environment["build_digest"] in page
    assert "cannot be built: environment/Dockerfile: line 1: FROM ubuntu:24.04" in owner_client.get(f"/tasks/{refused.task_set_id}/").content.decode()
    answered = api.get(f"/api/v1/task-sets/{hello.version.task_set_id}").json()
    assert answered["versions"][0]["tasks"][0]["environment"] == hello.environment


@pytest.mark.django_db(transaction=True)
def test_bv_tasks_import_uploads_a_folder_and_lists_it(live_server, api_key, project, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))

    def bv(*args):
        return CliRunner().invoke(cli, list(args), env={"BELVEDIR_API_KEY": api_key, "BELVEDIR_BASE_URL": live_server.url}, obj={})

    imported = bv("tasks", "import", str(EXAMPLES), "--name", "examples", "--json")
    assert imported.exit_code == 0, imported.output
    assert sorted(t["name"] for t in json.loads(imported.stdout)["tasks"]) == EXAMPLE_NAMES
    hello = bv("tasks", "import", str(HARBOR_HELLO), "--name", "hello", "--json")
    assert [t["name"] for t in json.loads(hello.stdout)["tasks"]] == ["hello"]
    listed = json.loads(bv("tasks", "list", "--json").stdout)
    assert sorted((s["name"], s["latest_version"]) for s in listed) == [("examples", 1), ("hello", 1)]
