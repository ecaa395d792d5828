import hashlib
import shutil
import subprocess
import tempfile
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from belvedir.sandbox.backends import docker_engine
from belvedir.sandbox.errors import SandboxError
from belvedir.sandbox.models import SandboxHost

IMAGE_DIR = Path(__file__).resolve().parents[2] / "image"
MIRROR = "http://deb.debian.org/debian"
LABEL_MADE_FROM = "belvedir.made-from"


class Command(BaseCommand):
    help = "Build the sandbox image offline: mmdebstrap a Debian bookworm rootfs, docker import it, finish it with a Dockerfile."

    def add_arguments(self, parser):
        parser.add_argument("--force", action="store_true", help="Rebuild even if the image exists.")
        parser.add_argument("--tag", default=settings.SANDBOX_IMAGE)
        parser.add_argument("--mirror", default=MIRROR, help="Debian mirror for mmdebstrap.")
        parser.add_argument("--host", help="Build on this sandbox host's engine (through its TLS settings) instead of DOCKER_HOST.")

    def handle(self, *args, force, tag, mirror, host=None, **options):
        engine = self._engine(host)
        packages = [line.strip() for line in (IMAGE_DIR / "packages.txt").read_text().splitlines() if line.strip() and not line.startswith("#")]
        dockerfile = (IMAGE_DIR / "Dockerfile").read_text()
        # The image is labelled with what it was made from: one made from another package list or Dockerfile (an
        # older checkout's) is rebuilt, not kept because its tag is there.
        made_from = hashlib.sha256("\0".join([*packages, dockerfile]).encode()).hexdigest()[:16]
        try:
            if not force and docker_engine.image_exists(engine, tag):
                if docker_engine.image_labels(engine, tag).get(LABEL_MADE_FROM) == made_from:
                    self.stdout.write(f"Sandbox image {tag} already exists (use --force to rebuild).")
                    return
                self.stdout.write(f"Sandbox image {tag} was made from another package list or Dockerfile; rebuilding it.")
            if shutil.which("mmdebstrap") is None:
                raise CommandError("mmdebstrap is not installed: apt-get install mmdebstrap")
            # The base tag names its package list, so a changed list builds a new base.
            base_tag = f"belvedir-sandbox-base:{hashlib.sha256(','.join(packages).encode()).hexdigest()[:12]}"
            if force or not docker_engine.image_exists(engine, base_tag):
                self._build_base(engine, base_tag, packages, mirror)
            self.stdout.write(f"Finishing {tag} from {base_tag}…")
            with tempfile.TemporaryDirectory() as context:
                finished = dockerfile.replace("${BASE}", base_tag) + f'LABEL {LABEL_MADE_FROM}="{made_from}"\n'
                (Path(context) / "Dockerfile").write_text(finished)
                docker_engine.build_image(engine, context, tag)
        except SandboxError as exc:
            raise CommandError(exc.message) from exc
        self.stdout.write(self.style.SUCCESS(f"Sandbox image {tag} is ready."))

    def _engine(self, name):
        if not name:
            return settings.SANDBOX_DOCKER_URL
        try:
            host = SandboxHost.objects.get(name=name)
        except SandboxHost.DoesNotExist:
            raise CommandError(f"No sandbox host is named {name!r}.") from None
        if host.backend != "docker":
            raise CommandError(f"Sandbox host {name!r} runs the {host.backend} backend, which has no Docker images to build.")
        return host.engine

    def _build_base(self, engine, base_tag, packages, mirror):
        self.stdout.write(f"Building a Debian bookworm root filesystem with {', '.join(packages)} (about a minute)…")
        with tempfile.TemporaryDirectory() as workdir:
            rootfs = Path(workdir) / "rootfs.tar"
            command = [
                "mmdebstrap",
                "--variant=minbase",
                "--include=" + ",".join(packages),
                # Documentation and locales are dead weight in a sandbox.
                "--dpkgopt=path-exclude=/usr/share/doc/*",
                "--dpkgopt=path-exclude=/usr/share/man/*",
                "--dpkgopt=path-exclude=/usr/share/locale/*",
                "bookworm",
                str(rootfs),
                mirror,
            ]
            result = subprocess.run(command, capture_output=True, text=True)
            if result.returncode != 0:
                raise CommandError(f"mmdebstrap failed:\n{result.stderr[-3000:]}")
            docker_engine.import_image(engine, str(rootfs), base_tag)
