"""Cloning a harness repo on the worker, before its sandbox starts.

The clone happens on the worker so that sandboxes can keep network `none`;
the checkout then goes into the sandbox as a tar stream.

The worker is a trusted host cloning an untrusted URL, so git runs with
nothing of the worker's: an empty HOME, no system or global config, no
credential helpers, no SSH agent, no prompts. Only https and ssh (plus
http to the platform's own origin, which serves preset driver repos, and
local paths where development allows them), only to an address the egress
policy allows, and git is pinned to that very address (curl's resolve list
for https, ssh's HostName), so DNS cannot answer differently for git.
Redirects are not followed; the checkout's size is capped while it grows.
A private repo's credential comes from the project's secrets.
"""

import base64
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from urllib.parse import urlsplit

from django.conf import settings

from belvedir.core.models import ProjectSecret
from belvedir.core.netpolicy import Refused, egress_policy, is_origin_url

CHUNK = 64 * 1024
SCP_LIKE = re.compile(r"(?P<user>[\w.-]+)@(?P<host>[\w.-]+):(?P<path>[\w./~-]+)\Z")  # git@github.com:org/repo.git
# Project secrets a clone may use: a token for https, a deploy key for ssh.
TOKEN_SECRET = "GIT_HTTPS_TOKEN"
DEPLOY_KEY_SECRET = "GIT_SSH_KEY"
SIZE_POLL_SECONDS = 0.25


class RepoError(Exception):
    pass


@dataclass(frozen=True)
class Target:
    scheme: str  # https, http (platform origin only), ssh, local
    host: str = ""
    port: int = 0
    address: str = ""  # the checked address git is pinned to


@dataclass(frozen=True)
class Credentials:
    token: str = ""
    ssh_key: str = ""

    @classmethod
    def for_project(cls, project) -> "Credentials":
        values = dict(ProjectSecret.objects.filter(project=project, name__in=[TOKEN_SECRET, DEPLOY_KEY_SECRET]).values_list("name", "value"))
        return cls(token=values.get(TOKEN_SECRET, ""), ssh_key=values.get(DEPLOY_KEY_SECRET, ""))


def redact(url: str) -> str:
    """Hide credentials embedded in a URL (https://token@host/...)."""
    return re.sub(r"(://)[^/@\s]+@", r"\1***@", url)


def check_url(url: str) -> Target:
    """Where git may go for this URL, checked; RepoError with the reason otherwise."""
    url = url.strip()
    if url.startswith("-"):
        raise RepoError("A repository URL cannot start with '-'.")
    if match := SCP_LIKE.match(url):
        return _checked("ssh", match["host"], 22)
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme == "file" or (not scheme and url.startswith("/")):
        if not settings.HARNESS_ALLOW_LOCAL_REPOS:
            raise RepoError("Local paths and file:// URLs are disabled on this server.")
        return Target("local")
    if scheme == "http" and is_origin_url(url):
        return _checked("http", parts.hostname or "", parts.port or 80)
    if scheme not in {"https", "ssh"}:
        raise RepoError(f"Only https and ssh repositories are cloned, not {scheme or 'this'}: {redact(url)}.")
    if not parts.hostname:
        raise RepoError(f"{redact(url)} names no host.")
    return _checked(scheme, parts.hostname, parts.port or (443 if scheme == "https" else 22))


def _checked(scheme: str, host: str, port: int) -> Target:
    policy = egress_policy()
    if scheme == "ssh":
        # git over ssh is port 22 (or the URL's), beside the harness egress ports.
        policy = replace(policy, ports=(policy.ports or frozenset()) | {port})
    try:
        addresses = policy.resolve(host, port)
    except Refused as exc:
        raise RepoError(f"Refused to clone from {host}: {exc}") from None
    return Target(scheme, host, port, addresses[0])


def clone(url: str, ref: str, dest: str, timeout: int, credentials: Credentials = Credentials()) -> str:
    """Clone `url` into `dest` at `ref` (default branch when empty); return the commit SHA."""
    target = check_url(url)
    try:
        return _clone_checked(url, ref, dest, timeout, target, credentials)
    except RepoError:
        shutil.rmtree(dest, ignore_errors=True)  # nothing half-cloned stays on the worker
        raise


