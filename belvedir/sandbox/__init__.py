"""Sandboxes: where untrusted harnesses and completions run, on sandbox hosts, behind one door.

Apps import only the public modules named in PUBLIC, each named for what
it holds: a workload opened through `launch`, the `Sandbox` it yields
(`backend`), what to run (`spec`, and `images`: an image's recipe, built
by the door when a spec names one), who owns it (`owners`), what can go
wrong (`errors`), output and egress helpers, the hosts' models and the
scheduler's capacity check. The backends behind the door (`backends/`:
Docker, the fake) and the package's own machinery (health, reaper) are
never imported by an app (tests/test_import_rules.py).

This file imports nothing: Django imports the package before its models
can load, so a door here would have to load them lazily. The public modules
are imported by their own names instead.
"""

PUBLIC = (
    "belvedir.sandbox.backend",
    "belvedir.sandbox.egress",
    "belvedir.sandbox.errors",
    "belvedir.sandbox.images",
    "belvedir.sandbox.launch",
    "belvedir.sandbox.models",
    "belvedir.sandbox.output",
    "belvedir.sandbox.owners",
    "belvedir.sandbox.scheduler",
    "belvedir.sandbox.spec",
)
