"""CPU seconds another process has used, from /proc: for the PostgreSQL backends and workers a bench drives."""

import os
import subprocess

TICKS_PER_SECOND = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User plus system time of `pid` (0 for a process that is gone or not ours to read), at 10 ms resolution."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICKS_PER_SECOND


def children(pid: int) -> list[int]:
    return [int(child) for child in subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()]


def postgres_processes() -> list[int]:
    """Every process run by the postgres user: a local server's backends, for a bench that owns the machine."""
    return [int(pid) for pid in subprocess.run(["pgrep", "-u", "postgres"], capture_output=True, text=True).stdout.split()]