def _clone_checked(url, ref, dest, timeout, target: Target, credentials: Credentials) -> str:
    with tempfile.TemporaryDirectory(prefix="bv-git-home-") as home:
        env, config = _isolated(home, target, credentials)
        # --no-hardlinks: a local clone would otherwise share the source's
        # object files, whose ctime every other clone of it changes (a link
        # more), and tar refuses a file that changes while it reads it.
        _clone(["clone", "--quiet", "--no-checkout", "--no-hardlinks", "--no-recurse-submodules", *config, "--", url.strip(), dest], env, dest, timeout, url)
        target_ref = "HEAD"
        if ref:
            for candidate in (ref, f"origin/{ref}"):
                if _git(["rev-parse", "--verify", "--quiet", f"{candidate}^{{commit}}"], env, cwd=dest).returncode == 0:
                    target_ref = candidate
                    break
            else:
                raise RepoError(f"Ref {ref!r} is not a branch, tag or commit of {redact(url)}.")
        checkout = _git(["checkout", "--quiet", "--detach", target_ref], env, cwd=dest)
        if checkout.returncode != 0:
            raise RepoError(f"Could not check out {ref or 'the default branch'}: {checkout.stderr.strip()[-500:]}")
        _check_size(dest)
        return _git(["rev-parse", "HEAD"], env, cwd=dest).stdout.strip()


def _isolated(home: str, target: Target, credentials: Credentials) -> tuple[dict, list[str]]:
    """git's environment and `-c` options: nothing of the worker's, pinned to the checked address."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": home,
        "LANG": "C.UTF-8",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_TERMINAL_PROMPT": "0",  # never wait for a password nobody will type
        "GIT_ASKPASS": "/bin/false",
        "SSH_ASKPASS": "/bin/false",
        "GIT_LFS_SKIP_SMUDGE": "1",
        "GIT_ALLOW_PROTOCOL": {"local": "file", "http": "http"}.get(target.scheme, target.scheme),
    }
    config = [
        "-c",
        "credential.helper=",
        "-c",
        "http.followRedirects=false",
        "-c",
        "core.hooksPath=/dev/null",
        "-c",
        "filter.lfs.required=false",
        "-c",
        "filter.lfs.smudge=",
        "-c",
        "filter.lfs.process=",
        "-c",
        "submodule.recurse=false",
    ]
    if target.scheme in {"https", "http"}:
        address = f"[{target.address}]" if ":" in target.address else target.address
        config += ["-c", f"http.curloptResolve={target.host}:{target.port}:{address}"]
        if credentials.token:
            # Through the environment, not argv (which any local user can read).
            header = "Authorization: Basic " + base64.b64encode(f"x-access-token:{credentials.token}".encode()).decode()
            env.update({"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "http.extraHeader", "GIT_CONFIG_VALUE_0": header})
    if target.scheme == "ssh":
        ssh = [
            "ssh",
            "-F",
            "/dev/null",
            "-o",
            "BatchMode=yes",
            "-o",
            "IdentitiesOnly=yes",
            "-o",
            "IdentityAgent=none",
            "-o",
            "StrictHostKeyChecking=accept-new",
            "-o",
            f"UserKnownHostsFile={home}/known_hosts",
            "-o",
            f"HostName={target.address}",
            "-o",
            f"HostKeyAlias={target.host}",
        ]
        if credentials.ssh_key:
            key_file = os.path.join(home, "deploy_key")
            with open(os.open(key_file, os.O_WRONLY | os.O_CREAT, 0o600), "w") as handle:
                handle.write(credentials.ssh_key.strip() + "\n")
            ssh += ["-i", key_file]
        env["GIT_SSH_COMMAND"] = " ".join(ssh)
    return env, config


def _git(args, env, cwd=None, timeout=60):
    try:
        return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise RepoError(f"git {args[0]} took longer than {timeout} s.") from None


def _clone(args, env, dest, timeout, url):
    """git clone, killed once the checkout outgrows the size cap or the time limit."""
    with tempfile.TemporaryFile() as stderr:
        process = subprocess.Popen(["git", *args], env=env, stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True)
        deadline = time.monotonic() + timeout
        try:
            while process.poll() is None:
                if time.monotonic() > deadline:
                    raise RepoError(f"git clone took longer than {timeout} s.")
                _check_size(dest)
                try:
                    process.wait(SIZE_POLL_SECONDS)
                except subprocess.TimeoutExpired:
                    pass
        except RepoError:
            _kill(process)
            raise
        stderr.seek(0)
        message = stderr.read().decode(errors="replace").strip()
    if process.returncode != 0:
        if "redirect" in message.lower() or re.search(r"error: 30[1278]", message):
            raise RepoError(f"Could not clone {redact(url)}: the server redirects, and redirects are not followed; give the final URL.")
        raise RepoError(f"Could not clone {redact(url)}: {redact(message)[-500:]}")


def _check_size(dest: str):
    limit = settings.HARNESS_CLONE_MAX_BYTES
    total = 0
    for root, _, files in os.walk(dest):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass  # git replaced it meanwhile
        if total > limit:
            raise RepoError(f"The repository is larger than the {limit // (1024 * 1024)} MB clone limit.")


def _kill(process):
    try:
        os.killpg(process.pid, 9)
    except ProcessLookupError:
        pass
    process.wait()


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
