"""A build cache keyed independently of where BUILD_DIR is.

SCons's ``CacheDir`` keys each target on its build signature and its path
(``File.get_cachedir_bsig``), and a command's signature names the paths it
runs on, so a cache filled by a build into ``bA`` serves nothing to a build
into ``/tmp/elsewhere/bB``, although the outputs are the same bytes (the
compiler maps BUILD_DIR to one name, ``gpsimd_build.profiles.base.
prefix_maps``). :class:`RelocatableCacheDir`, set as ``$CACHEDIR_CLASS``
(SCons's public ``CacheDir(path, custom_class=...)`` hook), keys a target
of ours on:

* its command's signature with BUILD_DIR, as the graph names it and as an
  absolute path, and then the project's folder, replaced by fixed tokens
  (so that another clone at another path is served too);
* each input's path (relocated the same way) and content signature,
  sorted by path;
* its own path relative to BUILD_DIR.

An object is pushed only when its key holds every file its compile read
(its depfile's, ``depfiles.py``): a header that only the compiler saw (a
macro's ``#include``, a ``-include``) then never lets a clean build take
an object compiled against another version of it. An object whose compile
probed for a file no scanner can name (``probes.py``: ``__has_include`` of
a macro, ``#include_next``...) is never pushed nor retrieved: a header
that appears later would not be in the key.

An entry is taken only when it is a regular file that not every user may
write, of a user who may write its folder (``usable``): a folder of the
cache that only the team may write does not keep anyone else from
rewriting such a file in place (one a build under ``umask 000`` stored:
SCons copies an output's mode into the cache), nor from having put one
there while the folder was open to them; an entry is pushed without that
right, and a folder made for it too.

A target of an environment without ``$GPSIMD_BUILD_DIR`` keeps SCons's own
key. Everything else (where the cache is, how files are copied in and out)
is SCons's.
"""

import contextlib
import functools
import grp
import hashlib
import os
import pwd
import re
import stat
import sys

import SCons.CacheDir

from . import depfiles, integrity, probes

__all__ = ["RelocatableCacheDir", "relocatable_key", "retrieved", "usable"]

_TOKEN = b"<BUILD_DIR>"
_TOP = b"<TOP>"
_PREFIX = b"gpsimd-cache-key-1\0"
#: Each target's key, once computed (its inputs' signatures are final then).
_KEYS = {}


class _Keyed:
    """What ``CacheDir.cachepath`` asks of a node: its key."""

    def __init__(self, key: str):
        self.key = key

    def get_cachedir_bsig(self) -> str:
        return self.key


def _relocation(env):
    """A function that replaces BUILD_DIR's names (as the graph names it
    and absolute) and then the project top's absolute path, where a path
    starts, by fixed tokens; or None without ``$GPSIMD_BUILD_DIR``."""
    base = env.get("GPSIMD_BUILD_DIR") if env is not None else None
    if not base:
        return None
    base = str(base)
    return _relocator(os.path.normpath(base), env.Dir(base).abspath, env.Dir("#").abspath)


@functools.lru_cache(maxsize=None)
def _relocator(relative: str, absolute: str, top: str):
    """:func:`_relocation`'s function for one BUILD_DIR and project (its
    regular expressions compiled once, not for each target). BUILD_DIR's
    names are replaced only where a path inside it starts (the name and
    ``/``): a word of a flag that only equals its name (``-DMODE=release``
    built into ``BUILD_DIR=release``) is kept, or two builds whose flags
    differ in that word would share a key."""
    start = rb"(?:^|(?<=[\0\s'\"=:,(])|(?<=-I))"
    end = rb"(?=/|$|[\0\s'\",)])"
    names = sorted({relative, absolute}, key=len, reverse=True)
    build = re.compile(start + b"(?:" + b"|".join(re.escape(n.encode()) for n in names)
                       + b")(?=/)")
    top_re = re.compile(start + re.escape(top.encode()) + end)
    return lambda text: top_re.sub(_TOP, build.sub(_TOKEN, text))


def relocatable_key(node):
    """The cache key of ``node`` (hex SHA-256), or None when its environment
    does not name ``$GPSIMD_BUILD_DIR`` (SCons's own key is then used)."""
    if not node.has_builder():      # (a source: never in the cache)
        return None
    key = _KEYS.get(node)
    if key is not None:
        return key
    executor = node.get_executor()
    if executor is None:
        # (released once the node was built: SCons asks again only whether
        # an input that exists is in the cache; no key of a target matches)
        return hashlib.sha256(b"released\0" + node.get_abspath().encode()).hexdigest()
    relocated = _relocation(node.get_build_env())
    if relocated is None:
        return None
    h = hashlib.sha256(_PREFIX)
    h.update(relocated(executor.get_contents()))
    inputs = sorted((relocated(child.get_abspath().encode()), child.get_cachedir_csig())
                    for child in node.children())
    for path, csig in inputs:
        h.update(b"\0" + path + b"\0" + str(csig).encode())
    h.update(b"\0target\0" + relocated(node.get_abspath().encode()))
    key = _KEYS[node] = h.hexdigest()
    return key


