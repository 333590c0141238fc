"""SCons tool ``gpsimd``: builds a GPSIMD custom-op collection from a manifest.

One builder per graph stage (DESIGN.md "The graph for one library"):

==================  ===============================================  ==========
builder             target                                           source
==================  ===============================================  ==========
GpsimdWrapper       ``<lib>/wrapper.cpp``                            Value(spec)
GpsimdObject        ``<lib>/obj/<src>.o`` (one per translation unit) .cpp
GpsimdLink          ``<lib>_cpuI.so`` / ``<lib>.so`` (one per LSP)   objects
GpsimdPack          ``<base>.packed.so`` + ``<base>.stripped.so``    linked .so
GpsimdVendorPack    the same, by ``xt-pkg-loadlib`` (xtensa)         linked .so
GpsimdVersions      ``<lib>/versions.json`` (build-front-end.txt §1) Value(text)
GpsimdCallGraph     ``<lib>/stack/<src>.ci`` (-fcallgraph-info=su)   .cpp
GpsimdStackReport   ``<lib>/stack-report.txt``                       .ci files
GpsimdTestPlan      ``<lib>/testplan.json``                          Value(plan)
GpsimdTest          ``<lib>/test-results.json``                      plan, objects
==================  ===============================================  ==========

plus two helpers for what every library shares: GpsimdArchive (the host
runtime ``libneuroncustomop.a``) and GpsimdLspSource (a host linker spec).

``env.GpsimdCollection(manifest)`` loads and validates the manifest (a bad
one stops the build with located errors, no traceback), expands it into the
graph above, defines the aliases ``<lib>``, ``test-<lib>``, ``test``,
``stack-report``, ``digests``, ``compiledb`` and the default ``all``, and
returns a dict of the nodes per library.

This is the only module of the project that imports SCons.
"""

import atexit
import json
import os
import sys

import SCons.Action
import SCons.Builder
import SCons.Scanner.C
import SCons.Script
import SCons.Tool.compilation_db

# Loaded through toolpath= from another project, SCons has not put this
# project's site_scons on sys.path: the build library sits next to the tool.
_SITE_SCONS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_RUNTIME_MODEL = os.path.join(os.path.dirname(_SITE_SCONS), "runtime_model")
for _p in (_RUNTIME_MODEL, _SITE_SCONS):
    if _p not in sys.path:
        sys.path.insert(0, _p)

from gpsimd_device import pack  # noqa: E402
from gpsimd_build import codegen, profiles, stackreport, testplan  # noqa: E402
from gpsimd_build.manifest import ManifestError, load_manifest  # noqa: E402

#: The project root (this file is <root>/site_scons/site_tools/gpsimd.py).
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUNTIME_DIR = os.path.join(ROOT, "runtime_model")


# ---- actions ---------------------------------------------------------------

def _write_wrapper(target, source, env):
    """Codegen action: wrapper.cpp from the JSON spec in the Value source."""
    spec = json.loads(source[0].read())
    ops = [codegen.WrapperOp(function=o["function"],
                             arg_types=tuple(o["arg_types"]),
                             return_types=tuple(o["return_types"]),
                             stack_size=o["stack_size"])
           for o in spec["ops"]]
    dialect = profiles.WrapperDialect(**spec["dialect"])
    text = codegen.emit_wrapper(ops, dialect)
    with open(str(target[0]), "w", encoding="utf-8", newline="\n") as f:
        f.write(text)
    return 0


def _write_value(target, source, env):
    """Write the text of a Value source to the target file."""
    with open(str(target[0]), "w", encoding="utf-8", newline="\n") as f:
        f.write(source[0].read())
    return 0


def _pack_host(target, source, env):
    """Host pack: wrap the stripped object (target[1]) into target[0]."""
    meta = json.loads(env["GPSIMD_PACK_META"])
    with open(str(target[1]), "rb") as f:
        payload = f.read()
    with open(str(target[0]), "wb") as f:
        f.write(pack.pack_bytes(payload, meta))
    return 0


