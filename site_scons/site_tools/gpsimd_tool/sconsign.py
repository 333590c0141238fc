"""SCons's record of what each target was built from (``.sconsign``),
written whole or not at all, and a write that fails said in one line.

SCons's own database module (``SCons.dblite``, the default of
``SConsignFile``) writes ``<name>.dblite.tmp`` and renames it; when that
write fails (a full disk) the build ends in Python tracebacks, one more at
interpreter exit, and leaves the partial ``.tmp`` taking the space. This
module is the ``dbm_module`` the tool gives ``env.SConsignFile`` (SCons's
public interface for it): the same file, ``<name>.dblite``, in the same
format (a pickled dict of str -> bytes; either module reads the other's),
written through :func:`gpsimd_device.atomic.write_atomically`. When it
cannot be written, the build says so, naming the file, and exits with
status 2; :func:`written` then tells the record of outputs
(``integrity.py``) not to record this build's outputs, which SCons's file
on disk does not know: an output it no longer knows the sources of would
otherwise be trusted by the next build (after a revert, the object of the
edit the failed write forgot)."""

import os
import pickle
import sys
from typing import Dict

from gpsimd_device.atomic import open_private, write_atomically

__all__ = ["open", "written", "SUFFIX"]

#: What SCons's ``dblite`` appends to a name without a suffix.
SUFFIX = ".dblite"

_failed = []   # the files this process could not write


def written() -> bool:
    """False once a database of this process could not be written."""
    return not _failed


class Database(dict):
    """One ``.sconsign`` database: a dict of str -> bytes in memory, kept on
    disk by :meth:`sync`."""

    def __init__(self, path: str, flag: str):
        super().__init__()
        self.path = path
        self.writable = flag != "r"
        if flag != "n":
            try:
                with open_private(path) as f:        # (a pickle)
                    data = pickle.load(f)
                if isinstance(data, dict):
                    self.update(data)
            except FileNotFoundError:
                pass
            except PermissionError as e:
                sys.stderr.write(f"scons: ignoring {path}: {e.strerror}; every target is "
                                 "built again\n")
            except (OSError, EOFError, pickle.UnpicklingError, ValueError, TypeError,
                    AttributeError, IndexError, ImportError):
                # unreadable: nothing is known to be built (every target is
                # built again), as SCons does with a corrupt file
                sys.stderr.write(f"scons: ignoring {path}: it cannot be read; every target "
                                 "is built again\n")
        self.dirty = flag == "n"

    def __setitem__(self, key: str, value: bytes) -> None:
        super().__setitem__(key, value)
        self.dirty = True

    def sync(self) -> None:
        """Write the database (when changed). A failure is said on stderr
        (``scons: cannot write PATH: WHY (errno N)``) and ends the build
        with status 2 (``SystemExit``: SCons exits with it, and the tool's
        exit handlers still run)."""
        if not (self.dirty and self.writable):
            return
        data: Dict[str, bytes] = dict(self)
        try:
            write_atomically(self.path, pickle.dumps(data, pickle.HIGHEST_PROTOCOL), private=True)
        except OSError as e:
            _failed.append(self.path)
            self.dirty = False      # (said once)
            sys.stderr.write(f"scons: cannot write {self.path}: {e.strerror} (errno {e.errno}); "
                             "the next build builds again what this one built\n")
            raise SystemExit(2) from None
        self.dirty = False

    def close(self) -> None:
        """Write the database (when changed)."""
        self.sync()



def open(file: str, flag: str = "r", mode: int = 0o666) -> Database:  # noqa: A001
    """The dbm interface ``SConsignFile`` calls: the database of ``file``
    (``.dblite`` appended when it has no suffix, as SCons's module does);
    ``flag`` ``r`` (read only), ``w``/``c`` (read, then write), ``n``
    (start empty). ``mode`` is ignored: new files get ``0o666`` less the
    umask, as every file the build writes."""
    del mode
    path = file if os.path.splitext(file)[1] else file + SUFFIX
    return Database(path, flag)
