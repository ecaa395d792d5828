"""Where a sandbox host's engine is and how to prove who we are to it.

An `Engine` is what every backend of a sandbox host starts from (the
sandbox, the reaper, image checks, health checks), so a remote Docker
engine's TLS client certificate travels with its address instead of being
looked up by each caller; the fake backend takes its URL as a name. A plain
URL string still works wherever an Engine does.
"""

from dataclasses import dataclass, field

PEM_MARKER = "-----BEGIN"


@dataclass(frozen=True)
class Engine:
    url: str
    # Each is a PEM, or the path of a PEM file on the worker; all empty for a
    # local socket. They are secrets: kept out of repr (logs, tracebacks).
    ca: str = field(default="", repr=False)
    cert: str = field(default="", repr=False)
    key: str = field(default="", repr=False)

    @property
    def uses_tls(self) -> bool:
        return bool(self.cert or self.key or self.ca)

    @property
    def is_local_socket(self) -> bool:
        return self.url.startswith("unix://")

    def __str__(self):
        return self.url


def as_engine(engine: "Engine | str") -> Engine:
    return engine if isinstance(engine, Engine) else Engine(engine)


def is_pem(value: str) -> bool:
    return value.lstrip().startswith(PEM_MARKER)
