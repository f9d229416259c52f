"""Whom the embedded PostgreSQL runs as, and the tools it runs with.

PostgreSQL refuses to run as root, so under root the server runs as an unprivileged system
user, which then needs read access to the bundled binaries and traverse access to the data
directory's parents (granted minimally: o+x on directories, o+r on files).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import pwd
import stat
import subprocess
import tempfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import structlog

from icemv.errors import EmbeddedPostgresError

log = structlog.get_logger(__name__)

# PostgreSQL refuses to run as root; as root we run it as this unprivileged system user.
SYSTEM_USER = "icemv"


@dataclass(frozen=True)
class RunAs:
    """Whom the PostgreSQL processes run as: the current user, or SYSTEM_USER under root."""

    uid: int
    gid: int

    @property
    def is_other(self) -> bool:
        return self.uid != os.geteuid()

    def subprocess_kwargs(self) -> dict[str, Any]:
        if not self.is_other:
            return {}
        # extra_groups=[] drops root's supplementary groups too.
        return {"user": self.uid, "group": self.gid, "extra_groups": []}


@cache
def install_dir() -> Path:
    """The pgserver wheel's PostgreSQL tree, found without importing pgserver (whose import
    has side effects we do not need)."""
    spec = importlib.util.find_spec("pgserver")
    if spec is None or spec.origin is None:
        raise EmbeddedPostgresError("the pgserver package (bundled PostgreSQL) is not installed")
    return Path(spec.origin).parent / "pginstall"


def tool_path(name: str) -> Path:
    path = install_dir() / "bin" / name
    if not path.is_file():
        raise EmbeddedPostgresError(f"bundled PostgreSQL binary missing: {path}")
    return path


def run_tool(cmd: list[str], run_as: RunAs, timeout: float) -> tuple[int, str]:
    """Run a PostgreSQL tool; return exit code and combined output.

    Output goes to a temporary file, not a pipe: the postmaster that pg_ctl forks could
    inherit a pipe and keep it open, hanging the read.
    """
    # PG* variables from the caller's shell must not redirect our tools to another server.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env["LC_ALL"] = "C"
    with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as out:
        try:
            proc = subprocess.run(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                cwd="/",
                timeout=timeout,
                check=False,
                **run_as.subprocess_kwargs(),
            )
        except subprocess.TimeoutExpired as e:
            raise EmbeddedPostgresError(f"{Path(cmd[0]).name} timed out after {timeout}s") from e
        out.seek(0)
        return proc.returncode, out.read()


def run_as_user() -> RunAs:
    if os.geteuid() != 0:
        return RunAs(os.geteuid(), os.getegid())
    try:
        pw = pwd.getpwnam(SYSTEM_USER)
    except KeyError:
        cmd = ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin"]
        proc = subprocess.run([*cmd, SYSTEM_USER], capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            with contextlib.suppress(KeyError):  # another process created it meanwhile
                pw = pwd.getpwnam(SYSTEM_USER)
                return RunAs(pw.pw_uid, pw.pw_gid)
            raise EmbeddedPostgresError(
                f"cannot create system user {SYSTEM_USER!r} to run PostgreSQL as (it refuses "
                f"to run as root): {proc.stderr.strip()}"
            ) from None
        pw = pwd.getpwnam(SYSTEM_USER)
        log.info("embedded_postgres.user_created", user=SYSTEM_USER)
    return RunAs(pw.pw_uid, pw.pw_gid)


def grant_traverse(path: Path) -> None:
    """Let other users traverse ``path`` and its ancestors: adds o+x only, never read."""
    for p in (path, *path.parents):
        mode = p.stat().st_mode
        if not mode & stat.S_IXOTH:
            log.info("embedded_postgres.chmod_o+x", path=str(p))
            p.chmod(stat.S_IMODE(mode) | stat.S_IXOTH)


@cache
def grant_access_to_binaries() -> None:
    """Let the server user read and run the bundled PostgreSQL and its libpq (o+r, and o+x
    on directories and executables); a no-op for the usual pip install with umask 022."""
    root = install_dir()
    trees = [root / "bin", root / "lib", root / "share", root.parent.parent / "pgserver.libs"]
    for tree in trees:
        if not tree.exists():
            continue
        grant_traverse(tree)
        for dirpath, _dirnames, filenames in os.walk(tree):
            for p in [Path(dirpath), *(Path(dirpath) / n for n in filenames)]:
                st = p.lstat()
                if stat.S_ISLNK(st.st_mode):
                    continue
                want = stat.S_IROTH
                if stat.S_ISDIR(st.st_mode) or st.st_mode & stat.S_IXUSR:
                    want |= stat.S_IXOTH
                if st.st_mode & want != want:
                    p.chmod(stat.S_IMODE(st.st_mode) | want)
