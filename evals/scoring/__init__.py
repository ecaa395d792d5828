"""Scoring: one contract for every score Belvedir gives, as the sandbox is one door for running code.

- `base`: the contract. A `Scorer` has a name, says whether it needs a judge,
  checks its options (`check`, a 400 naming what is wrong) and scores an
  `Item` (input, output, reference, extra) in a `Context` (the judge, the
  sandbox) as a `Score`. A scorer's configuration has one shape everywhere:
  {"name": ..., "options": {...}}.
- `scorers`: the written-out table, SCORERS, of the scorers every owner can
  name: dataset evals, live evaluators (which add the trajectory check, a
  trace's own), and benchmarks that use a generic check.
- `checks`: the code checks (exact match, contains, regex, last number, JSON).
- `judge`: the LLM judge: a deployment grading with a versioned rubric, its
  prompts and the one table of parsers its verdicts are read with.
- `extraction`: answers taken out of outputs (numbers, fenced code).
- `patterns`: user regular expressions, bounded before they are compiled.
- `calibration`: how far a judge agrees with people (its calibration card).

A new scorer is a `Scorer` subclass in `checks` (or its own module) and a line
in SCORERS; a new judge rubric is a prompt in `judge`; a benchmark's own
checker lives beside it in `evals/benchmarks/`.

This file imports nothing, so importing the contract never loads the judge's
HTTP client.
"""
