"""The README states facts the code defines; each is checked here against
its one definition, so that neither can change alone."""

import pathlib
import re

from gpsimd_build.profiles.host import HOST_CXXFLAGS, HOST_LINKFLAGS

ROOT = pathlib.Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_manifest_doc_gives_the_default_compiler_flags():
    text = (ROOT / "docs" / "manifest.md").read_text(encoding="utf-8")
    assert f"with `{' '.join(HOST_CXXFLAGS)}`" in text
    assert f"linked with\n`{' '.join(HOST_LINKFLAGS)}`" in text



def _setup_commands():
    """The ```sh blocks of README's "Set up and run" section."""
    section = README.split("## Set up and run", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.*?)\n```", section, re.S)


def test_readme_has_two_setup_commands_and_ci_runs_the_test_one():
    assert _setup_commands() == ["python3 -m pip install -e . && scons",
                                 "python3 -m pip install -e '.[test]' && python3 -m pytest -q -n auto --dist loadfile"]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert _setup_commands()[1] in ci
    # the campaigns the README command leaves out run as CI's second stage,
    # within its budget, and README says how to run them
    assert "timeout -s INT -k 30 1200 python3 -m pytest -q -m campaign" in ci
    assert ci.index("timeout -s INT -k 30 1200 python3 -m pytest -q -m campaign") > \
        ci.index(_setup_commands()[1])
    assert "`python3 -m pytest -q -m campaign`" in README
    # the switch of the session's compiler cache (tests/conftest.py) is README's
    from conftest import SHARE_COMPILES_ENV
    assert f"`{SHARE_COMPILES_ENV}=0`" in README


DOCS = pathlib.Path(__file__).resolve().parents[2] / "docs"


def test_readme_and_docs_point_nowhere_outside_the_repository():
    """Documentation lives in the repository: no link or path to the
    specification folder beside it (../shared)."""
    texts = {"README.md": README}
    texts.update({f"docs/{p.name}": p.read_text(encoding="utf-8") for p in DOCS.glob("*.md")})
    assert "docs/kernel-api.md" in texts and "docs/shape-functions.md" in texts
    assert [name for name, text in texts.items() if "../shared" in text] == []
    assert "(docs/kernel-api.md)" in README and "(docs/shape-functions.md)" in README


def test_no_file_cites_a_document_outside_the_repository():
    """Code, tests and docs cite what a user can reach: this repository's
    own files and public documents by title, never the design notes or
    specification files the project was written from."""
    import subprocess
    root = DOCS.parent
    files = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True,
                           check=True).stdout.split()
    outside = ("DESIGN.md", "build-front-end.txt", "customop-marshalling.txt", "device-api.md",
               "shared/spec")
    citing = sorted(f"{name}: {word}" for name in files if name != "tests/unit/test_docs.py"
                    for text in [_text(root / name)] for word in outside if word in text)
    assert citing == []


def test_no_file_cites_a_section_number_no_document_of_the_repository_has():
    """A citation names a place a user can open: a section of ARCHITECTURE.md
    or docs/ by its title, a definition of abi.h. No document of the
    repository numbers its sections, so a section sign and number point
    nowhere (they were the numbers of the specification the project was
    written from). Files kept on purpose are listed with the reason."""
    import subprocess
    root = DOCS.parent
    files = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True,
                           check=True).stdout.splitlines()
    kept = {"BENCHMARKS.md": "the history of the figures, as it was written"}
    sign = "\u00a7"
    citing = sorted(f"{name}:{number}: {line.strip()}" for name in files if name not in kept
                    for number, line in enumerate(_text(root / name).splitlines(), 1)
                    if sign in line)
    assert citing == []


def _titles(doc):
    """The places of a document a citation may name: its headings, its
    bold paragraph leads (``**Values and dtypes.**``) and the words before
    the colon that opens a paragraph (``Host link: ...``)."""
    text = (DOCS.parent / doc).read_text(encoding="utf-8")
    return ([m.group(1).strip() for m in re.finditer(r"^#+ (.+)$", text, re.M)]
            + re.findall(r"^\*\*([^*]+?)\.?\*\*", text, re.M)
            + re.findall(r"^([A-Z][\w ]+):", text, re.M))


def test_every_cited_section_title_is_one_of_the_document():
    """A citation ``docs/kernel-api.md "Limits"`` (or ``ARCHITECTURE.md,
    "The test plan", "..."``) names a heading of that document (or the
    start of one): titles of documents the project was written from, left
    behind when their file names were replaced, point nowhere."""
    import subprocess
    root = DOCS.parent
    files = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True,
                           check=True).stdout.splitlines()
    cite = re.compile(r'((?:ARCHITECTURE|README|docs/[a-z-]+)\.md),?\s+'
                      r'((?:"[^"]+"(?:,\s*(?:\*|//|#:?)?\s*)?)+)')
    wrap = re.compile(r'\s*\n\s*(?:\*|//|#:?)?\s*')
    titles, dangling = {}, []
    for name in files:
        if name in ("BENCHMARKS.md", "tests/unit/test_docs.py"):
            continue
        text = _text(root / name).replace('\\"', '"')    # (a message in a C or Python string)
        for m in cite.finditer(text):
            doc = m.group(1)
            if doc not in titles:
                titles[doc] = _titles(doc)
            for title in re.findall(r'"([^"]+)"', wrap.sub(" ", m.group(2))):
                if title.strip() and not any(t.startswith(title) for t in titles[doc]):
                    line = text.count("\n", 0, m.start()) + 1
                    dangling.append(f'{name}:{line}: {doc} "{title}"')
    assert dangling == []


def _text(path):
    try:
        return path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return ""


def test_kernel_api_limits_are_those_of_abi_h():
    import re
    from gpsimd_device.dtypes import DTYPES
    from gpsimd_device.headers import defines
    text = (DOCS / "kernel-api.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| [^|]+ \| `GPSIMD_(\w+)` \| (\d+) \|$", text, re.M)
    assert len(rows) == 16
    abi = defines("abi.h")
    assert {name: int(value) for name, value in rows} == {name: abi[name] for name, _ in rows}
    listed = text.split("Dtypes of the argument descriptors: ")[1].split(" (")[0]
    assert listed.replace("\n", " ").split(", ") == list(DTYPES)


def test_kernel_api_lists_the_dtypes_a_kernel_may_create_as_dtypes_h_does():
    """The factories refuse any dtype outside GPSIMD_KERNEL_DTYPES
    (gpsimd_host/dtypes.h): docs/kernel-api.md lists the same eight, in its
    "Limits" and, as torch:: constants, in "Making tensors"."""
    from gpsimd_device.dtypes import DTYPES
    from gpsimd_device.headers import xmacro_rows
    rows = xmacro_rows("dtypes.h", "GPSIMD_KERNEL_DTYPES")
    assert len(rows) == 8
    assert all(DTYPES[name].scalar_type == st for name, st in rows)
    text = (DOCS / "kernel-api.md").read_text(encoding="utf-8")
    listed = " ".join(text.split("A kernel may create ")[1].split(" tensors")[0].split())
    names = [name for name, _ in rows]
    assert listed == ", ".join(names[:-1]) + " and " + names[-1]
    constants = {"Float": "kFloat", "Half": "kHalf", "BFloat16": "kBFloat16", "Int": "kInt", "Short": "kShort",
                 "Char": "kChar", "Byte": "kByte", "Long": "kLong"}
    making = text.split("## Making tensors")[1].split("A factory without a dtype")[0]
    assert sorted(re.findall(r"`torch::(k\w+)`", making)) == sorted(constants[st] for _, st in rows)


def test_the_options_table_lists_every_option_of_scons_h():
    """README's options table (or, for the explore options, its text) names
    every option the tool defines (``gpsimd_tool.options``), and no other."""
    import sys
    sys.path.insert(0, str(ROOT / "site_scons" / "site_tools"))
    import SCons.Environment
    from gpsimd_tool import options
    defined = set(options._variables(SCons.Environment.Environment(tools=[])).keys())
    rows = set(re.findall(r"^\| `([A-Z_]+)=", README, re.M))
    assert rows <= defined
    assert {n for n in defined - rows if f"`{n}`" not in README} == set()


def test_architecture_names_every_module():
    """ARCHITECTURE.md's map is of the code as it is: every module and C
    source of the packages is named in it (a new module comes with its
    room on the map)."""
    text = (ROOT / "ARCHITECTURE.md").read_text()
    packages = ["runtime_model/gpsimd_device", "runtime_model/gpsimd_emu",
                "runtime_model/gpsimd_explore", "site_scons/gpsimd_build",
                "site_scons/gpsimd_pytest", "site_scons/site_tools/gpsimd_tool"]
    missing = sorted(str(p.relative_to(ROOT)) for top in packages
                     for p in (ROOT / top).rglob("*")
                     if p.suffix in (".py", ".c", ".h") and p.stem != "__init__"
                     and "__pycache__" not in p.parts
                     and not re.search(rf"\b{re.escape(p.stem if p.suffix == '.py' else p.name)}\b",
                                       text))
    assert missing == [], missing
