"""The error paths of the emulator's program (gpsimd-zygote: leader.c,
zygote.c, zygote_output.c, sandbox_cgroup.c), run against the stand-in
core object (tests/native/fake_core.cpp): a failure is said to the user
(the vector fails with it, the next one runs) and leaves no descriptor in
a process that no longer uses it. What no kernel can make fail is made to
by a shim preloaded into the program (``LD_PRELOAD``): ``openat`` and
``open`` of a file, and ``memfd_create`` of a memfd, whose name ``GPSIMD_TEST_FAIL``
lists, and ``pipe2`` from its ``GPSIMD_TEST_FAIL_PIPE2``-th call on; what a
kernel can (ignore SIGCHLD in the leader) by ops of the stand-in."""
import os
import re
import socket
import subprocess
import threading
import time

import pytest

from fake_core import CXX, compile_fake_core
from gpsimd_device.plan import TestPlan
from gpsimd_emu import abi, control
from gpsimd_emu.client.process import children
from gpsimd_emu.image import DeviceImage
from gpsimd_emu.session import LibrarySession, RunOptions
from gpsimd_emu.zygote_client import ZygoteClient


pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(CXX is None, reason="no C++ compiler")]

SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
/* 1 when GPSIMD_TEST_FAIL (names separated by commas) lists the last part of name */
static int listed(const char *name) {
    const char *list = getenv("GPSIMD_TEST_FAIL"), *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    size_t n = strlen(base);
    for (const char *at = list; at && *at; at = strchr(at, ',') ? strchr(at, ',') + 1 : NULL)
        if (strncmp(at, base, n) == 0 && (at[n] == ',' || at[n] == 0))
            return 1;
    return 0;
}
int openat(int dir, const char *path, int flags, ...) {
    mode_t mode = 0;
    if (flags & (O_CREAT | O_TMPFILE)) {
        va_list ap;
        va_start(ap, flags);
        mode = va_arg(ap, mode_t);
        va_end(ap);
    }
    if (listed(path)) {
        errno = EACCES;
        return -1;
    }
    return ((int (*)(int, const char *, int, ...))dlsym(RTLD_NEXT, "openat"))(dir, path, flags,
                                                                            mode);
}
int open(const char *path, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    mode_t mode = flags & (O_CREAT | O_TMPFILE) ? va_arg(ap, mode_t) : 0;
    va_end(ap);
    return openat(AT_FDCWD, path, flags, mode);
}
int pipe2(int fds[2], int flags) {
    static int calls;                  /* (of this process, and of those it forked) */
    const char *from = getenv("GPSIMD_TEST_FAIL_PIPE2");
    if (from && ++calls >= atoi(from)) {
        errno = EMFILE;
        return -1;
    }
    return ((int (*)(int *, int))dlsym(RTLD_NEXT, "pipe2"))(fds, flags);
}
int memfd_create(const char *name, unsigned flags) {
    if (listed(name)) {
        errno = EMFILE;
        return -1;
    }
    return ((int (*)(const char *, unsigned))dlsym(RTLD_NEXT, "memfd_create"))(name, flags);
}
"""

REFERENCE = "import numpy as np\ndef relu(x):\n    return np.maximum(x, np.float32(0))\n"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The stand-in object (its op ``hello`` also writing to stdout, and
    listing the descriptors it can reach) and the shim."""
    d = tmp_path_factory.mktemp("program_errors")
    so, shim = d / "fake.so", d / "fail.so"
    compile_fake_core(so, None, "-DHELLO_ON_STDOUT", "-DLIST_FDS")
    (d / "fail.c").write_text(SHIM)
    subprocess.run(["gcc", "-shared", "-fPIC", "-Wall", "-Werror", "-o", str(shim),
                    str(d / "fail.c"), "-ldl"], check=True)
    return so, shim


