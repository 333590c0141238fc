"""A kernel's text made safe to print (gpsimd_device.printable): what a
terminal would obey (cursor moves, clearing, carriage returns, hiding) is
shown as escapes, on every path that prints it."""
from gpsimd_build.report import _e
from gpsimd_device.printable import prefixed, visible
from gpsimd_device.results import VectorResult, format_line
from gpsimd_pytest.failure import VectorFailed

#: what the reviewer's hostile kernel wrote: up a line, clear the screen, a
#: fake PASS line and summary, then black-on-black to hide what follows
HOSTILE = ("\x1b[1A\x1b[2J\rPASS lib::op[v] (ops.yaml:1:1): max_abs_err 0 over 3 elements\n"
           "total: 1 passed, 0 failed\n\x1b[8m\x1b[30;40m")


def test_controls_are_shown_as_python_escapes_tabs_and_newlines_kept():
    assert visible("a\x1b[2Jb\rc\x07\x00\x7f\x9b\u202e\u2028\td\ne\\x1b") == (
        "a\\x1b[2Jb\\rc\\x07\\x00\\x7f\\x9b\\u202e\\u2028\td\ne\\x1b")
    assert visible("one\ntwo\r\n", newlines=False) == "one\\ntwo\\r\\n"
    assert visible("plain text, µ and 日本") == "plain text, µ and 日本"
    assert visible(visible(HOSTILE)) == visible(HOSTILE)
    assert "\x1b" not in visible(HOSTILE) and "\r" not in visible(HOSTILE)


def test_prefixed_lines_each_visible():
    assert prefixed("[lib::op[v] core 0 stderr] ", HOSTILE) == [
        "[lib::op[v] core 0 stderr] \\x1b[1A\\x1b[2J\\rPASS lib::op[v] (ops.yaml:1:1): max_abs_err "
        "0 over 3 elements",
        "[lib::op[v] core 0 stderr] total: 1 passed, 0 failed",
        "[lib::op[v] core 0 stderr] \\x1b[8m\\x1b[30;40m"]
    assert prefixed("> ", "a\r\rb\n\n") == ["> a\\r\\rb"]


def test_a_fail_line_is_one_visible_line_whatever_the_message():
    r = VectorResult("op", "v", "ops.yaml:3:5", "fail",
                     "core 0: fault CXX_EXCEPTION in op op: C++ exception: " + HOSTILE,
                     warnings=["core 0: \x1b[2K"])
    line = format_line("lib", r)
    assert line == (
        "FAIL lib::op[v] (ops.yaml:3:5): core 0: fault CXX_EXCEPTION in op op: C++ exception: "
        "\\x1b[1A\\x1b[2J\\rPASS lib::op[v] (ops.yaml:1:1): max_abs_err 0 over 3 elements\\n"
        "total: 1 passed, 0 failed\\n\\x1b[8m\\x1b[30;40m; warning: core 0: \\x1b[2K")
    # the results keep what the kernel wrote, as it wrote it
    assert r.to_json()["message"].endswith("\x1b[8m\x1b[30;40m")


def test_the_plugin_and_the_report_show_it_too():
    assert VectorFailed("FAIL x: \x1b[2J\r").line == "FAIL x: \\x1b[2J\\r"
    assert str(VectorFailed("\x1b")) == "\\x1b"
    assert _e("<b>\x1b[31m\r</b>") == "&lt;b&gt;\\x1b[31m\\r&lt;/b&gt;"
