"""Run the built container image without a container engine: buildah and a read-only chroot.

`make image` (deploy/image/build.sh) builds into a private buildah store under .cache/image.
Here a working container is made from that image and its root file system mounted; each
command then runs in fresh mount and PID namespaces, chrooted into that tree remounted
read-only, as the image's user, with the image's environment and working directory, and with
exactly the writable mounts the Helm chart gives the pod: /tmp and /var/lib/icemv, plus the
config directory /etc/icemv mounted read-only. That is what Kubernetes does with
`readOnlyRootFilesystem: true`, minus cgroups and a network namespace. Needs root.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STORE = Path(os.environ.get("BUILDAH_STORE", ROOT / ".cache" / "image" / "storage"))


def storage_driver() -> str:
    """The driver `make image` chose for the store (overlay, else vfs)."""
    recorded = STORE / "driver"
    return recorded.read_text().strip() if recorded.exists() else "vfs"


def image_name() -> str:
    """ICEMV_IMAGE, or the name `make image` gives: localhost/icemv:<pyproject version>."""
    if os.environ.get("ICEMV_IMAGE"):
        return os.environ["ICEMV_IMAGE"]
    version = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M)
    assert version is not None
    return f"localhost/icemv:{version.group(1)}"


def buildah(*args: str, timeout: float = 300) -> str:
    """One buildah command against the private store; its stdout."""
    binary = shutil.which("buildah")
    assert binary, "buildah is not installed: run `make image`"
    result = subprocess.run(
        [
            binary,
            "--root",
            str(STORE / "root"),
            "--runroot",
            str(STORE / "run"),
            "--storage-driver",
            storage_driver(),
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"buildah {' '.join(args)}: {result.stderr.strip()}")
    return result.stdout


def image_exists(name: str) -> bool:
    if shutil.which("buildah") is None or not STORE.exists():
        return False
    try:
        buildah("inspect", "--type", "image", name, timeout=60)
    except RuntimeError:
        return False
    return True


@dataclass(frozen=True)
class ImageConfig:
    env: dict[str, str]
    user: str
    workdir: str
    entrypoint: list[str]
    cmd: list[str]
    size_bytes: int


def image_config(name: str) -> ImageConfig:
    inspected = json.loads(buildah("inspect", "--type", "image", name, timeout=60))
    config = inspected["OCIv1"]["config"]
    env = dict(entry.split("=", 1) for entry in config.get("Env", []))
    size = sum(layer.get("size", 0) for layer in inspected["OCIv1"].get("layers", []))
    if not size:
        size = int(inspected.get("ImageSize", 0) or 0)
    return ImageConfig(
        env=env,
        user=config.get("User", ""),
        workdir=config.get("WorkingDir", "/"),
        entrypoint=list(config.get("Entrypoint") or []),
        cmd=list(config.get("Cmd") or []),
        size_bytes=size,
    )


@dataclass(frozen=True)
class Mounted:
    """An image's root file system, mounted from a working container."""

    name: str
    rootfs: Path
    config: ImageConfig


@contextmanager
def mounted_image(name: str) -> Iterator[Mounted]:
    container = buildah("from", "--pull=never", "--quiet", name).strip()
    try:
        rootfs = Path(buildah("mount", container).strip())
        yield Mounted(name, rootfs, image_config(name))
    finally:
        buildah("rm", container)


# Runs as root in new mount and PID namespaces: the mounts vanish with it, and every process
# the command leaves behind (an embedded PostgreSQL, a JVM) dies with its PID 1.
_READ_ONLY_CHROOT = r"""
set -eu
root=$1; work=$2; tmp=$3; etc=$4; user=$5; workdir=$6; hosts=$7; shift 7
mount --make-rprivate /
hostname icemv-pod
# What a container runtime provides (the kubelet manages /etc/hosts): mount points first.
for file in hosts hostname resolv.conf; do
    [ -e "$root/etc/$file" ] || touch "$root/etc/$file"
done
mount --bind "$root" "$root"
mount -o remount,bind,ro "$root"
mount --bind "$hosts" "$root/etc/hosts"
mount --bind /etc/resolv.conf "$root/etc/resolv.conf"
mount -t proc proc "$root/proc"
mount --rbind /dev "$root/dev"
mount -t sysfs -o ro sysfs "$root/sys"
mount --bind "$tmp" "$root/tmp"
mount --bind "$work" "$root/var/lib/icemv"
mount --bind "$etc" "$root/etc/icemv"
mount -o remount,bind,ro "$root/etc/icemv"
exec chroot --userspec="$user" "$root" /usr/bin/env -C "$workdir" "$@"
"""