def session(tmp_path, so, zygote_program, monkeypatch, ops=("relu", "hello"), timeout=10,
            **env):
    """A session of the ``ops`` (default ``relu`` and ``hello``; vectors
    ``a`` and ``b``), ``timeout`` seconds a run, its program started with
    the variables ``env`` (None: left out), and the shim when one of them
    is its own."""
    (tmp_path / "ref.py").write_text(REFERENCE)
    vectors = [{"name": name, "where": "ops.yaml:1:3", "inputs": {"x": {
        "kind": "tensor", "dtype": "float32", "shape": [4],
        "random": {"seed": 7, "distribution": "normal"}}},
        "output": {"dtype": "float32", "shape": None},
        "expected": {"reference": {"file": "ref.py", "function": "relu"}},
        "rtol": 1e-6, "atol": 1e-5} for name in ("a", "b")]
    plan = {"format": 1, "library": "fake", "multicore": False, "cores": [
        {"core": None, "lsp": "lsp_fll_load_cpu_single", "object": str(so[0])}],
        "ops": [{"name": name, "schema": f"my_ops::{name}(Tensor x) -> Tensor",
                 "args": [{"name": "x", "type": "Tensor"}], "stack_size": 4196,
                 "vectors": vectors} for name in ops]}
    with monkeypatch.context() as m:
        for name, value in env.items():
            if value is not None:
                m.setenv(name, value)
                if name.startswith("GPSIMD_TEST_FAIL"):
                    m.setenv("LD_PRELOAD", str(so[1]))
        return LibrarySession(TestPlan.from_json(plan), root=str(tmp_path),
                              options=RunOptions(zygote=zygote_program, timeout=timeout))


def descriptors(s: LibrarySession) -> dict:
    """{"relay": [...], "zygote": [...]}: what each of the program's two
    processes' descriptors lead to (``/proc/PID/fd``)."""
    relay = s.zygote.pid
    out = {}
    for name, pid in (("relay", relay), ("zygote", children(relay)[0])):
        out[name] = []
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                out[name].append(os.readlink(f"/proc/{pid}/fd/{fd}"))
            except FileNotFoundError:
                pass
    return out


def test_an_image_that_cannot_be_mapped_says_why(built, tmp_path, zygote_program, monkeypatch):
    """The zygote maps the image, whose control block is where a model
    error is recorded, before it forks the leader: when the map fails
    (here a size no address space holds) no block is there yet, and the
    zygote's reply says why; the next vector runs."""
    request, sizes = DeviceImage.request, [1 << 56]
    monkeypatch.setattr(DeviceImage, "request",
                        lambda image: dict(request(image), **(
                            {"size": sizes.pop()} if sizes else {})))
    with session(tmp_path, built, zygote_program, monkeypatch) as s:
        first, second = s.run_vector("relu", "a"), s.run_vector("relu", "b")
    assert (first.status, first.message) == (
        "fail", "the device model process failed: cannot map the device image of op relu "
        f"({1 << 56} bytes): Cannot allocate memory")
    assert (second.status, second.message) == ("pass", "")


def test_what_the_cores_wrote_that_cannot_be_kept_fails_the_vector(built, tmp_path,
                                                                    zygote_program, monkeypatch):
    """The reply's output entries come with a memfd of their bytes: when
    it cannot be made the vector fails saying so (the entries once came
    without their bytes, and a later stream's bytes in the memfd read as
    an earlier one's); a vector whose cores write nothing needs none."""
    with session(tmp_path, built, zygote_program, monkeypatch,
                 GPSIMD_TEST_FAIL="gpsimd-output") as s:
        hello, relu = s.run_vector("hello", "a"), s.run_vector("relu", "a")
    assert (hello.status, hello.message, hello.output) == (
        "fail", "the device model process failed: cannot keep what the cores wrote in a "
        "memfd: Too many open files", [])
    assert (relu.status, relu.message) == ("pass", "")


@pytest.mark.parametrize("given_up, fail, contain", [
    ("at its first limit", "memory.limit_in_bytes,memory.max", None),
    ("when it cannot be joined", "tasks,cgroup.procs", None),
    ("when it cannot be hidden", None, "userns")])
