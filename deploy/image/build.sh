#!/usr/bin/env bash
# `make image`: build the icemv container image with buildah, without a Docker engine and
# without a container registry.
#
# 1. The base image debian:bookworm-slim is made here from Debian's archive with
#    `debootstrap --variant=minbase bookworm` (where registries are reachable, a real pull gives
#    the same Debian 12 packages). The root file system and the base image are cached under
#    .cache/image/, so only the first run pays for them.
# 2. The Dockerfile is built with `buildah bud --isolation chroot --pull=never --layers`:
#    root, no daemon; unchanged steps come from the layer cache.
#
# The images live in a private buildah store, .cache/image/storage (BUILDAH_STORE), so nothing
# here touches or depends on the machine's own container storage. Its driver is overlay where
# the kernel mounts overlayfs, else vfs (STORAGE_DRIVER overrides). vfs needs nothing but
# copies the whole tree for every layer: measured here 21 min against 9 min (16 GB for one
# build). The driver is recorded in the store (tests/support/image.py reads it). Prints the
# image name.
#
# `build.sh --check-deps` prints the packages a build would install and installs nothing.
#
# Environment: IMAGE (default localhost/icemv:<pyproject version>), JARS (jar files or folders
# for Spark's classpath in the image, see deploy/docker/jars/README.md), BUILDAH_STORE,
# STORAGE_DRIVER (overlay or vfs), DEBIAN_MIRROR (default http://deb.debian.org/debian).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CACHE="$ROOT/.cache/image"
STORE=${BUILDAH_STORE:-$CACHE/storage}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
BASE=docker.io/library/debian:bookworm-slim
VERSION=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$ROOT/pyproject.toml" | head -n 1)
IMAGE=${IMAGE:-localhost/icemv:$VERSION}

overlay_works() {
    local probe
    grep -qw overlay /proc/filesystems || return 1
    probe=$(mktemp -d)
    mkdir "$probe/lower" "$probe/upper" "$probe/work" "$probe/merged"
    if mount -t overlay overlay \
        -o "lowerdir=$probe/lower,upperdir=$probe/upper,workdir=$probe/work" "$probe/merged" 2>/dev/null; then
        umount "$probe/merged"
        rm -rf "$probe"
        return 0
    fi
    rm -rf "$probe"
    return 1
}

buildah() {
    command buildah --root "$STORE/root" --runroot "$STORE/run" --storage-driver "$DRIVER" "$@"
}

elapsed() { echo "$(( $(date +%s) - $1 ))s"; }

if [ "${1:-}" = --check-deps ]; then  # what a build would install, installing nothing
    exec "$ROOT/deploy/system-deps.sh" --dry-run image
fi
if [ "$(id -u)" != 0 ]; then
    echo "make image: buildah with chroot isolation and vfs storage needs root" >&2
    exit 1
fi
# buildah and debootstrap as programs on PATH (the `buildah` function above does not count).
"$ROOT/deploy/system-deps.sh" image
mkdir -p "$CACHE" "$STORE"
# One store, one driver: a store made with one driver cannot be opened with the other.
if [ -f "$STORE/driver" ]; then
    DRIVER=$(cat "$STORE/driver")
elif [ -n "${STORAGE_DRIVER:-}" ]; then
    DRIVER=$STORAGE_DRIVER
elif overlay_works; then
    DRIVER=overlay
else
    DRIVER=vfs
fi
if [ -n "${STORAGE_DRIVER:-}" ] && [ "$STORAGE_DRIVER" != "$DRIVER" ]; then
    echo "$STORE holds $DRIVER images; remove it to switch to $STORAGE_DRIVER" >&2
    exit 1
fi
echo "$DRIVER" >"$STORE/driver"

