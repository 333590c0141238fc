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


def test_subreaper_sweep_kills_orphans_that_left_the_process_group():
    code = f"""
import os, sys, time
sys.path.insert(0, {RUNTIME_MODEL!r})
from gpsimd_emu import contain
assert contain.become_subreaper()
r, w = os.pipe()
child = os.fork()
if child == 0:                           # a child that forks a grandchild and dies
    if os.fork() == 0:
        os.setsid()
        os.write(w, str(os.getpid()).encode() + b"\\n")
        time.sleep(60)
        os._exit(0)
    os._exit(0)
grandchild = int(os.read(r, 64))
os.waitpid(child, 0)                     # (its orphan is ours once it has ended)
assert grandchild in contain.children(os.getpid()), contain.children(os.getpid())
print(grandchild, contain.sweep(), flush=True)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    grandchild, killed = map(int, out.stdout.split())
    assert killed >= 1 and not alive(grandchild)


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