def test_a_memory_cgroup_given_up_leaves_no_descriptor(built, tmp_path, zygote_program,
                                                       monkeypatch, given_up, fail, contain):
    """The memory cgroup is given up when its first limit cannot be
    written, when the zygote cannot join it, or when it cannot be hidden
    from the kernels (a user namespace, whose mounts are locked): the
    zygote then holds no descriptor of it (nor the relay, when there is
    no cgroup left to remove), and the vectors run under RLIMIT_DATA."""
    with session(tmp_path, built, zygote_program, monkeypatch, GPSIMD_TEST_FAIL=fail,
                 GPSIMD_EMU_CONTAIN=contain) as s:
        assert s.run_vector("relu", "a").status == "pass"
        assert not s.ready()["cgroup"]
        held = {name: [link for link in links if "/gpsimd-emu-" in link]
                for name, links in descriptors(s).items()}
    assert held["zygote"] == []
    if given_up == "at its first limit":
        assert held["relay"] == []


@pytest.mark.parametrize("define, contain", [
    ("-DFORK_AT_LOAD", None), ("-DFORK_AT_LOAD", "pgroup"), ("-DTIMER_AT_LOAD", None)])
def test_nothing_a_core_object_starts_as_it_loads_runs_beside_a_vector(
        tmp_path_factory, tmp_path, zygote_program, monkeypatch, define, contain):
    """A process that a static initialiser forks (FORK_AT_LOAD: one per
    copy of the object, each waiting for ever) holds what the zygote held
    then, its socket to the worker among it, and would run beside the
    vectors: the zygote ends every such process once the copies are
    loaded, before it reads a vector. A signal handler it set, which a
    timer of its own runs in the zygote (TIMER_AT_LOAD: the handler forks
    such a process every 20 ms), is set back to the default then. While
    the first vector's leader runs (``hang``, until its time limit), it is
    the zygote's only child, in a PID namespace or not."""
    so = tmp_path_factory.mktemp("at_load") / "at_load.so"
    compile_fake_core(so, None, define)

    def names(pids):
        out = []
        for pid in pids:
            try:
                with open(f"/proc/{pid}/comm") as f:
                    out.append(f.read().strip())
            except OSError:
                pass
        return sorted(out)
    with session(tmp_path, (so, None), zygote_program, monkeypatch, ops=("hang",),
                 timeout=1, GPSIMD_EMU_CONTAIN=contain) as s:
        s.ready()
        zygote = children(s.zygote.pid)[0]
        results = []
        run = threading.Thread(target=lambda: results.append(s.run_vector("hang", "a")))
        run.start()
        deadline, during = time.monotonic() + 60, set()
        try:
            while "gpsimd-vector" not in names(children(zygote)):
                assert run.is_alive() and time.monotonic() < deadline, results
                time.sleep(0.002)       # (no event tells a process's start to another)
            while run.is_alive():       # (until the leader's time limit, 1 s)
                during.update(names(children(zygote)))
                time.sleep(0.002)
        finally:
            run.join()
    assert during == {"gpsimd-vector"}
    assert results[0].status == "fail" and "timed out" in results[0].message, results[0].message


def test_a_core_object_that_forks_and_goes_on_in_its_child_does_not_load(
        tmp_path_factory, tmp_path, zygote_program, monkeypatch):
    """A static initialiser that forks, stops the loading process (the
    zygote, PID 1 of its namespace, out of reach of every sweep) and goes
    on in its child (SWAP_AT_LOAD) had the child serve every vector, which
    passed: the child ends, and the vectors fail."""
    so = tmp_path_factory.mktemp("swap_at_load") / "swap.so"
    compile_fake_core(so, None, "-DSWAP_AT_LOAD")
    with session(tmp_path, (so, None), zygote_program, monkeypatch, timeout=1) as s:
        relu = s.run_vector("relu", "a")
    assert relu.status == "fail" and relu.message.startswith(
        "the core objects could not be loaded: the device model process "), relu.message


