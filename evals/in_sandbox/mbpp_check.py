"""MBPP's check of one completion. The head of a sandboxed sample's program; never imported.

`evals.benchmarks.mbpp.program` appends one call, check(completion, setup,
tests, provides, proof), with the completion and the row's test_setup_code
and asserts as string literals. MBPP's own evaluation runs the completion,
the setup and the asserts as one script, and calls it passed when that exits
0; so would a completion that calls sys.exit(0) before the asserts, or shadows
`set` with a function that makes both sides of every assert equal. Here:

- the completion runs first, alone in its namespace; stopping there (an
  exception, SystemExit included) fails the sample;
- the setup and the asserts run in a namespace of their own over the genuine
  builtins, copied before any line of the completion ran: what the
  completion patched in `builtins` or in its `__builtins__` never reaches
  them, nor a name of its own that shadows a builtin, but for the names the
  task's reference solution defines (task 126's function is named `sum`);
- each assert runs on its own, so a failure names the assert;
- passing is a line the host chose at random (`proof`), written last, after
  every assert passed, then the process ends at once. An exit 0 without it (an
  os._exit(0) under the asserts) or any other printed "success" is a failure
  (`CodeSandbox.run(proof=...)`).

What this does not stop: code that goes looking for `proof` in this
interpreter's memory (its frames, the runner's copy of the program). That is
an attack written against this harness, not a way out that any script has.
"""

import builtins as _builtins
import os as _os
import sys as _sys

# Bound before any line of the completion runs: this harness's own names would
# otherwise resolve through the `builtins` module it may patch (an `exec`
# that does nothing runs no assert).
_exec, _compile, _str, _type, _BaseException = exec, compile, str, type, BaseException


def check(completion, setup, tests, provides, proof):
    genuine = dict(vars(_builtins))
    write, end, stdout, stderr = _os.write, _os._exit, _sys.stdout, _sys.stderr

    def finish(line, code):
        for stream in (stdout, stderr):
            try:
                stream.flush()
            except _BaseException:  # noqa: S110 - replaced or closed by the completion: its output is lost, the verdict is not
                pass
        write(1, ("\n" + " ".join(line.split())[:500] + "\n").encode())
        end(code)

    # The program file holds `proof`; the completion has no use for it.
    try:
        _os.unlink(_sys.argv[0])
    except OSError:
        pass
    mine = {"__name__": "__main__", "__builtins__": dict(genuine)}
    try:
        _exec(_compile(completion, "completion.py", "exec"), mine)
    except _BaseException as exc:  # SystemExit too: stopping before the tests fails them
        finish(f"The completion stopped before the tests: {why(exc)}", 1)
    given = {name: value for name, value in mine.items() if not name.startswith("__") and (name not in genuine or name in provides)}
    theirs = {**given, "__name__": "__main__", "__builtins__": genuine}
    try:
        _exec(_compile(setup, "test_setup_code.py", "exec"), theirs)
    except _BaseException as exc:
        finish(f"test_setup_code failed: {why(exc)}", 1)
    for test in tests:
        try:
            _exec(_compile(test, "test.py", "exec"), theirs)
        except _BaseException as exc:
            finish(f"Failed: {test[:300]} ({why(exc)})", 1)
    finish(proof, 0)


def why(exc):
    text = _str(exc)
    return f"{_type(exc).__name__}: {text}" if text else _type(exc).__name__
