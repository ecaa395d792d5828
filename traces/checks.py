"""System checks of the trace ingest: what `manage.py check` says about its compiled modules."""

from django.core.checks import Warning, register

from . import compiled


@register()
def check_compiled_modules(app_configs, **kwargs):
    """A build that is stale, missing or broken runs as its source (correct, slower) until it is rebuilt."""
    return [
        Warning(f"traces/{name}.py {why}: it runs as plain Python, slower.", hint=f"To use its build, {compiled.REBUILD}.", id="belvedir.W005")
        for name, why in compiled.plain().items()
    ]
