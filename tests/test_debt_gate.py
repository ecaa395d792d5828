"""The debt gate: every path through which a project spends (a charge, a deployment's or a judge's tokens) refuses
while the project owes money, and nothing is queued, charged or asked of any deployment meanwhile.

SPENDING_PATHS is the table: each path (an endpoint, a page or a queue task), the registered gate
(billing.actions.DEBT_GATES) it goes through, and what it must leave behind. The guard below finds in the
source every call that spends and checks each sits behind a registered gate, so a new way to spend is either
registered (and then must be in the table) or fails here.
"""

import ast
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.utils import timezone

from agent_tasks import jobs, regrades
from agent_tasks.actions import import_task_set
from agent_tasks.jobs import create_job, run_job_trial
from agent_tasks.models import Grade, Job, Regrade
from agent_tasks.regrades import run_grade
from billing.actions import DEBT_GATES, post_entry
from billing.models import Account, LedgerEntry
from evals import queue
from evals.datasets.versions import create_dataset
from evals.models import Deployment, Eval, SuiteRun
from evals.tasks import run_eval
from finetunes.models import FineTunedModel
from harnesses import actions as harness_actions
from harnesses.models import Harness, Run
from traces import evaluators
from traces.evaluator_rules import save_evaluator
from traces.models import Evaluator, EvaluatorScore, TraceSession

from .fakes.openai_server import FakeOpenAI
from .test_evaluators import exchange, post

pytestmark = pytest.mark.django_db(transaction=True)

DEBT = "owes $1.00"
TASK = {
    "t/task.toml": b'version = "1.0"\n',
    "t/instruction.md": b"Nothing.\n",
    "t/environment/Dockerfile": f"FROM {django_settings.SANDBOX_IMAGE}\n".encode(),
    "t/tests/test.sh": b"echo 1 > /logs/verifier/reward.txt\n",
}


class World:
    """A project with what each path acts on, made while it was funded, then put $1.00 in debt."""

    def __init__(self, project, owner, server, api, owner_client):
        self.project, self.owner, self.server, self.api, self.client = project, owner, server, api, owner_client
        priced = {"input_price_per_million": Decimal(1000), "output_price_per_million": Decimal(1000)}
        self.model = Deployment.objects.create(project=project, name="model", base_url=server.url, model="m", **priced)
        self.judge = Deployment.objects.create(project=project, name="judge", base_url=server.url, model="j", **priced)
        self.dataset = create_dataset(project, owner, "qa", b'{"input": "1+1", "expected": "2"}\n')
        judged = {"dataset": self.dataset, "dataset_version": 1, "scorers": [{"name": "llm_judge", "deployment": self.judge.pk}], "judge": self.judge}
        self.failed = Eval.objects.create(project=project, deployment=self.model, seed=1, status="failed", **judged)
        self.succeeded = Eval.objects.create(project=project, deployment=self.model, seed=1, status="succeeded", **judged)
        self.queued = Eval.objects.create(project=project, deployment=self.model, seed=1, status="queued", **judged)
        self.suite_run = SuiteRun.objects.create(project=project, suite_name="custom", entries=[])
        self.pending = Eval.objects.create(project=project, deployment=self.model, seed=1, status="pending", suite_run=self.suite_run, **judged)
        repo = {"repo_url": "https://example.com/r.git", "install_command": "true", "run_command": "true"}
        self.harness = Harness.objects.create(project=project, created_by=owner, name="cpu", **repo)
        self.gpu_harness = Harness.objects.create(project=project, created_by=owner, name="gpu", compute_type="gpu", gpu_type="a100", **repo)
        self.finetuned = FineTunedModel.objects.create(project=project, name="ft", base_model="b", adapter="adapters/ft.zip")
        self.task_version = import_task_set(project, owner, "tasks", TASK)[0]
        self.job = create_job(project, owner, version=self.task_version, agents=["nop"], budget_cents=100)
        self.evaluator = save_evaluator(project, owner, {"name": "helpful", "kind": "judge", "judge": self.judge, "daily_budget": Decimal(10), "config": {}})
        now = timezone.now().timestamp()
        post(api, [exchange("s-new", "Add up 1", "The total is 1.", now)])
        self.session = TraceSession.objects.get(session_id="s-new")
        self.errored = EvaluatorScore.objects.create(
            evaluator=self.evaluator,
            version=self.evaluator.version,
            project=project,
            session=self.session,
            session_at=self.session.first_span_at,
            status="error",
            error="judge down",
            attempts=1,
            scored_at=timezone.now() - evaluators.RETRY_AFTER * 2,
        )
        # Stripe took back a disputed top-up after its credit was spent: the project owes $1.00.
        post_entry(Account.for_project(project), kind=LedgerEntry.Kind.DISPUTE, amount_cents=-100, reference="txn_debt", memo="disputed")


