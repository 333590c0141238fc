"""Headers a compile depended on by their absence: what it probed for and
did not find.

A depfile names the files a compile read, never those it looked for:
``#if __has_include(OVERRIDE_H)`` with no such file gives an object that
another compile would not give once the file appears. Here:

* :func:`CScanner`, SCons's C scanner (``SCons.Scanner.ClassicCPP``, the
  same regular expression for ``#include "x"``/``<x>``), which also reads
  a literal ``__has_include("x")``/``(<x>)`` as an include of ``x``: found,
  it is a dependency; not found, each build searches for it again, as for
  an ``#include`` of a missing file, so that the build after it appears
  compiles again, and a cache key holds it.
* A probe no scanner can resolve (:func:`names`: ``__has_include`` of a
  macro, ``__has_include_next``, ``__has_embed``; comments are no code,
  and ``defined(__has_include)`` or ``#ifdef __has_include`` probe
  nothing) makes a translation unit *probing* when its source or any file
  of it inside the project reads so (:func:`judge`, from the depfile
  scanner: the C scanner's files, the files ``cflags`` force in, and the
  depfile's). A probing object is compiled on every SCons build
  (``AlwaysBuild``; a link after it runs only when its bytes changed) and
  never pushed to nor taken from a build cache (``cache.py``).
* On the ninja path, where no Python runs in the edit loop, a compile
  whose source or scanned headers probe (literally or not) depends on the
  folders its search reaches (:func:`search_folders`: its source's, its
  flags' include folders, those of the headers the C scanner finds, and
  the folder a literal probe names inside each; inside the project, not
  the build folder): a new file in one changes the folder's time, and
  ninja compiles it again. Other compiles depend on no folder, so that an
  editor's swap file costs no compile.

An ``#include`` of a macro, and ``#include_next``, read what they find
(the depfile names it); a header that appears earlier in the search than
the one they found, as for a literal ``#include`` on the ninja path, is
not seen (docs/guarantees.md).
"""

import os
import re
from typing import Any, Dict, Iterable, List, Set, Tuple

import SCons.Scanner

__all__ = ["CScanner", "judge", "names", "probing", "search_folders"]

#: SCons's own regular expression of ``SCons.Scanner.C.CScanner``.
INCLUDE = re.compile(r'^[ \t]*#[ \t]*(?:include|import)[ \t]*(<|")([^>"]+)(>|")', re.M)
#: A string or character literal (kept), or a comment (no code: dropped).
COMMENT = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|/\*.*?\*/|//[^\n]*', re.S)


def _code(text: str) -> str:
    """``text`` as the preprocessor reads it for a probe: its continued
    lines joined, its comments dropped (not inside a literal)."""
    return COMMENT.sub(lambda m: m.group() if m.group()[0] in "\"'" else " ",
                       text.replace("\\\n", ""))


#: A literal ``__has_include`` (not ``_next``): resolved as an include.
HAS_INCLUDE = re.compile(r'__has_include[ \t]*\([ \t]*(<|")([^>"\n]+)(>|")')
#: A probe no scanner resolves: ``__has_include`` of a macro,
#: ``__has_include_next``, ``__has_embed`` (each called: ``defined(...)``
#: and ``#ifdef`` of them probe nothing).
HAS_PROBE = re.compile(r'__has_include[ \t]*\([ \t]*(?!["<])|__has_include_next[ \t]*\(|'
                       r'__has_embed[ \t]*\(')

#: The nodes the C scanner read, those of them that probe unresolvably,
#: and the probing objects of this run.
_SCANNED: Set[Any] = set()
_PROBING: Set[Any] = set()
_PROBING_OBJECTS: Set[Any] = set()


def names(text: str) -> Tuple[List[Tuple[str, str, str]], bool, bool]:
    """The includes SCons's C scanner reads in ``text`` (and the names of
    literal ``__has_include`` probes), whether it probes unresolvably, and
    whether it probes at all (see the module docstring)."""
    found = INCLUDE.findall(text)
    if "__has_" not in text:
        return found, False, False
    code = _code(text)
    literal = HAS_INCLUDE.findall(code)
    probing = HAS_PROBE.search(code) is not None
    return found + literal, probing, probing or bool(literal)


class _Scanner(SCons.Scanner.ClassicCPP):
    """SCons's C scanner, with literal ``__has_include`` arguments as
    includes, noting the files that probe."""

    def find_include_names(self, node) -> List[Any]:
        found, unresolved, _ = names(node.get_text_contents())
        _SCANNED.add(node)
        if unresolved:
            _PROBING.add(node)
        return found


def CScanner() -> Any:
    """The compile builders' source scanner (``builders.py``)."""
    return _Scanner("CScanner", "$CPPSUFFIXES", "CPPPATH", INCLUDE.pattern)