def test_the_zygote_keeps_no_descriptor_of_what_it_handed_over(built, tmp_path, zygote_program,
                                                               monkeypatch):
    """The load output's memfd goes to the worker with the ready message;
    the zygote keeps none of it (nor, once it has replied, of a vector's
    image: it closes that one just after its reply)."""
    with session(tmp_path, built, zygote_program, monkeypatch) as s:
        assert s.run_vector("hello", "a").status == "pass"
        for _ in range(100):
            held = [link for link in descriptors(s)["zygote"]
                    if "gpsimd-load-output" in link or "gpsimd-image" in link]
            if not held:
                break
            time.sleep(0.01)
    assert held == []


def test_a_stream_whose_pipe_cannot_be_made_leaves_the_kernel_nothing_of_the_zygotes(
        built, tmp_path, zygote_program, monkeypatch):
    """The leader moves each core's pipes to fds 3.. and closes every fd
    above them: a stream whose pipe could not be made (pipe2 fails from
    the zygote's second one on: the core's stderr) is /dev/null there,
    not whatever the zygote had at that number (its socket to the worker,
    its cgroup's folder, the relay's pipes)."""
    with session(tmp_path, built, zygote_program, monkeypatch, GPSIMD_TEST_FAIL_PIPE2="4") as s:
        hello = s.run_vector("hello", "a")
    assert hello.status == "pass", hello.message
    assert [o["text"] for o in hello.output] == [
        "hello from core 0\nfd 3: pipe\nfd 4: /dev/null\nfd 5: /dev/null\n"]


def test_a_copy_of_the_objects_that_does_not_load_says_why(built, tmp_path, zygote_program,
                                                          monkeypatch):
    """The copies past the first load after the ready message, each from a
    memfd of its own: when that memfd cannot be made the vectors that
    launch that copy fail saying why (not only that it did not load)."""
    with session(tmp_path, built, zygote_program, monkeypatch, GPSIMD_TEST_FAIL="fake.so") as s:
        relu = s.run_vector("relu", "a")
    assert (relu.status, relu.message) == (
        "fail", "the device model process failed: copy 1 of core object 0 has no op relu (it "
        "did not load again: memfd_create: Too many open files)")


@pytest.fixture(scope="module")
def multicore(tmp_path_factory):
    """The stand-in object of each of the eight cores, with its ops that
    reach into the leader (HOSTILE_OPS)."""
    d = tmp_path_factory.mktemp("program_errors_cores")
    jobs = [compile_fake_core(d / f"fake_cpu{i}.so", i, "-DHOSTILE_OPS", wait=False)
            for i in range(8)]
    assert [job.wait() for job in jobs] == [0] * 8
    return [d / f"fake_cpu{i}.so" for i in range(8)]


def spread(tmp_path, cores, zygote_program, ops):
    """A session of a multicore library of ``ops`` (vector ``a`` each, the
    reference relu), each run spread at once over eight processes."""
    (tmp_path / "ref.py").write_text(REFERENCE)
    vector = {"name": "a", "where": "ops.yaml:1:3", "inputs": {"x": {
        "kind": "tensor", "dtype": "float32", "shape": [64],
        "random": {"seed": 7, "distribution": "normal"}}},
        "output": {"dtype": "float32", "shape": None},
        "expected": {"reference": {"file": "ref.py", "function": "relu"}},
        "rtol": 1e-6, "atol": 1e-5}
    plan = {"format": 1, "library": "fake", "multicore": True, "cores": [
        {"core": i, "lsp": abi.lsp_name(i), "object": str(so)} for i, so in enumerate(cores)],
        "ops": [{"name": name, "schema": f"my_ops::{name}(Tensor x) -> Tensor",
                 "args": [{"name": "x", "type": "Tensor"}], "stack_size": 4196,
                 "vectors": [vector]} for name in ops]}
    return LibrarySession(TestPlan.from_json(plan), root=str(tmp_path), options=RunOptions(
        zygote=zygote_program, timeout=10, parallel=8, spread_after=0.0))


