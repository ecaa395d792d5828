"""Importing a task set: every task parsed before the transaction, then one transaction that stores all or nothing."""

from django.db import transaction
from django.db.models import Max

from belvedir.sandbox.spec import HOME

from . import environment, outputs, versions
from .archive import pack, read_archive
from .harbor_format import TaskFormatError, content_digest, parse_task_set
from .models import AgentTask, TaskSet, TaskSetVersion


def import_task_set(project, user, name: str, files: dict[str, bytes], single_name: str | None = None) -> tuple[TaskSetVersion, bool]:
    """The set's version holding exactly these files: the existing one when the content is already there (created
    False), else the next. `single_name` names a folder that is itself one task (its directory name is unknown here);
    TaskFormatError refuses the whole set, and nothing is stored."""
    name = name.strip()
    if not name or len(name) > 100:
        raise TaskFormatError("name", "a task set needs a name of 1 to 100 characters")
    tasks = parse_task_set(files, single_name or name)
    for task in tasks:
        if reason := outputs.check(task.config, _writable(task.files)):
            raise TaskFormatError(f"{task.name}/task.toml", reason)
    stored = {f"{t.name}/{path}": data for t in tasks for path, data in t.files.items()}
    digest = content_digest(stored)
    # Compressing is the slow part: done before the transaction, which then only writes rows.
    archives = {t.name: pack(t.files) for t in tasks}
    parts = {t.name: versions.parts(t) for t in tasks}
    with transaction.atomic():
        task_set, _ = TaskSet.objects.get_or_create(project=project, name=name, defaults={"created_by": user})
        # The set's row is the lock: two imports into one set take numbers one after the other.
        TaskSet.objects.select_for_update().get(pk=task_set.pk)
        if existing := task_set.versions.filter(digest=digest).first():
            return existing, False
        number = (task_set.versions.aggregate(n=Max("number"))["n"] or 0) + 1
        previous = task_set.versions.filter(number=number - 1).first()
        said = {}
        if previous is not None:
            said = {"previous": previous.number, "tasks": versions.changes(dict(previous.tasks.values_list("name", "parts")), parts)}
        version = TaskSetVersion.objects.create(
            task_set=task_set,
            number=number,
            digest=digest,
            file_count=len(stored),
            total_bytes=sum(len(data) for data in stored.values()),
            changes=said,
            created_by=user,
        )
        AgentTask.objects.bulk_create(
            AgentTask(
                version=version,
                name=t.name,
                instruction=t.instruction,
                config=t.config,
                unknown_keys=t.unknown_keys,
                agent_timeout_sec=t.agent_timeout_sec,
                verifier_timeout_sec=t.verifier_timeout_sec,
                has_solution=t.has_solution,
                environment=environment.summary(t.files),
                digest=t.digest,
                parts=parts[t.name],
                file_count=len(t.files),
                size=sum(len(data) for data in t.files.values()),
                archive=archives[t.name],
            )
            for t in tasks
        )
    return version, True


def _writable(files: dict[str, bytes]) -> tuple[str, ...]:
    """Where the task's agent may write, for its declared outputs: its folders and the home (none where the Dockerfile
    cannot be built here: such a task is refused at its job, naming the reason)."""
    try:
        return (*environment.resolve(files).folders, HOME)
    except environment.EnvironmentRefused:
        return (HOME,)


def archive_stem(filename: str) -> str:
    """`hello.tar.gz` -> `hello`: the task's name when the archive holds one task at its root."""
    for suffix in (".tar.gz", ".tgz", ".tar", ".zip"):
        if filename.lower().endswith(suffix):
            return filename[: -len(suffix)]
    return filename


def import_archive(project, user, name: str, upload) -> tuple[TaskSetVersion, bool]:
    """An uploaded archive (API, page and `bv tasks import` alike) as a task set's version."""
    return import_task_set(project, user, name, read_archive(upload), single_name=archive_stem(upload.name or ""))
