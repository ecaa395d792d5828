from decimal import Decimal

from django import forms

from belvedir_cli import yamlsafe

from . import benchmarks, statistics
from .models import RESPONSE_CACHE_TTL, CacheMode, Dataset, Deployment, Eval, Suite, SuiteRun
from .scoring.base import config
from .scoring.scorers import SCORERS
from .validation import validate_deployment_url

CACHE_HELP = "A request answered before (same deployment, model, prompt and settings) is not asked again and costs nothing; bypass asks again."


class DeploymentForm(forms.ModelForm):
    base_url = forms.URLField(assume_scheme="https", max_length=500, help_text="e.g. https://api.openai.com/v1")

    class Meta:
        model = Deployment
        fields = [
            "name",
            "base_url",
            "model",
            "api_key",
            "api_style",
            "max_in_flight",
            "input_price_per_million",
            "output_price_per_million",
            "cache_ttl_seconds",
        ]
        widgets = {"api_key": forms.PasswordInput(render_value=False)}

    def __init__(self, *args, project=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.project = project
        self.fields["base_url"].validators.append(validate_deployment_url)
        # Left empty: the default (7 days), as the API does when it is not given.
        self.fields["cache_ttl_seconds"].required = False

    def clean_cache_ttl_seconds(self):
        ttl = self.cleaned_data.get("cache_ttl_seconds")
        return RESPONSE_CACHE_TTL if ttl is None else ttl

    def clean_name(self):
        name = self.cleaned_data["name"]
        if Deployment.objects.filter(project=self.project, name=name).exists():
            raise forms.ValidationError("A deployment with this name already exists in the project.")
        return name


class BenchmarkEvalForm(forms.Form):
    benchmark = forms.ChoiceField()
    deployment = forms.ModelChoiceField(queryset=Deployment.objects.none())
    mode = forms.ChoiceField(
        choices=Eval.Mode.choices,
        initial=Eval.Mode.GENERATIVE,
        required=False,
        help_text="Log-likelihood: multiple-choice benchmarks on a completions deployment that returns prompt logprobs (echo + logprobs, as vLLM).",
    )
    sample_limit = forms.IntegerField(required=False, min_value=1, help_text="Empty for the full split. The subset is drawn from a stored seed.")
    samples_per_problem = forms.IntegerField(
        required=False, min_value=1, max_value=20, initial=1, help_text="humaneval and mbpp: n completions per problem, for pass@1, @5 and @10 (k ≤ n)."
    )
    max_cost = forms.DecimalField(
        required=False,
        min_value=0,
        max_digits=14,
        decimal_places=6,
        label="Budget ($)",
        help_text="Stops the eval as cancelled when its token cost reaches this; resume with a higher budget. Needs deployment prices.",
    )
    judge = forms.ModelChoiceField(
        queryset=Deployment.objects.none(),
        required=False,
        help_text="Judged benchmarks (mt_bench): the deployment that grades the answers, preferably not the one under test. Its tokens count in the cost.",
    )
    epochs = forms.IntegerField(
        required=False, min_value=1, max_value=10, initial=1, help_text="Ask every row this many times: per-row pass rates, flips and the noise floor."
    )
    cache = forms.ChoiceField(choices=CacheMode.choices, initial=CacheMode.AUTO, required=False, label="Response cache", help_text=CACHE_HELP)
    precision_target = forms.FloatField(
        required=False,
        min_value=0.0001,
        max_value=0.5,
        label="Precision target (±)",
        help_text="Stop once the score's 95% interval is at most this far either side of it, e.g. 0.02; its rows go out in a fixed random order.",
    )

    def __init__(self, *args, project=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["judge"].queryset = Deployment.objects.filter(project=project)
        self.fields["benchmark"].choices = [(entry["name"], choice_label(entry)) for entry in map(benchmarks.describe, benchmarks.CATALOG.values())]
        self.fields["deployment"].queryset = Deployment.objects.filter(project=project)
        # Every benchmark's options, each labelled with its benchmark: the page works without JavaScript.
        for benchmark in benchmarks.CATALOG.values():
            for name, option in benchmark.options.items():
                self.fields[option_field(benchmark.name, name)] = option_form_field(benchmark.name, name, option)

    def benchmark_options(self) -> dict:
        """The chosen benchmark's options as the form gives them (other benchmarks' fields are ignored; an empty one is its default)."""
        chosen = benchmarks.get(self.cleaned_data["benchmark"])
        given = {name: self.cleaned_data.get(option_field(chosen.name, name)) for name in chosen.options}
        return {name: value for name, value in given.items() if value not in (None, "")}


def option_field(benchmark: str, name: str) -> str:
    return f"option_{benchmark}_{name}"


def option_form_field(benchmark: str, name: str, option) -> forms.Field:
    kind = {bool: forms.BooleanField, int: forms.IntegerField, float: forms.FloatField, str: forms.CharField}[type(option.default)]
    return kind(required=False, initial=option.default, label=f"{benchmark}: {name.replace('_', ' ')}", help_text=option.help)


def choice_label(entry: dict) -> str:
    if not entry["available"]:
        return f"{entry['name']} (data not installed)"
    return f"{entry['name']} ({entry['rows']} rows, {entry['metric']})"


SCORER_CHOICES = [(name, name.replace("_", " ")) for name in SCORERS]


class DatasetEvalForm(forms.Form):
    dataset = forms.ModelChoiceField(queryset=Dataset.objects.none())
    dataset_version = forms.IntegerField(required=False, min_value=1, label="Version", help_text="Blank for the dataset's latest version.")
    deployment = forms.ModelChoiceField(queryset=Deployment.objects.none())
    scorers = forms.MultipleChoiceField(choices=SCORER_CHOICES, widget=forms.CheckboxSelectMultiple)
    regex_pattern = forms.CharField(required=False, help_text="For the regex scorer; {expected} stands for the expected answer.")
    judge = forms.ModelChoiceField(queryset=Deployment.objects.none(), required=False, help_text="For the LLM judge scorer.")
    sample_limit = forms.IntegerField(required=False, min_value=1)
    cache = forms.ChoiceField(choices=CacheMode.choices, initial=CacheMode.AUTO, required=False, label="Response cache", help_text=CACHE_HELP)

    def __init__(self, *args, project=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["dataset"].queryset = Dataset.objects.filter(project=project)
        self.fields["deployment"].queryset = self.fields["judge"].queryset = Deployment.objects.filter(project=project)

    def scorer_config(self) -> list:
        """The ticked scorers, {"name", "options"} each; the judge is the eval's (judge), which llm_judge asks."""
        return [config(name, {"pattern": self.cleaned_data["regex_pattern"]} if name == "regex" else {}) for name in self.cleaned_data["scorers"]]


DATASET_FILE_HELP = (
    'JSONL: one {"input": ..., "expected": ...} per line; or CSV whose header names "input" and "expected" (its other columns become each row\'s metadata).'
)


class DatasetUploadForm(forms.Form):
    name = forms.CharField(max_length=100)
    file = forms.FileField(help_text=DATASET_FILE_HELP)


class DatasetRowsUploadForm(forms.Form):
    """More rows for a dataset from a file: its next version."""

    file = forms.FileField(help_text=DATASET_FILE_HELP)
    replace = forms.BooleanField(
        required=False,
        label="Replace its rows",
        help_text="Unticked, the file's rows are added after the dataset's; ticked, they take their places, row for row (the diff then shows what the file changed).",
    )


class DatasetRowForm(forms.Form):
    # Not required here: an empty input is refused by the row's own check (evals.dataset_rows.clean_row), in the words the API uses.
    input = forms.CharField(required=False, strip=False, widget=forms.Textarea(attrs={"rows": 4}))
    expected = forms.CharField(required=False, strip=False, widget=forms.Textarea(attrs={"rows": 3}))


class RerunForm(forms.Form):
    deployment = forms.ModelChoiceField(queryset=Deployment.objects.none())
    decide = forms.BooleanField(
        required=False,
        label="Stop once decided",
        help_text="Against this eval, with a test valid at every look: it stops when one is better, or when no difference of 2 points is left.",
    )
    decision_alpha = forms.FloatField(required=False, min_value=0.0001, max_value=0.5, initial=0.05, label="α")

    def __init__(self, *args, project=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["deployment"].queryset = Deployment.objects.filter(project=project)


class SampleSizeForm(forms.Form):
    """Expected gap → rows needed: the question to ask before choosing sample_limit."""

    gap = forms.FloatField(min_value=0.1, max_value=100, label="Expected gap (points)", help_text="e.g. 5 for 0.62 → 0.67")
    baseline = forms.FloatField(min_value=0, max_value=100, initial=50, required=False, label="Current score (%)", help_text="50 when unknown (the worst case)")

    def rows_needed(self) -> int | None:
        if not self.is_valid():
            return None
        baseline = self.cleaned_data["baseline"]
        return statistics.rows_for_gap(self.cleaned_data["gap"] / 100, (50 if baseline is None else baseline) / 100)


class SuiteRunForm(forms.Form):
    suite = forms.ChoiceField(help_text="core: the whole catalog at full splits; quick: every benchmark at 100 rows; or one of yours.")
    deployments = forms.ModelMultipleChoiceField(
        queryset=Deployment.objects.none(), widget=forms.CheckboxSelectMultiple, help_text="One eval per benchmark and deployment."
    )
    judge = forms.ModelChoiceField(
        queryset=Deployment.objects.none(), required=False, help_text="For judged benchmarks (mt_bench): preferably not a deployment under test."
    )
    same_rows_as = forms.ModelChoiceField(
        queryset=SuiteRun.objects.none(), required=False, label="Same rows as", help_text="Each benchmark's rows from an earlier suite run."
    )
    max_cost = forms.DecimalField(
        required=False, min_value=0, max_digits=14, decimal_places=6, label="Budget ($)", help_text="For the whole suite run; needs prices."
    )
    epochs = forms.IntegerField(required=False, min_value=1, max_value=10, initial=1, help_text="Ask every row this many times: flips and the noise floor.")
    force = forms.BooleanField(
        required=False,
        label="Run every cell again",
        help_text="Otherwise a cell a finished eval of this project already answered (same benchmark data, rows, deployment, settings) is reused at no cost.",
    )
    cache = forms.ChoiceField(choices=CacheMode.choices, initial=CacheMode.AUTO, label="Response cache", help_text="Each eval's use of the response cache.")

    def __init__(self, *args, project=None, **kwargs):
        super().__init__(*args, **kwargs)
        names = [(name, name) for name in ("quick", "core")] + [(s.name, s.name) for s in Suite.objects.filter(project=project)]
        self.fields["suite"].choices = names
        self.fields["deployments"].queryset = Deployment.objects.filter(project=project)
        self.fields["judge"].queryset = Deployment.objects.filter(project=project)
        self.fields["same_rows_as"].queryset = SuiteRun.objects.filter(project=project)


class SuiteForm(forms.Form):
    name = forms.CharField(max_length=100)
    description = forms.CharField(max_length=500, required=False)
    entries = forms.CharField(
        label="Benchmarks (YAML)",
        widget=forms.Textarea(attrs={"rows": 6}),
        initial="- gsm8k\n- {benchmark: mmlu, sample_limit: 200}\n- {benchmark: mbpp, sample_limit: 100, options: {challenge_tests: false}}",
        help_text="A list: benchmark names, or {benchmark, sample_limit, mode, options}.",
    )

    def clean_entries(self):
        try:
            return yamlsafe.load(self.cleaned_data["entries"])
        except yamlsafe.YAMLRefused as exc:
            raise forms.ValidationError(f"The benchmarks' YAML {exc}.") from None


class SuiteCompareForm(forms.Form):
    other = forms.ModelChoiceField(queryset=SuiteRun.objects.none(), required=False, label="Suite run")
    deployment_a = forms.ModelChoiceField(queryset=Deployment.objects.none(), required=False, label="A's deployment")
    deployment_b = forms.ModelChoiceField(queryset=Deployment.objects.none(), required=False, label="B's deployment")
    set_aside_flaky = forms.BooleanField(required=False, label="Set aside rows that flip within their own epochs")

    def __init__(self, *args, project=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["other"].queryset = SuiteRun.objects.filter(project=project)
        self.fields["deployment_a"].queryset = self.fields["deployment_b"].queryset = Deployment.objects.filter(project=project)


def posted_budget(text: str | None) -> Decimal | None:
    """A resume's new budget, posted as a bare field: None when empty, else a number of dollars the column
    holds (not NaN, not infinite, not negative), or ValueError with a message a person reads."""
    column = Eval._meta.get_field("max_cost")
    field = forms.DecimalField(required=False, min_value=0, max_digits=column.max_digits, decimal_places=column.decimal_places)
    try:
        return field.clean(text)
    except forms.ValidationError as exc:
        raise ValueError(f"The budget must be a number of dollars: {' '.join(exc.messages)}") from None
