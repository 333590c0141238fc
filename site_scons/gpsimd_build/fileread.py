"""Reading a named file without surprises: regular files only, never
blocking on a FIFO or device, bounded in size. Standard library only, so
that the manifest cache's checks (``gpsimd_build.manifest.reads``) run
without importing the YAML reader."""

import os
import stat

__all__ = ["FILE_TYPE_WORDS", "MAX_MANIFEST_BYTES", "read_regular_file"]

#: Largest manifest file, bytes (4 MiB; a 5,000-op manifest is about 1.35 MB).
#: A larger file is refused before it is read.
MAX_MANIFEST_BYTES = 4 * 1024 * 1024

#: What a file that is not regular is, in words (``stat`` file types).
FILE_TYPE_WORDS = {
    stat.S_IFDIR: "a directory", stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}


def read_regular_file(path: str, limit: int) -> bytes:
    """The bytes of the regular file ``path`` (symlinks followed), at most
    ``limit`` of them. Never opens a FIFO, a device or a socket (so never
    blocks); raises ``OSError`` (its ``strerror`` says why: "is a FIFO
    (named pipe), not a regular file", "is larger than N bytes", or the
    system's words)."""
    mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode):
        raise _not_regular(mode)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) \
        | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # swapped since the stat above
            raise _not_regular(st.st_mode)
        if st.st_size > limit:
            raise OSError(0, f"is larger than {limit} bytes ({st.st_size} bytes)")
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise OSError(0, f"is larger than {limit} bytes")
        return b"".join(chunks)
    finally:
        os.close(fd)


def _not_regular(mode: int) -> OSError:
    words = FILE_TYPE_WORDS.get(stat.S_IFMT(mode), "not a regular file")
    if stat.S_ISDIR(mode):
        return IsADirectoryError(21, "is a directory")
    return OSError(0, f"is {words}, not a regular file")
