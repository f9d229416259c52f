"""The distribution as a user installs it: a wheel whose only top-level package is `icemv`.

`daemon/` is the source root, not a package: PyPI's `python-daemon` (an Airflow
dependency) is imported as `daemon`, and installing icemv beside it must not clobber it.
"""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    pip_wheel = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"]
    built = subprocess.run(
        [*pip_wheel, "--wheel-dir", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    (path,) = out.glob("icemv-*.whl")
    return path


def test_the_wheel_holds_only_the_icemv_package(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    top = {name.split("/", 1)[0] for name in names if not name.startswith("icemv-")}
    assert top == {"icemv"}, top
    assert "icemv/py.typed" in names
    assert "icemv/refresh/plan.py" in names or "icemv/refresh/policy.py" in names
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "icemv = icemv.cli.main:main" in zipfile.ZipFile(wheel).read(entry_points).decode()


def test_icemv_and_python_daemon_install_side_by_side(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True, timeout=60)
    python = venv / "bin" / "python"
    pip_install = [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps"]
    installed = subprocess.run(
        [*pip_install, "-q", str(wheel), "python-daemon"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert installed.returncode == 0, installed.stdout[-2000:] + installed.stderr[-2000:]
    site = subprocess.check_output(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True
    ).strip()
    # icemv's own dependencies come from this environment; the venv adds only the two.
    (Path(site) / "zz_borrowed_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    probe = (
        "import daemon, icemv, icemv.cli.main, icemv.errors;"
        "from daemon import DaemonContext;"
        "print(daemon.__file__); print(icemv.__file__)"
    )
    out = subprocess.run(
        [python, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    daemon_file, icemv_file = out.stdout.split()
    assert Path(daemon_file).is_relative_to(site), daemon_file
    assert Path(icemv_file).is_relative_to(site), icemv_file
    assert "icemv" not in Path(daemon_file).parts
