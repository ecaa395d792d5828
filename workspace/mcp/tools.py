"""Every tool of the MCP server, written out: the API endpoint it is the twin of and the arguments it takes.

A tool's path names its arguments in braces (`/api/v1/evals/{eval_id}`); its other arguments go in the query
(reads) or the JSON body (writes). Writes need a key of scope `full`: the API refuses a `read` key, naming the
scope, and so does the tool. tests/test_mcp.py calls every tool here beside its endpoint and compares.
"""

from dataclasses import dataclass, field

ID = int
LIMIT = "How many to return (the API's page; at most 1,000)."


@dataclass(frozen=True)
class Arg:
    name: str
    type: type
    description: str
    required: bool = False
    # Strings and lists are bounded before anything is asked of the platform.
    max_length: int | None = None
    minimum: int | None = None
    maximum: int | None = None


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    path: str
    args: tuple[Arg, ...] = ()
    method: str = "GET"
    # A list the API pages: the tool takes `limit` and `cursor` and answers `next_cursor`.
    paged: bool = False
    # A write refused to a read-only key; `dry_run` then answers what would be sent, and nothing is done.
    dry_run: bool = False
    body_arg: str | None = None  # a write whose whole JSON body is this one argument (an object)
    annotations: dict = field(default_factory=dict)

    @property
    def writes(self) -> bool:
        return self.method != "GET"


def _id(name: str, what: str) -> Arg:
    return Arg(name, ID, f"The {what}'s id.", required=True, minimum=1)


def _text(name: str, description: str, required: bool = False, max_length: int = 200) -> Arg:
    return Arg(name, str, description, required=required, max_length=max_length)


