"""Cloning a harness repo on the worker, before its sandbox starts.

The clone happens on the worker so that sandboxes can keep network `none`;
the checkout then goes into the sandbox as a tar stream.
"""

import os
import re
import subprocess
from collections.abc import Iterator

CHUNK = 64 * 1024


class RepoError(Exception):
    pass


def _git(args, cwd=None, timeout=60):
    env = {
        **os.environ,
        "GIT_TERMINAL_PROMPT": "0",  # never wait for a password nobody will type
        "GIT_SSH_COMMAND": "ssh -o BatchMode=yes -o StrictHostKeyChecking=accept-new",
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    try:
        result = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise RepoError(f"git {args[0]} took longer than {timeout} s.") from None
    return result


def redact(url: str) -> str:
    """Hide credentials embedded in a URL (https://token@host/...)."""
    return re.sub(r"(://)[^/@\s]+@", r"\1***@", url)


def clone(url: str, ref: str, dest: str, timeout: int) -> str:
    """Clone `url` into `dest` at `ref` (default branch when empty); return the commit SHA."""
    result = _git(["clone", "--quiet", "--no-checkout", "--", url, dest], timeout=timeout)
    if result.returncode != 0:
        raise RepoError(f"Could not clone {redact(url)}: {redact(result.stderr.strip())[-500:]}")
    target = "HEAD"
    if ref:
        for candidate in (ref, f"origin/{ref}"):
            if _git(["rev-parse", "--verify", "--quiet", f"{candidate}^{{commit}}"], cwd=dest).returncode == 0:
                target = candidate
                break
        else:
            raise RepoError(f"Ref {ref!r} is not a branch, tag or commit of {redact(url)}.")
    checkout = _git(["checkout", "--quiet", "--detach", target], cwd=dest)
    if checkout.returncode != 0:
        raise RepoError(f"Could not check out {ref or 'the default branch'}: {checkout.stderr.strip()[-500:]}")
    return _git(["rev-parse", "HEAD"], cwd=dest).stdout.strip()


def tar_stream(directory: str) -> Iterator[bytes]:
    """The directory as an uncompressed tar, in chunks (never whole in memory)."""
    process = subprocess.Popen(["tar", "-c", "-C", directory, "."], stdout=subprocess.PIPE)
    try:
        while chunk := process.stdout.read(CHUNK):
            yield chunk
    finally:
        process.stdout.close()
        if process.wait() != 0:
            raise RepoError("Could not package the checkout.")