def test_a_kernel_that_ignores_sigchld_leaves_a_helpers_crash_a_crash(multicore, tmp_path,
                                                                       zygote_program):
    """A kernel runs in the leader: one that ignores SIGCHLD there has the
    kernel of Linux reap the leader's helpers, whose wait statuses are then
    lost. The leader sets SIGCHLD back after each launch, so a core that
    crashes in a helper forked after it is still said to crash (in the
    first run, or a later one when core 7 of the first ran in the leader;
    it read as an exit 0)."""
    with spread(tmp_path, multicore, zygote_program, ["nochld_crash", "relu"]) as s:
        crash, relu = s.run_vector("nochld_crash", "a"), s.run_vector("relu", "a")
    assert crash.status == "fail" and re.fullmatch(r"core 7 crashed with SIGSEGV( \(.*\))?",
                                                   crash.message), crash.message
    assert (relu.status, relu.message) == ("pass", "")


def test_a_helper_whose_end_the_leader_cannot_learn_fails_the_vector(multicore, tmp_path,
                                                                     zygote_program):
    """A kernel that waits for the leader's children itself takes their
    wait statuses: the leader, whose wait then fails, does not read that as
    a normal end (a helper that crashed between two launches would pass);
    the vector fails naming the cores that process ran (none: a helper
    started late on a loaded machine may find every core claimed)."""
    with spread(tmp_path, multicore, zygote_program, ["reap", "relu"]) as s:
        reap, relu = s.run_vector("reap", "a"), s.run_vector("relu", "a")
    assert reap.status == "fail" and re.fullmatch(
        r"the helper process( that ran cores? [-0-9, ]+)?( \(.*\))? ended, and how is not known: a "
        r"kernel waited for the model.s processes itself, or had them reaped \(SIGCHLD ignored\), "
        r"so their wait status was lost", reap.message), reap.message
    assert (relu.status, relu.message) == ("pass", "")


def _half_a_message(client, cores):
    """The objects' message without its descriptors."""
    socket.send_fds(client.sock, [b"".join(os.fsencode(c.path) + b"\0" for c in cores)], [])


@pytest.mark.parametrize("fail, said", [
    (dict(GPSIMD_TEST_FAIL_PIPE2="1"),
     "gpsimd-zygote: cannot start the sandbox's relay: Too many open files"),
    (dict(GPSIMD_TEST_FAIL="gpsimd-ready"),
     "gpsimd-zygote: cannot make the ready message: Too many open files"),
    ({}, "gpsimd-zygote: no whole message of 1 core objects"),
    (dict(GPSIMD_TEST_FAIL="null"), "gpsimd-zygote: cannot open /dev/null: Permission denied")])
def test_what_the_program_says_before_it_is_ready_reaches_the_user(
        built, tmp_path, zygote_program, monkeypatch, fail, said):
    """What the program says before its ready message went to the load
    output's memfd, which only that message sends: its relay that cannot
    be made (pipe2 fails), a ready message that cannot be (its memfd), an
    objects' message that is not whole (no descriptors) ended it with
    'exited with status N (a static initialiser of a core object?)'; and
    the vector's failure names no culprit the program did not name. A
    relay that cannot be made left the memory cgroup on disk. Without
    /dev/null the program ran on, and a stream without a pipe, or the
    later copies' output without a memfd of its own, stayed on whatever
    the zygote had at that fd."""
    if not fail:
        monkeypatch.setattr(ZygoteClient, "load", _half_a_message)
    started, start = [], ZygoteClient.__init__

    def recorded(client, *args, **kwargs):
        start(client, *args, **kwargs)
        started.append(client.pid)
    monkeypatch.setattr(ZygoteClient, "__init__", recorded)
    with session(tmp_path, built, zygote_program, monkeypatch, **fail) as s:
        relu = s.run_vector("relu", "a")
    assert (relu.status, relu.message) == (
        "fail", f"the device model process ended before it was ready: {said}")
    # (and the memory cgroup it made is gone, with or without its relay)
    assert len(started) == 1
    assert not os.path.exists(f"{_cgroup_parent().rstrip('/')}/gpsimd-emu-{started[0]}")