TOOLS: tuple[Tool, ...] = (
    # -- what there is -------------------------------------------------------------------------------------------
    Tool("whoami", "The project this key acts on, its user and the key's scope.", "/api/v1/me"),
    Tool("get_balance", "The project's prepaid balance, its recent ledger entries (charges, refunds, credits) and top-ups: the spend.", "/api/v1/balance"),
    Tool("list_benchmarks", "The benchmark catalog: each benchmark's rows, scoring, prompt format and options.", "/api/v1/benchmarks"),
    Tool("list_harnesses", "The project's harnesses (git repos run in a sandbox).", "/api/v1/harnesses", paged=True),
    Tool("get_harness", "One harness: its repo, commands, compute and latest scores.", "/api/v1/harnesses/{harness_id}", (_id("harness_id", "harness"),)),
    Tool("list_runs", "Harness runs, newest first.", "/api/v1/runs", paged=True),
    Tool("get_run", "One harness run: status, score, results, cost, egress.", "/api/v1/runs/{run_id}", (_id("run_id", "run"),)),
    Tool("list_deployments", "The project's model deployments (OpenAI-compatible endpoints).", "/api/v1/deployments", paged=True),
    Tool("get_deployment", "One deployment.", "/api/v1/deployments/{deployment_id}", (_id("deployment_id", "deployment"),)),
    Tool("list_evals", "Evals, newest first, with score, interval and status.", "/api/v1/evals", paged=True),
    Tool("get_eval", "One eval: its score with interval, categories, cost, progress.", "/api/v1/evals/{eval_id}", (_id("eval_id", "eval"),)),
    Tool(
        "list_eval_samples",
        "An eval's samples (input, output, score), a page at a time; `errors=true` for the errored ones only.",
        "/api/v1/evals/{eval_id}/samples",
        (_id("eval_id", "eval"), Arg("errors", bool, "Only the errored samples.")),
        paged=True,
    ),
    Tool(
        "compare_evals",
        "Eval B against eval A on the same rows: paired delta with its interval, McNemar p, flips and a verdict.",
        "/api/v1/evals/{a}/compare/{b}",
        (_id("a", "baseline eval (A)"), _id("b", "candidate eval (B)")),
    ),
    Tool("list_suite_runs", "Suite runs (many benchmarks × deployments), newest first.", "/api/v1/suite-runs", paged=True),
    Tool("get_suite_run", "One suite run: its cells and their status.", "/api/v1/suite-runs/{suite_run_id}", (_id("suite_run_id", "suite run"),)),
    Tool(
        "compare_suite_runs",
        "Suite run B against A, benchmark by benchmark on paired rows, verdicts corrected (Holm) for testing them all, and a gate.",
        "/api/v1/suite-runs/{a}/compare/{b}",
        (
            _id("a", "baseline suite run (A)"),
            _id("b", "candidate suite run (B)"),
            _text("deployment_a", "A's deployment when it ran several."),
            _text("deployment_b", "B's deployment when it ran several."),
        ),
    ),
    Tool(
        "list_monitors",
        "Monitors: suites run on a schedule against a deployment, with each one's last verdict and open alerts.",
        "/api/v1/monitors",
        paged=True,
    ),
    Tool(
        "get_monitor",
        "One monitor: its schedule, sensitivity (the per-run false-alarm rate that follows), budget and last verdict.",
        "/api/v1/monitors/{monitor_id}",
        (_id("monitor_id", "monitor"),),
    ),
    Tool(
        "list_monitor_runs",
        "A monitor's runs, newest first: each verdict (passed, regressed, improved, inconclusive, failed, skipped) with per-benchmark deltas.",
        "/api/v1/monitors/{monitor_id}/runs",
        (_id("monitor_id", "monitor"),),
        paged=True,
    ),
    Tool(
        "list_alerts",
        "Alerts that monitors opened (a regression, a failed or skipped run); `state=open` for those not resolved.",
        "/api/v1/alerts",
        (_text("state", "open (not resolved), acknowledged or resolved.", max_length=20),),
        paged=True,
    ),
    Tool(
        "list_review_queues",
        "Review queues: people labelling sessions, samples and trials against a rubric, each with its progress and, for a judge's calibration, its target.",
        "/api/v1/review-queues",
        paged=True,
    ),
    Tool(
        "get_review_progress",
        "One review queue's progress: items, labels and what is left, and per reviewer their labels, skips and median seconds a label.",
        "/api/v1/review-queues/{queue_id}/progress",
        (_id("queue_id", "review queue"),),
    ),
    Tool(
        "get_review_agreement",
        "How far a queue's reviewers agree (Krippendorff's α per score, Cohen's κ per pair, with intervals, and the items they disagree on); a calibrating queue adds its judge's κ against people.",
        "/api/v1/review-queues/{queue_id}/agreement",
        (_id("queue_id", "review queue"),),
    ),
    Tool("list_task_sets", "Agent task sets (Harbor's format) with their latest version.", "/api/v1/task-sets"),
    Tool("list_jobs", "Agent jobs (agents × deployments × tasks × attempts), newest first, with progress.", "/api/v1/jobs", paged=True),
    Tool(
        "get_job",
        "One job: progress, and per contestant pass@k and pass^k with intervals, mean reward, cost per solve.",
        "/api/v1/jobs/{job_id}",
        (_id("job_id", "job"),),
    ),
    Tool(
        "list_job_trials",
        "A job's trials (task, contestant, attempt, reward, flags), a page at a time.",
        "/api/v1/jobs/{job_id}/trials",
        (_id("job_id", "job"), _text("status", "queued, running, succeeded, errored or skipped.", max_length=20)),
        paged=True,
    ),
    Tool(
        "get_trial",
        "One trial: its reward, both phases' output, the agent's trajectory, flags, egress record, and its agent's session in Traces (trace_session).",
        "/api/v1/trials/{trial_id}",
        (_id("trial_id", "trial"),),
    ),
    Tool(
        "compare_jobs",
        "Job B against job A paired by task: delta with its interval, McNemar or a paired t, the tasks that moved, a gate.",
        "/api/v1/jobs/{a}/compare/{b}",
        (
            _id("a", "baseline job (A)"),
            _id("b", "candidate job (B)"),
            _text("contestant_a", "A's contestant when it has several."),
            _text("contestant_b", "B's contestant when it has several."),
        ),
    ),
    Tool("list_datasets", "The project's datasets with their latest version.", "/api/v1/datasets", paged=True),
    Tool("get_dataset", "One dataset.", "/api/v1/datasets/{dataset_id}", (_id("dataset_id", "dataset"),)),
    Tool("list_dataset_rows", "A dataset's rows, a page at a time.", "/api/v1/datasets/{dataset_id}/rows", (_id("dataset_id", "dataset"),), paged=True),
    Tool("list_evaluators", "Evaluators scoring live traffic.", "/api/v1/evaluators", paged=True),
    Tool("get_evaluator", "One evaluator: its scorer, sampling and budget.", "/api/v1/evaluators/{evaluator_id}", (_id("evaluator_id", "evaluator"),)),
    Tool(
        "list_evaluator_scores",
        "An evaluator's scores, newest first.",
        "/api/v1/evaluators/{evaluator_id}/scores",
        (_id("evaluator_id", "evaluator"),),
        paged=True,
    ),
    Tool(
        "query_sessions",
        "Trace sessions by filter: outcome, a harness run, a user, evaluator scores.",
        "/api/v1/sessions",
        (
            _text("outcome", "success or fail.", max_length=10),
            Arg("run", int, "Sessions of this harness run.", minimum=1),
            _text("user", "Sessions of this user id."),
            Arg("evaluator", int, "With score, score_below or score_above: by this evaluator's scores.", minimum=1),
            _text("score", "pass, fail or error.", max_length=10),
        ),
        paged=True,
    ),
    Tool(
        "get_session",
        "One trace session with its spans and tasks.",
        "/api/v1/sessions/{session_id}",
        (_text("session_id", "The session's id.", required=True, max_length=255),),
    ),
    Tool(
        "get_trajectory",
        "A session's (or a harness run's: its id is the session id) trajectory, its steps in order, a page at a time.",
        "/api/v1/sessions/{session_id}/steps",
        (
            _text("session_id", "The session's id (a run's id for a harness run).", required=True, max_length=255),
            _text("kind", "llm, tool or span.", max_length=10),
            Arg("errors", bool, "Only steps that ended in error."),
            _text("q", "Text in a step's name, messages or attributes."),
            Arg("page_size", int, "Steps per page (1 to 200).", minimum=1, maximum=200),
        ),
        paged=True,
    ),
    Tool(
        "diff_trajectories",
        "Two sessions' steps aligned: the first row where they diverge, what changed per row, each side's totals.",
        "/api/v1/session-diff",
        (_text("a", "Session A's id.", required=True, max_length=255), _text("b", "Session B's id.", required=True, max_length=255)),
    ),
    # -- writes: a key of scope full, each with a budget -----------------------------------------------------------
    Tool(
        "start_eval",
        "Start an eval of a benchmark (or a dataset with scorers) against a deployment, within max_cost dollars.",
        "/api/v1/evals",
        (
            _text("deployment", "Deployment name or id.", required=True),
            _text("benchmark", "A catalog benchmark (see list_benchmarks)."),
            Arg("dataset_id", int, "Instead of a benchmark: this dataset.", minimum=1),
            Arg("scorers", list, "With a dataset: scorer names."),
            Arg("sample_limit", int, "Score only this many rows.", minimum=1),
            Arg("max_cost", float, "Dollars the eval may spend on the deployment's tokens.", required=True),
            Arg("dry_run", bool, "Answer what would be sent and do nothing."),
        ),
        method="POST",
        dry_run=True,
    ),
    Tool(
        "start_suite_run",
        "Start a suite (core, quick or the project's own) on deployments, within max_cost dollars.",
        "/api/v1/suite-runs",
        (
            _text("suite", "core, quick or one of the project's suites.", required=True),
            Arg("deployments", list, "Deployment names or ids.", required=True),
            Arg("max_cost", float, "Dollars the run may spend on the deployments' tokens.", required=True),
            Arg("dry_run", bool, "Answer what would be sent and do nothing."),
        ),
        method="POST",
        dry_run=True,
    ),
    Tool(
        "start_job",
        "Start a job of agents on a task set's tasks, each trial charged at its start within budget dollars.",
        "/api/v1/jobs",
        (
            _text("task_set", "Task set name or id.", required=True),
            Arg("agents", list, "Agents: oracle, nop, reference.", required=True),
            Arg("deployments", list, "Deployments (names or ids) for agents that call a model."),
            Arg("attempts", int, "Trials of each task by each contestant.", minimum=1, maximum=100),
            _text("budget", 'Dollars its trials may be charged in all, e.g. "5".', required=True, max_length=20),
            Arg("dry_run", bool, "Answer what would be sent and do nothing."),
        ),
        method="POST",
        dry_run=True,
    ),
    Tool(
        "retry_eval_errors", "Ask again only the errored samples of an eval.", "/api/v1/evals/{eval_id}/retry-errors", (_id("eval_id", "eval"),), method="POST"
    ),
    Tool(
        "add_sessions_to_dataset",
        "Add trace sessions (their inputs and outputs) to a dataset as rows, making its next version.",
        "/api/v1/datasets/rows-from-traces",
        (Arg("payload", dict, "The body of POST /api/v1/datasets/rows-from-traces (dataset, sessions…).", required=True),),
        method="POST",
        body_arg="payload",
    ),
    Tool(
        "create_evaluator",
        "Create an evaluator scoring live sessions (a scorer, a sample rate, a daily budget for judges).",
        "/api/v1/evaluators",
        (Arg("payload", dict, "The body of POST /api/v1/evaluators (name, scorer, sample_rate, daily_budget…).", required=True),),
        method="POST",
        body_arg="payload",
    ),
)

BY_NAME = {tool.name: tool for tool in TOOLS}