def judge(obj: Any, read: Iterable[Any], inside: tuple) -> None:
    """Note whether the compile of ``obj`` probes (see the module
    docstring): its sources and the headers the C scanner found (already
    scanned), then the files it depends on explicitly under ``inside``
    (the project's and the build folder's paths, with a trailing
    separator) and those of ``read`` (the nodes its depfile names) the C
    scanner did not read. (Set operations: a null build at 5,000 ops
    judges 10,000 objects.) A probing object is compiled on every build."""
    read = list(read)
    found = not (_PROBING.isdisjoint(obj.sources) and _PROBING.isdisjoint(obj.implicit or ())
                 and _PROBING.isdisjoint(read))   # (a header scanned for another compile)
    if not found:
        rest = set(read).difference(_SCANNED)
        rest.update(n for n in obj.depends if n.get_abspath().startswith(inside))
        found = any(_file(n.get_abspath())[0] for n in rest)
    if found:
        _PROBING_OBJECTS.add(obj)
        obj.set_always_build()
    else:
        _PROBING_OBJECTS.discard(obj)


def probing(node: Any) -> bool:
    """Was ``node`` judged a probing compile in this run?"""
    return node in _PROBING_OBJECTS


#: Per file, read once a run: (does it probe unresolvably, does it probe
#: at all, the names it probes for literally, the names it includes
#: literally); per (file, folders): which of it and the project's headers
#: it includes, transitively, probe (the ninja path: no scan).
_FILES: Dict[str, Tuple[bool, bool, List[str], List[str]]] = {}
_REACHED: Dict[Tuple[str, Tuple[str, ...]], Tuple[List[str], List[str]]] = {}


def _file(path: str) -> Tuple[bool, bool, List[str], List[str]]:
    got = _FILES.get(path)
    if got is None:
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
        except OSError:
            text = ""
        found, unresolved, probes = names(text)
        literal = [n for _, n, _ in HAS_INCLUDE.findall(_code(text))] if probes else []
        got = _FILES[path] = (unresolved, probes, literal, [n for _, n, _ in found])
    return got


def _reached(path: str, folders: Tuple[str, ...], within,
             going: Set[str]) -> Tuple[List[str], List[str], bool]:
    """The folders of ``path`` and of the headers it includes that
    ``within`` accepts (found in its folder, then in ``folders``) that
    probe, the names they probe for literally, and whether that is whole
    (not cut short by an include cycle through ``going``, the headers
    being followed: only whole answers are remembered)."""
    key = (path, folders)
    got = _REACHED.get(key)
    if got is not None:
        return got[0], got[1], True
    going.add(path)
    _, probes, literal, included = _file(path)
    where, literal, whole = ([os.path.dirname(path)] if probes else []), list(literal), True
    for name in included:
        for folder in (os.path.dirname(path),) + folders:
            found = os.path.normpath(os.path.join(folder, name))
            if within(found) and os.path.isfile(found):
                if found in going:
                    whole = False
                else:
                    more, names_, complete = _reached(found, folders, within, going)
                    where, literal, whole = where + more, literal + names_, whole and complete
                break
    going.discard(path)
    if whole:
        _REACHED[key] = (where, literal)
    return where, literal, whole


def search_folders(obj: Any, depfiles: Any) -> List[str]:
    """The folders (paths relative to the project's) whose new files the
    compile of ``obj`` could find, when its source or a project header it
    includes probes (ninja's inputs: see the module docstring), else []:
    the folders of its sources and of those headers, and its ``CPPPATH``
    (its flags' include folders), and in each the folder a literal probe's
    name holds (``sub/x.h``: ``sub``), inside the project and outside the
    build folder (as ``depfiles``, its ``depfiles.Depfiles``, names them).
    (The ninja path scans no header: the files are read here, each once.)"""
    top, build, env = depfiles.top, depfiles.build, obj.get_build_env()
    inside = top.rstrip(os.sep) + os.sep

    def within(path: str) -> bool:
        return (path == top or path.startswith(inside)) and not (
            path == build or path.startswith(build + os.sep))
    cpppath = tuple(f for f in (env.Dir(d).get_abspath() for d in env.get("CPPPATH", ()))
                    if within(f))
    sources = [n.get_abspath() for n in obj.sources]
    reached = [_reached(path, cpppath, within, set())[:2] for path in sources if within(path)]
    probing = [folder for where, _ in reached for folder in where]
    if not probing:
        return []
    subs = {os.path.dirname(name) for _, literal in reached for name in literal} - {""}
    out: Set[str] = set()
    for folder in dict.fromkeys([os.path.dirname(p) for p in sources] + list(cpppath) + probing):
        if within(folder) and os.path.isdir(folder):
            out.add(folder)
            out.update(p for p in (os.path.normpath(os.path.join(folder, sub)) for sub in subs)
                       if within(p) and os.path.isdir(p))
    return sorted(os.path.relpath(f, top) for f in out)
