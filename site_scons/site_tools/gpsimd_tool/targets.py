"""Targets of the collection's graph: which libraries a command line
needs (``scons relu`` reads one library's graph), and the text ``scons -h``
adds about targets and libraries."""

from typing import Any, List

from gpsimd_build import buildnames as names_

__all__ = ["help_text", "selected_libraries"]


def selected_libraries(libraries, profile_dir: str, targets) -> List[Any]:
    """The libraries whose graph this run needs: when every command-line
    target names a library (``<lib>``, ``test-<lib>``, or a path under
    ``<profile_dir>/<lib>/``), those libraries only; else all of them. A
    collection target (``test``, ``all``...) is never one library's, even
    if a library had its name (the loader refuses such a name)."""
    names = {lib.name for lib in libraries}
    wanted = set()
    for target in targets:
        t = str(target).rstrip("/")
        if t in names and names_.library_target(t):
            wanted.add(t)
        elif t.startswith(names_.TEST_PREFIX) and t[len(names_.TEST_PREFIX):] in names:
            wanted.add(t[len(names_.TEST_PREFIX):])
        elif t.startswith(profile_dir + "/") and t[len(profile_dir) + 1:].split("/")[0] in names:
            wanted.add(t[len(profile_dir) + 1:].split("/")[0])
        else:
            return list(libraries)
    if not wanted:
        return list(libraries)
    return [lib for lib in libraries if lib.name in wanted]


def help_text(libraries, profile) -> str:
    """What ``scons -h`` adds to the options: the targets and the libraries
    of the loaded manifest."""
    names = [lib.name for lib in libraries]
    rows = [("all", "the default: every library built" + (
                 ", its stack report and its tests" if profile.runs_tests else "")),
            ("<lib>", "one library: its objects" + (
                ", stack report and tests, then its results" if profile.runs_tests else "")),
            ]
    if profile.runs_tests:
        rows += [("test-<lib>", "one library's test vectors and its results"),
                 ("test", "every library's test vectors"),
                 ("explore-<lib>", "search each op of one library for a failing input "
                                   "(docs/explore.md)"),
                 ("explore", "the same for every library (with -k, past a falsified one)"),
                 ("stack-report", "every library's static stack report")]
    rows += [("schemas", "print every op's schema in canonical form (those derived from "
                         "shape functions too)"),
             ("digests", "one SHA-256 per artifact, printed and written to "
                         f"<BUILD_DIR>/{profile.name}/digests.txt"),
             ("compiledb", "<BUILD_DIR>/compile_commands.json for editors and clangd")]
    width = max(len(r[0]) for r in rows)
    lines = ["", "Targets:"] + [f"  {t.ljust(width)}  {what}" for t, what in rows]
    lines += ["", f"Libraries ({len(names)}):"]
    line = " "
    for name in names:
        if len(line) + len(name) + 1 > 79:
            lines.append(line)
            line = " "
        line += " " + name
    if names:
        lines.append(line)
    return "\n".join(lines) + "\n"
