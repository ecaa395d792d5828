"""A job's numbers: per task and per contestant pass@k and pass^k with intervals, mean reward, cost per solve.

A trial solves its task when its reward is full marks (1). Errored and skipped trials count nowhere: an error is
the platform's or the verifier's, never the agent's 0. Flagged trials count unless the caller sets them aside.
Intervals are percentile bootstraps over tasks (the unit a benchmark samples), from the fixed seed of
evals.statistics, so a page shows the same interval every time.
"""

from dataclasses import dataclass, field

from evals import statistics

from .egress_record import denied_by_trial
from .models import Job, Trial

SOLVED = 1.0


@dataclass
class Cell:
    """One task × one contestant: its trials and what they add up to."""

    trials: list = field(default_factory=list)

    def usable(self, set_aside_flagged: bool = False) -> list[Trial]:
        return [t for t in self.trials if t.status == Trial.Status.SUCCEEDED and not (set_aside_flagged and t.is_flagged)]

    def rewards(self, set_aside_flagged: bool = False) -> list[float]:
        return [t.reward for t in self.usable(set_aside_flagged)]


def ks(attempts: int) -> list[int]:
    """The k a job reports: 1, and every attempt count up to its own (at most 1, 3, 5 and its own)."""
    return sorted({k for k in (1, 3, 5, attempts) if k <= attempts})


def matrix(job: Job) -> tuple[list[str], list[str], dict[tuple[str, str], Cell]]:
    """Tasks (rows), contestants (columns) and each cell's trials, in attempt order."""
    cells: dict[tuple[str, str], Cell] = {}
    tasks, columns = {}, {}
    trials = job.trials.select_related("task", "deployment").defer("task__archive", "agent_output", "verifier_output", "trajectory").order_by("attempt", "pk")
    trials = list(trials)
    flags = denied_by_trial(trials, job.deny_hosts)
    for trial in trials:
        trial.egress_flags = flags.get(trial.pk, ())
        tasks.setdefault(trial.task.name, None)
        columns.setdefault(trial.contestant, None)
        cells.setdefault((trial.task.name, trial.contestant), Cell()).trials.append(trial)
    return sorted(tasks), list(columns), cells


def interval(values: list[float]) -> dict:
    if not values:
        return {"value": None, "ci": None, "tasks": 0}
    return {"value": round(statistics.mean(values), 6), "ci": statistics.bootstrap_mean(values).as_list(), "tasks": len(values)}


def summary(job: Job, *, set_aside_flagged: bool = False, found=None) -> list[dict]:
    """One entry per contestant: pass@k and pass^k for each k (over the tasks with at least k usable trials),
    mean reward, counts and cost. `found`: the job's matrix when the caller has read it already."""
    tasks, columns, cells = found or matrix(job)
    out = []
    for column in columns:
        mine = [cells[(task, column)] for task in tasks if (task, column) in cells]
        rewards = [cell.rewards(set_aside_flagged) for cell in mine]
        entry = {
            "contestant": column,
            "trials": sum(len(cell.trials) for cell in mine),
            "succeeded": sum(len(r) for r in rewards),
            "solved": sum(sum(1 for x in r if x >= SOLVED) for r in rewards),
            "errored": sum(1 for cell in mine for t in cell.trials if t.status == Trial.Status.ERRORED),
            "skipped": sum(1 for cell in mine for t in cell.trials if t.status == Trial.Status.SKIPPED),
            "flagged": sum(1 for cell in mine for t in cell.trials if t.is_flagged),
            "mean_reward": interval([statistics.mean(r) for r in rewards if r]),
            "pass_at_k": {},
            "pass_hat_k": {},
        }
        for k in ks(job.attempts):
            counted = [(len(r), sum(1 for x in r if x >= SOLVED)) for r in rewards if len(r) >= k]
            entry["pass_at_k"][str(k)] = interval([statistics.pass_at_k(n, c, k) for n, c in counted])
            entry["pass_hat_k"][str(k)] = interval([statistics.pass_hat_k(n, c, k) for n, c in counted])
        ran = [t for cell in mine for t in cell.trials]
        # What a solve cost: the platform's charges kept (refunds out) and the model's tokens at its prices.
        tokens_cost = sum(float(t.model_cost or 0) for t in ran) * 100
        cost = sum(t.price_cents for t in ran if not t.platform_fault) + tokens_cost
        entry["input_tokens"] = sum(t.input_tokens for t in ran)
        entry["output_tokens"] = sum(t.output_tokens for t in ran)
        entry["model_cost_cents"] = round(tokens_cost, 4)
        entry["cost_cents"] = round(cost, 4)
        entry["cost_per_solve_cents"] = round(cost / entry["solved"], 2) if entry["solved"] else None
        out.append(entry)
    return out
