# Before any compiled ingest module is imported (traces/admin.py imports
# traces.otlp during the admin's autodiscovery, before TracesConfig.ready, and
# bench scripts import them without Django), every import of a `traces.*`
# module runs this first: a stale or broken build then runs its source
# instead of stopping the app (traces/compiled.py).
import sys

from . import compiled

sys.meta_path.insert(0, compiled.Builds())
