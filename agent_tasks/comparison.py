"""Two jobs on the same tasks, paired by task: the comparison evals have (delta with its interval, McNemar or a
paired t, flips, a verdict), each task's value being the contestant's mean reward over its usable trials.

A task pairs when both jobs ran it with the same files (its digest): a task changed between the two jobs is left
out and listed, as is one either side has no usable trial for. The gate fails when B is significantly worse, or
when either job failed (its trials errored past the share a job may lose): a gate on it would pass nothing measured.
"""

from evals import statistics
from evals.comparison import paired_statistics

from .models import Job
from .results import SOLVED, matrix


class NotComparable(ValueError):
    """The two jobs cannot be paired as asked: the message says why (a 400)."""

    status_code = 400


def _column(job: Job, columns: list[str], wanted: str | None, side: str) -> str:
    if wanted:
        if wanted not in columns:
            raise NotComparable(f"Job #{job.pk} has no contestant {wanted!r}; it has {', '.join(columns)}.")
        return wanted
    if len(columns) != 1:
        raise NotComparable(f"Job #{job.pk} has {len(columns)} contestants ({', '.join(columns)}): name one with contestant_{side}.")
    return columns[0]


def _digests(job: Job) -> dict[str, str]:
    return dict(job.version.tasks.values_list("name", "digest"))


def compare_jobs(a: Job, b: Job, *, contestant_a: str | None = None, contestant_b: str | None = None, set_aside_flagged: bool = False) -> dict:
    tasks_a, columns_a, cells_a = matrix(a)
    tasks_b, columns_b, cells_b = matrix(b)
    column_a = _column(a, columns_a, contestant_a, "a")
    column_b = _column(b, columns_b, contestant_b, "b")
    digests_a, digests_b = _digests(a), _digests(b)
    common = sorted(set(tasks_a) & set(tasks_b))
    changed = [t for t in common if digests_a.get(t) != digests_b.get(t)]
    if not common:
        raise NotComparable(f"Jobs #{a.pk} and #{b.pk} share no task: nothing to pair.")
    pairs, unpaired, set_aside = [], [], []
    for task in common:
        if task in changed:
            continue
        sides = []
        for cells, column in ((cells_a, column_a), (cells_b, column_b)):
            cell = cells.get((task, column))
            if cell is None:
                sides.append([])
                continue
            if set_aside_flagged:
                set_aside += [t.pk for t in cell.trials if t.is_flagged]
            sides.append(cell.rewards(set_aside_flagged))
        if sides[0] and sides[1]:
            pairs.append((task, statistics.mean(sides[0]), statistics.mean(sides[1])))
        else:
            unpaired.append(task)
    found = paired_statistics([x for _, x, _ in pairs], [y for _, _, y in pairs])
    flips = [
        {"task": task, "a": round(x, 6), "b": round(y, 6), "way": "better" if y > x else "worse"}
        for task, x, y in sorted(pairs, key=lambda p: (-abs(p[2] - p[1]), p[0]))
        if x != y
    ]
    return {
        "a": _side(a, column_a, [x for _, x, _ in pairs]),
        "b": _side(b, column_b, [y for _, _, y in pairs]),
        "n": len(pairs),
        **found,
        "tasks": flips,
        "changed_tasks": changed,
        "unpaired_tasks": unpaired,
        "set_aside_trials": sorted(set_aside),
        "failed": [job.pk for job in (a, b) if job.status == Job.Status.FAILED],
        "gate": "fail" if found["verdict"] == statistics.WORSE or Job.Status.FAILED in (a.status, b.status) else "pass",
    }


def _side(job: Job, column: str, values: list[float]) -> dict:
    return {
        "id": job.pk,
        "name": str(job),
        "contestant": column,
        "status": job.status,
        "mean_reward": round(statistics.mean(values), 6) if values else None,
        "solved_tasks": sum(1 for v in values if v >= SOLVED),
    }
