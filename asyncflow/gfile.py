"""`tf.gfile` / `tf.io.gfile` on the local filesystem: the file idiom TF1 scripts use
(`with tf.gfile.GFile(path, "rb") as f: graph_def.ParseFromString(f.read())`).

Errors are TF's: a missing file is NotFoundError, an existing one where a new one is
required AlreadyExistsError, other OS failures their closest TF class.
"""

from __future__ import annotations

import errno
import glob as _glob
import os
import shutil
import stat as stat_module

from asyncflow import errors

__all__ = [
    "GFile", "FastGFile", "Open", "Exists", "IsDirectory", "ListDirectory", "MakeDirs",
    "MkDir", "Remove", "Rename", "Glob", "Copy", "DeleteRecursively", "Stat", "Walk",
    "exists", "isdir", "listdir", "makedirs", "mkdir", "remove", "rename", "glob", "copy",
    "rmtree", "stat", "walk", "get_registered_schemes", "join", "FileStatistics",
]  # fmt: skip


_FILE = "file://"


def _local(path) -> str:
    """A local path for `path`; a `file://` URL is its path, any other scheme (gs://,
    s3://, hdfs://, ...) is UnimplementedError, as in a TF build without that file
    system."""
    path = os.fsdecode(os.fspath(path))
    if path.startswith(_FILE):
        return path[len(_FILE) :]
    if "://" in path[1:]:
        scheme = path.split("://", 1)[0]
        raise errors.UnimplementedError(
            None, None, f"File system scheme '{scheme}' not implemented (file: '{path}')"
        )
    return path


def get_registered_schemes() -> list[str]:
    """The URL schemes paths may carry here: the local file system's ("" and "file")."""
    return ["file", ""]


def join(path, *paths):
    """`os.path.join`, keeping a URL's `scheme://` on the front unless a later component
    is absolute (TF's `tf.io.gfile.join`)."""
    head = os.fsdecode(os.fspath(path))
    if "://" in head[1:]:
        scheme, rest = head.split("://", 1)
        joined = os.path.join(rest, *paths)
        if any(os.fsdecode(os.fspath(p)).startswith("/") for p in paths):
            return joined
        return f"{scheme}://{joined}"
    return os.path.join(path, *paths)


def _error(e: OSError, path) -> errors.OpError:
    cls = {
        errno.ENOENT: errors.NotFoundError,
        errno.EEXIST: errors.AlreadyExistsError,
        errno.EACCES: errors.PermissionDeniedError,
        errno.EPERM: errors.PermissionDeniedError,
    }.get(e.errno, errors.UnknownError)
    return cls(None, None, f"{path}; {e.strerror or e}")


class GFile:
    """A file object (TF's `tf.gfile.GFile`): read, write, readline, iteration, seek, tell,
    size, flush, close; a context manager.  `mode` is open()'s ("r", "rb", "w", "a"...)."""

    def __init__(self, name, mode="r"):
        self.name = os.fspath(name)
        self.mode = mode
        try:
            self._f = open(_local(self.name), mode)  # noqa: SIM115 - closed by close()/__exit__
        except OSError as e:
            raise _error(e, self.name) from None

    def read(self, n=-1):
        return self._f.read(n)

    def readline(self):
        return self._f.readline()

    def readlines(self):
        return self._f.readlines()

    def write(self, data):
        self._f.write(data)

    def seek(self, offset, whence=0):
        return self._f.seek(offset, whence)

    def tell(self):
        return self._f.tell()

    def size(self) -> int:
        return os.fstat(self._f.fileno()).st_size

    def flush(self):
        self._f.flush()

    def close(self):
        self._f.close()

    def __iter__(self):
        return iter(self._f)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


FastGFile = Open = GFile


def Exists(filename) -> bool:  # noqa: N802 - TF's name
    return os.path.exists(_local(filename))


def IsDirectory(dirname) -> bool:  # noqa: N802
    return os.path.isdir(_local(dirname))


def ListDirectory(dirname) -> list[str]:  # noqa: N802
    try:
        return sorted(os.listdir(_local(dirname)))
    except OSError as e:
        raise _error(e, dirname) from None