def refused_402(response):
    assert response.status_code == 402, response.content
    body = response.json()
    assert DEBT in body["detail"] and body["debt_cents"] == 100


def refused_page(response):
    assert response.status_code == 402 and DEBT in response.content.decode()


def create_eval_api(w):
    refused_402(w.api.post("/api/v1/evals", {"dataset": w.dataset.pk, "deployment": "model", "scorers": ["exact_match"]}, format="json"))
    assert Eval.objects.count() == 4


def create_eval_page(w):
    refused_page(w.client.post("/evals/new/benchmark/", {"benchmark": "gsm8k", "deployment": w.model.pk, "sample_limit": "1"}))
    assert Eval.objects.count() == 4


def resume_eval_api(w):
    refused_402(w.api.post(f"/api/v1/evals/{w.failed.pk}/resume", {}, format="json"))
    assert Eval.objects.get(pk=w.failed.pk).status == "failed"


def retry_eval_errors_api(w):
    refused_402(w.api.post(f"/api/v1/evals/{w.failed.pk}/retry-errors"))


def rescore_eval_api(w):
    refused_402(w.api.post(f"/api/v1/evals/{w.succeeded.pk}/rescore"))
    assert Eval.objects.count() == 4


def create_suite_run_api(w):
    payload = {"name": "mine", "benchmarks": [{"benchmark": "gsm8k", "sample_limit": 1}], "deployments": ["model"]}
    refused_402(w.api.post("/api/v1/suite-runs", payload, format="json"))
    assert SuiteRun.objects.count() == 1


def eval_on_the_queue(w):
    """Queued before the debt (a dispute arrives while it waits): the worker asks nothing and says why."""
    run_eval(w.queued.pk)
    queued = Eval.objects.get(pk=w.queued.pk)
    assert queued.status == "failed" and DEBT in queued.status_message and "Resume once it is paid" in queued.status_message


def suite_cells(w):
    """A suite's pending cells wait while the project is in debt, on the worker's advance and the scheduled one."""
    assert queue.advance(w.suite_run.pk) == 0
    from evals.suites.actions import advance_all

    assert advance_all() == 0
    assert Eval.objects.get(pk=w.pending.pk).status == "pending"


def deployment_test_api(w):
    refused_402(w.api.post(f"/api/v1/deployments/{w.judge.pk}/test"))


