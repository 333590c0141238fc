"""Process containment helpers (gpsimd_emu.contain): a subreaper sweeps
every descendant, a child dies with its parent. (The vectors' sandbox is
the zygote's: tests/integration/test_emu_sandbox.py.)"""
import os
import subprocess
import sys
import time

from conftest import alive

RUNTIME_MODEL = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "runtime_model")


def test_subreaper_sweep_ends_orphans_that_left_the_process_group(tmp_path):
    """Two orphans of a child that died, in sessions of their own: one
    named as the zygote program (its relay, which removes the memory
    cgroup on SIGTERM) gets SIGTERM and the time to finish; the other,
    which ignores SIGTERM, is killed at once, not after the grace."""
    done = tmp_path / "relay-done"
    code = f"""
import os, signal, sys, time
sys.path.insert(0, {RUNTIME_MODEL!r})
from gpsimd_emu import contain
from gpsimd_device.zygote import PROGRAM_NAME
assert contain.become_subreaper()
r, w = os.pipe()
child = os.fork()
if child == 0:                           # a child that forks two grandchildren and dies
    for relay in (True, False):
        if os.fork() == 0:
            os.setsid()
            if relay:
                contain.set_name(PROGRAM_NAME)
                def clean_up(*_):
                    time.sleep(0.2)          # (removing its cgroup)
                    open({str(done)!r}, "w").close()
                    os._exit(0)
                signal.signal(signal.SIGTERM, clean_up)
            else:
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
            os.write(w, str(os.getpid()).encode() + b" ")
            while True:
                time.sleep(60)
    os._exit(0)
os.waitpid(child, 0)                     # (its orphans are ours once it has ended)
orphans = []
while len(orphans) < 2:
    orphans += os.read(r, 64).split()
orphans = [int(p) for p in orphans]
assert set(orphans) <= set(contain.children(os.getpid())), contain.children(os.getpid())
t0 = time.monotonic()
n = contain.sweep(grace=30)
print(*orphans, n, time.monotonic() - t0, flush=True)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    *orphans, ended, took = out.stdout.split()
    assert int(ended) == 2 and not any(alive(int(p)) for p in orphans)
    assert done.exists()                # the relay finished its clean-up
    assert float(took) < 30, took       # and the other was not given the grace


def test_a_child_dies_with_its_parent():
    code = f"""
import os, sys, time
sys.path.insert(0, {RUNTIME_MODEL!r})
from gpsimd_emu import contain
me = os.getpid()
pid = os.fork()
if pid == 0:
    contain.die_with_parent(me)
    time.sleep(60)
    os._exit(0)
print(pid, flush=True)
time.sleep(60)
"""
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    child = int(p.stdout.readline())
    p.kill()
    p.wait()
    deadline = time.monotonic() + 5
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not alive(child)