def _pack_emitter(target, source, env):
    base = str(target[0])
    for suffix in (".packed.so", ".stripped.so", ".so"):
        if base.endswith(suffix):
            base = base[: -len(suffix)]
            break
    return [base + ".packed.so", base + ".stripped.so"], source


def _summary_text(result_paths):
    """Per-library lines and the total, from the result files that exist
    (``test-results.json`` or, after a failed run, ``test-results.failed.json``);
    a library with neither is listed as not run."""
    passed = failed = 0
    lines = []
    for path in result_paths:
        failed_path = os.path.splitext(path)[0] + ".failed.json"
        for candidate in (path, failed_path):
            try:
                with open(candidate, encoding="utf-8") as f:
                    res = json.load(f)
                break
            except (OSError, ValueError):
                res = None
        if res is None:
            lines.append(f"{os.path.basename(os.path.dirname(path))}: not run")
            continue
        passed += res["passed"]
        failed += res["failed"]
        lines.append(f"{res['library']}: {res['passed']} passed, {res['failed']} failed")
    lines.append(f"all libraries: {passed} passed, {failed} failed")
    return "\n".join(lines) + "\n"


def _summary_at_exit(result_paths):
    """When a test node failed, SCons never builds the summary: print it at exit."""
    failures = SCons.Script.GetBuildFailures()
    if any(str(f.node).endswith("test-results.json") for f in failures):
        print(_summary_text(result_paths), end="")


def _summarize(target, source, env):
    """Print the totals of every library's results and record them."""
    text = _summary_text([n.abspath for n in source])
    print(text, end="")
    with open(str(target[0]), "w", encoding="utf-8") as f:
        f.write(text)
    # every source is a passing library's results (a failed run leaves none)
    return 0


def _print_digests(target, source, env):
    """Print one SHA-256 per artifact, sorted by path (a reproducibility check)."""
    import hashlib
    lines = []
    for node in sorted(source, key=lambda n: n.path):
        with open(node.abspath, "rb") as f:
            lines.append(f"{hashlib.sha256(f.read()).hexdigest()}  {node.path}")
    text = "\n".join(lines) + "\n"
    print(text, end="")
    with open(str(target[0]), "w", encoding="utf-8") as f:
        f.write(text)
    return 0


def _test_argv(target, source, env, results):
    return [env["PYTHON"], "-m", "gpsimd_emu", "run", source[0].path, "--results", results,
            "--locations", env["GPSIMD_LOCATIONS"], *env.subst("$GPSIMD_EMU_FLAGS").split()]


def _failed_path(target):
    return os.path.splitext(target[0].abspath)[0] + ".failed.json"


def _run_tests(target, source, env):
    """The emulated-runtime action: run the library's plan in a subprocess.

    The results file exists only after a run in which every vector passed;
    a failed run leaves its results beside it as ``test-results.failed.json``
    (so that, whatever changes next, SCons runs the tests again), and a run
    that wrote no results (the emulator itself died) is a failure naming the
    library.
    """
    import subprocess
    out = target[0].abspath
    partial = out + ".partial"
    failed = _failed_path(target)
    for path in (out, partial, failed):
        if os.path.exists(path):
            os.remove(path)
    argv = _test_argv(target, source, env, partial)
    proc_env = {k: str(v) for k, v in env["ENV"].items()}
    library = os.path.basename(os.path.dirname(out))
    # The emulator bounds each vector's kernel run; a reference that never
    # returns runs in the emulator's own process: bound the whole run too.
    per_vector = float(argv[argv.index("--timeout") + 1]) if "--timeout" in argv else 60.0
    from gpsimd_device.plan import TestPlan
    vectors = TestPlan.load(source[0].abspath).vector_count()
    limit = per_vector * (vectors + 1) + 30
    try:
        status = subprocess.run(argv, env=proc_env, cwd=env.Dir("#").abspath,
                                timeout=limit).returncode
    except subprocess.TimeoutExpired:
        sys.stderr.write(f"scons: {library}: the emulator did not finish within {limit:g} s "
                         f"(a reference that never returns?)\n")
        return 1
    try:
        with open(partial, encoding="utf-8") as f:
            res = json.load(f)
    except (OSError, ValueError):
        res = None
    if res is None:
        sys.stderr.write(f"scons: {library}: the emulator exited with status {status} and "
                         f"wrote no results (a reference or the emulator itself failed)\n")
        return status or 1
    if status != 0 or res.get("failed"):
        os.replace(partial, failed)
        return status or 1
    os.replace(partial, out)
    return 0