def deployment_test_page(w):
    response = w.client.post(f"/evals/deployments/{w.judge.pk}/test/", HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and DEBT in response.content.decode()


def harness_run_api(w, settings):
    # A run priced at nothing would pass a charge into debt: the gate must refuse it first.
    settings.RUN_PRICE_CPU_CENTS = 0
    refused_402(w.api.post(f"/api/v1/harnesses/{w.harness.pk}/runs"))
    assert not Run.objects.exists()


def model_benchmark_api(w, settings):
    refused_402(w.api.post(f"/api/v1/models/{w.finetuned.pk}/runs", {"harness": w.gpu_harness.pk}, format="json"))
    assert not Run.objects.exists()


def judge_evaluator_api(w):
    payload = {"name": "another", "kind": "judge", "judge": "judge", "daily_budget": "5"}
    refused_402(w.api.post("/api/v1/evaluators", payload, format="json"))
    assert Evaluator.objects.count() == 1


def judge_evaluator_page(w):
    form = {"name": "another", "target": "session", "source": "any", "sample_rate": "1", "kind": "judge", "judge": w.judge.pk, "daily_budget": "5"}
    form |= {"enabled": "on", "scale": "pass_fail"}
    refused_page(w.client.post("/traces/evaluators/", form))
    assert Evaluator.objects.count() == 1


def backfill_api(w):
    window = {"since": "2020-01-01", "until": "2100-01-01", "confirm": True}
    refused_402(w.api.post(f"/api/v1/evaluators/{w.evaluator.pk}/backfill", window, format="json"))


def backfill_page(w):
    window = {"since": "2020-01-01", "until": "2100-01-01"}
    response = w.client.post(f"/traces/evaluators/{w.evaluator.pk}/backfill/", window, follow=True)
    assert "No backfill" in response.content.decode() and DEBT in response.content.decode()


def scheduled_scoring(w):
    """Skipped with the debt as the reason, once: a second look stores nothing more and asks nothing."""
    EvaluatorScore.objects.filter(pk=w.errored.pk).delete()
    assert evaluators.score_sessions([w.session.pk]) == 1
    skipped = EvaluatorScore.objects.get(evaluator=w.evaluator)
    assert skipped.status == "skipped" and DEBT in skipped.error and skipped.cost is None
    assert evaluators.score_sessions([w.session.pk]) == 0


def evaluator_retries(w):
    """Its errors wait as they are (attempts untouched) until the debt is paid."""
    assert evaluators.retry_errors() == 0
    w.errored.refresh_from_db()
    assert (w.errored.status, w.errored.attempts) == ("error", 1)


def create_job_api(w):
    refused_402(w.api.post("/api/v1/jobs", {"task_set": "tasks", "agents": ["nop"], "budget": "1"}, format="json"))
    assert Job.objects.count() == 1


def create_job_page(w):
    refused_page(w.client.post("/jobs/", {"version": w.task_version.pk, "agents": ["nop"], "attempts": 1, "budget": "1", "runtime": "auto"}))
    assert Job.objects.count() == 1


def job_trial_on_the_queue(w):
    """Sent before the debt: the worker skips it naming the debt, charges nothing and runs nothing."""
    trial = w.job.trials.get()
    run_job_trial(trial.pk)
    trial.refresh_from_db()
    assert trial.status == "skipped" and DEBT in trial.error and trial.price_cents == 0


def regrade_api(w):
    refused_402(w.api.post(f"/api/v1/jobs/{w.job.pk}/regrade", {"version": w.task_version.number}, format="json"))
    assert not Regrade.objects.exists()


def grade_on_the_queue(w):
    """A grade sent before the debt: the worker skips it naming the debt, charges nothing and grades nothing."""
    trial = w.job.trials.get()
    grade = Grade.objects.create(regrade=Regrade.objects.create(job=w.job, version=w.task_version), trial=trial, task=trial.task)
    run_grade(grade.pk)
    grade.refresh_from_db()
    assert grade.status == "skipped" and DEBT in grade.error and grade.price_cents == 0


# (what is tried, the registered gate it goes through, the check)
SPENDING_PATHS = [
    ("POST /api/v1/evals", "evals.actions.create_eval", create_eval_api),
    ("the New eval page", "evals.actions.create_eval", create_eval_page),
    ("POST /api/v1/evals/{id}/resume", "evals.actions.resume_eval", resume_eval_api),
    ("POST /api/v1/evals/{id}/retry-errors", "evals.actions.retry_errors", retry_eval_errors_api),
    ("POST /api/v1/evals/{id}/rescore (a judge's tokens)", "evals.actions.rescore_eval", rescore_eval_api),
    ("POST /api/v1/suite-runs", "evals.suites.actions.create_suite_run", create_suite_run_api),
    ("an eval's pass on the queue", "evals.tasks.run_eval", eval_on_the_queue),
    ("a suite run's next cells", "evals.queue.advance", suite_cells),
    ("POST /api/v1/deployments/{id}/test", "evals.connection.try_connection", deployment_test_api),
    ("the deployment's Test button", "evals.connection.try_connection", deployment_test_page),
    ("POST /api/v1/harnesses/{id}/runs at no price", "harnesses.actions.start_run", harness_run_api),
    ("POST /api/v1/models/{id}/runs", "harnesses.actions.start_run", model_benchmark_api),
    ("POST /api/v1/evaluators (a judge)", "traces.evaluator_rules.save_evaluator", judge_evaluator_api),
    ("the New evaluator page (a judge)", "traces.evaluator_rules.save_evaluator", judge_evaluator_page),
    ("POST /api/v1/evaluators/{id}/backfill", "traces.evaluators.start_backfill", backfill_api),
    ("the evaluator's Backfill button", "traces.evaluators.start_backfill", backfill_page),
    ("scoring segmented sessions", "traces.evaluators.score_targets", scheduled_scoring),
    ("retrying a judge's errors", "traces.evaluators.retry_errors", evaluator_retries),
    ("POST /api/v1/jobs", "agent_tasks.jobs.create_job", create_job_api),
    ("the New job form", "agent_tasks.jobs.create_job", create_job_page),
    ("a job's trial on the queue", "agent_tasks.jobs.run_job_trial", job_trial_on_the_queue),
    ("POST /api/v1/jobs/{id}/regrade", "agent_tasks.regrades.start", regrade_api),
    ("a regrade's grade on the queue", "agent_tasks.regrades.run_grade", grade_on_the_queue),
]


@pytest.fixture
def enqueued(monkeypatch):
    """What would have gone to a queue: every async_task of the project (the guard below checks these are all)."""
    sent = []
    for module in (queue, harness_actions, evaluators, jobs, regrades):
        monkeypatch.setattr(module, "async_task", lambda name, *args, **kwargs: sent.append(name))
    return sent


@pytest.fixture
def world(settings, project, owner, api, owner_client, enqueued):
    settings.EVAL_ALLOW_PRIVATE_URLS = True  # the fake OpenAI server is on 127.0.0.1
    settings.RUN_PRICE_CPU_CENTS, settings.RUN_PRICE_GPU_CENTS = 100, 500
    with FakeOpenAI(answer=lambda text: "CORRECT") as server:
        made = World(project, owner, server, api, owner_client)
        enqueued.clear()  # what making it queued (the ingest, an evaluator) is not under test
        yield made


@pytest.mark.parametrize(("path", "gate", "check"), SPENDING_PATHS, ids=[row[0] for row in SPENDING_PATHS])
def test_every_spending_path_refuses_while_the_project_is_in_debt(world, enqueued, settings, path, gate, check):
    ledger_before = list(LedgerEntry.objects.values_list("pk", flat=True))
    if "settings" in check.__code__.co_varnames[: check.__code__.co_argcount]:
        check(world, settings)
    else:
        check(world)
    assert world.server.requests == [], f"{path} asked a deployment"
    assert enqueued == [], f"{path} queued {enqueued}"
    assert list(LedgerEntry.objects.values_list("pk", flat=True)) == ledger_before and Account.balance_for(world.project) == -100


def test_the_table_covers_every_registered_gate():
    assert {gate for _, gate, _ in SPENDING_PATHS} == set(DEBT_GATES)


# -- the guard: every call that spends, found in the source, is behind a registered gate ------------------------

# The calls that spend: a ledger charge (billing.workloads.charge), a request to a deployment (generation, log-likelihood, a judge's
# verdict) and a task sent to a queue (whose work spends).
SPENDING_CALLS = {"charge", "charge_trial", "complete", "send_request", "grade", "async_task"}

# Where a chain of callers up from a spender may stop short of a registered gate, and why. Nothing else may: a new
# caller of a spender (a view calling test_connection without try_connection) must reach a gate, or be named here.
STOPS = {
    "evals.queue.enqueue": "whatever queued it, the task (evals.tasks.run_eval, a gate) refuses in debt when it runs",
    "agent_tasks.jobs.enqueue": "whatever sent it, the task (agent_tasks.jobs.run_job_trial, a gate) skips it in debt",
    "agent_tasks.regrades.advance": "whatever sent it, the task (agent_tasks.regrades.run_grade, a gate) skips it in debt",
    "harnesses.actions.enqueue_run": "a run is queued once start_run (a gate) charged it; requeue_lost_runs sends it again, charged already",
    "traces.evaluators.enqueue_for": "its scoring task (traces.evaluators.score_targets, a gate) refuses in debt when it runs",
    "evals.engine.EvalRun.run": "an eval's engine runs only in evals.tasks.run_eval (a gate); other objects' `.run(` calls share its name",
}


PACKAGES = ("agent_tasks", "belvedir", "billing", "evals", "finetunes", "harnesses", "traces", "workspace")


@dataclass
class Graph:
    """The project's functions and what each calls: resolved to a qualified name where the source says which (a
    function of its module, an imported name, an imported module's function, a method of its own class), else by
    the called attribute's name alone (a method of some object)."""

    calls: dict[str, set[str]]  # function: qualified names it calls
    by_name: dict[str, set[str]]  # function: attribute names it calls on objects it cannot resolve
    methods: set[str]  # functions defined in a class


def graph() -> Graph:
    root = Path(django_settings.BASE_DIR)
    found = Graph({}, {}, set())
    for package in PACKAGES:
        for path in (root / package).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            module = ".".join(path.relative_to(root).with_suffix("").parts)
            tree = ast.parse(path.read_text())
            names = _bindings(tree, module)
            _walk(tree, module, [], None, names, found)
    return found


def _bindings(tree, module: str) -> dict[str, str]:
    """What each module-level name stands for: its own functions and classes, and what it imports."""
    package = module.rsplit(".", 1)[0]
    names = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names[node.name] = f"{module}.{node.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                names[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = module.split(".")[: -node.level] if node.level else []
                base = ".".join([*parent, *([node.module] if node.module else [])]) or package
            for alias in node.names:
                names[alias.asname or alias.name] = f"{base}.{alias.name}"
    return names


def _walk(node, module, scope, klass, names, found):
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.ClassDef):
            _walk(child, module, [*scope, child.name], ".".join([module, *scope, child.name]), names, found)
            continue
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            qualified = ".".join([module, *scope, child.name])
            found.calls.setdefault(qualified, set())
            found.by_name.setdefault(qualified, set())
            if scope and ".".join([module, *scope]) != klass:
                # A function defined inside another is that one's (a closure it calls or hands on: the engine's `ask`).
                found.calls.setdefault(".".join([module, *scope]), set()).add(qualified)
            if klass and len(scope) and ".".join([module, *scope]) == klass:
                found.methods.add(qualified)
            _walk(child, module, [*scope, child.name], klass, names, found)
            continue
        if isinstance(child, ast.Call) and scope:
            function = ".".join([module, *scope])
            func = child.func
            if isinstance(func, ast.Name) and func.id in names:
                found.calls.setdefault(function, set()).add(names[func.id])
            elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in names:
                found.calls.setdefault(function, set()).add(f"{names[func.value.id]}.{func.attr}")
            elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in ("self", "cls") and klass:
                found.calls.setdefault(function, set()).add(f"{klass}.{func.attr}")
            elif isinstance(func, ast.Attribute):
                found.by_name.setdefault(function, set()).add(func.attr)
            elif isinstance(func, ast.Name):
                found.calls.setdefault(function, set()).add(f"{function}.{func.id}")  # a function defined inside it
        _walk(child, module, scope, klass, names, found)


