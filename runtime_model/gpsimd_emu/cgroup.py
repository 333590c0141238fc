"""The memory cgroup of a test run's vectors (stdlib only).

``MemoryCgroup``: a child memory cgroup of our own (cgroup v1 ``memory`` or
v2) whose limit is shared by every process of a vector, and whose
``oom_kill`` count tells a memory-limit breach from any other SIGKILL
(ARCHITECTURE.md "Processes and containment"). Where none can be made,
``MemoryCgroup.create`` returns None and ``contain.limit_data``
(``RLIMIT_DATA``) is the limit alone. ``native_zygote.c`` writes the same
files (its ``cg_*`` functions).
"""

from __future__ import annotations

import errno
import os
import time
from typing import Optional

__all__ = ["MemoryCgroup"]


class MemoryCgroup:
    """A child memory cgroup of our own cgroup, for one vector at a time.

    ``create`` returns None where no child cgroup can be made (no
    privileges, no memory controller, cgroup v2 without the controller
    delegated); callers then rely on ``limit_data`` alone.
    """

    def __init__(self, path: str, version: int):
        self.path = path
        self.version = version
        self._limit: Optional[int] = None

    @classmethod
    def create(cls, tag: str = "") -> Optional["MemoryCgroup"]:
        """Make ``gpsimd-emu-<pid><tag>`` under this process's memory cgroup
        (and remove siblings of that name whose process is gone)."""
        try:
            with open("/proc/self/cgroup") as f:
                lines = f.read().splitlines()
        except OSError:
            return None
        v1 = [l.split(":", 2)[2] for l in lines if l.split(":")[1:2] and "memory" in l.split(":")[1].split(",")]
        candidates = []
        if v1:
            candidates.append(("/sys/fs/cgroup/memory" + v1[0], 1))
        v2 = [l.split(":", 2)[2] for l in lines if l.startswith("0::")]
        if v2 and os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
            candidates.append(("/sys/fs/cgroup" + v2[0], 2))
        for base, version in candidates:
            if version == 2:
                try:
                    with open(os.path.join(base, "cgroup.subtree_control")) as f:
                        if "memory" not in f.read().split():
                            continue
                except OSError:
                    continue
            _remove_stale(base)
            path = os.path.join(base, f"gpsimd-emu-{os.getpid()}{tag}")
            try:
                os.mkdir(path)
            except FileExistsError:
                pass
            except OSError:
                continue
            cg = cls(path, version)
            try:
                cg.set_limit(1 << 40)
            except OSError:
                cg.close()
                continue
            return cg
        return None

    def _write(self, name: str, value: str) -> None:
        with open(os.path.join(self.path, name), "w") as f:
            f.write(value)

    def set_limit(self, nbytes: int) -> None:
        """Limit the memory of the processes in the cgroup to ``nbytes``
        (swap included where the kernel accounts it).

        Raises:
            OSError: the limit files cannot be written.
        """
        if nbytes == self._limit:
            return
        if self.version == 1:
            memsw = os.path.join(self.path, "memory.memsw.limit_in_bytes")
            has_memsw = os.path.exists(memsw)
            if has_memsw:
                self._write("memory.memsw.limit_in_bytes", "-1")
            self._write("memory.limit_in_bytes", str(nbytes))
            if has_memsw:
                self._write("memory.memsw.limit_in_bytes", str(nbytes))
        else:
            self._write("memory.max", str(nbytes))
            try:
                self._write("memory.swap.max", "0")
            except OSError:
                pass
        self._limit = nbytes

    def oom_kills(self) -> int:
        """Processes the kernel killed so far for exceeding the limit."""
        name = "memory.oom_control" if self.version == 1 else "memory.events"
        try:
            with open(os.path.join(self.path, name)) as f:
                for line in f:
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def usage(self) -> int:
        """Bytes charged to the cgroup now (0 if it cannot be read)."""
        name = "memory.usage_in_bytes" if self.version == 1 else "memory.current"
        try:
            with open(os.path.join(self.path, name)) as f:
                return int(f.read())
        except (OSError, ValueError):
            return 0

    def procs_path(self) -> str:
        """The file a process writes its pid to, to join the cgroup."""
        return os.path.join(self.path, "cgroup.procs")

    def join(self) -> bool:
        """Move the calling process into the cgroup; False if that failed."""
        try:
            self._write("cgroup.procs", str(os.getpid()))
            return True
        except OSError:
            return False

    def close(self) -> None:
        """Remove the cgroup (its processes must be gone; idempotent)."""
        for _ in range(50):
            try:
                os.rmdir(self.path)
                return
            except FileNotFoundError:
                return
            except OSError as e:
                if e.errno != errno.EBUSY:
                    return
                time.sleep(0.01)


def _remove_stale(base: str) -> None:
    """Remove ``gpsimd-emu-<pid>...`` cgroups under ``base`` whose process
    is gone (a run that was SIGKILLed could not remove its own)."""
    try:
        names = os.listdir(base)
    except OSError:
        return
    for name in names:
        if not name.startswith("gpsimd-emu-"):
            continue
        digits = name[len("gpsimd-emu-"):].split("-")[0]
        if not digits.isdigit() or os.path.exists(f"/proc/{digits}"):
            continue
        try:
            os.rmdir(os.path.join(base, name))
        except OSError:
            pass
