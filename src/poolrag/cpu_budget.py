"""The CPUs this process may use: its affinity mask, cut to its cgroup's CPU quota.

A container's CPU limit (``docker run --cpus 2``, a Kubernetes ``limits.cpu``) is a CFS bandwidth
quota (cgroup v2 ``cpu.max``; v1 ``cpu.cfs_quota_us`` over ``cpu.cfs_period_us``): it throttles
the time the process's threads run and leaves every host core in ``os.cpu_count()`` and in the
affinity mask. torch sizes its intra-op team from the affinity mask (GNU OpenMP's default), so
under ``--cpus 2`` on a 64-core host it runs 64 threads in lockstep: once they spend the period's
quota the whole team is throttled, and each parallel op waits on a thread that cannot run.
(``--cpuset-cpus`` and ``taskset`` narrow the affinity mask itself, which torch already honours.)

The quota is read in the process's own cgroup and in each of its ancestors up to the hierarchy's
mount (a parent's limit binds its children too), found through ``/proc/self/cgroup`` and
``/proc/self/mountinfo``, v1 and v2: a container whose cgroup is its namespace's root and a
service in a nested cgroup of a host are read alike (Ray, for one, reads the mount's top only). A
fraction rounds down, to at least one: one thread more than the quota runs gets the whole lockstep
team throttled (automaxprocs and Rust's ``available_parallelism`` round down too).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable
from pathlib import Path

#: where a process reads its own ``cgroup`` and ``mountinfo`` files
PROC_SELF = Path("/proc/self")


def affinity_cpus() -> int:
    """The CPUs in this process's affinity mask (all of them where the system has no mask)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def usable_cpus(proc_self: Path = PROC_SELF) -> int:
    """The affinity mask's CPUs, cut to the CPU quota of the process's cgroups (at least one)."""
    cpus = affinity_cpus()
    quota = cpu_quota(cgroup_dirs("cpu", proc_self))
    if quota is not None:
        cpus = min(cpus, max(1, math.floor(quota)))
    return cpus


def cpu_quota(dirs: Iterable[Path]) -> float | None:
    """The tightest CPU quota, in CPUs, of these cgroup folders (``None``: none is limited)."""
    quotas = [quota for folder in dirs if (quota := _folder_quota(folder)) is not None]
    return min(quotas, default=None)


def _folder_quota(folder: Path) -> float | None:
    try:
        if (folder / "cpu.max").is_file():  # v2: "max 100000" or "200000 100000"
            quota, _, period = (folder / "cpu.max").read_text().strip().partition(" ")
        elif (folder / "cpu.cfs_quota_us").is_file():  # v1: -1 when unlimited
            quota = (folder / "cpu.cfs_quota_us").read_text().strip()
            period = (folder / "cpu.cfs_period_us").read_text().strip()
        else:
            return None
        if quota == "max" or int(quota) <= 0 or int(period) <= 0:
            return None
        return int(quota) / int(period)
    except (OSError, ValueError):  # unreadable, or a format this reader does not know: no limit seen
        return None


def cgroup_dirs(controller: str, proc_self: Path = PROC_SELF) -> list[Path]:
    """The folders of this process's cgroup and of its ancestors up to their mount, innermost
    first, in the v1 hierarchy that holds ``controller`` and in the v2 one (where mounted)."""
    try:
        memberships = (proc_self / "cgroup").read_text().splitlines()
        mounts = (proc_self / "mountinfo").read_text().splitlines()
    except OSError:  # not Linux, or no /proc
        return []
    found: list[Path] = []
    for line in memberships:  # "ID:controllers:path"; v2's line is "0::path"
        _id, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        v2 = not controllers
        if not v2 and controller not in controllers.split(","):
            continue
        for mount_root, mount_point in _mounts(mounts, None if v2 else controller):
            relative = _under(path, mount_root)
            if relative is None:
                continue
            folder = mount_point.joinpath(*relative)
            while True:
                found.append(folder)
                if folder == mount_point:
                    break
                folder = folder.parent
    return found


def _mounts(mountinfo: list[str], controller: str | None) -> list[tuple[str, Path]]:
    """(root, mount point) of each cgroup mount: v2's (``controller`` ``None``) or the v1 mount
    holding ``controller``."""
    found = []
    for line in mountinfo:  # "ID PARENT MAJ:MIN ROOT POINT OPTIONS [TAGS] - TYPE SOURCE SUPER"
        fields, _, tail = line.partition(" - ")
        parts, kind = fields.split(), tail.split()
        if len(parts) < 5 or len(kind) < 3:
            continue
        wanted = kind[0] == "cgroup2" if controller is None else kind[0] == "cgroup"
        if wanted and (controller is None or controller in kind[2].split(",")):
            found.append((_unescape(parts[3]), Path(_unescape(parts[4]))))
    return found


def _under(path: str, root: str) -> list[str] | None:
    """``path``'s parts below ``root`` (both cgroup paths), or ``None`` when it is not below it."""
    parts = [part for part in path.split("/") if part]
    root_parts = [part for part in root.split("/") if part]
    if parts[: len(root_parts)] != root_parts:
        return None
    return parts[len(root_parts) :]


def _unescape(field: str) -> str:
    """mountinfo writes a space, tab, newline and backslash in a path as an octal escape."""
    return re.sub(r"\\([0-7]{3})", lambda match: chr(int(match.group(1), 8)), field)
