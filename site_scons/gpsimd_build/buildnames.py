"""The names the build gives a meaning of its own: the collection's targets
(SCons aliases, ninja phonies) and the folders it makes beside the
libraries' in ``<BUILD_DIR>/<profile>/``. Defined here once: the SCons
tool and the profiles name them through these constants, and the manifest
loader refuses a library so named (its alias and its folder would be
these: ``scons test`` would build one library and report only its
vectors, a library ``runtime`` would share the runtime's objects' folder).
"""

import os
from typing import Tuple

#: The collection's targets (``scons -h``).
ALL = "all"
TEST = "test"
EXPLORE = "explore"
STACK_REPORT = "stack-report"
SCHEMAS = "schemas"
DIGESTS = "digests"
COMPILEDB = "compiledb"
#: Aliases every test (every step) node depends on.
EMU_SOURCES_ALIAS = "gpsimd-emulator-sources"
STEP_SOURCES_ALIAS = "gpsimd-step-sources"

#: Every target name the build defines for the collection.
COLLECTION_TARGETS: Tuple[str, ...] = (ALL, TEST, EXPLORE, STACK_REPORT, SCHEMAS, DIGESTS,
                                       COMPILEDB, EMU_SOURCES_ALIAS, STEP_SOURCES_ALIAS)
#: A library's own targets: ``<prefix><lib>`` (and ``<lib>`` itself).
TEST_PREFIX = "test-"
EXPLORE_PREFIX = "explore-"
LIBRARY_TARGET_PREFIXES: Tuple[str, ...] = (TEST_PREFIX, EXPLORE_PREFIX)

#: Folders of ``<BUILD_DIR>/<profile>/`` beside the libraries' own:
#: the runtime's objects and archive, the linker specs' objects, the
#: emulator's program.
RUNTIME_DIR = "runtime"
LSP_DIR = "lsp"
EMU_DIR = "emu"
BUILD_FOLDERS: Tuple[str, ...] = (RUNTIME_DIR, LSP_DIR, EMU_DIR)

#: The object stem of the generated wrapper (``<lib>/obj/wrapper.o``),
#: beside the sources' (:func:`source_stem`).
WRAPPER_STEM = "wrapper"

#: Every name a library may not have because the build uses it.
BUILD_RESERVED_NAMES: Tuple[str, ...] = COLLECTION_TARGETS + BUILD_FOLDERS


def library_target(name: str) -> bool:
    """Whether a command-line target ``name`` could be one library's alias
    (``<lib>``): never one of the collection's own targets."""
    return name not in COLLECTION_TARGETS


def reserved_reason(name: str) -> str:
    """Why a library may not be named ``name`` (one of
    :data:`BUILD_RESERVED_NAMES`), in words; "" for a name it may have."""
    if name in COLLECTION_TARGETS:
        return (f"'{name}' is a target of the build's own (`scons {name}`), which a "
                "library of that name would take over")
    if name in BUILD_FOLDERS:
        return (f"'{name}' is a folder of the build's own (<BUILD_DIR>/<profile>/{name}/), "
                "where this library's files would mix with the build's")
    return ""


def source_stem(src: str) -> str:
    """A source's object path stem (``<lib>/obj/<stem>.o``; a shape
    source's ``<lib>/shapes/obj/<stem>.o``): its root-relative path without
    its suffix; a source outside the root (an allowed folder,
    ``../aws/relu.cpp``) under ``outside/`` (``outside/aws/relu``). Two
    sources of one library with one stem, or a kernel source whose stem is
    :data:`WRAPPER_STEM`, are refused by the manifest loader."""
    parts = os.path.normpath(src).replace(os.sep, "/").split("/")
    inside = [p for p in parts if p != ".."]
    return os.path.splitext("/".join((["outside"] if len(inside) < len(parts) else []) + inside))[0]
