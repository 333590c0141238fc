"""The static stack report's chains and lines, on call graphs given by hand
(what gpsimd_build.objgraph reads from objects: tests/unit/test_objgraph.py)."""
import pytest

from gpsimd_build import stackreport as sr
from gpsimd_build.objgraph import INDIRECT, Function


def fn(name, frame=None, callees=(), dynamic=False):
    return name, Function(name, frame, dynamic, set(callees))


@pytest.fixture
def graph():
    return dict([
        fn("_Z11big_wrapperv", 48, ["_Z3bigRKN2at6TensorE", "_Z20customop_next_tensorv"]),
        fn("_Z3bigRKN2at6TensorE", 4112, ["k.o:_ZL4leafv", "memcpy"]),
        fn("k.o:_ZL4leafv", 64),
        fn("_Z11rec_wrapperv", 32, ["_Z3recRKN2at6TensorE"]),
        fn("_Z3recRKN2at6TensorE", 100, ["_Z3recRKN2at6TensorE", INDIRECT], dynamic=True),
        fn("_Z20customop_next_tensorv", 192),
        fn("_Z12warn_wrapperv", 32, ["_Z4warnv", "k.o:_ZL4leafv"]),
    ] + [("_Z4warnv", Function("_Z4warnv", 4000, False, {"_Z3bigRKN2at6TensorE"},
                                host_only=True))])


def test_worst_chain_crosses_translation_units(graph):
    chain = sr.worst_chain(graph, "_Z11big_wrapperv")
    assert chain.total == 48 + 4112 + 64
    assert chain.path == ("_Z11big_wrapperv", "_Z3bigRKN2at6TensorE", "k.o:_ZL4leafv")
    assert chain.unknown == ("memcpy",)
    assert chain.recursive == () and not chain.dynamic


def test_report_lines(graph):
    labels = {"_Z11big_wrapperv": "big_wrapper()", "_Z3bigRKN2at6TensorE": "big(at::Tensor const&)",
              "k.o:_ZL4leafv": "leaf()", "_Z11rec_wrapperv": "rec_wrapper()",
              "_Z3recRKN2at6TensorE": "rec(at::Tensor const&)"}
    big, rec = sr.op_report(graph, [("big", 4196), ("rec", 4196)], labels)
    assert big.line("lib") == (
        "WARNING: lib::big: worst static stack chain 4224 bytes of 4196 "
        "(big_wrapper -> big -> leaf); 1 callee(s) without frame information")
    assert rec.line("lib") == (
        "lib::rec: worst static stack chain 132 bytes of 4196 (rec_wrapper -> rec); "
        "recursion in rec (counted once; its depth is not); dynamic allocation below the wrapper; "
        "indirect calls not followed")
    assert sr.named(graph, [("big", 4196), ("rec", 4196)]) == set(labels)


def test_host_only_diagnostics_are_not_charged(graph):
    """(the runtime's GPSIMD_HOST_ONLY functions: the device does not run them)"""
    chain = sr.worst_chain(graph, "_Z12warn_wrapperv")
    assert (chain.total, chain.path, chain.host_only) == (32 + 64, ("_Z12warn_wrapperv",
                                                                    "k.o:_ZL4leafv"), ("_Z4warnv",))
    line = sr.op_report(graph, [("warn", 4196)], {"_Z12warn_wrapperv": "warn_wrapper()",
                                                  "k.o:_ZL4leafv": "leaf()"})[0].line("lib")
    assert line == ("lib::warn: worst static stack chain 96 bytes of 4196 (warn_wrapper -> leaf); "
                    "1 host-only diagnostic(s) of the model not counted")


def test_short_names_from_demangled_labels():
    assert sr.short_name("_ZN9gpsimd_rt12_GLOBAL__N_17prepareEv",
                         "gpsimd_rt::(anonymous namespace)::prepare()") == "gpsimd_rt::{anonymous}::prepare"
    assert sr.short_name("_Z1fIiEvT_", "void f<int>(int)") == "f<int>"
    assert sr.short_name("k.o:helper", "helper") == "helper"     # not a signature: the symbol
    # long template arguments are elided; operators keep their brackets
    assert sr.short_name("_ZN", "std::_Rb_tree<unsigned long, std::pair<unsigned long const, "
                         "unsigned long> >::_M_erase(int)") == "std::_Rb_tree<...>::_M_erase"
    assert sr.short_name("_ZN", "a::operator<<(int)") == "a::operator<<"


def test_wrapper_symbol_is_the_itanium_mangling():
    assert sr.wrapper_symbol("relu") == "_Z12relu_wrapperv"
    assert sr.wrapper_symbol("a" * 31) == f"_Z39{'a' * 31}_wrapperv"
