"""Compile the trace ingest's per-span modules with Cython (traces/compiled.py says why); `scripts/venv.sh` runs this.

Only modules whose source changed since their last build are compiled
(~10 s each on 2 cores). Should compiling fail, their old builds are removed
and they run as plain Python: correct, only slower.

Usage: .venv/bin/python scripts/compile.py [--force]
"""

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from traces import compiled  # noqa: E402

BUILD = ROOT / "build"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--force", action="store_true", help="compile every module, current or not")
    args = parser.parse_args()
    for name in compiled.stray():
        compiled.remove(name)  # no longer compiled: its old build goes (the finder runs the source meanwhile)
    names = [name for name in compiled.MODULES if args.force or not compiled.current(name)]
    if not names:
        return
    print(f"Compiling traces/{{{','.join(names)}}}.py with Cython…", flush=True)
    try:
        build(names)
    except (Exception, SystemExit) as exc:  # setuptools reports a failed compiler as SystemExit
        for name in names:
            compiled.remove(name)
        print(f"Could not compile them ({exc}): trace ingest runs as plain Python, slower.", file=sys.stderr)
        return
    compiled.record(names)


def build(names: list[str]):
    from Cython.Build import cythonize
    from setuptools import Distribution

    os.chdir(ROOT)  # module names (traces.otlp) come from paths relative to the package's parent
    extensions = cythonize(
        [f"traces/{name}.py" for name in names],
        build_dir=str(BUILD / "cython"),
        # annotation_typing off: the source's type hints stay hints, as in
        # plain Python, so compiled and plain behave the same.
        compiler_directives={"language_level": 3, "annotation_typing": False},
        force=True,
        quiet=True,
    )
    for extension in extensions:
        # gcc misreads some of Cython's generated comparisons (-Warray-bounds): pages of noise, nothing wrong.
        extension.extra_compile_args = ["-Wno-array-bounds"]
    distribution = Distribution({"ext_modules": extensions})
    distribution.verbose = False
    command = distribution.get_command_obj("build_ext")
    command.inplace, command.build_temp, command.parallel = True, str(BUILD / "temp"), os.cpu_count()
    distribution.run_command("build_ext")


if __name__ == "__main__":
    main()
