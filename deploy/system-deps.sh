#!/usr/bin/env bash
# The Debian packages icemv's commands need, installed where missing and checked after.
#
#   deploy/system-deps.sh [--dry-run] GROUP...
#
# Groups: `runtime` (`make demo`, `make test`: Java 17, javac for the tests' REST catalog
# server, the JDBC drivers Spark's Iceberg JdbcCatalog loads) and `image` (`make image`:
# buildah, debootstrap). A program counts as installed only if it is a file on PATH
# (`type -P`): shell functions, aliases and builtins of the same name do not count, so a
# wrapper function in a calling script cannot hide a missing package. After installing,
# every check runs again and a program still missing fails with one line naming its package.
# --dry-run prints what would be installed and installs nothing. ICEMV_JAVA_SHARE (default
# /usr/share/java) is where the JDBC jars are looked for.
set -euo pipefail

dry_run=0
groups=()
for arg in "$@"; do
    case "$arg" in
        --dry-run) dry_run=1 ;;
        runtime | image) groups+=("$arg") ;;
        *) echo "system-deps: unknown argument '$arg' (expected --dry-run, runtime, image)" >&2; exit 2 ;;
    esac
done
[ ${#groups[@]} -gt 0 ] || { echo "usage: deploy/system-deps.sh [--dry-run] runtime|image..." >&2; exit 2; }
share=${ICEMV_JAVA_SHARE:-/usr/share/java}

# "kind name package" per requirement: a program on PATH or a file.
requirements=()
for group in "${groups[@]}"; do
    case "$group" in
        runtime)
            requirements+=(
                "program java openjdk-17-jre-headless"
                "program javac openjdk-17-jdk-headless"
                "file $share/postgresql.jar libpostgresql-jdbc-java"
                "file $share/sqlite-jdbc.jar libxerial-sqlite-jdbc-java"
            ) ;;
        image)
            requirements+=("program buildah buildah" "program debootstrap debootstrap") ;;
    esac
done

present() {  # kind name
    if [ "$1" = program ]; then type -P "$2" >/dev/null; else [ -f "$2" ]; fi
}

missing_packages() {
    local requirement kind name package
    for requirement in "${requirements[@]}"; do
        read -r kind name package <<<"$requirement"
        present "$kind" "$name" || printf '%s\n' "$package"
    done
}

missing=$(missing_packages | sort -u | tr '\n' ' ')
missing=${missing% }
if [ -z "$missing" ]; then
    exit 0
fi
if [ "$dry_run" = 1 ]; then
    echo "would install: $missing"
    exit 0
fi
echo "installing: $missing" >&2
sudo=()
[ "$EUID" = 0 ] || sudo=(sudo)
# shellcheck disable=SC2086 # one word per package
"${sudo[@]}" apt-get update -qq >&2
# shellcheck disable=SC2086
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >&2
status=0
for requirement in "${requirements[@]}"; do
    read -r kind name package <<<"$requirement"
    if ! present "$kind" "$name"; then
        echo "system-deps: $name still missing after installing package $package" >&2
        status=1
    fi
done
exit "$status"
