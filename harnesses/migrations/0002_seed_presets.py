from django.db import migrations

REPO = "https://github.com/{org}/%s"
PRESETS = [
    {
        "slug": "swe-bench-lite",
        "name": "SWE-bench Lite",
        "description": "300 real GitHub issues from 11 Python projects. The agent writes a patch; the project's own tests judge it. Score: fraction resolved.",
        "repo_url": REPO % "swe-bench-lite",
        "install_command": "python3 -m pip install --user -r requirements.txt",
        "run_command": "python3 run.py --split lite --output results.json",
        "env_var_names": ["ANTHROPIC_API_KEY"],
    },
    {
        "slug": "tau-bench",
        "name": "tau-bench",
        "description": "Tool-using customer-service agents (retail and airline) talking to a simulated user. Score: pass^1 over tasks.",
        "repo_url": REPO % "tau-bench",
        "install_command": "python3 -m pip install --user -e .",
        "run_command": "python3 run.py --env retail --output results.json",
        "env_var_names": ["ANTHROPIC_API_KEY", "OPENAI_API_KEY"],
    },
    {
        "slug": "terminal-bench",
        "name": "Terminal-Bench",
        "description": "Hard tasks done in a real shell: compiling, debugging, data wrangling. Score: fraction of tasks whose checks pass.",
        "repo_url": REPO % "terminal-bench",
        "install_command": "python3 -m pip install --user -r requirements.txt",
        "run_command": "python3 run.py --output results.json",
        "env_var_names": ["ANTHROPIC_API_KEY"],
    },
    {
        "slug": "gaia",
        "name": "GAIA",
        "description": "General-assistant questions that need reasoning, tools and reading files. Score: exact-match accuracy on the validation split.",
        "repo_url": REPO % "gaia",
        "install_command": "python3 -m pip install --user -r requirements.txt",
        "run_command": "python3 run.py --split validation --output results.json",
        "env_var_names": ["ANTHROPIC_API_KEY", "HF_TOKEN"],
    },
    {
        "slug": "aider-polyglot",
        "name": "Aider Polyglot",
        "description": "225 Exercism exercises in C++, Go, Java, JavaScript, Python and Rust, edited by the agent. Score: fraction solved in two tries.",
        "repo_url": REPO % "aider-polyglot",
        "install_command": "python3 -m pip install --user -r requirements.txt",
        "run_command": "python3 run.py --output results.json",
        "env_var_names": ["ANTHROPIC_API_KEY"],
    },
    {
        "slug": "lm-eval",
        "name": "lm-eval (vLLM)",
        "description": "EleutherAI's lm-evaluation-harness against a vLLM server started in the sandbox for $MODEL, with the LoRA adapter from $ADAPTER_URL when given.",
        "repo_url": REPO % "lm-eval-vllm",
        "install_command": "python3 -m pip install --user vllm lm-eval",
        "run_command": "python3 run.py --tasks hellaswag,arc_easy --output results.json",
        "compute_type": "gpu",
        "gpu_type": "A10G",
        "env_var_names": ["HF_TOKEN"],
    },
    {
        "slug": "mt-bench",
        "name": "MT-Bench (vLLM)",
        "description": "80 multi-turn questions answered by $MODEL served with vLLM in the sandbox, graded by an LLM judge. Score: mean judge rating (1-10).",
        "repo_url": REPO % "mt-bench-vllm",
        "install_command": "python3 -m pip install --user vllm fschat",
        "run_command": "python3 run.py --judge gpt-4o --output results.json",
        "compute_type": "gpu",
        "gpu_type": "A10G",
        "env_var_names": ["OPENAI_API_KEY", "HF_TOKEN"],
    },
    {
        "slug": "openclaw",
        "name": "OpenClaw",
        "description": "The OpenClaw agent scaffold, with no task suite of its own: give it Tasks (one per line) and it reports the fraction completed.",
        "repo_url": REPO % "openclaw",
        "install_command": "npm install --omit=dev",
        "run_command": 'node run.js --tasks "$FRACTAL_TASKS_FILE" --output results.json',
        "env_var_names": ["ANTHROPIC_API_KEY"],
        "needs_tasks": True,
    },
]


def seed(apps, schema_editor):
    Preset = apps.get_model("harnesses", "Preset")
    for position, values in enumerate(PRESETS):
        Preset.objects.update_or_create(slug=values["slug"], defaults={**values, "position": position})


class Migration(migrations.Migration):
    dependencies = [("harnesses", "0001_initial")]
    operations = [migrations.RunPython(seed, migrations.RunPython.noop)]
