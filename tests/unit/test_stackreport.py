"""Static stack report from GCC's -fcallgraph-info=su call graphs."""
import shutil
import subprocess

import pytest

from gpsimd_build import stackreport as sr

WRAPPER_CI = r'''graph: { title: "wrapper.cpp"
node: { title: "_Z11big_wrapperv" label: "void big_wrapper()\nwrapper.cpp:4:6\n48 bytes (static)" }
edge: { sourcename: "_Z11big_wrapperv" targetname: "_Z3bigRKN2at6TensorE" label: "wrapper.cpp:6:24" }
edge: { sourcename: "_Z11big_wrapperv" targetname: "_Z20customop_next_tensorv" label: "wrapper.cpp:6:24" }
node: { title: "_Z3bigRKN2at6TensorE" label: "at::Tensor big(const at::Tensor&)\nwrapper.cpp:3:12" shape : ellipse }
node: { title: "_Z11rec_wrapperv" label: "void rec_wrapper()\nwrapper.cpp:9:6\n32 bytes (static)" }
edge: { sourcename: "_Z11rec_wrapperv" targetname: "_Z3recRKN2at6TensorE" label: "wrapper.cpp:11:24" }
}
'''
KERNEL_CI = r'''graph: { title: "k.cpp"
node: { title: "_Z3bigRKN2at6TensorE" label: "at::Tensor big(const at::Tensor&)\nk.cpp:3:15\n4112 bytes (static)" }
edge: { sourcename: "_Z3bigRKN2at6TensorE" targetname: "_ZL4leafv" label: "k.cpp:5:3" }
edge: { sourcename: "_Z3bigRKN2at6TensorE" targetname: "memcpy" label: "k.cpp:6:3" }
node: { title: "_ZL4leafv" label: "int leaf()\nk.cpp:1:12\n64 bytes (dynamic,bounded)" }
node: { title: "memcpy" label: "void* memcpy(void*, const void*, size_t)\n<built-in>" shape : ellipse }
node: { title: "_Z3recRKN2at6TensorE" label: "at::Tensor rec(const at::Tensor&)\nk.cpp:9:15\n100 bytes (dynamic)" }
edge: { sourcename: "_Z3recRKN2at6TensorE" targetname: "_Z3recRKN2at6TensorE" label: "k.cpp:10:10" }
edge: { sourcename: "_Z3recRKN2at6TensorE" targetname: "__indirect_call" label: "k.cpp:11:3" }
}
'''
RUNTIME_CI = r'''graph: { title: "runtime.cpp"
node: { title: "_Z20customop_next_tensorv" label: "at::Tensor customop_next_tensor()\nr.cpp:1:1\n192 bytes (static)" }
}
'''


@pytest.fixture
def graph():
    return sr.merge([sr.parse_ci(WRAPPER_CI), sr.parse_ci(KERNEL_CI), sr.parse_ci(RUNTIME_CI)])


def test_worst_chain_crosses_translation_units(graph):
    chain = sr.worst_chain(graph, "_Z11big_wrapperv")
    assert chain.total == 48 + 4112 + 64
    assert chain.path == ("_Z11big_wrapperv", "_Z3bigRKN2at6TensorE", "_ZL4leafv")
    assert chain.unknown == ("memcpy",)
    assert chain.recursive == () and not chain.dynamic   # "dynamic,bounded" is bounded


def test_report_lines(graph):
    big, rec = sr.op_report(graph, [("big", 4196), ("rec", 4196)])
    assert big.line("lib") == (
        "WARNING: lib::big: worst static stack chain 4224 bytes of 4196 "
        "(big_wrapper -> big -> leaf); 1 callee(s) without frame information")
    assert rec.line("lib") == (
        "lib::rec: worst static stack chain 132 bytes of 4196 (rec_wrapper -> rec); "
        "recursion in rec (counted once; its depth is not); dynamic allocation below the wrapper; "
        "indirect calls not followed")


def test_wrapper_symbol_is_the_itanium_mangling():
    assert sr.wrapper_symbol("relu") == "_Z12relu_wrapperv"
    assert sr.wrapper_symbol("a" * 31) == f"_Z39{'a' * 31}_wrapperv"


def test_merge_keeps_the_largest_frame():
    a = sr.parse_ci('graph: { title: "a"\nnode: { title: "f" label: "int f()\\na:1:1\\n16 bytes (static)" }\n}\n')
    b = sr.parse_ci('graph: { title: "b"\nnode: { title: "f" label: "int f()\\nb:1:1\\n32 bytes (static)" }\n}\n')
    assert sr.merge([a, b])["f"].frame == 32


def test_not_a_callgraph():
    with pytest.raises(sr.StackReportError, match="x.ci: not a GCC call-graph"):
        sr.parse_ci("hello", "x.ci")


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="no g++")
def test_real_gcc_output(tmp_path):
    src = tmp_path / "k.cpp"
    src.write_text("#include <string.h>\n"
                   "static int leaf(int x) { volatile char b[3000]; memset((char*)b, x, sizeof b); return b[7]; }\n"
                   "int kern(int x) { return leaf(x) * 2; }\n"
                   "void kern_wrapper() { kern(3); }\n")
    subprocess.run(["g++", "-O2", "-fcallgraph-info=su", "-S", "-o", str(tmp_path / "k.s"), str(src)],
                   check=True)
    g = sr.parse_ci((tmp_path / "k.ci").read_text())
    chain = sr.worst_chain(g, sr.wrapper_symbol("kern"))
    # a 3000-byte array, less at most the 128-byte x86-64 red zone of a leaf
    assert chain.total >= 3000 - 128
    # kern() may be inlined into the wrapper; the chain runs from it to leaf()
    names = [sr.short_name(g[n]) for n in chain.path]
    assert names[0] == "kern_wrapper" and names[-1] == "leaf"


# ---- the report in the build -------------------------------------------------