#: The targets this build retrieved from the cache (their absolute paths).
_RETRIEVED = set()


def retrieved(node) -> bool:
    """Did this build retrieve ``node`` from the cache? (SCons's own flag,
    ``Node.cached``, is cleared once the node is built.)"""
    return node.get_abspath() in _RETRIEVED


def usable(entry: str) -> bool:
    """May a build take the cache entry ``entry``? Yes when it is missing
    (SCons then finds no entry) or a regular file that not every user may
    write, of a user who may write its folder now (root, the folder's
    owner, a member of its group when that may write it); else no, saying
    so on stderr: anyone could have rewritten it in place with another
    source's output, or a user outside the team put it there while the
    folder was open to them (a ``umask 000`` build makes its folders 777;
    ``chmod o-w`` later leaves their entries in it)."""
    try:
        st = os.lstat(entry)
    except FileNotFoundError:
        return True
    folder = os.stat(os.path.dirname(entry))
    if stat.S_ISREG(st.st_mode) and not st.st_mode & stat.S_IWOTH:
        if _may_write(st.st_uid, folder):
            return True
        sys.stderr.write(f"scons: the cache entry {entry} belongs to user {_user(st.st_uid)}, "
                         f"who may not write its folder (mode {stat.S_IMODE(folder.st_mode):o}, "
                         f"owner {_user(folder.st_uid)}, group {_group(folder.st_gid)}): it was "
                         f"put there while the folder was open to them, so it is not taken "
                         f"(built instead). Remove it, or chown it if you trust its bytes\n")
        return False
    what = ("writable by every user" if stat.S_ISREG(st.st_mode) else "not a regular file")
    sys.stderr.write(f"scons: the cache entry {entry} is {what} (mode "
                     f"{stat.S_IMODE(st.st_mode):o}): anyone could have put another output "
                     f"there, so it is not taken (built instead). Remove it, or chmod o-w it "
                     f"if you trust its bytes\n")
    return False


@functools.lru_cache(maxsize=None)
def _may_write(uid: int, folder: os.stat_result) -> bool:
    """May the user ``uid`` write the folder of stat ``folder``, by its
    owner and group (an account the machine does not know: no)?"""
    if uid in (0, folder.st_uid):
        return True
    if not folder.st_mode & stat.S_IWGRP:
        return False
    try:
        account = pwd.getpwuid(uid)
    except KeyError:
        return False
    return folder.st_gid in os.getgrouplist(account.pw_name, account.pw_gid)


def _user(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _group(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


class RelocatableCacheDir(SCons.CacheDir.CacheDir):
    """SCons's CacheDir with :func:`relocatable_key` as the key of our
    targets, which notes what it retrieved (:func:`retrieved`), and pushes
    no object whose compile read a file its key does not hold (a header
    only the compiler's depfile names: ``depfiles.unseen``; the next
    build compiles it again, with that file among its dependencies, and
    pushes it then), nor an output whose action read a source that
    changed while it ran (``integrity.read_an_edit``: an editor's save
    during a compile or a test run; its key holds the content from before
    the edit, so a later build of that content would take it). A compile
    that depends on a file's absence (``probes.probing``: its key cannot
    hold what it did not find) is neither pushed nor retrieved. An entry
    is stored without write access for others and taken only when
    :func:`usable`."""

    @classmethod
    def copy_to_cache(cls, env, src, dst) -> str:
        result = super().copy_to_cache(env, src, dst)
        fd = os.open(dst, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)   # (not a link put there)
        try:
            os.fchmod(fd, stat.S_IMODE(os.fstat(fd).st_mode) & ~stat.S_IWOTH)
        finally:
            os.close(fd)
        return result

    def push(self, node):
        if depfiles.unseen(node) or probes.probing(node) or integrity.read_an_edit(node):
            return None
        folder = self.cachepath(node)[0] if self.is_enabled() and not self.is_readonly() \
            else None
        if folder is not None:      # (SCons's makedirs: 777 under umask 000, open to anyone)
            with contextlib.suppress(OSError):      # (there already; else SCons says why)
                os.mkdir(folder, 0o775)
        return super().push(node)

    def cachepath(self, node):
        key = relocatable_key(node)
        return super().cachepath(node if key is None else _Keyed(key))

    def retrieve(self, node) -> bool:
        if probes.probing(node):
            return False
        entry = self.cachepath(node)[1] if self.is_enabled() else None
        if entry is not None and not usable(entry):
            return False
        done = super().retrieve(node)
        if done:
            _RETRIEVED.add(node.get_abspath())
        return done
