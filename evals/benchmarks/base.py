"""The benchmark protocol: what every entry of the catalog is, as Inspect's Task and Scorer are.

A benchmark is a subclass of `Benchmark`: its metadata as class attributes,
`load()` for its rows (each with a stable id), `prompt(row)` for the chat
messages of a row, `request_fields(row)` for what else its request carries
(tools), and `async score(row, output, sandbox) -> Score`. The engine calls
exactly these, on every benchmark alike; it never asks what a benchmark has.
A benchmark that also runs in log-likelihood mode (multiple choice) lists it
in `modes` and implements `choices(row)` and
`score_loglikelihoods(row, loglikelihoods)`; the eval's mode, checked
against `modes` when it is created, decides which pair the engine calls.

A benchmark may declare `options` (name -> Option: its default, whose type is
the option's, and what it does); an eval stores the values it chose, checked
by `resolve_options`, and is scored by `configured(...)`, the catalog entry
with those values, which `score()` reads with `self.option(name)`.
"""

import copy
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import Any, ClassVar

from ..loglikelihood import Choice
from ..scoring.base import Option, Score
from .data import DataMissing, record_row_count, recorded_row_count

__all__ = ["GENERATIVE", "LOGLIKELIHOOD", "Benchmark", "Choice", "DataMissing", "Option", "OptionError", "Row", "Score", "chat", "tool_reply"]

# An eval's modes (Eval.Mode): the model writes its answer, or the options are ranked by how likely the model finds each.
GENERATIVE, LOGLIKELIHOOD = "generative", "loglikelihood"


@dataclass(frozen=True, eq=False)
class Row(Mapping):
    """One item of a benchmark. Read as a mapping (`row["input"]`), so its extra fields sit beside the standard ones."""

    id: str
    input: str
    reference: str = ""
    # Axis -> value, e.g. {"subject": "anatomy", "group": "STEM"}: the per-category scores' keys.
    categories: Mapping[str, str] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __getitem__(self, key):
        if key in ("id", "input", "reference", "categories"):
            return getattr(self, key)
        return self.extra[key]

    def __iter__(self) -> Iterator[str]:
        yield from ("id", "input", "reference", "categories", *self.extra)

    def __len__(self) -> int:
        return 4 + len(self.extra)


class OptionError(ValueError):
    """An eval chose an option its benchmark does not have, or a value of the wrong type."""

    status_code = 400


