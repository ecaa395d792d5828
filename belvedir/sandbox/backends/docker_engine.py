"""The Docker engine's plumbing: connection and TLS, what the engine says of itself, images, listing and removal.

With docker_sandbox.py, the only modules that import `docker`. A plain URL
string works wherever an Engine does.
"""

import atexit
import hashlib
import json
import os
import shutil
import tempfile
import threading
from contextlib import contextmanager

import docker
import requests
from django.conf import settings
from docker import errors as docker_errors
from docker.tls import TLSConfig

from ..backend import EngineImage, ManagedSandbox
from ..engine import Engine, as_engine, is_pem
from ..errors import DockerUnavailable, ImageMissing, LaunchFailed, SandboxPlatformError
from ..spec import LABEL_INSTANCE, LABEL_MANAGED, LABEL_OWNER_ID, LABEL_OWNER_KIND, LABEL_SANDBOX

API_TIMEOUT = 60
# What a Docker call raises when the engine fails or cannot be reached.
ENGINE_ERRORS = (docker_errors.DockerException, requests.RequestException)


def connect(engine: Engine | str, timeout: float = API_TIMEOUT) -> docker.DockerClient:
    engine = as_engine(engine)
    try:
        client = _Client(base_url=engine.url, timeout=timeout, tls=_tls(engine))
        client.ping()
    except (*ENGINE_ERRORS, OSError) as exc:
        raise DockerUnavailable(f"Docker engine at {engine.url} is unreachable: {exc}") from exc
    return client


class _APIClient(docker.APIClient):
    def merge_environment_settings(self, url, proxies, stream, verify, cert):
        merged = super().merge_environment_settings(url, proxies, stream, verify, cert)
        # requests lets REQUESTS_CA_BUNDLE (set on many machines) replace the
        # session's CA; an engine's own CA must win, or its certificate fails.
        if isinstance(self.verify, str):
            merged["verify"] = self.verify
        return merged


class _Client(docker.DockerClient):
    def __init__(self, **kwargs):  # DockerClient.__init__ only makes its APIClient
        self.api = _APIClient(**kwargs)


def _tls(engine: Engine) -> TLSConfig | bool:
    """Client certificate and CA for a remote engine (mutual TLS, as `dockerd --tlsverify` requires)."""
    if not engine.uses_tls:
        return False
    cert = (_pem_file(engine.cert), _pem_file(engine.key)) if engine.cert else None
    # Without a CA of its own, the engine's certificate is checked against the system's CAs.
    return TLSConfig(client_cert=cert, ca_cert=_pem_file(engine.ca) if engine.ca else None, verify=True)


_pem_dir: str | None = None


def _pem_file(value: str) -> str:
    """A path for TLSConfig: a path as given, or a PEM written once to a private temp dir.

    requests reads the files at every new connection, so they live as long as
    the process: mode 0600 in a 0700 directory, named by content hash, removed
    at exit.
    """
    global _pem_dir
    if not is_pem(value):
        return value
    if _pem_dir is None:
        _pem_dir = tempfile.mkdtemp(prefix="bv-engine-tls-")  # 0700
        atexit.register(shutil.rmtree, _pem_dir, True)
    path = os.path.join(_pem_dir, hashlib.sha256(value.encode()).hexdigest()[:32] + ".pem")
    if not os.path.exists(path):
        partial = f"{path}.{os.getpid()}.{threading.get_ident()}"
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(value)
        os.replace(partial, path)  # another thread never reads half a key
    return path


@contextmanager
def engine_errors(doing: str):
    """Docker failing where no sandbox's evidence applies (checking on one): the platform's fault."""
    try:
        yield
    except ENGINE_ERRORS as exc:
        raise SandboxPlatformError(f"The Docker engine failed while trying to {doing}: {explain(exc)}") from exc


def explain(exc: Exception) -> str:
    if isinstance(exc, docker_errors.APIError):
        return exc.explanation or str(exc)
    return str(exc)


# -- what the engine says of itself ------------------------------------------

_engine_info: dict[str, dict] = {}


def _info(engine: Engine | str, client=None) -> dict:
    """`docker info` of an engine, asked once per engine and process (runtimes and cores do not change under it)."""
    engine = as_engine(engine)
    if engine.url not in _engine_info:
        owned = client is None
        client = client or connect(engine)
        try:
            _engine_info[engine.url] = client.info()
        except ENGINE_ERRORS as exc:
            raise DockerUnavailable(f"Docker engine at {engine.url} did not describe itself: {explain(exc)}") from exc
        finally:
            if owned:
                client.close()
    return _engine_info[engine.url]


def engine_runtimes(engine: Engine | str, client=None) -> frozenset[str]:
    """The runtimes an engine offers."""
    return frozenset(_info(engine, client).get("Runtimes", {}))


def engine_cpus(engine: Engine | str, client=None) -> int:
    """The engine host's CPU count (0 when it does not say)."""
    return int(_info(engine, client).get("NCPU") or 0)


def check_engine(engine: Engine | str, image: str, timeout: float):
    """DockerUnavailable when the engine does not answer in time, ImageMissing when it lacks `image`."""
    client = connect(engine, timeout)
    try:
        client.images.get(image)
    except docker_errors.ImageNotFound as exc:
        raise ImageMissing(f"The sandbox image {image!r} is missing on this host.") from exc
    except ENGINE_ERRORS as exc:
        raise DockerUnavailable(f"Docker engine at {as_engine(engine).url} failed: {explain(exc)}") from exc
    finally:
        client.close()


# -- images ---------------------------------------------------------------------


