"""A project's datasets: what a row holds (`rows`), versions and their diffs (`versions`), their API and pages, and the
dataset eval, a version's rows scored by scorers (`evals`)."""