def MakeDirs(dirname) -> None:  # noqa: N802
    try:
        os.makedirs(_local(dirname), exist_ok=True)
    except OSError as e:
        raise _error(e, dirname) from None


def MkDir(dirname) -> None:  # noqa: N802
    try:
        os.mkdir(_local(dirname))
    except OSError as e:
        raise _error(e, dirname) from None


def Remove(filename) -> None:  # noqa: N802
    try:
        os.remove(_local(filename))
    except OSError as e:
        raise _error(e, filename) from None


def Rename(oldname, newname, overwrite=False) -> None:  # noqa: N802
    oldname, newname = _local(oldname), _local(newname)
    if not overwrite and os.path.exists(newname):
        raise errors.AlreadyExistsError(None, None, f"{newname}; File already exists")
    try:
        os.replace(oldname, newname)
    except OSError as e:
        raise _error(e, oldname) from None


def Glob(filename) -> list[str]:  # noqa: N802
    pattern = os.fsdecode(os.fspath(filename))
    found = sorted(_glob.glob(_local(pattern)))
    return [_FILE + f for f in found] if pattern.startswith(_FILE) else found


def Copy(oldpath, newpath, overwrite=False) -> None:  # noqa: N802
    oldpath, newpath = _local(oldpath), _local(newpath)
    if not overwrite and os.path.exists(newpath):
        raise errors.AlreadyExistsError(None, None, f"{newpath}; File already exists")
    try:
        shutil.copyfile(oldpath, newpath)
    except OSError as e:
        raise _error(e, oldpath) from None


def DeleteRecursively(dirname) -> None:  # noqa: N802
    try:
        shutil.rmtree(_local(dirname))
    except OSError as e:
        raise _error(e, dirname) from None


class FileStatistics:
    """What `Stat` tells of a file (TF's FileStatistics): `length` in bytes,
    `mtime_nsec`, `is_directory`."""

    __slots__ = ("length", "mtime_nsec", "is_directory")

    def __init__(self, length=0, mtime_nsec=0, is_directory=False):
        self.length, self.mtime_nsec, self.is_directory = length, mtime_nsec, is_directory


def Stat(filename) -> FileStatistics:  # noqa: N802
    try:
        st = os.stat(_local(filename))
    except OSError as e:
        raise _error(e, filename) from None
    # TF reports whole seconds in nanoseconds.
    return FileStatistics(
        st.st_size, int(st.st_mtime) * 1_000_000_000, stat_module.S_ISDIR(st.st_mode)
    )


def Walk(top, in_order=True):  # noqa: N802
    yield from os.walk(_local(top), topdown=in_order)


# tf.io.gfile's lowercase names: TF 2's functions, with TF 2's argument names.


def exists(path) -> bool:
    return Exists(path)


def isdir(path) -> bool:
    return IsDirectory(path)


def listdir(path) -> list[str]:
    return ListDirectory(path)


def makedirs(path) -> None:
    MakeDirs(path)


def mkdir(path) -> None:
    MkDir(path)


def remove(path) -> None:
    Remove(path)


def rename(src, dst, overwrite=False) -> None:
    Rename(src, dst, overwrite)


def glob(pattern) -> list[str]:
    return Glob(pattern)


def copy(src, dst, overwrite=False) -> None:
    Copy(src, dst, overwrite)


def rmtree(path) -> None:
    DeleteRecursively(path)


def stat(path) -> FileStatistics:
    return Stat(path)


def walk(top, topdown=True, onerror=None):
    """(directory, subdirectories, files) for `top` and below, parents first when
    `topdown`; a directory that cannot be listed goes to `onerror` (if given) and is
    skipped."""
    try:
        names = ListDirectory(top)
    except errors.OpError as e:
        if onerror is not None:
            onerror(e)
        return
    top = os.fsdecode(os.fspath(top))
    subdirs = [n for n in names if IsDirectory(join(top, n))]
    files = [n for n in names if n not in subdirs]
    if topdown:
        yield top, subdirs, files
    for d in subdirs:
        yield from walk(join(top, d), topdown, onerror)
    if not topdown:
        yield top, subdirs, files
