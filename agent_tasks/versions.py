"""What changed from one version of a task set to the next, per task, and what that means for results already run.

Following Terminal-Bench's rules for a continuous benchmark: a task whose environment or instruction changed is
another task (its agents must run again); one whose tests changed can be graded again from the outputs its trials
kept (a regrade: regrades.py); one whose metadata alone changed keeps its results. Each task's parts are hashed at
import (`parts`), so comparing two versions reads no archive.
"""

import hashlib
import json

from .harbor_format import ParsedTask

# What a change to each part means, the most demanding first: a task is classed by the first part that changed.
RERUN, REGRADE, STAND = "rerun", "regrade", "stand"
MEANING = {
    "environment": RERUN,
    "instruction": RERUN,
    "agent": RERUN,
    "tests": REGRADE,
    "verifier": REGRADE,
    "solution": STAND,
    "metadata": STAND,
}
SAYS = {
    RERUN: "its environment, instruction or agent settings changed: agents must run it again",
    REGRADE: "its tests or verifier settings changed: trials that kept their outputs can be regraded",
    STAND: "only its metadata or solution changed: results stand",
}


def parts(task: ParsedTask) -> dict[str, str]:
    """A digest of each part of a task that a change could mean something different for."""
    config = task.config
    return {
        "environment": _files(task.files, "environment/", {"environment": config.get("environment", {})}),
        "instruction": _digest(task.instruction.encode()),
        "agent": _digest(_json(config.get("agent", {}))),
        "tests": _files(task.files, "tests/"),
        "verifier": _digest(_json(config.get("verifier", {}))),
        "solution": _files(task.files, "solution/", {"solution": config.get("solution", {})}),
        "metadata": _digest(_json({k: v for k, v in config.items() if k not in ("environment", "agent", "verifier", "solution")})),
    }


def _files(files: dict[str, bytes], prefix: str, extra: dict | None = None) -> str:
    sha = hashlib.sha256(_json(extra or {}))
    for path in sorted(p for p in files if p.startswith(prefix)):
        sha.update(len(path).to_bytes(8, "big") + path.encode() + len(files[path]).to_bytes(8, "big") + files[path])
    return sha.hexdigest()


def _json(value) -> bytes:
    return json.dumps(value, sort_keys=True, default=str).encode()


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def change(old: dict[str, str], new: dict[str, str]) -> tuple[str, list[str]]:
    """(what the change means, the parts that changed) between two tasks' parts; ("unchanged", []) when none did."""
    changed = [part for part in MEANING if old.get(part) != new.get(part)]
    if not changed:
        return "unchanged", []
    order = [RERUN, REGRADE, STAND]
    return min((MEANING[part] for part in changed), key=order.index), changed


def changes(previous: dict[str, dict[str, str]], current: dict[str, dict[str, str]]) -> dict[str, dict]:
    """Per task name, what changed from the previous version's tasks (name: parts) to the current's."""
    found = {}
    for name in sorted(set(previous) | set(current)):
        if name not in previous:
            found[name] = {"change": "added", "parts": []}
        elif name not in current:
            found[name] = {"change": "removed", "parts": []}
        else:
            meaning, parts_changed = change(previous[name], current[name])
            found[name] = {"change": meaning, "parts": parts_changed}
    return found
