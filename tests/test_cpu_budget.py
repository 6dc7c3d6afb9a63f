"""The CPUs a process may use: the affinity mask cut to the cgroup CPU quota, read from cgroup
folders written as the kernel writes them (v1 and v2 files, ``/proc/self``'s ``cgroup`` and
``mountinfo``), and from the real process with its affinity narrowed in a child."""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path

from poolrag.cpu_budget import affinity_cpus, cgroup_dirs, cpu_quota, usable_cpus
from poolrag.worker_threads import worker_threads


def write(folder: Path, **files: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name.replace("_", ".", 1)).write_text(text + "\n")
    return folder


def v1_quota(folder: Path, quota: int, period: int = 100000) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "cpu.cfs_quota_us").write_text(f"{quota}\n")
    (folder / "cpu.cfs_period_us").write_text(f"{period}\n")
    return folder


def proc_self(tmp_path: Path, cgroup: str, mountinfo: str) -> Path:
    """A ``/proc/self`` folder of the two files the reader takes, in the kernel's formats."""
    return write(tmp_path / "proc_self", cgroup=cgroup, mountinfo=mountinfo)


def test_a_v2_quota_is_read_in_cpus_and_max_is_no_limit(tmp_path: Path) -> None:
    assert cpu_quota([write(tmp_path / "a", cpu_max="150000 100000")]) == 1.5
    assert cpu_quota([write(tmp_path / "b", cpu_max="max 100000")]) is None
    assert cpu_quota([tmp_path / "no-cpu-files"]) is None
    assert cpu_quota([write(tmp_path / "c", cpu_max="garbage")]) is None


def test_a_v1_quota_is_read_and_minus_one_is_no_limit(tmp_path: Path) -> None:
    assert cpu_quota([v1_quota(tmp_path / "a", 200000)]) == 2.0
    assert cpu_quota([v1_quota(tmp_path / "b", 50000, 100000)]) == 0.5
    assert cpu_quota([v1_quota(tmp_path / "c", -1)]) is None


def test_the_tightest_of_the_cgroup_and_its_ancestors_binds(tmp_path: Path) -> None:
    parent = write(tmp_path / "kubepods", cpu_max="200000 100000")
    child = write(parent / "pod", cpu_max="max 100000")
    assert cpu_quota([child, parent]) == 2.0


def test_a_v2_service_in_a_nested_cgroup_finds_its_folder_and_ancestors(tmp_path: Path) -> None:
    root = tmp_path / "sys fs cgroup"  # a space in the mount point, escaped in mountinfo
    service = write(root / "system.slice" / "app.service", cpu_max="max 100000")
    write(root / "system.slice", cpu_max="300000 100000")
    escaped = str(root).replace(" ", "\\040")
    proc = proc_self(
        tmp_path,
        cgroup="0::/system.slice/app.service",
        mountinfo=f"41 31 0:38 / {escaped} rw,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate",
    )
    assert cgroup_dirs("cpu", proc) == [service, root / "system.slice", root]
    assert cpu_quota(cgroup_dirs("cpu", proc)) == 3.0


def test_a_v1_container_sees_its_own_cgroup_mounted_as_the_hierarchy_top(tmp_path: Path) -> None:
    """Docker on cgroup v1 without a cgroup namespace: /proc/self/cgroup names the container's
    cgroup on the host, and the mount's root is that same cgroup."""
    mount = v1_quota(tmp_path / "cpu,cpuacct", 250000)
    proc = proc_self(
        tmp_path,
        cgroup="12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n0::/",
        mountinfo=(
            f"30 25 0:26 /docker/abc {tmp_path}/memory ro - cgroup cgroup rw,memory\n"
            f"32 25 0:28 /docker/abc {mount} ro,nosuid - cgroup cgroup rw,cpu,cpuacct"
        ),
    )
    assert cgroup_dirs("cpu", proc) == [mount]
    assert usable_cpus(proc) == min(affinity_cpus(), 2)  # 2.5 CPUs round down


def test_a_quota_below_one_cpu_leaves_one(tmp_path: Path) -> None:
    root = write(tmp_path / "cgroup", cpu_max="50000 100000")
    proc = proc_self(tmp_path, cgroup="0::/", mountinfo=f"41 31 0:38 / {root} rw - cgroup2 cgroup2 rw")
    assert usable_cpus(proc) == 1


def test_no_cgroup_files_leave_the_affinity_mask(tmp_path: Path) -> None:
    assert usable_cpus(tmp_path / "no-proc") == affinity_cpus()
    proc = proc_self(tmp_path, cgroup="0::/elsewhere", mountinfo="1 0 8:1 / / rw - ext4 /dev/sda1 rw")
    assert cgroup_dirs("cpu", proc) == []


def _narrowed_child(report: multiprocessing.Queue) -> None:
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    report.put((usable_cpus(), worker_threads(1)))


def test_the_real_process_counts_only_the_cpus_of_its_affinity_mask() -> None:
    context = multiprocessing.get_context("spawn")
    report = context.Queue()
    child = context.Process(target=_narrowed_child, args=(report,))
    child.start()
    assert report.get(timeout=60) == (1, 1)
    child.join(60)
    assert child.exitcode == 0
    assert 1 <= usable_cpus() <= affinity_cpus() <= (os.cpu_count() or 1)