def _run_tests_str(target, source, env):
    comstr = env.subst("$GPSIMD_TESTCOMSTR", target=target, source=source)
    if comstr:
        return comstr
    import shlex
    return " ".join(shlex.quote(a) for a in _test_argv(target, source, env, target[0].path))


def _summary_str(target, source, env):
    return f"Summarizing {len(source)} test result file(s)"


# ---- command generators: every command comes from gpsimd_build.profiles ----

def _launcher(env, for_signature):
    # A compiler launcher (ccache, distcc, icecc) changes how a compile runs,
    # not what it produces: it stays out of the build signature.
    launcher = env.get("CXX_LAUNCHER")
    return [] if (for_signature or not launcher) else [launcher]


# SCons asks a generator for its command many times per node (signature,
# implicit command dependencies, execution): a null build of a large
# collection would spend much of its time rebuilding the same argv lists
# (BENCHMARKS.md). A command is a pure function of the node's targets,
# sources and construction variables, fixed for one run, so it is memoised
# per (step, targets, sources, for_signature).
_COMMANDS = {}


def _memo(step, target, source, for_signature, make):
    key = (step, tuple(t.path for t in target), tuple(s.path for s in source), for_signature)
    cmd = _COMMANDS.get(key)
    if cmd is None:
        cmd = _COMMANDS[key] = tuple(make())
    return list(cmd)


def _compile_generator(source, target, env, for_signature):
    def make():
        tc = env["GPSIMD_TC"]
        cflags = list(env.get("GPSIMD_USER_CFLAGS", []))
        includes = list(env.get("GPSIMD_INCLUDES", []))
        if tc.name == "host":
            return tc.compile_command(str(source[0]), str(target[0]), cflags, includes,
                                      env["GPSIMD_RUNTIME_INCLUDE"],
                                      None if for_signature else env.Dir("#").abspath)
        return tc.compile_command(str(source[0]), str(target[0]), cflags, includes)
    return [_launcher(env, for_signature) + _memo("cxx", target, source, for_signature, make)]


def _link_generator(source, target, env, for_signature):
    def make():
        tc = env["GPSIMD_TC"]
        objs = [str(s) for s in source]
        if tc.name == "host":
            # the last source is the LSP object, then the runtime archive
            return tc.link_command(str(target[0]), objs[:-2], objs[-2], objs[-1])
        return tc.link_command(str(target[0]), objs, env["GPSIMD_LSP"])
    return [_memo("link", target, source, for_signature, make)]


def _callgraph_generator(source, target, env, for_signature):
    def make():
        return env["GPSIMD_TC"].callgraph_command(
            str(source[0]), str(target[1]), list(env.get("GPSIMD_USER_CFLAGS", [])),
            list(env.get("GPSIMD_INCLUDES", [])), env["GPSIMD_RUNTIME_INCLUDE"])
    return [_memo("callgraph", target, source, for_signature, make)]


def _callgraph_emitter(target, source, env):
    base = os.path.splitext(str(target[0]))[0]
    return [base + ".ci", base + ".s"], source


