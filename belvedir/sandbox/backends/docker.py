"""Docker as a sandbox backend: a container per sandbox on a host's engine, under runc or gVisor (runsc).

The work is in docker_engine.py (the engine) and docker_sandbox.py (a
sandbox); this is the contract's face of them.
"""

from ..backend import Backend, Capability, EngineImage, ManagedSandbox
from ..spec import SandboxSpec
from . import docker_engine
from .docker_sandbox import DockerSandbox


class DockerBackend(Backend):
    name = "docker"
    # Under either runtime: runc's limits are the kernel's cgroups, gVisor's its own kernel's.
    capabilities = frozenset(Capability)

    def sandbox(self, spec: SandboxSpec) -> DockerSandbox:
        return DockerSandbox(spec, self.engine)

    def managed(self, owner_kind: str | None = None) -> list[ManagedSandbox]:
        return docker_engine.managed_containers(self.engine, owner_kind)

    def remove(self, name: str):
        docker_engine.remove_container(self.engine, name)

    def check(self, image: str, timeout: float):
        docker_engine.check_engine(self.engine, image, timeout)

    def image_id(self, tag: str) -> str | None:
        return docker_engine.image_id(self.engine, tag)

    def image_from_layer(self, base: str, layer: bytes, tag: str, labels: dict[str, str]):
        docker_engine.image_from_layer(self.engine, base, layer, tag, labels)

    def images(self, repository: str) -> list[EngineImage]:
        return docker_engine.images(self.engine, repository)

    def remove_image(self, tag: str) -> bool:
        return docker_engine.remove_image(self.engine, tag)

    def runtimes(self) -> frozenset[str]:
        return docker_engine.engine_runtimes(self.engine)

    def cpus(self) -> int:
        return docker_engine.engine_cpus(self.engine)
