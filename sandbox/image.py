"""Build the Docker sandbox image locally, from this machine's own Python 3 (no registry, no network).

``python -m sandbox.image build [--image NAME] [--python PATH]`` stages into a tar stream: the
interpreter, its standard library without tests, IDLE, tkinter, ensurepip and site-packages (the
``.pyc`` caches stay, for start-up speed), the shared libraries ``ldd`` lists for the interpreter and
every extension module (the dynamic loader included), libgcc_s (which glibc opens when a thread exits)
and an ``/etc/passwd`` naming ``nobody``. There is no shell and nothing else. The tar goes to
``docker import`` with ``USER 65534:65534``.

The image is tagged ``<name>:<content key>``, where the key hashes the staged paths, sizes and
modification times, and ``<name>:latest`` points at it. Building again is a no-op (well under a
second) while the key is unchanged. The default name is ``turngym-sandbox``, overridden by the
``TURNGYM_SANDBOX_IMAGE`` variable or ``--image`` (a name without a tag).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import re
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path

__all__ = ["DEFAULT_IMAGE", "IMAGE_LABEL", "build_image", "default_image", "image_key", "staged_files"]

DEFAULT_IMAGE = "turngym-sandbox"
IMAGE_LABEL = "turngym.sandbox.image"
_SKIPPED_STDLIB = {"test", "tests", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3", "site-packages"}
_SKIPPED_STDLIB |= {"dist-packages", "config-3.11-x86_64-linux-gnu", "pydoc_data"}
_TOP_LEVEL_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")  # merged-/usr links, kept as links
_BUILD_FORMAT = 2  # bump when the staging rules change, so that old images are not reused
_PASSWD = b"root:x:0:0:root:/root:/nonexistent\nnobody:x:65534:65534:nobody:/tmp:/nonexistent\n"
_GROUP = b"root:x:0:\nnogroup:x:65534:\n"


def default_image() -> str:
    """The image the Docker backend uses: ``$TURNGYM_SANDBOX_IMAGE`` or ``turngym-sandbox:latest``."""
    return "{}:{}".format(*split_image(os.environ.get("TURNGYM_SANDBOX_IMAGE", DEFAULT_IMAGE)))


def default_python() -> str:
    """The interpreter to stage: the system ``/usr/bin/python3`` if there is one, else this one."""
    return "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable


def _interpreter_paths(python: str) -> dict[str, str]:
    code = "import json, sys, sysconfig; print(json.dumps({'stdlib': sysconfig.get_paths()['stdlib'], "
    code += "'platstdlib': sysconfig.get_paths()['platstdlib'], 'executable': sys.executable}))"
    output = subprocess.run([python, "-E", "-s", "-c", code], capture_output=True, text=True, check=True).stdout
    return json.loads(output)


def _stdlib_files(root: Path) -> Iterator[Path]:
    for directory, subdirs, names in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs if d not in _SKIPPED_STDLIB)
        for name in sorted(names):
            if not name.endswith((".opt-1.pyc", ".opt-2.pyc", ".exe")):
                yield Path(directory, name)


#: Libraries glibc opens at run time, which ``ldd`` cannot list: ``pthread_exit`` and thread cancellation
#: unwind through libgcc_s (without it, a program whose thread exits, as asyncio's subprocess waiter does,
#: is aborted: "libgcc_s.so.1 must be installed for pthread_exit to work").
_RUNTIME_LIBRARIES = ("libgcc_s.so.1",)


def _runtime_libraries() -> set[Path]:
    """Where this machine's loader finds :data:`_RUNTIME_LIBRARIES` (``ldconfig -p``), for this architecture."""
    result = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, check=False)
    wanted = "x86-64" if os.uname().machine == "x86_64" else ""
    found: set[Path] = set()
    for line in result.stdout.splitlines():
        match = re.match(r"\s*(\S+) \(([^)]*)\) => (/\S+)", line)
        if match and match.group(1) in _RUNTIME_LIBRARIES and wanted in match.group(2):
            path = Path(match.group(3))
            found.add(Path(os.path.realpath(path.parent), path.name))
    return found


def _shared_libraries(binaries: list[Path]) -> set[Path]:
    found: set[Path] = _runtime_libraries()
    for binary in binaries:
        result = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, check=False)
        for line in result.stdout.splitlines():
            match = re.search(r"(/\S+) \(0x", line)
            if match:  # canonical directory (/lib -> /usr/lib on merged-/usr systems), name as linked
                path = Path(match.group(1))
                found.add(Path(os.path.realpath(path.parent), path.name))
    return found


