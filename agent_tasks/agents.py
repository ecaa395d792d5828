"""The agents a trial can run: what each runs in its phase, what it may see, and what it needs to reach a model.

`oracle` runs the task's solution (the only agent that gets /solution: a check of the task itself); `nop` does
nothing (the floor); `reference` is Belvedir's reference agent (drivers/reference-agent, standard library only)
on a job's deployment, reached through the egress proxy with that deployment's host as the only destination.
`pip:PACKAGE[==VERSION]` is an agent installed from the package index in its phase (through the proxy too, the
index's host added to its destinations) and run by the command its job gives it.
"""

import shlex
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from django.conf import settings
from packaging.requirements import InvalidRequirement, Requirement

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
        }
        found = model_setup(task, deployment)
        found.files[AGENT_DIR].update(files)
        found.env["PYTHONPATH"] = AGENT_DIR
        return found


def model_setup(task, deployment) -> Setup:
    """What every model-calling agent gets: the instruction as a file, the deployment as LLM_* variables, where to
    write its trajectory, and the deployment's host as its destination."""
    env = {
        "AGENT_INSTRUCTION_FILE": f"{AGENT_DIR}/instruction.md",
        "AGENT_TRAJECTORY_FILE": TRAJECTORY_FILE,
        # Its own cap inside the task's limit, so it stops and writes its trajectory before `timeout` kills it.
        "AGENT_TASK_SECONDS": str(max(1, int(task.agent_timeout_sec) - 5)),
        "LLM_BASE_URL": deployment.base_url,
        "LLM_MODEL": deployment.model,
        "LLM_API_KEY": deployment.api_key,
        "LLM_API": "openai",
        "LLM_MAX_TOKENS": str(settings.AGENT_MAX_TOKENS),
    }
    host = (urlsplit(deployment.base_url).hostname or "").lower()
    return Setup(
        files={AGENT_DIR: {"instruction.md": task.instruction.encode()}}, env=env, domains=[host], secrets=[deployment.api_key] if deployment.api_key else []
    )


class AgentSpecError(ValueError):
    """An agent name that names no agent: the message says why."""


class PipAgent(Agent):
    """An agent installed with pip from the index (BELVEDIR_AGENT_PIP_INDEX_URL) at the start of its phase, into the
    sandbox user's ~/.local, then run by `run_command` (its job's: a package's own command line differs from the next).
    The install counts against the task's agent time limit."""

    uses_model = True
    prefix = "pip:"

    def __init__(self, name: str, run_command: str):
        self.name, self.run_command = name, run_command
        self.requirement = parse_pip(name)

    def command(self, task):
        index = settings.AGENT_PIP_INDEX_URL
        # pip refuses an index over plain HTTP unless told to trust its host: the operator chose it (a mirror inside).
        trusted = f"--trusted-host {shlex.quote(urlsplit(index).hostname or '')} " if index.startswith("http://") else ""
        install = f"python3 -m pip install --user --quiet --disable-pip-version-check --no-input {trusted}--index-url {shlex.quote(index)} {shlex.quote(str(self.requirement))}"
        return f'{install} && export PATH="$HOME/.local/bin:$PATH" && {self.run_command}'

    def setup(self, task, deployment):
        found = model_setup(task, deployment)
        found.domains.append((urlsplit(settings.AGENT_PIP_INDEX_URL).hostname or "").lower())
        return found


def parse_pip(name: str) -> Requirement:
    """`pip:NAME` or `pip:NAME==VERSION` as a requirement; AgentSpecError for anything else (extras, URLs, ranges)."""
    spec = name.removeprefix(PipAgent.prefix)
    try:
        requirement = Requirement(spec)
    except InvalidRequirement:
        raise AgentSpecError(f"{name!r}: give pip:NAME or pip:NAME==VERSION (a package of the index).") from None
    pinned = not requirement.specifier or (len(requirement.specifier) == 1 and next(iter(requirement.specifier)).operator == "==")
    if requirement.url or requirement.extras or requirement.marker or not pinned:
        raise AgentSpecError(f"{name!r}: give pip:NAME or pip:NAME==VERSION (a package of the index).")
    return requirement


def resolve(name: str, commands: dict[str, str] | None = None) -> Agent:
    """The agent a job names: a built-in one, or one installed by its package with the job's command for it."""
    if name in AGENTS:
        return AGENTS[name]
    if name.startswith(PipAgent.prefix):
        command = (commands or {}).get(name, "").strip()
        if not command:
            raise AgentSpecError(
                f"{name}: say how to run it once installed (agent_commands, e.g. {{{name!r}: 'my-agent --task-file $AGENT_INSTRUCTION_FILE'}})."
            )
        return PipAgent(name, command)
    if name.startswith("npm:"):
        raise AgentSpecError(f"{name}: npm is not in the sandbox image; agents from npm cannot be installed here yet.")
    raise AgentSpecError(f"No agent named {name}; the agents are {', '.join(sorted(AGENTS))}, or pip:PACKAGE with a command.")


AGENTS: dict[str, Agent] = {agent.name: agent for agent in (Oracle(), Nop(), Reference())}