def test_the_later_copies_write_nowhere_near_the_load_output_handed_over(
        built, tmp_path, zygote_program, monkeypatch):
    """What the copies past the first write while they load goes to a memfd
    of its own; when that memfd cannot be made, to /dev/null: not to the
    load output's, which the worker has (fds 1 and 2 stayed on it)."""
    with session(tmp_path, built, zygote_program, monkeypatch,
                 GPSIMD_TEST_FAIL="gpsimd-load-rest") as s:
        assert s.run_vector("relu", "a").status == "pass"
        held = [link for link in descriptors(s)["zygote"] if "gpsimd-load-output" in link]
    assert held == []


def _cgroup_parent() -> str:
    """The folder the program makes its memory cgroup in (v1's, else v2's)."""
    with open("/proc/self/cgroup") as f:
        lines = [line.rstrip("\n").split(":", 2) for line in f]
    v1 = [path for _, names, path in lines if "memory" in names.split(",")]
    return f"/sys/fs/cgroup/memory{v1[0]}" if v1 else \
        f"/sys/fs/cgroup{[path for n, _, path in lines if n == '0'][0]}"


def test_the_cgroup_is_removed_when_its_parent_folder_could_not_be_opened(
        built, tmp_path, zygote_program, monkeypatch):
    """The relay removes the cgroup through a descriptor of its parent
    folder (the path may be hidden from it); when that folder could not be
    opened, it called unlinkat(-1, ...) and the cgroup stayed."""
    parent = _cgroup_parent().rstrip("/")
    if not os.path.basename(parent):
        pytest.skip("the memory cgroup's parent is the root")
    with session(tmp_path, built, zygote_program, monkeypatch,
                 GPSIMD_TEST_FAIL=os.path.basename(parent)) as s:
        assert s.run_vector("relu", "a").status == "pass"
        if not s.ready()["cgroup"]:
            pytest.skip("no memory cgroup here")
        cgroup = f"{parent}/gpsimd-emu-{s.zygote.pid}"
        assert os.path.isdir(cgroup)
    assert not os.path.exists(cgroup)


def test_a_helper_that_ends_between_two_launches_fails_the_vector(multicore, tmp_path,
                                                                  zygote_program):
    """A whole run's helper whose process a kernel's thread ends (exit
    status 0) between two launches left its run unfinished, which the
    judge took for the run that stopped the vector: the vector passed,
    that run and those after it never judged."""
    with spread(tmp_path, multicore, zygote_program, ["quit_between", "relu"]) as s:
        quit, relu = s.run_vector("quit_between", "a"), s.run_vector("relu", "a")
    assert quit.status == "fail" and re.fullmatch(
        r"the helper process that ran core \d \(second run\) ended \(exit status 0\) before its "
        r"run was done: a kernel ended it between two launches \(a thread of its own\?\)",
        quit.message), quit.message
    assert (relu.status, relu.message) == ("pass", "")


def test_a_first_call_s_crash_is_the_first_call_s_whatever_the_kernel_prints(
        multicore, tmp_path, zygote_program):
    """A crash was taken for the second call's when its text (which ends
    with what the kernel printed) held the second call's label: the first
    call's outputs were then judged, and a vector whose first call crashed
    counted as right on its first call (``second_call_only``), its
    arguments used for the next vector's second call. The judge now says
    which run stopped the vector."""
    with spread(tmp_path, multicore, zygote_program, ["crash_quoting", "relu"]) as s:
        crash, relu = s.run_vector("crash_quoting", "a"), s.run_vector("relu", "a")
    assert crash.status == "fail" and re.fullmatch(
        r"core 0 crashed with SIGSEGV( \(.*\))?; printf ends with: ' \(a second call of the "
        r"op, from the state the first call left\)'", crash.message), crash.message
    assert crash.second_call_only is False
    assert (relu.status, relu.message) == ("pass", "")


