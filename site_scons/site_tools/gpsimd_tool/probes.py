"""Headers a compile depended on by their absence: what it probed for and
did not find, or found later in the search than where a new file would be.

A depfile names the files a compile read, never those it looked for:
``#if __has_include(OVERRIDE_H)`` with no such file, or ``#include H``
found in the second folder of the include path, gives an object that
another compile would not give once the file appears (in a folder the
search reaches first). Here:

* :func:`CScanner`, SCons's C scanner (``SCons.Scanner.ClassicCPP``, the
  same regular expression for ``#include "x"``/``<x>``), which also reads
  a literal ``__has_include("x")``/``(<x>)`` as an include of ``x``: found,
  it is a dependency; not found, each build searches for it again, as for
  an ``#include`` of a missing file, so that the build after it appears
  compiles again, and a cache key holds it.
* What no scanner can resolve (:func:`names`: ``__has_include`` of a
  macro, ``__has_include_next``, ``#include_next``, ``#include`` of a
  macro, ``#embed``, ``__has_embed``) makes a translation unit *probing*
  when its source or any file of it inside the project reads so
  (:func:`judge`, from the depfile scanner: the C scanner's files, the
  files ``cflags`` force in, and the depfile's). A probing object is
  compiled on every SCons build (``AlwaysBuild``; a link after it runs
  only when its bytes changed), never pushed to nor taken from a build
  cache (``cache.py``), and its library is not written to the record of
  inputs (``inputs_record.py``: the pytest plugin asks for a build).
* On the ninja path, where no Python runs in the edit loop, every compile
  depends on the folders its search reaches (:func:`search_folders`: its
  source's, the include folders of its flags, the folders of the headers
  the C scanner finds, each with its subfolders; not the build folder's):
  a new file in any of them changes the folder's time, and ninja compiles
  again (so does any other new file there, an editor's swap file too).
"""

import os
import re
from typing import Any, Dict, Iterable, List, Set, Tuple

import SCons.Scanner

__all__ = ["CScanner", "judge", "names", "probing", "search_folders"]

#: SCons's own regular expression of ``SCons.Scanner.C.CScanner``.
INCLUDE = re.compile(r'^[ \t]*#[ \t]*(?:include|import)[ \t]*(<|")([^>"]+)(>|")', re.M)
#: Every directive that names a file: a literal ``#include``/``#import`` is
#: SCons's; any other (a macro's, ``#include_next``, ``#embed``) probes.
DIRECTIVE = re.compile(r'^[ \t]*#[ \t]*(include_next|include|import|embed)(?![A-Za-z0-9_])'
                       r'(?:[ \t]*(<|")([^>"]+)(>|"))?', re.M)
#: A literal ``__has_include`` (not ``_next``): resolved as an include.
HAS_INCLUDE = re.compile(r'__has_include[ \t]*\([ \t]*(<|")([^>"\n]+)(>|")')
#: A ``__has_`` probe no scanner resolves: of a macro, ``_next``,
#: ``__has_embed``. (``defined(__has_include)`` is none; ``#ifdef
#: __has_include`` is one, harmlessly.)
HAS_PROBE = re.compile(r'__has_include(?![ \t]*\([ \t]*["<])(?![ \t]*\))|__has_embed')

#: The nodes the C scanner read, those of them that probe, the other
#: files judged (node -> probes?), and the probing objects of this run.
_SCANNED: Set[Any] = set()
_PROBING: Set[Any] = set()
_CHECKED: Dict[Any, bool] = {}
_PROBING_OBJECTS: Set[Any] = set()


def names(text: str) -> Tuple[List[Tuple[str, str, str]], bool]:
    """The includes SCons's C scanner reads in ``text`` (and the names of
    literal ``__has_include`` probes), and whether it probes (see the
    module docstring). One pass of the directives' expression; the
    ``__has_`` ones only in a text that names one."""
    found, probing = [], False
    for kind, opening, name, closing in DIRECTIVE.findall(text):
        if opening and kind in ("include", "import"):
            found.append((opening, name, closing))
        else:
            probing = True
    if "__has_" in text:
        found += HAS_INCLUDE.findall(text)
        probing = probing or HAS_PROBE.search(text) is not None
    return found, probing


