"""Each test file's time at the end of every run, CI's included: where the suite's budget goes (docs/developing/bench/make-test.md).

A file's time sums its tests' setup, call and teardown, so a module fixture that starts a server counts once,
in its file. Under pytest-xdist the controller receives every worker's reports and sums them; files running
side by side on two workers add up to more than the run's wall time.
"""

from collections import Counter

FILES_SHOWN = 25


class FileTimes:
    def __init__(self):
        self.seconds: Counter[str] = Counter()
        self.tests: Counter[str] = Counter()

    def pytest_runtest_logreport(self, report):
        path = report.nodeid.split("::", 1)[0]
        self.seconds[path] += report.duration
        self.tests[path] += report.when == "call"

    def pytest_terminal_summary(self, terminalreporter):
        if not self.seconds:
            return
        terminalreporter.write_sep("=", f"slowest {FILES_SHOWN} files (setup, call and teardown summed)")
        for path, seconds in self.seconds.most_common(FILES_SHOWN):
            terminalreporter.write_line(f"{seconds:8.1f}s {self.tests[path]:5d} tests  {path}")
        terminalreporter.write_line(f"{sum(self.seconds.values()):8.1f}s {sum(self.tests.values()):5d} tests  in {len(self.seconds)} files")


def pytest_configure(config):
    # Once, where the reports gather: the controller of an xdist run, or the only process of a plain one.
    if not hasattr(config, "workerinput"):
        config.pluginmanager.register(FileTimes(), "file-times")
