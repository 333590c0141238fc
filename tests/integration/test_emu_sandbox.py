"""A kernel sees only its vector (the zygote's sandbox, ``sandbox.c``): it
cannot write to the source tree or to another library's results, see
the machine's SysV IPC objects or those of an earlier vector, reach
a listening abstract Unix socket or a TCP port on the machine, remount the
file system, enter another namespace, keep a capability or open the
zygote's descriptors (``/proc/PID/fd``, ``pidfd_getfd``); its working
directory is private and empty for each vector; its static initialisers,
which run in the zygote, can do no more; and what it writes to
stdout and stderr is bounded (the build log stays small, the results keep
the first and last 32 KiB and say how much was written).

Each probe is a value of the kernel's output (1: contained), so the
vector passes only when every probe held; the test then checks the victim
files' bytes itself. Run as the machine allows: root gets the PID,
network and mount namespaces; the header of an uncontained run says what
is missing (tested with ``GPSIMD_EMU_CONTAIN=pgroup``).
"""
import ctypes
import json
import os
import socket
import subprocess
import sys

import pytest

from conftest import copy_built, run_scons
from gpsimd_emu import control

PROBES = r"""
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <signal.h>
#include <torch/torch.h>
#include <neuron/neuron-utils.hpp>

#include <sys/syscall.h>

// a static initialiser runs in the zygote as it loads the object: it tries
// to make the file system writable again (mount_setattr(2), clearing
// MOUNT_ATTR_RDONLY), to write into the source tree, and to make the
// load output it writes to a terabyte long
struct MountAttr { uint64_t set, clr, propagation, userns_fd; };
static int ctor_tries = [] {
    MountAttr rw = {0, 1, 0, 0};
    syscall(442, -1, "/", 0x8000, &rw, sizeof rw);
    FILE* f = fopen(PROJECT "/kernels/PWNED_by_a_static_initialiser.txt", "w");
    if (f) fclose(f);
    return ftruncate(1, (off_t)1 << 40);
}();

namespace {
int blocked_fopen(const char* path) {
    FILE* f = fopen(path, "w");
    if (f == nullptr) return 1;
    fputs("written by a kernel\n", f);
    fclose(f);
    return 0;
}
int blocked_abstract() {
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    if (s < 0) return 1;
    struct sockaddr_un a = {};
    a.sun_family = AF_UNIX;
    memcpy(a.sun_path + 1, ABSTRACT, sizeof ABSTRACT - 1);
    int rc = connect(s, (struct sockaddr*)&a, offsetof(struct sockaddr_un, sun_path) + sizeof ABSTRACT);
    close(s);
    return rc != 0;
}
int blocked_pair() {           // a datagram pair could connect to a path
    int sv[2];
    return socketpair(AF_UNIX, SOCK_DGRAM, 0, sv) != 0;
}
int blocked_tcp() {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0) return 1;
    struct sockaddr_in a = {};
    a.sin_family = AF_INET;
    a.sin_port = htons(PORT);
    a.sin_addr.s_addr = htonl(0x7f000001);
    int rc = connect(s, (struct sockaddr*)&a, sizeof a);
    close(s);
    return rc != 0;
}
int no_capabilities() {
    FILE* f = fopen("/proc/self/status", "r");
    char line[256];
    int none = 0;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "CapEff:", 7) == 0) none = strtoull(line + 7, nullptr, 16) == 0;
    if (f) fclose(f);
    return none;
}
// the working directory's tree as it was made: /tmp holds run0..run5 and
// nothing else, the folders of the runs a single-core vector does not make
// (run3, run4, run5; its runs are the first, the second and the second
// call) are empty
int pristine_tmp() {
    int n = 0, others = 0;
    DIR* d = opendir("/tmp");
    for (struct dirent* e; d && (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            (strncmp(e->d_name, "run", 3) == 0 && strlen(e->d_name) == 4 ? n : others)++;
    if (d) closedir(d);
    for (const char* run : {"/tmp/run3", "/tmp/run4", "/tmp/run5"}) {
        DIR* r = opendir(run);
        for (struct dirent* e; r && (e = readdir(r));)
            others += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
        if (r) closedir(r);
        else others++;
    }
    return n == 6 && others == 0;
}
int empty_cwd() {
    DIR* d = opendir(".");
    int n = 0;
    for (struct dirent* e; d && (e = readdir(d));)
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    if (d) closedir(d);
    return d != nullptr && n == 0;
}
}  // namespace

torch::Tensor probe(const torch::Tensor& x) {
    torch::Tensor out = get_dst_tensor();
    float r[8];
    r[0] = empty_cwd() && pristine_tmp();    // before it writes there
    r[1] = blocked_fopen(PROJECT "/kernels/PWNED_by_kernel.txt");
    r[2] = blocked_fopen(PROJECT "/build/host/relu/test-results.json");
    r[3] = blocked_abstract();
    r[4] = blocked_tcp() && blocked_pair();
    r[5] = mount(nullptr, "/", nullptr, MS_REMOUNT | MS_BIND, nullptr) != 0;
    int ns = open("/proc/1/ns/mnt", O_RDONLY);
    r[6] = no_capabilities() && (ns < 0 || setns(ns, 0) != 0);
    r[7] = !blocked_fopen("scratch.txt");    // its own directory is writable
    float* buf = (float*)torch::neuron::tcm_malloc(sizeof r);
    for (int i = 0; i < 8; i++) buf[i] = r[i] + 0.0f * x.numel();
    out.tcm_accessor().tcm_to_tensor<float>(buf, 0, 8);
    torch::neuron::tcm_free(buf);
    return out;
}

// the zygote's descriptors (the cgroup's limit, its socket to the worker)
// through /proc/PID/fd and pidfd_getfd(2): none opens
torch::Tensor zygote_fds(const torch::Tensor& x) {
    const pid_t zygote = getppid();
    char path[64];
    int reached = 0;
    const int pidfd = (int)syscall(SYS_pidfd_open, zygote, 0);
    for (int fd = 0; fd < 64; fd++) {
        snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)zygote, fd);
        const int f = open(path, O_RDONLY);
        const int g = pidfd >= 0 ? (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0) : -1;
        reached += (f >= 0) + (g >= 0);
        if (f >= 0) close(f);
        if (g >= 0) close(g);
    }
    return torch::mul(x, reached == 0 && pidfd >= 0 ? 1.0f : 0.0f);
}

// leaves the working directory's tree changed but with as many inodes as
// it had: a folder removed, a file made
torch::Tensor scramble(const torch::Tensor& x) {
    rmdir("/tmp/run3");
    FILE* f = fopen("/tmp/run2/left_behind", "w");
    if (f) fclose(f);
    return torch::mul(x, 2.0f);
}

// a SysV segment of the machine's (the test made it) is not there; one this
// vector makes stays behind it, for the next vector to look for
float ipc_alone(int leave) {
    int host = shmget(HOST_KEY, 0, 0) < 0;
    int mine = leave ? shmget(HOST_KEY + 1, 4096, IPC_CREAT | 0600) >= 0
                     : shmget(HOST_KEY + 1, 0, 0) < 0;
    return host && mine;
}
torch::Tensor ipc_leave(const torch::Tensor& x) { return torch::mul(x, ipc_alone(1)); }
torch::Tensor ipc_look(const torch::Tensor& x) { return torch::mul(x, ipc_alone(0)); }

// a fork bomb of 3,000 processes ends well before (they wait to be swept)
torch::Tensor forks(const torch::Tensor& x) {
    int n = 0;
    for (; n < 3000; n++) {
        pid_t p = fork();
        if (p == 0) { pause(); _exit(0); }
        if (p < 0) break;
    }
    return torch::mul(x, n < MAX_PIDS ? 1.0f : 0.0f);
}

// 1 GiB to stdout and to stderr, with a line at each end of each
torch::Tensor flood(const torch::Tensor& x) {
    static char block[1 << 20];
    memset(block, 'x', sizeof block);
    for (int fd = 1; fd <= 2; fd++) {
        dprintf(fd, "first line of fd %d\n", fd);
        for (int i = 0; i < 1024; i++)
            if (write(fd, block, sizeof block) != (ssize_t)sizeof block) break;
        dprintf(fd, "\nlast line of fd %d\n", fd);
    }
    return torch::mul(x, 2.0f);
}
"""


