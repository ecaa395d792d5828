"""The agents a trial can run: what each runs in its phase, what it may see, and what it needs to reach a model.

`oracle` runs the task's solution (the only agent that gets /solution: a check of the task itself); `nop` does
nothing (the floor); `reference` is Belvedir's reference agent (drivers/reference-agent, standard library only)
on a job's deployment, reached through the egress proxy with that deployment's host as the only destination.
`pip:PACKAGE[==VERSION]` and `npm:PACKAGE[@VERSION]` are agents installed from the package index or the npm
registry in their phase (through the proxy too, the index's host added to their destinations) and run by the
command their job gives them.
"""

import re
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
        "AGENT_MAX_STEPS": str(settings.AGENT_MAX_STEPS),
        **({"LLM_TEMPERATURE": str(settings.AGENT_TEMPERATURE)} if settings.AGENT_TEMPERATURE is not None else {}),
    }
    host = (urlsplit(deployment.base_url).hostname or "").lower()
    return Setup(
        files={AGENT_DIR: {"instruction.md": task.instruction.encode()}}, env=env, domains=[host], secrets=[deployment.api_key] if deployment.api_key else []
    )


class AgentSpecError(ValueError):
    """An agent name that names no agent: the message says why."""


class PackageAgent(Agent):
    """An agent installed from a package registry at the start of its phase, then run by `run_command` (its job's: a
    package's own command line differs from the next). The install counts against the task's agent time limit and
    goes through the egress proxy, the registry's host added to the agent's destinations."""

    uses_model = True
    prefix: str

    def __init__(self, name: str, run_command: str):
        self.name, self.run_command = name, run_command

    @property
    @abstractmethod
    def registry(self) -> str:
        """The index or registry it is installed from."""

    def setup(self, task, deployment):
        found = model_setup(task, deployment)
        found.domains.append((urlsplit(self.registry).hostname or "").lower())
        return found


class PipAgent(PackageAgent):
    """From the index (BELVEDIR_AGENT_PIP_INDEX_URL), into the sandbox user's ~/.local."""

    prefix = "pip:"

    def __init__(self, name: str, run_command: str):
        super().__init__(name, run_command)
        self.requirement = parse_pip(name)

    @property
    def registry(self) -> str:
        return settings.AGENT_PIP_INDEX_URL

    def command(self, task):
        index = self.registry
        # pip refuses an index over plain HTTP unless told to trust its host: the operator chose it (a mirror inside).
        trusted = f"--trusted-host {shlex.quote(urlsplit(index).hostname or '')} " if index.startswith("http://") else ""
        install = f"python3 -m pip install --user --quiet --disable-pip-version-check --no-input {trusted}--index-url {shlex.quote(index)} {shlex.quote(str(self.requirement))}"
        return f'{install} && export PATH="$HOME/.local/bin:$PATH" && {self.run_command}'


class NpmAgent(PackageAgent):
    """From the npm registry (BELVEDIR_AGENT_NPM_REGISTRY_URL), into the sandbox user's ~/.npm-global. npm reads the
    proxy from HTTPS_PROXY; the agent's own requests must too (Node's fetch does not)."""

    prefix = "npm:"

    def __init__(self, name: str, run_command: str):
        super().__init__(name, run_command)
        self.package = parse_npm(name)

    @property
    def registry(self) -> str:
        return settings.AGENT_NPM_REGISTRY_URL

    def command(self, task):
        install = (
            f'npm install --global --prefix "$HOME/.npm-global" --no-audit --no-fund --no-update-notifier --loglevel=error '
            f"--registry {shlex.quote(self.registry)} {shlex.quote(self.package)}"
        )
        return f'{install} && export PATH="$HOME/.npm-global/bin:$PATH" && {self.run_command}'


# npm's package names (lower case, an optional @scope/), then, if any, an exact version: a range or a tag would
# install whatever the registry holds that day (pip:NAME alike takes the index's latest; pin it for a job you compare).
NPM_PACKAGE = re.compile(r"(@[a-z0-9][a-z0-9._~-]*/)?[a-z0-9][a-z0-9._~-]{0,213}(@\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?)?")


def parse_npm(name: str) -> str:
    """`npm:NAME` or `npm:NAME@VERSION` (NAME may be @scope/name) as npm's own spec; AgentSpecError for anything else."""
    spec = name.removeprefix(NpmAgent.prefix)
    if not NPM_PACKAGE.fullmatch(spec):
        raise AgentSpecError(f"{name!r}: give npm:NAME or npm:NAME@VERSION (a package of the registry, an exact version).")
    return spec


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
    for kind in (PipAgent, NpmAgent):
        if name.startswith(kind.prefix):
            command = (commands or {}).get(name, "").strip()
            if not command:
                raise AgentSpecError(
                    f"{name}: say how to run it once installed (agent_commands, e.g. {{{name!r}: 'my-agent --task-file $AGENT_INSTRUCTION_FILE'}})."
                )
            return kind(name, command)
    raise AgentSpecError(f"No agent named {name}; {THE_AGENTS}")


class RedTeam(Agent):
    """One of the red team's forgeries (agent_tasks/red_team): it tries to score without solving the task, and a task on
    which it scores is open to that attack. A task set's audit runs each (audits.py); any job may name them."""

    prefix = "red-team:"
    DIR = Path(__file__).resolve().parent / "red_team"

    def __init__(self, attack: str):
        self.attack, self.name = attack, f"{self.prefix}{attack}"

    def command(self, task):
        return f"{(self.DIR / 'common.sh').read_text()}\n{(self.DIR / f'{self.attack}.sh').read_text()}"

    @property
    def summary(self) -> str:
        """What the attack plants, from its script's opening comment."""
        lines = (self.DIR / f"{self.attack}.sh").read_text().splitlines()
        return " ".join(line.lstrip("# ") for line in lines if line.startswith("#")).split(". Opens")[0].split(". ")[0] + "."


# The red team's attacks, in the order an audit shows them; each has its script in agent_tasks/red_team.
ATTACKS = (
    "planted-tools",
    "python-hooks",
    "shell-hooks",
    "environment-hooks",
    "process-left-behind",
    "reward-write",
    "verifier-links",
    "test-inputs",
    "printed-reward",
)
RED_TEAM = tuple(RedTeam(attack) for attack in ATTACKS)
AGENTS: dict[str, Agent] = {agent.name: agent for agent in (Oracle(), Nop(), Reference(), *RED_TEAM)}

THE_AGENTS = (
    f"the agents are {', '.join(sorted(a for a in AGENTS if not a.startswith(RedTeam.prefix)))}, the red team's "
    f"({RedTeam.prefix}ATTACK, the attacks being {', '.join(ATTACKS)}), or pip:PACKAGE or npm:PACKAGE with a command."
)


def calls_a_model(name: str) -> bool:
    """Whether the agent a job names calls a model (a column per deployment), without resolving its command."""
    return AGENTS[name].uses_model if name in AGENTS else name.startswith((PipAgent.prefix, NpmAgent.prefix))