def staged_files(python: str | None = None) -> tuple[Path, list[Path]]:
    """The interpreter's real path and every host file the image holds (paths kept as on the host)."""
    paths = _interpreter_paths(python or default_python())
    executable = Path(os.path.realpath(paths["executable"]))
    library = sorted({*_stdlib_files(Path(paths["stdlib"])), *_stdlib_files(Path(paths["platstdlib"]))})
    extensions = [path for path in library if path.suffix == ".so"]
    libraries = _shared_libraries([executable, *extensions])
    return executable, sorted({executable, *library, *libraries})


def image_key(files: list[Path]) -> str:
    """A content key over the staged files' paths, sizes and modification times."""
    digest = hashlib.sha256(f"format={_BUILD_FORMAT}\n".encode())
    for path in files:
        stat = path.stat()
        digest.update(f"{path}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


def _add(tar: tarfile.TarFile, name: str, data: bytes | None = None, *, mode: int = 0o644, link: str = "") -> None:
    info = tarfile.TarInfo(name.lstrip("/"))
    info.mtime, info.mode = 0, mode
    if link:
        info.type, info.linkname = tarfile.SYMTYPE, link
    elif data is None:
        info.type = tarfile.DIRTYPE
    else:
        info.size = len(data)
    tar.addfile(info, io.BytesIO(data) if data is not None else None)


def image_tar(executable: Path, files: list[Path]) -> bytes:
    """The image's root file system as an uncompressed tar (files dereferenced, root-owned)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        links = {top: os.readlink(top) for top in _TOP_LEVEL_LINKS if os.path.islink(top)}
        directories = {str(parent) for path in files for parent in path.parents if str(parent) != "/"}
        for directory in sorted(directories | {"/etc", "/tmp", "/usr/bin"}):
            _add(tar, directory, mode=0o1777 if directory == "/tmp" else 0o755)
        for top, target in sorted(links.items()):
            if top not in directories:
                _add(tar, top, link=target)
        for path in files:
            _add(tar, str(path), path.read_bytes(), mode=0o755 if os.access(path, os.X_OK) else 0o644)
        if str(executable) != "/usr/bin/python3":
            _add(tar, "/usr/bin/python3", link=str(executable))
        _add(tar, "/etc/passwd", _PASSWD)
        _add(tar, "/etc/group", _GROUP)
    return buffer.getvalue()


def build_image(image: str | None = None, *, python: str | None = None, force: bool = False) -> str:
    """Build (or find) the image; returns ``name:key``; ``image`` (``name:tag``) then points at it too."""
    from sandbox.docker_backend import docker_client

    client = docker_client()
    name, tag = split_image(image or default_image())
    executable, files = staged_files(python)
    key = image_key(files)
    if force or not client.images.list(name=f"{name}:{key}"):
        changes = ["USER 65534:65534", "WORKDIR /tmp", "ENV PATH=/usr/bin LANG=C.UTF-8", f"LABEL {IMAGE_LABEL}=1"]
        client.api.import_image_from_data(image_tar(executable, files), repository=name, tag=key, changes=changes)
    client.api.tag(f"{name}:{key}", name, tag)
    return f"{name}:{key}"


def split_image(image: str) -> tuple[str, str]:
    """``"repo:tag"`` -> ``("repo", "tag")``; the tag defaults to ``latest`` (a registry port is not a tag)."""
    repository, _, tag = image.rpartition(":")
    if not repository or "/" in tag:
        return image, "latest"
    return repository, tag


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sandbox.image", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    build = commands.add_parser("build", help="build the sandbox image if it is missing or out of date")
    build.add_argument("--image", default=None, help="image name (default: $TURNGYM_SANDBOX_IMAGE or turngym-sandbox)")
    build.add_argument("--python", default=None, help="interpreter to stage (default: /usr/bin/python3)")
    build.add_argument("--force", action="store_true", help="import again even if the content key exists")
    args = parser.parse_args(argv)
    start = time.monotonic()
    tagged = build_image(args.image, python=args.python, force=args.force)
    print(f"sandbox image {tagged} ready ({time.monotonic() - start:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