@pytest.mark.parametrize("attempt", range(3))
def test_a_run_whose_helper_ends_before_its_second_call_never_passes(multicore, tmp_path,
                                                                      zygote_program, attempt,
                                                                      monkeypatch):
    """A helper of run 0 whose process a kernel's thread ends (exit status
    0) after its first launch of a core, before its second call's launch
    of that core: the leader marked the second call's run done with that
    core never launched, and since only core 0 writes the output, the
    vector passed (found in review, 2 times in 4). The worker now fails a
    done run with a core never launched. (When the thread ends the process
    once its launches are made, the vector passes, rightly; when it ends it
    during one, it fails as a process that ended badly.)"""
    from gpsimd_emu import judge
    records, judge_run = [], judge.judge_run

    def recorded(image, cores, outcome, *args, **kwargs):
        records.append(outcome.record)
        return judge_run(image, cores, outcome, *args, **kwargs)
    monkeypatch.setattr(judge, "judge_run", recorded)
    with spread(tmp_path, multicore, zygote_program, ["quit_second", "relu"]) as s:
        quit, relu = s.run_vector("quit_second", "a"), s.run_vector("relu", "a")
    if quit.status == "pass":
        rec = records[0]
        assert rec is not None and all(
            slot["state"] == control.SLOT_DONE for p, run in enumerate(rec["passes"])
            for slot in rec["slots"][p][:run["ncores"]]), rec
    else:
        assert re.fullmatch(
            r"the vector's processes left no valid record of the run \(run 4 is done, but core "
            r"\d was never launched in it or did not end; a kernel's thread that ended a process "
            r"of the model between two launches\?\): a kernel wrote over the model's memory"
            r"|core \d ended the process \(exit status 0\).*", quit.message), quit.message
    assert (relu.status, relu.message) == ("pass", "")


def test_what_a_kernel_sets_on_its_stdout_does_not_reach_the_next_vector(multicore, tmp_path,
                                                                         zygote_program):
    """The cores' pipes are the zygote's, kept for every vector, and a
    kernel's stdout shares the zygote's end of its pipe: a kernel that made
    it non-blocking and its pipe 4 KiB had the next vector's writes fail
    (EAGAIN), its output and the warning of its size lost. Each vector
    gets the pipes as they were made."""
    ops = ["stdout_flags", "stdout_flags_set"]
    with spread(tmp_path, multicore, zygote_program, ops) as s:
        before = s.run_vector("stdout_flags", "a")
        assert s.run_vector("stdout_flags_set", "a").status == "pass"
        after = s.run_vector("stdout_flags", "a")
    assert before.status == after.status == "pass", (before.message, after.message)
    first = {o["text"] for o in before.output}
    assert len(first) == 1 and first.pop().startswith("stdout: non-blocking 0, pipe ")
    assert [o["text"] for o in after.output] == [o["text"] for o in before.output]


def test_a_kernel_can_make_or_join_no_namespace(multicore, tmp_path, zygote_program):
    """A new user namespace gives back every capability in it (mounts, a
    network of its own): unshare, setns and clone with a CLONE_NEW* flag
    are refused (EACCES), clone3 (whose flags a filter cannot read) is
    ENOSYS, and a thread and a process still start (the C library falls
    back to clone)."""
    with spread(tmp_path, multicore, zygote_program, ["namespaces"]) as s:
        got = s.run_vector("namespaces", "a")
    assert got.status == "pass", got.message
    assert {o["text"] for o in got.output} == {
        "unshare: 13, setns: 13, clone: 13, clone3: 38, thread: 0, fork: 0\n"}


def test_a_kernel_cannot_use_the_kernel_keyring_nor_posix_message_queues(multicore, tmp_path,
                                                                         zygote_program):
    """Without a user namespace (as root) a key is the machine's, in the
    user's keyring, and outlives the build; a POSIX message queue outlives
    its vector (only SysV IPC is cleared between vectors): both are refused
    (EACCES), as sockets are."""
    with spread(tmp_path, multicore, zygote_program, ["keys"]) as s:
        keys = s.run_vector("keys", "a")
    assert keys.status == "pass", keys.message
    assert {o["text"] for o in keys.output} == {"add_key: 13, keyctl: 13, mq_open: 13\n"}