def _vector(name, n, expected):
    return {"name": name, "inputs": {"x": {"dtype": "float32", "shape": [n], "values": [1] * n}},
            "expected": {"values": expected}}


@pytest.fixture(scope="module")
def sandboxed(built_project, tmp_path_factory):
    """(project copy, an abstract socket and a TCP port listening, the
    results of the sandbox library run through scons)."""
    proj = copy_built(built_project[0], tmp_path_factory.mktemp("sandbox") / "proj")
    name = f"gpsimd-test-{os.getpid()}"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind("\0" + name)
    listener.listen(8)
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(8)
    (proj / "probe").mkdir(exist_ok=True)
    libc = ctypes.CDLL(None, use_errno=True)
    key = 0x5A000000 | (os.getpid() & 0xFFFF) << 4
    shm = libc.shmget(key, 4096, 0o1000 | 0o600)          # IPC_CREAT: the machine's own
    assert shm >= 0, os.strerror(ctypes.get_errno())
    (proj / "probe" / "sandbox.cpp").write_text(
        f'#define PROJECT "{proj}"\n#define ABSTRACT "{name}"\n'
        f'#define PORT {tcp.getsockname()[1]}\n#define HOST_KEY {key:#x}\n'
        f'#define MAX_PIDS {control.ZY["MAX_PIDS"]}\n' + PROBES)
    manifest = {"version": 1, "libraries": [{
        "name": "sandbox", "sources": ["probe/sandbox.cpp"],
        "ops": [{"schema": "t::scramble(Tensor x) -> Tensor",
                 "vectors": [_vector("n4", 4, [2] * 4)]},
                {"schema": "t::probe(Tensor x) -> Tensor",
                 "vectors": [_vector("first", 8, [1] * 8), _vector("second", 8, [1] * 8)]},
                {"schema": "t::flood(Tensor x) -> Tensor",
                 "vectors": [_vector("n4", 4, [2] * 4)]},
                {"schema": "t::ipc_leave(Tensor x) -> Tensor",
                 "vectors": [_vector("n4", 4, [1] * 4)]},
                {"schema": "t::ipc_look(Tensor x) -> Tensor",
                 "vectors": [_vector("n4", 4, [1] * 4)]},
                {"schema": "t::forks(Tensor x) -> Tensor",
                 "vectors": [_vector("n4", 4, [1] * 4)]},
                {"schema": "t::zygote_fds(Tensor x) -> Tensor",
                 "vectors": [_vector("n4", 4, [1] * 4)]}]}]}
    (proj / "sandbox.yaml").write_text(json.dumps(manifest))
    victim = (proj / "build/host/relu/test-results.json").read_bytes()
    proc = run_scons(proj, "MANIFEST=sandbox.yaml", "test-sandbox")
    # what the contained run left, seen at once (the uncontained run of a
    # later test writes where the probes' paths, compiled in, point)
    left = {"escaped": sorted(p.name for p in (proj / "kernels").glob("PWNED_*")),
            "victim": (proj / "build/host/relu/test-results.json").read_bytes() == victim,
            "scratch": (proj / "scratch.txt").exists()}
    yield proj, proc, left
    listener.close()
    tcp.close()
    libc.shmctl(shm, 0, None)                              # IPC_RMID


