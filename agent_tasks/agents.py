"""The agents a trial can run: what each runs in its phase, what it may see, and what it needs to reach a model.

`oracle` runs the task's solution (the only agent that gets /solution: a check of the task itself); `nop` does
nothing (the floor); `reference` is Belvedir's reference agent (drivers/reference-agent, standard library only)
on a job's deployment, reached through the egress proxy with that deployment's host as the only destination.
"""

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from django.conf import settings

SOLUTION_DIR = "/solution"
# Where an agent's own files go (Harbor installs its agents at /installed-agent too).
AGENT_DIR = "/installed-agent"
# What an agent leaves for the platform to read after its phase: its trajectory (the verifier's folder is /logs/verifier).
AGENT_LOGS = "/logs/agent"
TRAJECTORY_FILE = f"{AGENT_LOGS}/trajectory.json"


@dataclass
class Setup:
    """What an agent that calls a model needs in its sandbox: its files, its environment, the hosts it may reach
    (the egress grant's allowlist) and the values to mask in whatever it prints."""

    files: dict[str, dict[str, bytes]] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    domains: list[str] = field(default_factory=list)
    secrets: list[str] = field(default_factory=list)


class Agent(ABC):
    name: str
    # Only the oracle may: for every other agent the solution never enters the sandbox.
    sees_solution: bool = False
    # One that does is run once per deployment of its job, through the egress proxy.
    uses_model: bool = False

    @abstractmethod
    def command(self, task) -> str | None:
        """The shell command of its phase, run in the task's working folder; None to do nothing."""

    def setup(self, task, deployment) -> Setup | None:
        """For an agent that calls a model: what its sandbox needs (it then gets the egress network)."""
        return None


class Oracle(Agent):
    name = "oracle"
    sees_solution = True

    def command(self, task):
        return f"bash {SOLUTION_DIR}/solve.sh"


class Nop(Agent):
    name = "nop"

    def command(self, task):
        return None


class Reference(Agent):
    name = "reference"
    uses_model = True

    def command(self, task):
        return f"python3 {AGENT_DIR}/agent.py"

    def setup(self, task, deployment):
        drivers = Path(settings.BASE_DIR) / "drivers"
        files = {
            "agent.py": (drivers / "reference-agent" / "agent.py").read_bytes(),
            "belvedir_driver.py": (drivers / "_shared" / "belvedir_driver.py").read_bytes(),
            "instruction.md": task.instruction.encode(),
        }
        env = {
            "PYTHONPATH": AGENT_DIR,
            "AGENT_INSTRUCTION_FILE": f"{AGENT_DIR}/instruction.md",
            "AGENT_TRAJECTORY_FILE": TRAJECTORY_FILE,
            # Its own cap inside the task's limit, so it stops and writes its trajectory before `timeout` kills it.
            "AGENT_TASK_SECONDS": str(max(1, int(task.agent_timeout_sec) - 5)),
            "LLM_BASE_URL": deployment.base_url,
            "LLM_MODEL": deployment.model,
            "LLM_API_KEY": deployment.api_key,
            "LLM_API": "openai",
        }
        host = (urlsplit(deployment.base_url).hostname or "").lower()
        return Setup(files={AGENT_DIR: files}, env=env, domains=[host], secrets=[deployment.api_key] if deployment.api_key else [])


AGENTS: dict[str, Agent] = {agent.name: agent for agent in (Oracle(), Nop(), Reference())}
