"""Stand-ins for `agent_tasks.jobs.execute` where a test proves a job's machinery (queue, claim, charge, advance,
results, pages, CLI) and not what happens in a sandbox: each ends its trial through the trial's own end
(`trials.finish`: the paid workloads' lifecycle, its money included), as a sandbox's run would have.

What a sandbox does is proven in real ones: the shipped tasks' oracle and nop by tests/test_agent_trials.py under
runc and gVisor, a job's own path by the hostile and model agents of tests/test_agent_jobs.py."""

from agent_tasks import trials


def ends_with(reward=None, **result):
    """An `execute` that ends the trial with this reward, or this error."""

    def execute(trial, agent=None, **kwargs):
        return trials.finish(trial, trials.TrialResult(reward=reward, **result))

    return execute


def as_verified(trial, agent, *, runtime_wanted: str = "auto"):
    """An `execute` ending each trial as the shipped tasks' verifiers end it: the oracle's solves it, nop's does not."""
    reward = 1.0 if agent.name == "oracle" else 0.0
    result = trials.TrialResult(reward=reward, agent_exit=0, verifier_exit=0, runtime=runtime_wanted, verifier_output=f"reward {reward}\n")
    return trials.finish(trial, result)
