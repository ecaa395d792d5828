"""Evals: deployments measured on benchmarks and datasets, and the scoring every score goes through.

Grouped by concern:
- `scoring/`: the one door for scores (the Scorer contract, the SCORERS table, the LLM judge, calibration);
- `benchmarks/`: the catalog, one module per benchmark, each benchmark's own checker beside it;
- `datasets/`: a project's datasets (rows, versions, their API and pages) and the dataset eval;
- `suites/`: suites of benchmarks on several deployments, their runs and comparisons;
- at the top: the engine (`engine`, asking deployments through `client`), the queue (`queue`, `tasks`),
  what creates and changes evals (`actions`), statistics and comparisons, and the web layer (`api`, `views`, `forms`).

Other apps (traces, harnesses, finetunes, agent_tasks) import only the public modules named in PUBLIC
(tests/test_import_rules.py); the composition layer (workspace) and the URL conf may import any.
This file imports nothing, as belvedir/sandbox/__init__.py: Django imports the package before its models load.
"""

PUBLIC = (
    "evals.actions",
    "evals.comparison",
    "evals.contamination",
    "evals.datasets.api",
    "evals.datasets.rows",
    "evals.datasets.versions",
    "evals.local_model",
    "evals.models",
    "evals.scoring",
    "evals.scoring.base",
    "evals.scoring.calibration",
    "evals.scoring.judge",
    "evals.scoring.scorers",
    "evals.statistics",
)