def _stack_report(target, source, env):
    """Write a library's static stack report; print its warnings."""
    graphs = []
    for node in source:
        with open(node.abspath, encoding="utf-8") as f:
            graphs.append(stackreport.parse_ci(f.read(), node.path))
    spec = json.loads(env["GPSIMD_STACK_OPS"])
    lines = [r.line(spec["library"]) for r in
             stackreport.op_report(stackreport.merge(graphs), spec["ops"])]
    for line in lines:
        if line.startswith("WARNING"):
            print(line)
    with open(str(target[0]), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return 0


def _strip_generator(source, target, env, for_signature):
    return [_memo("strip", target, source, for_signature,
                  lambda: env["GPSIMD_TC"].strip_command(str(source[0]), str(target[1])))]


def _vendor_pack_generator(source, target, env, for_signature):
    return [env["GPSIMD_TC"].pack_command(str(source[0]), str(target[0]), str(target[1]))]


# ---- tool ------------------------------------------------------------------

def exists(env):
    """The host profile needs a C++ compiler and strip."""
    return bool(env.Detect(env.get("CXX", "g++")) and env.Detect("strip"))


def _gen_action(gen, comstr):
    return SCons.Action.Action(gen, comstr, generator=1)


def _compilation_db_emitter(target, source, env):
    """Record each compile for SCons's compilation_db tool.

    compilation_db only hooks SCons's own Object builders; its entries list
    is the one place it reads, so our compiles join it with the same
    (target, source, env, action) shape its own emitters use.
    """
    entries = vars(SCons.Tool.compilation_db).get("__COMPILATION_DB_ENTRIES")
    if entries is not None and "CompilationDatabase" in env["BUILDERS"]:
        entries.append((target[0], source[0], env, _CompileCommand()))
    return target, source


class _CompileCommand:
    """What compilation_db asks of an entry's action: the command as text."""

    def strfunction(self, target, source, env, executor=None, overrides=None):
        argv = _compile_generator(source if isinstance(source, list) else [source],
                                  target if isinstance(target, list) else [target],
                                  env, for_signature=False)[0]
        return " ".join(argv)


def generate(env):
    """Add the gpsimd builders and the GpsimdCollection method (idempotent)."""
    if env.get("GPSIMD_TOOL"):
        return
    env["GPSIMD_TOOL"] = True
    env.SetDefault(
        PYTHON=sys.executable,
        GPSIMD_ARCOM="$AR rcsD $TARGET $SOURCES",
        GPSIMD_EMU_FLAGS="",   # e.g. "--no-checks --timeout 5" (SConstruct: EMU_CHECKS, EMU_TIMEOUT)
        GPSIMD_CXXCOMSTR="CXX      $TARGET",
        GPSIMD_LINKCOMSTR="LINK     $TARGET",
        GPSIMD_ARCOMSTR="AR       $TARGET",
        GPSIMD_STRIPCOMSTR="STRIP    ${TARGETS[1]}",
        GPSIMD_PACKCOMSTR="PACK     ${TARGETS[0]}",
        GPSIMD_GENCOMSTR="GEN      $TARGET",
        GPSIMD_TESTCOMSTR="TEST     $TARGET",
        GPSIMD_STACKCOMSTR="STACK    $TARGET",
    )
    cscan = SCons.Scanner.C.CScanner()
    env.Append(BUILDERS={
        "GpsimdWrapper": SCons.Builder.Builder(
            action=SCons.Action.Action(_write_wrapper, "$GPSIMD_GENCOMSTR")),
        "GpsimdObject": SCons.Builder.Builder(
            action=_gen_action(_compile_generator, "$GPSIMD_CXXCOMSTR"),
            suffix=".o", src_suffix=".cpp", source_scanner=cscan,
            emitter=_compilation_db_emitter),
        "GpsimdArchive": SCons.Builder.Builder(
            action=SCons.Action.Action("$GPSIMD_ARCOM", "$GPSIMD_ARCOMSTR"),
            suffix=".a"),
        "GpsimdLspSource": SCons.Builder.Builder(
            action=SCons.Action.Action(_write_value, "$GPSIMD_GENCOMSTR")),
        "GpsimdLink": SCons.Builder.Builder(
            action=_gen_action(_link_generator, "$GPSIMD_LINKCOMSTR"), suffix=".so"),
        "GpsimdPack": SCons.Builder.Builder(
            action=[_gen_action(_strip_generator, "$GPSIMD_STRIPCOMSTR"),
                    SCons.Action.Action(_pack_host, "$GPSIMD_PACKCOMSTR",
                                        varlist=["GPSIMD_PACK_META"])],
            emitter=_pack_emitter),
        "GpsimdVendorPack": SCons.Builder.Builder(
            action=_gen_action(_vendor_pack_generator, "$GPSIMD_PACKCOMSTR"),
            emitter=_pack_emitter),
        "GpsimdCallGraph": SCons.Builder.Builder(
            action=_gen_action(_callgraph_generator, "$GPSIMD_STACKCOMSTR"),
            emitter=_callgraph_emitter, source_scanner=cscan),
        "GpsimdStackReport": SCons.Builder.Builder(
            action=SCons.Action.Action(_stack_report, "$GPSIMD_STACKCOMSTR",
                                       varlist=["GPSIMD_STACK_OPS"])),
        "GpsimdTestPlan": SCons.Builder.Builder(
            action=SCons.Action.Action(_write_value, "$GPSIMD_GENCOMSTR")),
        "GpsimdVersions": SCons.Builder.Builder(
            action=SCons.Action.Action(_write_value, "$GPSIMD_GENCOMSTR")),
        "GpsimdTest": SCons.Builder.Builder(
            action=SCons.Action.Action(_run_tests, strfunction=_run_tests_str,
                                       varlist=["GPSIMD_EMU_FLAGS"])),
    })
    env.AddMethod(GpsimdCollection, "GpsimdCollection")
    if "CompilationDatabase" not in env["BUILDERS"]:
        env.Tool("compilation_db")


# ---- the graph -------------------------------------------------------------

def _source_stem(src):
    """A source's path below the top without its suffix, '..' made safe."""
    rel = os.path.normpath(src).replace(os.sep, "/")
    parts = ["__" if p == ".." else p for p in rel.split("/")]
    return os.path.splitext("/".join(parts))[0]


def _object_path(lib_dir, src):
    """Object path for a source of a library."""
    return f"{lib_dir}/obj/{_source_stem(src)}.o"


def _host_runtime(env, profile_dir):
    """The host runtime archive and the LSP objects, shared by all libraries."""
    inc = env.Dir(os.path.join(RUNTIME_DIR, "include"))
    srcdir = env.Dir(os.path.join(RUNTIME_DIR, "src"))
    objs, callgraphs = [], []
    for src in sorted(srcdir.glob("*.cpp"), key=str):
        stem = os.path.splitext(src.name)[0]
        objs += env.GpsimdObject(f"{profile_dir}/runtime/obj/{stem}.o", src,
                                 CPPPATH=[inc])
        callgraphs.append(env.GpsimdCallGraph(f"{profile_dir}/runtime/stack/{stem}.ci", src,
                                              CPPPATH=[inc])[0])
    env["GPSIMD_RUNTIME_CALLGRAPHS"] = callgraphs
    lib = env.GpsimdArchive(f"{profile_dir}/runtime/libneuroncustomop.a", objs)
    lsps = {}
    for spec in profiles.MULTICORE_LSPS + (profiles.SINGLE_LSP,):
        cpp = env.GpsimdLspSource(f"{profile_dir}/lsp/{spec.name}.cpp",
                                  env.Value(profiles.lsp_source(spec)))
        lsps[spec.name] = env.GpsimdObject(f"{profile_dir}/lsp/{spec.name}.o",
                                           cpp, CPPPATH=[inc])
    return lib, lsps


def _wrapper_spec(lib, dialect):
    return json.dumps({
        "dialect": {"fnptr_cast": dialect.fnptr_cast,
                    "switch_back": dialect.switch_back},
        "ops": [{"function": op.name,
                 "arg_types": [a.type for a in op.schema.arguments],
                 "return_types": [r.type for r in op.schema.returns],
                 "stack_size": op.stack_size} for op in lib.ops],
    }, sort_keys=True)


def _toolchain(env, name):
    """The toolchain object of a profile; a missing vendor tool stops SCons."""
    if name == "host":
        return profiles.HostToolchain(cxx=env.subst("$CXX") or "g++")
    if name == "xtensa":
        tc = profiles.XtensaToolchain.from_environ(os.environ)
        path = os.environ.get("PATH", "")
        for tool in (tc.cxx, tc.packer):
            if not env.WhereIs(tool, path=path):
                # the driver's own message (build-front-end.txt §1, line 382)
                sys.stderr.write(f"scons: Could not find {tool}\n")
                SCons.Script.Exit(2)
        env["ENV"]["PATH"] = path
        return tc
    sys.stderr.write(f"scons: unknown toolchain '{name}' (host or xtensa)\n")
    SCons.Script.Exit(2)


def GpsimdCollection(env, manifest, build_dir="build", toolchain="host"):
    """Load ``manifest`` and add every library's nodes to the graph.

    ``toolchain`` is ``host`` (build, then run every vector on the emulator)
    or ``xtensa`` (the vendor driver's commands; nothing runs). Outputs go
    under ``<build_dir>/<toolchain>/``. Returns ``{library name: {"wrapper",
    "objects", "linked", "loadable", "versions", "results"}}``, lists of nodes. A
    manifest with errors prints each as ``FILE:LINE:COL: path: message`` and
    stops SCons with exit status 2 before anything is built.
    """
    try:
        collection = load_manifest(manifest)
    except ManifestError as err:
        sys.stderr.write(f"{err}\n")
        SCons.Script.Exit(2)

    tc = _toolchain(env, toolchain)
    env = env.Clone(GPSIMD_TC=tc)
    profile_dir = f"{build_dir}/{tc.name}"
    artifacts = []
    inc = env.Dir(os.path.join(RUNTIME_DIR, "include"))
    if tc.name == "host":
        env["GPSIMD_RUNTIME_INCLUDE"] = inc.path
        runtime_lib, lsp_objs = _host_runtime(env, profile_dir)
        artifacts += runtime_lib + [o for objs in lsp_objs.values() for o in objs]
        env["ENV"]["PYTHONPATH"] = RUNTIME_DIR
        emu_sources = sorted(env.Dir(os.path.join(RUNTIME_DIR, "gpsimd_emu")).glob("*.py"),
                             key=str)

    nodes = {}
    all_results, all_loadable, all_versions, all_stack = [], [], [], []
    for lib in collection.libraries:
        lib_dir = f"{profile_dir}/{lib.name}"
        scan_path = ([inc] if tc.name == "host" else []) + [env.Dir(d) for d in lib.includes]
        compile_env = dict(CPPPATH=scan_path, GPSIMD_USER_CFLAGS=list(lib.cflags),
                           GPSIMD_INCLUDES=list(lib.includes))
        wrapper = env.GpsimdWrapper(f"{lib_dir}/wrapper.cpp",
                                    env.Value(_wrapper_spec(lib, tc.dialect)))
        objects = []
        for src in lib.sources:
            objects += env.GpsimdObject(_object_path(lib_dir, src), src, **compile_env)
        objects += env.GpsimdObject(f"{lib_dir}/obj/wrapper.o", wrapper, **compile_env)
        if tc.name == "xtensa":
            for obj in objects:   # -MMD -MP writes <obj>.d beside each object
                dep = os.path.splitext(str(obj))[0] + ".d"
                env.SideEffect(dep, obj)
                env.Clean(obj, dep)
        linked, loadable, cores = [], [], []
        specs = profiles.linker_specs(lib.multicore)
        for spec, name in zip(specs, profiles.linked_names(lib.name, lib.multicore)):
            if tc.name == "host":
                so = env.GpsimdLink(f"{lib_dir}/{name}.so",
                                    objects + lsp_objs[spec.name] + runtime_lib)
            else:
                so = env.GpsimdLink(f"{lib_dir}/{name}.so", objects, GPSIMD_LSP=spec)
            linked += so
            if "-g" in lib.cflags:
                # build-front-end.txt §5d: the user's -g skips the pack step.
                obj = so[0]
            elif tc.packs_with_tool:
                obj = env.GpsimdVendorPack(f"{lib_dir}/{name}", so)[0]
            else:
                meta = pack.pack_metadata(lib.name, spec.name, spec.core,
                                          profiles.VERSIONS)
                obj = env.GpsimdPack(f"{lib_dir}/{name}", so,
                                     GPSIMD_PACK_META=json.dumps(meta, sort_keys=True))[0]
            loadable.append(obj)
            cores.append((spec.core, spec.name, obj.path))
        # build-front-end.txt §1: the version metadata, with every library.
        versions = env.GpsimdVersions(f"{lib_dir}/versions.json",
                                      env.Value(profiles.versions_json(lib.name, tc.name)))
        env.Alias(lib.name, loadable + versions)
        all_loadable += loadable
        all_versions += versions
        results = []
        if tc.runs_tests:
            # the static stack report (-fcallgraph-info=su of every TU)
            callgraphs = [env.GpsimdCallGraph(f"{lib_dir}/stack/{_source_stem(src)}.ci", src,
                                              **compile_env)[0] for src in lib.sources]
            callgraphs.append(env.GpsimdCallGraph(f"{lib_dir}/stack/wrapper.ci", wrapper,
                                                  **compile_env)[0])
            # each after its object: a TU that does not compile is reported once
            for ci, obj in zip(callgraphs, objects):
                env.Depends(ci, obj)
            stack_ops = json.dumps({"library": lib.name,
                                    "ops": [[op.name, op.stack_size] for op in lib.ops]})
            all_stack += env.GpsimdStackReport(
                f"{lib_dir}/stack-report.txt", callgraphs + env["GPSIMD_RUNTIME_CALLGRAPHS"],
                GPSIMD_STACK_OPS=stack_ops)
            plan = testplan.library_plan(lib, cores)
            plan_node = env.GpsimdTestPlan(f"{lib_dir}/testplan.json",
                                           env.Value(testplan.dump_plan(plan)))
            # where each vector is written: needed by the run, not part of its
            # signature (Requires: built first, never a reason to re-run)
            locations = env.GpsimdTestPlan(
                f"{lib_dir}/locations.json",
                env.Value(json.dumps(testplan.plan_locations(lib), sort_keys=True, indent=1)))
            results = env.GpsimdTest(
                f"{lib_dir}/test-results.json",
                plan_node + loadable + [env.File(f) for f in testplan.plan_files(lib)],
                GPSIMD_LOCATIONS=locations[0].path)
            env.Requires(results, locations)
            env.Depends(results, emu_sources)
            env.Alias(f"test-{lib.name}", results)
            all_results += results
        artifacts += wrapper + objects + linked + loadable + versions
        nodes[lib.name] = {"wrapper": wrapper, "objects": objects, "linked": linked,
                           "loadable": loadable, "versions": versions, "results": results}
    env.Alias("compiledb", env.CompilationDatabase())
    digests = env.Command(f"{profile_dir}/digests.txt", artifacts,
                          SCons.Action.Action(_print_digests, None))
    env.AlwaysBuild(digests)
    env.Alias("digests", digests)
    if tc.runs_tests:
        env.Alias("test", all_results)
        summary = env.Command(f"{profile_dir}/test-summary.txt", all_results,
                              SCons.Action.Action(_summarize, _summary_str))
        env.Depends(summary, all_versions + all_stack)   # built first, so the totals come last
        atexit.register(_summary_at_exit, [n.abspath for n in all_results])
        env.Alias("stack-report", all_stack)
        env.Default(env.Alias("all", summary + all_stack))
    else:
        env.Default(env.Alias("all", all_loadable + all_versions))
    return nodes
