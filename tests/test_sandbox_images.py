"""What a build hands the engine (belvedir/sandbox/images.py): only a plain tar of files, folders and links inside
the image. The build's own tools pack it, and its steps could have replaced them, while the engine unpacks it as
root on the host. The real builds are in tests/test_agent_build.py and tests/test_backend_contract.py."""

import gzip
import io
import tarfile

import pytest

from belvedir.sandbox.errors import ImageBuildFailed
from belvedir.sandbox.images import _check_layer


def tar_of(*members: tarfile.TarInfo) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as archive:
        for member in members:
            archive.addfile(member, io.BytesIO(b"x" * member.size) if member.isreg() else None)
    return out.getvalue()


def member(name: str, kind=tarfile.REGTYPE, size: int = 1, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.size, info.linkname = kind, size if kind == tarfile.REGTYPE else 0, link
    return info


def test_a_plain_tar_of_files_folders_and_links_is_laid_on_the_image():
    _check_layer(tar_of(member("usr/local/bin", tarfile.DIRTYPE), member("usr/local/bin/tool"), member("usr/local/bin/t", tarfile.SYMTYPE, link="tool")))


@pytest.mark.parametrize(
    "layer, says",
    [
        (gzip.compress(tar_of(member("big"))), "came back compressed"),
        (b"BZh91AY&SY" + bytes(600), "came back compressed"),
        (tar_of(member("dev/evil", tarfile.CHRTYPE)), "neither a file, a folder nor a link"),
        (tar_of(member("fifo", tarfile.FIFOTYPE)), "neither a file, a folder nor a link"),
        (tar_of(member("../../etc/cron.d/x")), "outside the image"),
        (tar_of(member("/etc/passwd")), "outside the image"),
        (tar_of(member("x", tarfile.LNKTYPE, link="../../etc/shadow")), "outside the image"),
        (b"not a tar at all" * 64, "could not be read back as a plain tar"),
    ],
    ids=["gzip", "bzip2", "device", "fifo", "dot-dot", "absolute", "hard-link-out", "garbage"],
)
def test_anything_else_fails_the_build_naming_why(layer, says):
    with pytest.raises(ImageBuildFailed, match=says):
        _check_layer(layer)