# ---- 1. the base image ---------------------------------------------------------------------
if ! buildah images --quiet "$BASE" >/dev/null 2>&1; then
    start=$(date +%s)
    rootfs="$CACHE/rootfs"
    if [ ! -f "$rootfs/.complete" ]; then
        rm -rf "$rootfs.tmp"
        echo "debootstrap --variant=minbase bookworm ($MIRROR)" >&2
        debootstrap --variant=minbase bookworm "$rootfs.tmp" "$MIRROR" >"$CACHE/debootstrap.log" 2>&1 \
            || { tail -n 20 "$CACHE/debootstrap.log" >&2; exit 1; }
        # What the official slim image has and a bare debootstrap has not: the updates and
        # security suites, no documentation installed, no package caches, an empty /dev.
        rm -f "$rootfs.tmp/etc/apt/sources.list"
        cat >"$rootfs.tmp/etc/apt/sources.list.d/debian.sources" <<SOURCES
Types: deb
URIs: $MIRROR
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
        cat >"$rootfs.tmp/etc/dpkg/dpkg.cfg.d/slim" <<'DPKG'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
DPKG
        rm -rf "$rootfs.tmp"/var/cache/apt/archives/*.deb "$rootfs.tmp"/var/lib/apt/lists/* \
            "$rootfs.tmp"/var/log/* "$rootfs.tmp"/dev/*
        rm -rf "$rootfs"
        mv "$rootfs.tmp" "$rootfs"
        touch "$rootfs/.complete"
    fi
    container=$(buildah from scratch)
    mount=$(buildah mount "$container")
    tar -C "$rootfs" --exclude=./.complete -cf - . | tar -C "$mount" -xpf -
    buildah umount "$container" >/dev/null
    buildah config \
        --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        --cmd bash \
        --label org.opencontainers.image.description="Debian 12 minbase by debootstrap (icemv make image)" \
        "$container"
    buildah commit --quiet --rm "$container" "$BASE" >/dev/null
    echo "base image $BASE made in $(elapsed "$start")" >&2
fi

# ---- 2. the icemv image ----------------------------------------------------------------------
# JARS: jar files, or folders of jars, for Spark's classpath in the image (deploy/docker/jars/).
jars_dir="$ROOT/deploy/docker/jars"
unstage_jars() { find "$jars_dir" -maxdepth 1 -name '*.jar' -delete; }
unstage_jars
trap unstage_jars EXIT
for source in ${JARS:-}; do
    if [ -d "$source" ]; then
        find "$source" -maxdepth 1 -name '*.jar' -exec cp -L -t "$jars_dir" {} +
    elif [ -f "$source" ] && [ "${source%.jar}" != "$source" ]; then
        cp -L "$source" "$jars_dir/"
    else
        echo "make image: JARS names $source, which is neither a .jar file nor a folder" >&2
        exit 1
    fi
done
jar_count=$(find "$jars_dir" -maxdepth 1 -name '*.jar' | wc -l)
# Where HTTPS goes through an intercepting proxy, pip in the build must trust the proxy's CA
# like pip on this machine does (PIP_CERT / SSL_CERT_FILE). The bundle and a pip.conf naming
# it are bind-mounted into the RUN steps only: nothing of them ends up in a layer.
mounts=()
ca_bundle=${BUILD_CA_BUNDLE:-${PIP_CERT:-${SSL_CERT_FILE:-}}}
if [ -n "$ca_bundle" ] && [ -f "$ca_bundle" ]; then
    printf '[global]\ncert = /run/icemv-build/ca.pem\n' >"$CACHE/pip.conf"
    mounts+=(--volume "$ca_bundle:/run/icemv-build/ca.pem:ro" --volume "$CACHE/pip.conf:/etc/pip.conf:ro")
fi
start=$(date +%s)
buildah bud --quiet --isolation chroot --pull=never --layers "${mounts[@]}" \
    --tag "$IMAGE" --file "$ROOT/Dockerfile" "$ROOT" >&2
echo "image $IMAGE built in $(elapsed "$start") with $jar_count extra jars" >&2
echo "$IMAGE"