def spending_calls() -> dict[str, set[str]]:
    """{function: the spending calls in its own body (by the called name, however it is reached)}."""
    found = graph()
    short = lambda q: q.rsplit(".", 1)[1]  # noqa: E731
    return {f: {short(c) for c in found.calls[f]} | found.by_name.get(f, set()) for f in found.calls}


def callers(found: Graph) -> dict[str, set[str]]:
    """{function: the functions that call it}: by its qualified name, and a method also by its name alone."""
    up: dict[str, set[str]] = {}
    for function, calls in found.calls.items():
        for called in calls:
            up.setdefault(called, set()).add(function)
    for function, names in found.by_name.items():
        for name in names:
            up.setdefault(f"*.{name}", set()).add(function)
    return up


def ungated(spender: str, found: Graph, up: dict[str, set[str]]) -> list[list[str]]:
    """A chain of callers up from `spender` to each function nothing calls (a view, a queue task, a command) reached
    without passing a registered gate or a STOPS entry. A method's callers include every call of its name on an
    object the source does not name: the walk errs on the side of more chains, never fewer. Breadth first, each
    function once: a chain to every open entry, not every chain."""
    below = {spender: None}  # function: the one it was reached from (towards the spender)
    queue, entries = [spender], []
    while queue:
        function = queue.pop(0)
        if function in DEBT_GATES or function in STOPS:
            continue
        above = set(up.get(function, ()))
        if function in found.methods:
            above |= up.get("*." + function.rsplit(".", 1)[1], set())
        above.discard(function)
        if not above:
            entries.append(function)
        for caller in sorted(above - below.keys()):
            below[caller] = function
            queue.append(caller)
    chains = []
    for entry in entries:
        chain, step = [], entry
        while step is not None:
            chain.append(step)
            step = below[step]
        chains.append(chain)
    return chains


def test_every_call_that_spends_is_behind_a_registered_gate_on_every_way_to_it():
    found = spending_calls()
    # Every request to a deployment goes out through the client's _post, which only its send_request() makes:
    assert {name for name, calls in found.items() if "_post" in calls} == {"evals.client.send_request"}
    # complete() is send_request() and a parse: the door itself, as send_request() is.
    spenders = {name for name, calls in found.items() if calls & SPENDING_CALLS} - {"evals.client.complete", "evals.client.send_request"}
    assert len(spenders) >= 15  # the walk finds them
    calls = graph()
    up = callers(calls)
    open_chains = {" -> ".join(chain) for spender in sorted(spenders) for chain in ungated(spender, calls, up)}
    assert open_chains == set()
    assert set(STOPS) <= set(calls.calls)  # no stale entry


def test_the_guard_finds_a_new_caller_that_bypasses_the_gates():
    """The fault put back: a view that tests a deployment's connection without try_connection (the gate)."""
    calls = graph()
    calls.calls["evals.views.a_new_view"] = {"evals.connection.test_connection"}
    chains = ungated("evals.connection.test_connection", calls, callers(calls))
    assert ["evals.views.a_new_view", "evals.connection.test_connection"] in chains
