"""The catalog points at the drivers shipped in drivers/ and served at /drivers/<name>.git.

`{drivers}` resolves to this platform's /drivers (or https://github.com/ORG when
BELVEDIR_PRESET_ORG is set). Adds the ninth preset, the reference agent.
"""

from django.db import migrations, models

LLM = ["LLM_MODEL", "LLM_API_KEY"]
INSTALL = "sh install.sh"
RUN = "python3 run.py"
PRESETS = [
    {
        "slug": "swe-bench-lite",
        "name": "SWE-bench Lite",
        "description": "300 real GitHub issues from 11 Python projects. mini-swe-agent writes a patch; SWE-bench's evaluation judges it. Score: fraction resolved.",
        "repo_url": "{drivers}/swe-bench-lite.git",
        "install_command": INSTALL,
        "run_command": RUN,
        "env_var_names": [*LLM, "SWEBENCH_API_KEY"],
    },
    {
        "slug": "tau-bench",
        "name": "tau-bench",
        "description": "Tool-using customer-service agents (retail and airline) talking to a simulated user. Score: pass^1 over tasks.",
        "repo_url": "{drivers}/tau-bench.git",
        "install_command": INSTALL,
        "run_command": "python3 run.py --env retail",
        "env_var_names": LLM,
    },
    {
        "slug": "terminal-bench",
        "name": "Terminal-Bench",
        "description": "Hard tasks done in a real shell: compiling, debugging, data wrangling. Score: fraction of tasks whose checks pass.",
        "repo_url": "{drivers}/terminal-bench.git",
        "install_command": INSTALL,
        "run_command": RUN,
        "env_var_names": [*LLM, "DOCKER_HOST"],
    },
    {
        "slug": "gaia",
        "name": "GAIA",
        "description": "General-assistant questions that need reasoning, tools and reading files. Score: exact-match accuracy on the validation split.",
        "repo_url": "{drivers}/gaia.git",
        "install_command": INSTALL,
        "run_command": RUN,
        "env_var_names": [*LLM, "HF_TOKEN"],
    },
    {
        "slug": "aider-polyglot",
        "name": "Aider Polyglot",
        "description": "225 Exercism exercises in C++, Go, Java, JavaScript, Python and Rust, edited by the agent. Score: fraction solved in two tries.",
        "repo_url": "{drivers}/aider-polyglot.git",
        "install_command": INSTALL,
        "run_command": RUN,
        "env_var_names": LLM,
    },
    {
        "slug": "lm-eval",
        "name": "lm-eval (vLLM)",
        "description": "EleutherAI's lm-evaluation-harness against a vLLM server started in the sandbox for $MODEL, with the LoRA adapter from $ADAPTER_URL when given.",
        "repo_url": "{drivers}/lm-eval.git",
        "install_command": INSTALL,
        "run_command": "python3 run.py --tasks hellaswag,arc_easy",
        "compute_type": "gpu",
        "gpu_type": "A10G",
        "env_var_names": ["HF_TOKEN"],
    },
    {
        "slug": "mt-bench",
        "name": "MT-Bench (vLLM)",
        "description": "80 multi-turn questions answered by $MODEL served with vLLM in the sandbox, graded by an LLM judge. Score: mean judge rating (1-10).",
        "repo_url": "{drivers}/mt-bench.git",
        "install_command": INSTALL,
        "run_command": "python3 run.py --judge gpt-4o",
        "compute_type": "gpu",
        "gpu_type": "A10G",
        "env_var_names": ["OPENAI_API_KEY", "HF_TOKEN"],
    },
    {
        "slug": "openclaw",
        "name": "OpenClaw",
        "description": "The OpenClaw agent scaffold, with no task suite of its own: give it Tasks (one per line) and it reports the fraction completed.",
        "repo_url": "{drivers}/openclaw.git",
        "install_command": INSTALL,
        "run_command": RUN,
        "env_var_names": LLM,
        "needs_tasks": True,
    },
    {
        "slug": "reference-agent",
        "name": "Tasks (reference agent)",
        "description": "A small, readable agent loop with a shell tool, against any OpenAI- or Anthropic-compatible endpoint. Give it Tasks, one per line, each with an optional check after ' :: '. Score: fraction solved.",
        "repo_url": "{drivers}/reference-agent.git",
        "install_command": "python3 -m py_compile agent.py belvedir_driver.py",
        "run_command": "python3 agent.py",
        "env_var_names": ["LLM_BASE_URL", *LLM],
        "needs_tasks": True,
    },
]
DEFAULTS = {"compute_type": "cpu", "gpu_type": "", "needs_tasks": False, "ref": ""}


def seed(apps, schema_editor):
    Preset = apps.get_model("harnesses", "Preset")
    for position, values in enumerate(PRESETS):
        Preset.objects.update_or_create(slug=values["slug"], defaults={**DEFAULTS, **values, "position": position})


class Migration(migrations.Migration):
    dependencies = [("harnesses", "0005_harness_egress_domains")]
    operations = [
        migrations.AlterField(
            model_name="preset",
            name="repo_url",
            field=models.CharField(
                help_text="May start with {drivers}: this platform's /drivers (or the BELVEDIR_PRESET_ORG organisation when set).", max_length=500
            ),
        ),
        migrations.RunPython(seed, migrations.RunPython.noop),
    ]
