"""Evals of gsm8k rows against fake deployments that get chosen rows wrong: material for paired comparisons."""

import time
from contextlib import ExitStack

from evals.actions import create_eval
from evals.benchmarks import gsm8k
from evals.models import Deployment, Eval
from evals.subset import select_rows
from evals.tasks import run_eval

from .fakes.openai_server import FakeOpenAI

REFERENCES = {row["input"]: row["reference"] for row in gsm8k.rows()}
ROWS, SEED = 40, 11


def questions(count=ROWS, seed=SEED) -> list[str]:
    """The questions a gsm8k eval with this limit and seed asks, in row order."""
    return [gsm8k.rows()[i]["input"] for i in select_rows(len(gsm8k.rows()), count, seed)]


class PairedEvals:
    """Runs gsm8k evals on the same rows against deployments wrong on the given questions."""

    def __init__(self, project, owner):
        self.project, self.owner = project, owner
        self.stack = ExitStack()
        self.first: Eval | None = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stack.close()

    def deployment(self, name, wrong=(), latency=0.0, server=None, **fields) -> Deployment:
        """`server`: the Server header its answers carry (aiohttp's own when None)."""
        wrong = set(wrong)
        answer = lambda q: "#### -1" if q in wrong else f"So\n#### {REFERENCES.get(q, '0')}"  # noqa: E731
        fake = self.stack.enter_context(FakeOpenAI(answer=answer, latency=latency))
        fake.server = server
        return Deployment.objects.create(project=self.project, name=name, base_url=fake.url, model=name, **fields)

    def run(self, name, wrong=(), server=None, **kwargs) -> Eval:
        deployment = self.deployment(name, wrong, server=server)
        if self.first is None:
            ev = create_eval(self.project, self.owner, deployment=deployment, benchmark="gsm8k", sample_limit=ROWS, seed=SEED, **kwargs)
            self.first = ev
        else:
            ev = create_eval(self.project, self.owner, deployment=deployment, same_rows_as=self.first, **kwargs)
        run_eval(ev.pk)
        # Under the `worker` fixture a thread may have claimed the eval first: wait for it.
        deadline = time.monotonic() + 60
        while Eval.objects.filter(pk=ev.pk, status__in=Eval.ACTIVE).exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        ev.refresh_from_db()
        return ev
