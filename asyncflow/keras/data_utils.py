"""`tf.keras.utils.get_file` and `validate_file`: a file fetched once into Keras' cache.

Keras' datasets and pretrained application weights are named by a URL and looked up
first in the cache (`~/.keras/<cache_subdir>/<fname>`, or `/tmp/.keras` where the home
directory is not writable), so a machine without network access runs a program whose
files were placed there beforehand.  A download goes to a temporary name beside its
target and is renamed into place only when complete and, given a hash, verified: a
failed or interrupted fetch never leaves a partial file for the next run to trust.
Archives are extracted with members confined to the target directory.
"""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import tarfile
import tempfile
import urllib.error
import urllib.request
import warnings
import zipfile
from urllib.parse import urlsplit

from asyncflow.keras.utils_more import Progbar, _print_msg

__all__ = ["get_file", "validate_file"]

_CHUNK = 65535


def _hasher(algorithm, file_hash=None):
    """sha256 when asked, or for 'auto' with a 64-digit hash; else md5 (Keras' legacy)."""
    if algorithm == "sha256" or (
        algorithm == "auto" and file_hash is not None and len(file_hash) == 64
    ):
        return hashlib.sha256()
    return hashlib.md5()


def _hash_file(fpath, hasher, chunk_size=_CHUNK):
    with open(fpath, "rb") as f:
        for chunk in iter(lambda: f.read(chunk_size), b""):
            hasher.update(chunk)
    return hasher.hexdigest()


def validate_file(fpath, file_hash, algorithm="auto", chunk_size=_CHUNK):
    """Whether the file at `fpath` has the sha256 or md5 hash `file_hash`."""
    return _hash_file(fpath, _hasher(algorithm, file_hash), chunk_size) == str(file_hash)


def _inside(base, name):
    target = os.path.realpath(os.path.join(base, name))
    return target == base or target.startswith(base + os.sep)


def _safe_tar_members(archive, base):
    """The members that land inside `base` (links too, by where they point); devices and
    escaping members are skipped with Keras' warning."""
    for member in archive.getmembers():
        inside = _inside(base, member.name)
        if inside and (member.issym() or member.islnk()):
            link_dir = os.path.relpath(os.path.dirname(os.path.join(base, member.name)), base)
            inside = _inside(base, os.path.join(link_dir, member.linkname))
        if not inside:
            warnings.warn(
                f"Skipping invalid path during archive extraction: '{member.name}'.",
                stacklevel=3,
            )
        elif not member.isdev():
            yield member


def _extract_archive(file_path, path=".", archive_format="auto"):
    """Extract a tar (plain, gz, bz2) or zip archive into `path`; True if it was one."""
    if archive_format is None:
        return False
    if archive_format == "auto":
        archive_format = ["tar", "zip"]
    if isinstance(archive_format, str):
        archive_format = [archive_format]
    base = os.path.realpath(path)
    for kind in archive_format:
        if kind == "tar" and tarfile.is_tarfile(file_path):
            try:
                with tarfile.open(file_path) as archive:
                    archive.extractall(base, members=list(_safe_tar_members(archive, base)))
            except (tarfile.TarError, RuntimeError, KeyboardInterrupt):
                _remove(path)
                raise
            return True
        if kind == "zip" and zipfile.is_zipfile(file_path):
            try:
                with zipfile.ZipFile(file_path) as archive:
                    members = [n for n in archive.namelist() if _inside(base, n)]
                    archive.extractall(base, members=members)
            except (zipfile.BadZipFile, RuntimeError, KeyboardInterrupt):
                _remove(path)
                raise
            return True
    return False


def _remove(path):
    if os.path.isfile(path):
        os.remove(path)
    elif os.path.isdir(path):
        shutil.rmtree(path)


def _download(origin, fpath):
    """Fetch `origin` to a temporary file beside `fpath`, showing Keras' progress bar."""
    bar = []

    def progress(block_num, block_size, total_size):
        if not bar:
            bar.append(Progbar(None if total_size == -1 else total_size))
        done = block_num * block_size
        if bar[0].target is None or done < bar[0].target:
            bar[0].update(done)
        elif len(bar) == 1:
            bar[0].update(bar[0].target)
            bar.append(True)

    if not os.path.isdir(os.path.dirname(fpath) or "."):
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), fpath)
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(fpath) + ".", dir=os.path.dirname(fpath))
    os.close(fd)
    message = "URL fetch failure on {}: {} -- {}"
    try:
        try:
            urllib.request.urlretrieve(origin, tmp, progress)
        except urllib.error.HTTPError as e:
            raise Exception(message.format(origin, e.code, e.msg)) from None
        except urllib.error.URLError as e:
            raise Exception(message.format(origin, e.errno, e.reason)) from None
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    return tmp


def get_file(
    fname=None,
    origin=None,
    untar=False,
    md5_hash=None,
    file_hash=None,
    cache_subdir="datasets",
    hash_algorithm="auto",
    extract=False,
    archive_format="auto",
    cache_dir=None,
):
    """The path of `origin`'s file in Keras' cache, downloaded first if absent or if its
    hash differs from `file_hash` (sha256 or md5); `extract`/`untar` unpack an archive
    beside it."""
    if origin is None:
        raise ValueError('Please specify the "origin" argument (URL of the file to download).')
    if cache_dir is None:
        cache_dir = os.path.join(os.path.expanduser("~"), ".keras")
    if md5_hash is not None and file_hash is None:
        file_hash, hash_algorithm = md5_hash, "md5"
    base = os.path.expanduser(cache_dir)
    if not os.access(base, os.W_OK):
        base = os.path.join("/tmp", ".keras")
    datadir = os.path.join(base, cache_subdir)
    os.makedirs(datadir, exist_ok=True)

    fname = os.fspath(fname) if fname is not None else None
    if not fname:
        fname = os.path.basename(urlsplit(origin).path)
        if not fname:
            raise ValueError(
                f"Can't parse the file name from the origin provided: '{origin}'."
                "Please specify the `fname` as the input param."
            )
    if untar:
        if fname.endswith(".tar.gz"):
            fname = fname[: -len(".tar.gz")]
        untar_fpath = os.path.join(datadir, fname)
        fpath = untar_fpath + ".tar.gz"
    else:
        fpath = os.path.join(datadir, fname)

    download = not os.path.exists(fpath)
    if not download and file_hash is not None:
        if not validate_file(fpath, file_hash, algorithm=hash_algorithm):
            _print_msg(
                "A local file was found, but it seems to be incomplete or outdated because "
                f"the {hash_algorithm} file hash does not match the original value of "
                f"{file_hash} so we will re-download the data.\n"
            )
            download = True
    if download:
        _print_msg(f"Downloading data from {origin}\n")
        tmp = _download(origin, fpath)
        if file_hash is not None and not validate_file(tmp, file_hash, algorithm=hash_algorithm):
            os.remove(tmp)
            raise ValueError(
                f"Incomplete or corrupted file detected. The {hash_algorithm} file hash does "
                f"not match the provided value of {file_hash}."
            )
        os.replace(tmp, fpath)

    if untar:
        if not os.path.exists(untar_fpath):
            _extract_archive(fpath, datadir, archive_format="tar")
        return untar_fpath
    if extract:
        _extract_archive(fpath, datadir, archive_format)
    return fpath
