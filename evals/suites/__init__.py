"""Suites: named lists of benchmarks run on several deployments at once (`actions`), their API, pages and comparisons."""
