"""What ``scons -h`` adds to the options of the SConstruct: the targets and
the libraries of the loaded manifest."""

__all__ = ["help_text"]


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
                 ("stack-report", "every library's static stack report")]
    rows += [("digests", "one SHA-256 per artifact, printed and written to "
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
