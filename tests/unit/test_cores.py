"""config/cores.py: the default of refresh.max_concurrent and refresh.processes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from icemv.config import parse_config
from icemv.config.cores import available_cores, cpu_quota


def _v2(root: Path, text: str) -> Path:
    (root / "cpu.max").write_text(text)
    return root


def _v1(root: Path, quota: str, period: str) -> Path:
    (root / "cpu").mkdir()
    (root / "cpu" / "cpu.cfs_quota_us").write_text(quota)
    (root / "cpu" / "cpu.cfs_period_us").write_text(period)
    return root


def test_cgroup_v2_quota(tmp_path: Path) -> None:
    assert cpu_quota(_v2(tmp_path, "250000 100000\n")) == 2.5


def test_cgroup_v2_without_quota(tmp_path: Path) -> None:
    assert cpu_quota(_v2(tmp_path, "max 100000\n")) is None


def test_cgroup_v1_quota(tmp_path: Path) -> None:
    assert cpu_quota(_v1(tmp_path, "150000\n", "100000\n")) == 1.5
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")
    assert cpu_quota(tmp_path) is None


def test_no_cgroup_files(tmp_path: Path) -> None:
    assert cpu_quota(tmp_path) is None
    assert available_cores(tmp_path) == len(os.sched_getaffinity(0))


def test_a_quota_caps_the_cores_rounded_up(tmp_path: Path) -> None:
    mask = len(os.sched_getaffinity(0))
    assert available_cores(_v2(tmp_path, "50000 100000")) == 1
    assert available_cores(tmp_path) == min(mask, 1)
    (tmp_path / "cpu.max").write_text("150000 100000")
    assert available_cores(tmp_path) == min(mask, 2)
    (tmp_path / "cpu.max").write_text("6400000 100000")
    assert available_cores(tmp_path) == mask


def test_workers_and_concurrency_default_to_the_cores() -> None:
    refresh = parse_config({}).refresh
    assert refresh.processes == available_cores() == refresh.max_concurrent


@pytest.mark.parametrize("processes", [0, 3])
def test_processes_as_configured(processes: int) -> None:
    assert parse_config({"refresh": {"processes": processes}}).refresh.processes == processes
