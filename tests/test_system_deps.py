"""The install steps name every missing Debian package, whatever the shell has defined.

The checks run with a PATH from which buildah, debootstrap, java and javac are absent (a
temporary directory holding only the plain tools the scripts use) and with the JDBC jars
looked for in an empty directory, in dry-run mode: nothing is installed. A shell function
named like a missing program must not count as the program (it once hid a missing buildah
from `make image`, so `make test` failed on every machine that had never had it).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SYSTEM_DEPS = ROOT / "deploy" / "system-deps.sh"
BUILD = ROOT / "deploy" / "image" / "build.sh"
BASH = shutil.which("bash") or "/bin/bash"
# What build.sh runs before its dependency check: nothing that is being checked for.
PLAIN_TOOLS = ("bash", "dirname", "sed", "head", "id", "cat", "mkdir", "grep", "sort", "tr", "env")
RUNTIME = {
    "openjdk-17-jre-headless",
    "openjdk-17-jdk-headless",
    "libpostgresql-jdbc-java",
    "libxerial-sqlite-jdbc-java",
}
IMAGE = {"buildah", "debootstrap"}


@pytest.fixture
def bare_path(tmp_path: Path) -> Path:
    """A PATH directory with the plain tools and none of the checked programs."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in PLAIN_TOOLS:
        found = shutil.which(tool)
        assert found is not None, tool
        (bin_dir / tool).symlink_to(found)
    return bin_dir


def run(command: list[str], path: Path, share: Path, prelude: str = "") -> str:
    """Run `command` under bash with PATH=`path`, after `prelude` (e.g. exported functions)."""
    script = prelude + ' exec "$@"'
    env = {"PATH": str(path), "ICEMV_JAVA_SHARE": str(share), "HOME": os.environ["HOME"]}
    done = subprocess.run(
        [BASH, "-c", script, "bash", *command],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return done.stdout + done.stderr


def would_install(output: str) -> set[str]:
    lines = [line for line in output.splitlines() if line.startswith("would install: ")]
    assert len(lines) == 1, output
    return set(lines[0].removeprefix("would install: ").split())


def test_every_missing_package_is_named(bare_path: Path, tmp_path: Path) -> None:
    output = run([BASH, str(SYSTEM_DEPS), "--dry-run", "runtime", "image"], bare_path, tmp_path)
    assert would_install(output) == RUNTIME | IMAGE


def test_functions_named_like_the_programs_do_not_count(bare_path: Path, tmp_path: Path) -> None:
    prelude = "".join(
        f"{name}() {{ :; }}; export -f {name};" for name in ("buildah", "debootstrap", "java")
    )
    output = run(
        [BASH, str(SYSTEM_DEPS), "--dry-run", "runtime", "image"], bare_path, tmp_path, prelude
    )
    assert would_install(output) == RUNTIME | IMAGE


def test_make_image_names_buildah_and_debootstrap(bare_path: Path, tmp_path: Path) -> None:
    """build.sh itself, with its own `buildah` wrapper function defined before the check."""
    prelude = "buildah() { :; }; export -f buildah;"
    output = run([BASH, str(BUILD), "--check-deps"], bare_path, tmp_path, prelude)
    assert would_install(output) == IMAGE


def test_programs_on_path_and_jars_present_need_nothing(bare_path: Path, tmp_path: Path) -> None:
    for program in ("buildah", "debootstrap", "java", "javac"):
        stand_in = bare_path / program
        stand_in.write_text("#!/bin/sh\n")
        stand_in.chmod(0o755)
    share = tmp_path / "share"
    share.mkdir()
    for jar in ("postgresql.jar", "sqlite-jdbc.jar"):
        (share / jar).write_bytes(b"")
    output = run([BASH, str(SYSTEM_DEPS), "--dry-run", "runtime", "image"], bare_path, share)
    assert output == ""
    (share / "sqlite-jdbc.jar").unlink()
    output = run([BASH, str(SYSTEM_DEPS), "--dry-run", "runtime"], bare_path, share)
    assert would_install(output) == {"libxerial-sqlite-jdbc-java"}


def test_a_bad_argument_is_one_line(bare_path: Path, tmp_path: Path) -> None:
    output = run([BASH, str(SYSTEM_DEPS), "--dry-run", "everything"], bare_path, tmp_path)
    assert output.strip().splitlines() == [
        "system-deps: unknown argument 'everything' (expected --dry-run, runtime, image)"
    ]


def test_no_install_check_uses_command_v() -> None:
    """`command -v` finds functions, aliases and builtins too: checks use `type -P`."""
    scripts = [ROOT / "Makefile", ROOT / ".ci" / "run", *sorted((ROOT / "deploy").rglob("*.sh"))]
    offenders = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in scripts
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if "command -v" in line
    ]
    assert offenders == []