class _Scanner(SCons.Scanner.ClassicCPP):
    """SCons's C scanner, with literal ``__has_include`` arguments as
    includes, noting the files that probe."""

    def find_include_names(self, node) -> List[Any]:
        found, probing = names(node.get_text_contents())
        _SCANNED.add(node)
        if probing:
            _PROBING.add(node)
        return found


def CScanner() -> Any:
    """The compile builders' source scanner (``builders.py``)."""
    return _Scanner("CScanner", "$CPPSUFFIXES", "CPPPATH", INCLUDE.pattern)


def _reads_a_probe(node: Any) -> bool:
    """Does the file of ``node`` probe? (Read once per run.)"""
    found = _CHECKED.get(node)
    if found is None:
        try:
            with open(node.get_abspath(), encoding="utf-8", errors="replace") as f:
                found = names(f.read())[1]
        except OSError:
            found = False
        _CHECKED[node] = found
    return found


def judge(obj: Any, read: Iterable[Any], inside: tuple) -> None:
    """Note whether the compile of ``obj`` probes (see the module
    docstring): its sources and the headers the C scanner found (already
    scanned), then the files it depends on explicitly under ``inside``
    (the project's and the build folder's paths, with a trailing
    separator) and those of ``read`` (the nodes its depfile names) the C
    scanner did not read. (Set operations: a null build at 5,000 ops
    judges 10,000 objects.) A probing object is compiled on every build."""
    found = not _PROBING.isdisjoint(obj.sources) or not _PROBING.isdisjoint(obj.implicit or ())
    if not found:
        rest = set(read).difference(_SCANNED)
        rest.update(n for n in obj.depends if n.get_abspath().startswith(inside))
        found = any(_reads_a_probe(n) for n in rest)
    if found:
        _PROBING_OBJECTS.add(obj)
        obj.set_always_build()
    else:
        _PROBING_OBJECTS.discard(obj)


def probing(node: Any) -> bool:
    """Was ``node`` judged a probing compile in this run?"""
    return node in _PROBING_OBJECTS


_WALKED: Dict[str, List[str]] = {}


def _subtree(folder: str, skip: str) -> List[str]:
    """``folder`` and its subfolders (not hidden ones, not ``skip``, the
    build folder's absolute path), once per run."""
    out = _WALKED.get(folder)
    if out is None:
        out = []
        for here, dirs, _ in os.walk(folder):
            if here == skip or here.startswith(skip + os.sep):
                dirs[:] = []
                continue
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            out.append(here)
        _WALKED[folder] = out
    return out


def search_folders(obj: Any, depfiles: Any) -> List[str]:
    """The folders (paths relative to the project's) whose new files the
    compile of ``obj`` could find (ninja's inputs: see the module
    docstring): those of its sources and of the headers its C scan found,
    and its ``CPPPATH`` (its flags' include folders), each with its
    subfolders, inside the project and outside the build folder (as
    ``depfiles``, its ``depfiles.Depfiles``, names them)."""
    obj.children()      # (scanned)
    top, build, env = depfiles.top, depfiles.build, obj.get_build_env()
    folders = [n.get_dir().get_abspath() for n in obj.sources + (obj.implicit or [])]
    folders += [env.Dir(d).get_abspath() for d in env.get("CPPPATH", ())]
    out: Set[str] = set()
    inside = top.rstrip(os.sep) + os.sep
    for folder in dict.fromkeys(folders):
        if (folder == top or folder.startswith(inside)) and os.path.isdir(folder) \
                and not (folder == build or folder.startswith(build + os.sep)):
            out.update(_subtree(folder, build))
    return sorted(os.path.relpath(f, top) for f in out)
