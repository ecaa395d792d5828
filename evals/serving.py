"""The serving stack an eval's answers came from, stamped on the eval (`Eval.serving_stack`), and what a comparison
says when two evals' stacks differ.

Scores move with the stack itself, not only with the model: the inference engine, its version and the batch a
request shared (greedy decoding is not reproducible across batch compositions). So each eval keeps what its server
said of itself while it answered: the `Server` header of its answers, the digest of the deployment's `/models` entry
(`response_cache.record_models_entry`), the `system_fingerprint`s its answers carried, and the most requests it had
in flight at once. A comparison across two stamps that differ says which parts differ beside its verdict.
"""

from collections.abc import Mapping

# At most this many distinct values of a part are kept (a server that changes on every answer is one that changes).
KEPT = 5
VALUE_CHARS = 100
# The parts that name the stack (a difference is flagged); the peak in flight is told beside them, not flagged alone.
IDENTITY = ("server", "models", "system_fingerprints")
LABELS = {"server": "Server header", "models": "/models entry", "system_fingerprints": "system_fingerprint"}
DIFFERENT_STACKS = "Served by different stacks"


class Seen:
    """What one pass of the engine saw of its deployment's server, merged into the eval's stamp when the pass ends."""

    def __init__(self):
        self.servers: list[str] = []
        self.fingerprints: list[str] = []
        self.peak_in_flight = 0

    def headers(self, headers: Mapping[str, str]):
        """A 200's headers (the client calls this for each answer)."""
        _add(self.servers, headers.get("Server"))

    def reply(self, system_fingerprint: str | None, in_flight: int):
        _add(self.fingerprints, system_fingerprint)
        self.peak_in_flight = max(self.peak_in_flight, in_flight)

    def stamp(self, earlier: dict, models: str) -> dict:
        """The eval's stamp: an earlier pass's (a resumed eval) with this pass's added."""
        servers, fingerprints = list(earlier.get("server") or []), list(earlier.get("system_fingerprints") or [])
        for value in self.servers:
            _add(servers, value)
        for value in self.fingerprints:
            _add(fingerprints, value)
        return {
            "server": servers,
            "models": models or earlier.get("models", ""),
            "system_fingerprints": fingerprints,
            "peak_in_flight": max(self.peak_in_flight, earlier.get("peak_in_flight") or 0),
        }


def _add(values: list[str], value) -> None:
    if isinstance(value, str) and (value := " ".join(value.split())[:VALUE_CHARS]) and value not in values and len(values) < KEPT:
        values.append(value)


def described(stamp: dict) -> str:
    """One line for a page or the CLI: "" for an eval stamped before stamps were kept (or that asked no server)."""
    if not stamp:
        return ""
    parts = [f"{LABELS[part]} {_shown(stamp.get(part))}" for part in IDENTITY if stamp.get(part)]
    if stamp.get("peak_in_flight"):
        parts.append(f"at most {stamp['peak_in_flight']} requests in flight")
    return "; ".join(parts) or "the server named nothing of itself"


def note(a: dict, b: dict) -> dict | None:
    """A comparison's word on the two evals' stacks: None when either has no stamp (it cannot tell); otherwise which
    identifying parts differ ("differs": [{part, a, b}]), the peaks in flight, and a warning when any part differs.

    A part only one side stated is not a difference: a server that lists no /models, or an eval answered wholly
    from the response cache (it saw no header; the cache keeps answers per fingerprint), says nothing either way."""
    if not a or not b:
        return None
    differs = [
        {"part": part, "label": LABELS[part], "a": _shown(a.get(part)), "b": _shown(b.get(part))}
        for part in IDENTITY
        if a.get(part) and b.get(part) and a.get(part) != b.get(part)
    ]
    warning = ""
    if differs:
        named = "; ".join(f"{d['label']} {d['a']} against {d['b']}" for d in differs)
        warning = f"{DIFFERENT_STACKS} ({named}): part of the difference may be the stack's, not the model's."
    return {"same": not differs, "differs": differs, "peak_in_flight": [a.get("peak_in_flight"), b.get("peak_in_flight")], "warning": warning}


def _shown(value) -> str:
    return ", ".join(value) if isinstance(value, list) else (value or "")