def image_exists(engine: Engine | str, tag: str) -> bool:
    client = connect(engine)
    try:
        client.images.get(tag)
        return True
    except docker_errors.ImageNotFound:
        return False
    finally:
        client.close()


def image_id(engine: Engine | str, tag: str) -> str | None:
    client = connect(engine)
    try:
        with engine_errors(f"look up the image {tag}"):
            try:
                return client.images.get(tag).id
            except docker_errors.ImageNotFound:
                return None
    finally:
        client.close()


def image_labels(engine: Engine | str, tag: str) -> dict[str, str]:
    client = connect(engine)
    try:
        with engine_errors(f"read the labels of {tag}"):
            return client.images.get(tag).labels or {}
    finally:
        client.close()


def import_image(engine: Engine | str, rootfs_tar: str, tag: str):
    client = connect(engine)
    try:
        repository, _, version = tag.rpartition(":") if ":" in tag else (tag, "", "latest")
        with open(rootfs_tar, "rb") as data:
            client.api.import_image_from_data(data, repository=repository, tag=version)
    finally:
        client.close()


def build_image(engine: Engine | str, context_dir: str, tag: str) -> list[str]:
    client = connect(engine)
    try:
        # network_mode none: the build needs nothing from outside, and this
        # engine may run without a bridge at all.
        _, logs = client.images.build(path=context_dir, tag=tag, network_mode="none", rm=True, forcerm=True)
        return [line["stream"] for line in logs if "stream" in line]
    except docker_errors.BuildError as exc:
        raise LaunchFailed(f"Sandbox image build failed: {exc.msg}") from exc
    finally:
        client.close()


def image_from_layer(engine: Engine | str, base: str, layer: bytes, tag: str, labels: dict[str, str]):
    """`base` with the tar `layer` over its root: a Dockerfile of ADD and LABEL, which the builder applies without
    starting a container (so under no runtime at all; the layer's steps ran in a sandbox: images.py)."""
    label_line = " ".join(f"{json.dumps(k)}={json.dumps(v)}" for k, v in labels.items())
    with tempfile.TemporaryDirectory() as context:
        with open(os.path.join(context, "layer.tar"), "wb") as f:
            f.write(layer)
        with open(os.path.join(context, "Dockerfile"), "w") as f:
            f.write(f"FROM {base}\nADD layer.tar /\n" + (f"LABEL {label_line}\n" if labels else ""))
        with engine_errors(f"build the image {tag}"):
            build_image(engine, context, tag)


def images(engine: Engine | str, repository: str) -> list[EngineImage]:
    client = connect(engine)
    try:
        with engine_errors(f"list the images of {repository}"):
            found = client.api.images(name=repository)
        return [
            EngineImage(tag=tag, created=float(image["Created"]), size=int(image["Size"]), labels=image.get("Labels") or {})
            for image in found
            for tag in image.get("RepoTags") or []
            if tag.startswith(f"{repository}:")
        ]
    finally:
        client.close()


def remove_image(engine: Engine | str, tag: str) -> bool:
    client = connect(engine)
    try:
        with engine_errors(f"remove the image {tag}"):
            try:
                client.api.remove_image(tag)
            except docker_errors.ImageNotFound:
                pass
            except docker_errors.APIError as exc:
                if exc.status_code == 409:  # a container (running or not) holds it
                    return False
                raise
        return True
    finally:
        client.close()


# -- listing and removal ----------------------------------------------------------


def managed_containers(engine: Engine | str, owner_kind: str | None = None) -> list[ManagedSandbox]:
    """Every container this installation labelled on that engine: name, owner and state."""
    client = connect(engine)
    labels = [f"{LABEL_MANAGED}=1", f"{LABEL_INSTANCE}={settings.SANDBOX_INSTANCE}"]
    filters = {"label": labels + ([f"{LABEL_OWNER_KIND}={owner_kind}"] if owner_kind else [])}
    try:
        # One list call, no inspect per container: one removed meanwhile (a
        # worker ending its sandbox) would otherwise fail the whole listing.
        with engine_errors("list its sandboxes"):
            found = client.api.containers(all=True, filters=filters)
        return [
            ManagedSandbox(
                name=c["Names"][0].lstrip("/"),
                owner_kind=c["Labels"].get(LABEL_OWNER_KIND),
                owner_id=c["Labels"].get(LABEL_OWNER_ID),
                status=c["State"],
            )
            for c in found
        ]
    finally:
        client.close()


def remove_container(engine: Engine | str, name: str):
    """Removed (or being removed by another) when this returns, else DockerUnavailable. The reaper races the
    worker that ends the same sandbox: "removal already in progress" (409)
    is the other side winning, not a failure."""
    client = connect(engine)
    try:
        try:
            client.containers.get(name).remove(force=True)
        except docker_errors.NotFound:
            pass
        remove_volumes(client, name)
    except ENGINE_ERRORS as exc:
        if isinstance(exc, docker_errors.APIError) and exc.status_code == 409 and "already in progress" in explain(exc):
            return
        raise DockerUnavailable(f"Docker engine at {as_engine(engine).url} could not remove {name}: {explain(exc)}") from exc
    finally:
        client.close()


def remove_volumes(client, sandbox_name: str):
    """The volumes of a sandbox (its `outside` folders: spec.Folder), gone with it."""
    for volume in client.volumes.list(filters={"label": f"{LABEL_SANDBOX}={sandbox_name}"}):
        try:
            volume.remove(force=True)
        except docker_errors.NotFound:
            pass
        except docker_errors.APIError as exc:
            if exc.status_code != 409:
                raise
            # In use: its container is being removed by another (a worker and the reaper racing), who removes it.