def test_a_kernel_reaches_nothing_outside_its_vector(sandboxed):
    proj, proc, left = sandboxed
    lines = proc.stdout.splitlines()
    assert any(l.startswith("PASS sandbox::probe[first]") for l in lines), proc.stdout
    assert any(l.startswith("PASS sandbox::probe[second]") for l in lines), proc.stdout
    # the machine's SysV IPC is not the kernel's, nor one vector's the next's
    assert any(l.startswith("PASS sandbox::ipc_leave[n4]") for l in lines), proc.stdout
    assert any(l.startswith("PASS sandbox::ipc_look[n4]") for l in lines), proc.stdout
    # nor the zygote's descriptors
    assert any(l.startswith("PASS sandbox::zygote_fds[n4]") for l in lines), proc.stdout
    # a fork bomb is bounded (the namespace's own pid_max: Linux 6.14 and later)
    major, minor = (int(x) for x in os.uname().release.split(".")[:2])
    if (major, minor) >= (6, 14):
        assert any(l.startswith("PASS sandbox::forks[n4]") for l in lines), proc.stdout
    assert left == {"escaped": [], "victim": True, "scratch": False}


def test_what_a_kernel_writes_is_bounded(sandboxed):
    proj, proc, _ = sandboxed
    log = len(proc.stdout) + len(proc.stderr)
    assert log < 1 << 20, log
    res = json.loads((proj / "build/host/sandbox/test-results.json").read_text())
    (flood,) = [v for v in res["vectors"] if v["op"] == "flood"]
    assert flood["status"] == "pass"
    by_stream = {o["stream"]: o for o in flood["output"]}
    for fd, stream in ((1, "stdout"), (2, "stderr")):
        o = by_stream[stream]
        total = len(f"first line of fd {fd}\n") + (1 << 30) + len(f"\nlast line of fd {fd}\n")
        assert (o["core"], o["bytes"]) == (0, total)
        assert o["text"].startswith(f"first line of fd {fd}\nxxx")
        assert o["text"].endswith(f"xxx\nlast line of fd {fd}\n")
        assert f"\n[... {total - (64 << 10)} bytes dropped ...]\n" in o["text"]
        assert f"core 0: wrote 1.0 GiB to {stream} (64 KiB kept)" in flood["warnings"]
    # printed under the line of a vector with warnings, as kept
    assert "[sandbox::flood[n4] core 0 stdout] first line of fd 1" in proc.stderr
    assert "[sandbox::flood[n4] core 0 stderr] last line of fd 2" in proc.stderr
    # the vectors that wrote nothing carry no output
    assert all("output" not in v for v in res["vectors"] if v["op"] == "probe")


def test_an_uncontained_run_says_what_is_missing(sandboxed):
    proj, _, _ = sandboxed
    env = dict(os.environ, GPSIMD_EMU_CONTAIN="pgroup", PYTHONPATH=str(proj / "runtime_model"))
    try:
        proc = subprocess.run([sys.executable, "-m", "gpsimd_emu", "run",
                               "build/host/sandbox/testplan.json", "--results", "r.json"],
                              cwd=str(proj), env=env, capture_output=True, text=True,
                              timeout=120)
    finally:        # (what its uncontained probes wrote: the module's build as it was)
        for path in [*(proj / "kernels").glob("PWNED_*"), proj / "scratch.txt",
                     proj / "r.json"]:
            if path.exists():
                path.unlink()
    assert ("gpsimd_emu: sandbox: the vectors are not contained here: a PID namespace "
            "(the vectors' processes share the machine's view: network, file system, "
            "processes) (Operation not permitted)") in proc.stderr.splitlines(), proc.stderr
    # without the namespaces, the probes that needed them fail, and say so
    assert "FAIL sandbox::probe[first]" in proc.stdout