class Benchmark:
    """A catalog entry. Subclasses set the metadata and implement load, prompt and score."""

    name: ClassVar[str]
    description: ClassVar[str]
    metric: ClassVar[str] = "accuracy"
    licence: ClassVar[str]
    source: ClassVar[str]
    # How the prompt is built, so two platforms can be compared honestly.
    prompt_format: ClassVar[str]
    # Category axes (e.g. ("subject", "group")); empty when the benchmark has none.
    categories: ClassVar[tuple[str, ...]] = ()
    generation: ClassVar[dict] = {"temperature": 0, "max_tokens": 512}
    # Scoring runs the completion as code: the engine opens a CodeSandbox for the eval and passes it to score().
    sandboxed: ClassVar[bool] = False
    # Its requests offer tools (request_fields) and score() reads the reply's tool calls: it needs a chat
    # deployment, and its stored outputs are tool_reply() JSON.
    calls_tools: ClassVar[bool] = False
    modes: ClassVar[tuple[str, ...]] = (GENERATIVE,)
    # Category axes that the scored detail decides rather than the row (IFBench: one prompt's
    # instructions fall in several groups), scored by detail_category_scores().
    detail_categories: ClassVar[tuple[str, ...]] = ()
    # A sandboxed sample's wall-clock limit in seconds; None: settings.HUMANEVAL_TIMEOUT_SECONDS.
    sample_timeout: ClassVar[int | None] = None
    # What an eval may choose (e.g. mbpp's challenge_tests), and what this instance was configured with.
    options: ClassVar[Mapping[str, Option]] = {}
    chosen: Mapping[str, Any] = MappingProxyType({})
    # Scored by an LLM judge (a deployment the eval names, see judged_by()): MT-Bench.
    judged: ClassVar[bool] = False
    # The range of a row's score: (0, 1) for right/wrong and rates, (1, 10) for MT-Bench's ratings.
    scale: ClassVar[tuple[float, float]] = (0.0, 1.0)
    # What guessing scores, shown beside every score (one over the choices; 0 where the answer is free-form and checked
    # exactly); None where no guess has a known score (a judge's rating, instructions followed in part).
    chance: ClassVar[float | None] = None

    def load(self) -> Sequence[Row]:
        raise NotImplementedError

    def version(self) -> str:
        """What the rows are: a data file's SHA-256, or the package that ships them."""
        raise NotImplementedError

    def prompt(self, row: Row) -> list[dict]:
        raise NotImplementedError

    def request_fields(self, row: Row) -> dict:
        """Fields a chat request for the row carries beside its messages and generation settings (e.g. `tools`)."""
        return {}

    def generation_for(self, row: Row) -> dict:
        """The row's generation settings, before the eval's own (MT-Bench sets a temperature per category)."""
        return self.generation

    async def respond(self, row: Row, ask) -> list:
        """The deployment's answer to a row, as the replies `await ask(messages)` returned: one request, unless
        the benchmark holds a conversation (MT-Bench's second turn is asked with the first answer before it)."""
        return [await ask(self.prompt(row))]

    def output_of(self, replies: list) -> str:
        """The stored output of a row's replies (the text, or the tool calls as JSON); score() reads it back."""
        reply = replies[-1]
        return tool_reply(reply.text, reply.tool_calls or []) if self.calls_tools else reply.text

    async def score(self, row: Row, output: str, sandbox=None) -> Score:
        raise NotImplementedError

    def choices(self, row: Row) -> list[Choice]:
        """Log-likelihood mode: each option's context and continuation, one request each."""
        raise NotImplementedError

    def score_loglikelihoods(self, row: Row, loglikelihoods: list[float]) -> Score:
        """Log-likelihood mode: the score of the options' log-likelihoods (in the order of choices())."""
        raise NotImplementedError

    def loglikelihood(self) -> dict | None:
        """Log-likelihood mode's prompt format and metrics (headline first), or None when the benchmark has no such mode."""
        return None

    def metrics(self, details: Iterable[Mapping[str, Any]]) -> list[dict]:
        """Figures besides the headline score, from the scored samples' `Score.detail`:
        [{"name", "n", "unit", "score", "score_ci"}]. None unless the benchmark reports more (IFBench's four accuracies)."""
        return []

    def detail_category_scores(self, details: Iterable[Mapping[str, Any]]) -> dict[str, list[dict]]:
        """{axis: [{"name", "n", "score", "score_ci"}]} for the detail_categories axes, from the scored samples' `Score.detail`."""
        return {}

    def option(self, name: str):
        return self.chosen.get(name, self.options[name].default)

    def resolve_options(self, given) -> dict:
        """Every option's value for an eval that chose `given` (defaults for the rest); OptionError for a name it lacks or a wrong type."""
        if not isinstance(given, Mapping):
            raise OptionError("benchmark_options must be a mapping of option names to values.")
        offered = ", ".join(f"{name} ({option.type})" for name, option in self.options.items()) or "none"
        for name, value in given.items():
            if name not in self.options:
                raise OptionError(f"{self.name} has no option {name!r}; its options: {offered}.")
            if not self.options[name].accepts(value):
                raise OptionError(f"{self.name}'s option {name} takes a {self.options[name].type}, not {value!r}.")
        return {name: given.get(name, option.default) for name, option in self.options.items()}

    def configured(self, given) -> "Benchmark":
        """This benchmark as an eval that chose `given` scores it: itself when nothing changes."""
        resolved = self.resolve_options(given)
        if resolved == {name: self.option(name) for name in self.options}:
            return self
        clone = copy.copy(self)
        clone.chosen = MappingProxyType(resolved)
        # Rows are loaded once per process, on the catalog's instance, whatever options an eval chose.
        clone.rows = self.rows
        return clone

    def judged_by(self, judge) -> "Benchmark":
        """This benchmark scored by `judge` (a Deployment), for a judged benchmark; itself otherwise."""
        return self

    def rubric(self, version: str):
        """A judged benchmark's judge prompt (judges.Rubric) at the benchmark's data `version`: part of the judge's identity."""
        return None

    async def aclose(self):
        """Release what scoring opened (a judge's HTTP session, a worker pool)."""

    @cached_property
    def _rows(self) -> tuple[Row, ...]:
        return tuple(self.load())

    def rows(self) -> tuple[Row, ...]:
        """The full split, in a fixed order (loaded once per process)."""
        return self._rows

    def row_count(self) -> int:
        """How many rows, as recorded for this version; the rows are loaded (and the count recorded) only the first time."""
        version = self.version()
        count = recorded_row_count(self.name, version)
        if count is None:
            count = len(self.rows())
            record_row_count(self.name, version, count)
        return count

    def metadata(self) -> dict:
        """What the catalog says of it without reading its data."""
        return {
            "name": self.name,
            "description": self.description,
            "metric": self.metric,
            "categories": [*self.categories, *self.detail_categories],
            "licence": self.licence,
            "source": self.source,
            "prompt_format": self.prompt_format,
            "generation": self.generation,
            "modes": list(self.modes),
            "loglikelihood": self.loglikelihood(),
            "options": self.describe_options(),
            "judged": self.judged,
            "scale": list(self.scale),
        }

    def describe(self) -> dict:
        return {**self.metadata(), "rows": self.row_count(), "version": self.version()}

    def describe_options(self) -> dict:
        return {name: option.describe() for name, option in self.options.items()}


def chat(system: str, user: str) -> list[dict]:
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def tool_reply(content: str, tool_calls: list[dict]) -> str:
    """A tool-calling row's stored output: the reply as JSON, so its calls read back exactly and prose never passes for a call.

    Each call is {"name", "arguments"}, the arguments as the model wrote them (JSON text, or not).
    """
    return json.dumps({"tool_calls": tool_calls, "content": content}, ensure_ascii=False)