@dataclass(frozen=True)
class Run:
    returncode: int
    stdout: str
    stderr: str


@dataclass(frozen=True)
class PodLike:
    """The image mounted like the chart's pod: read-only root, writable /tmp and work dir."""

    image: Mounted
    work: Path
    tmp: Path
    etc: Path
    hosts: Path

    def run(
        self,
        argv: Sequence[str],
        env: Mapping[str, str] | None = None,
        timeout: float = 300,
        entrypoint: bool = True,
    ) -> Run:
        """`argv` after the image's entry point (or instead of it), as the image's user."""
        command, environment = self._command(argv, env, entrypoint)
        result = subprocess.run(
            command,
            env=environment,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        return Run(result.returncode, result.stdout, result.stderr)

    def start(
        self, argv: Sequence[str], log: Path, env: Mapping[str, str] | None = None
    ) -> Started:
        """`argv` after the entry point, in the background, its output to `log`."""
        command, environment = self._command(argv, env, True)
        with log.open("ab") as out:
            process = subprocess.Popen(
                command, env=environment, stdout=out, stderr=subprocess.STDOUT
            )
        return Started(process, log)

    def _command(
        self, argv: Sequence[str], env: Mapping[str, str] | None, entrypoint: bool
    ) -> tuple[list[str], dict[str, str]]:
        """The host command, and its environment: exactly the pod's (the chrooted `env`
        passes it on), so that nothing of it, secrets included, is on a command line."""
        config = self.image.config
        command = [*(config.entrypoint if entrypoint else []), *argv]
        environment = {**config.env, **(env or {})}
        return (
            [
                "unshare",
                "--mount",
                "--pid",
                "--uts",
                "--fork",
                "sh",
                "-c",
                _READ_ONLY_CHROOT,
                "sh",
                str(self.image.rootfs),
                str(self.work),
                str(self.tmp),
                str(self.etc),
                config.user,
                config.workdir,
                str(self.hosts),
                *command,
            ],
            environment,
        )


@dataclass(frozen=True)
class Started:
    """A command running in the pod: `unshare` on the host, the command its forked child
    (PID 1 of the pod's PID namespace, as in a container)."""

    process: subprocess.Popen[bytes]
    log: Path

    def stop(self, timeout: float = 60) -> int:
        """SIGTERM to the command itself, as the kubelet sends it; its exit code."""
        children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children")
        for pid in children.read_text().split() if children.exists() else []:
            os.kill(int(pid), signal.SIGTERM)
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise


def pod_like(image: Mounted, base: Path, config_yaml: str) -> PodLike:
    """Host directories for the pod's volumes, owned as the chart's fsGroup would make them."""
    uid, _, gid = image.config.user.partition(":")
    work, tmp, etc = base / "work", base / "tmp", base / "etc-icemv"
    for path in (work, tmp, etc):
        path.mkdir(parents=True)
    os.chown(work, int(uid), int(gid or uid))
    tmp.chmod(0o1777)
    (etc / "config.yaml").write_text(config_yaml)
    etc.chmod(0o755)
    (etc / "config.yaml").chmod(0o644)
    hosts = base / "hosts"
    hosts.write_text("127.0.0.1\tlocalhost\n::1\tlocalhost\n127.0.1.1\ticemv-pod\n")
    hosts.chmod(0o644)
    return PodLike(image, work, tmp, etc, hosts)
