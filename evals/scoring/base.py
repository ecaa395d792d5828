"""The scoring contract: what a scorer is given, what it gives back, and how its options are checked."""

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple


class Usage(NamedTuple):
    """Tokens a scorer spent on the judge for one sample: they count towards the eval's cost, whatever the verdict."""

    prompt_tokens: int = 0
    completion_tokens: int = 0

    def __add__(self, other):
        return Usage(self.prompt_tokens + other.prompt_tokens, self.completion_tokens + other.completion_tokens)


NO_USAGE = Usage()


class ScoringError(Exception):
    """A sample that could not be scored; the message is its error (and `usage`, what its judge spent meanwhile)."""

    def __init__(self, message: str, *, usage: Usage = NO_USAGE):
        super().__init__(message)
        self.usage = usage


class ScorerConfigError(ValueError):
    """A scorer named or configured wrongly: the message names the scorer and the option."""

    status_code = 400


@dataclass(frozen=True)
class Score:
    """A scored output: its value (1 right, 0 wrong, or between), the answer taken from it, and why.

    `category` overrides the row's categories where the output decides them;
    `detail` holds the scorer's parts (a dataset's per-scorer scores, a judge's verdicts);
    `usage` is what a judge spent scoring it, which the eval's cost includes.
    """

    value: float
    extracted: str = ""
    category: Mapping[str, str] | None = None
    detail: Mapping[str, Any] = field(default_factory=dict)
    usage: Usage = Usage()


@dataclass(frozen=True)
class Item:
    """What is scored: the question, the answer, the reference answer when there is one, and what else its owner knows
    (a trace's step count, tool errors and cost under `extra`)."""

    input: str
    output: str
    reference: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Context:
    """What a scorer may use beside the item: the owner's judge (a judge.Judge) and sandbox, when it has them."""

    judge: Any = None
    sandbox: Any = None


@dataclass(frozen=True)
class Option:
    """One setting of a scorer or benchmark: its default (a bool, int, float or str, whose type the value must have) and what it does."""

    default: bool | int | float | str
    help: str

    @property
    def type(self) -> str:
        return {bool: "boolean", int: "integer", float: "number", str: "string"}[type(self.default)]

    def accepts(self, value) -> bool:
        # bool is an int in Python, and JSON's 1 is not its true: each type takes only its own values (a number takes an integer too).
        if isinstance(self.default, bool) or isinstance(value, bool):
            return isinstance(value, bool) and isinstance(self.default, bool)
        if isinstance(self.default, float):
            return isinstance(value, int | float)
        return isinstance(value, type(self.default))

    def describe(self) -> dict:
        return {"type": self.type, "default": self.default, "help": self.help}


@dataclass(frozen=True)
class AsText(Option):
    """An option that takes any JSON value and reads it as its text (an expected answer of 42 is "42"), kept as given."""

    @property
    def type(self) -> str:
        return "any (read as text)"

    def accepts(self, value) -> bool:
        return True


class Scorer:
    """One way to score an item. Subclasses set `name`, `description` and `options`, and implement `score`;
    `check` adds the rules the options' types cannot say (a pattern that compiles, a prompt that places the answer)."""

    name: ClassVar[str]
    description: ClassVar[str]
    options: ClassVar[Mapping[str, Option]] = {}
    # Asks Context.judge: refused where its owner has no judge to give.
    needs_judge: ClassVar[bool] = False
    # Compares the output with a reference: an owner whose items have none (live traffic) must give `expected`.
    needs_reference: ClassVar[bool] = False
    scale: ClassVar[tuple[float, float]] = (0.0, 1.0)

    def check(self, options, *, references: bool = True) -> dict:
        """The options, every one set (defaults for the rest), or ScorerConfigError naming what is wrong.
        `references`: whether the items this scorer will see carry a reference answer."""
        if not isinstance(options, Mapping):
            raise ScorerConfigError(f"The {self.name} scorer's options are a mapping of option names to values.")
        offered = ", ".join(f"{name} ({option.type})" for name, option in self.options.items()) or "none"
        for name, value in options.items():
            if name not in self.options:
                raise ScorerConfigError(f"The {self.name} scorer has no option {name!r}; its options: {offered}.")
            if not self.options[name].accepts(value):
                raise ScorerConfigError(f"The {self.name} scorer's option {name} takes a {self.options[name].type}, not {value!r}.")
        checked = {name: options.get(name, option.default) for name, option in self.options.items()}
        if self.needs_reference and not references and not str(checked.get("expected", "")).strip():
            raise ScorerConfigError(f"The {self.name} check needs the expected text (expected).")
        return checked

    def scale_of(self, options: Mapping) -> tuple[float, float]:
        """The range of this scorer's values under these options."""
        return self.scale

    async def score(self, item: Item, options: Mapping, ctx: Context) -> Score:
        raise NotImplementedError

    def describe(self) -> dict:
        return {
            "name": self.name,
            "description": self.description,
            "needs_judge": self.needs_judge,
            "options": {name: option.describe() for name, option in self.options.items()},
        }


def config(name: str, options: Mapping | None = None) -> dict:
    """A scorer's configuration in its one shape."""
    return {"name": name, "options": dict(options or {})}
