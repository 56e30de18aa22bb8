"""`tf.keras.utils.get_file` and `tf.keras.datasets`, against TF 2.21's recorded behaviour
(tf_keras 2.21: paths returned, what is printed, the errors), fetching file:// origins
so no network is needed."""

import gzip
import hashlib
import io
import os
import tarfile
import zipfile
from contextlib import redirect_stdout

import numpy as np
import pytest

import asyncflow as tf

get_file = tf.keras.utils.get_file


@pytest.fixture
def src(tmp_path):
    d = tmp_path / "src"
    d.mkdir()
    (d / "a.txt").write_bytes(b"hello world")
    with tarfile.open(d / "arch.tar.gz", "w:gz") as t:
        t.add(d / "a.txt", arcname="arch/a.txt")
    with zipfile.ZipFile(d / "z.zip", "w") as z:
        z.writestr("zz/b.txt", "zip body")
    cache = tmp_path / "cache"
    cache.mkdir()
    return "file://" + str(d) + "/", str(cache)


def _run(f):
    out = io.StringIO()
    with redirect_stdout(out):
        r = f()
    return r, out.getvalue()


def test_download_then_cache(src):
    url, cache = src
    path, out = _run(lambda: get_file("a.txt", url + "a.txt", cache_dir=cache))
    assert path == os.path.join(cache, "datasets", "a.txt")
    assert f"Downloading data from {url}a.txt" in out
    assert open(path, "rb").read() == b"hello world"
    # Cached: the origin is not read again (it does not exist).
    path2, out = _run(lambda: get_file("a.txt", url + "nothere.txt", cache_dir=cache))
    assert path2 == path and "Downloading" not in out
    # The file name defaults to the URL's last component.
    path3, _ = _run(lambda: get_file(origin=url + "a.txt", cache_dir=cache, cache_subdir="other"))
    assert path3 == os.path.join(cache, "other", "a.txt")


def test_hashes(src):
    url, cache = src
    sha = hashlib.sha256(b"hello world").hexdigest()
    md5 = hashlib.md5(b"hello world").hexdigest()
    _run(lambda: get_file("a.txt", url + "a.txt", cache_dir=cache))
    for kw in ({"file_hash": sha}, {"md5_hash": md5}, {"file_hash": md5}):
        _, out = _run(lambda kw=kw: get_file("a.txt", url + "a.txt", cache_dir=cache, **kw))
        assert out == ""
    assert tf.keras.utils.get_file.__module__ == "asyncflow.keras.data_utils"
    bad = "0" * 64
    out = io.StringIO()
    with redirect_stdout(out), pytest.raises(ValueError) as e:
        get_file("a.txt", url + "a.txt", file_hash=bad, cache_dir=cache)
    # TF 2.21's messages.
    assert str(e.value) == (
        "Incomplete or corrupted file detected. The auto file hash does not match the "
        f"provided value of {bad}."
    )
    assert (
        "A local file was found, but it seems to be incomplete or outdated because the auto "
        f"file hash does not match the original value of {bad} so we will re-download the "
        "data." in out.getvalue()
    )
    # No temporary file is left beside the target.
    assert sorted(os.listdir(os.path.join(cache, "datasets"))) == ["a.txt"]


def test_errors(src):
    url, cache = src
    with pytest.raises(Exception) as e, redirect_stdout(io.StringIO()):
        get_file("m.txt", url + "missing.txt", cache_dir=cache)
    assert str(e.value).startswith(f"URL fetch failure on {url}missing.txt: None -- [Errno 2]")
    assert not os.listdir(os.path.join(cache, "datasets"))
    with pytest.raises(ValueError, match='Please specify the "origin" argument'):
        get_file("x")
    with pytest.raises(ValueError) as e:
        get_file(origin="http://example.com/", cache_dir=cache)
    assert str(e.value) == (
        "Can't parse the file name from the origin provided: 'http://example.com/'."
        "Please specify the `fname` as the input param."
    )
    absf = os.path.join(cache, "absf", "q.txt")
    with pytest.raises(FileNotFoundError) as e, redirect_stdout(io.StringIO()):
        get_file(absf, url + "a.txt", cache_dir=cache)
    assert str(e.value) == f"[Errno 2] No such file or directory: '{absf}'"


def test_archives(src):
    url, cache = src
    path, _ = _run(
        lambda: get_file("arch.tar.gz", url + "arch.tar.gz", untar=True, cache_dir=cache)
    )
    assert path == os.path.join(cache, "datasets", "arch")
    assert sorted(os.listdir(os.path.join(cache, "datasets"))) == ["arch", "arch.tar.gz"]
    assert open(os.path.join(path, "a.txt"), "rb").read() == b"hello world"
    kw = {"cache_dir": cache, "cache_subdir": "ex", "extract": True}
    p1, _ = _run(lambda: get_file("arch2.tar.gz", url + "arch.tar.gz", **kw))
    p2, _ = _run(lambda: get_file("z.zip", url + "z.zip", **kw))
    ex = os.path.join(cache, "ex")
    assert (p1, p2) == (os.path.join(ex, "arch2.tar.gz"), os.path.join(ex, "z.zip"))
    assert sorted(os.listdir(ex)) == ["arch", "arch2.tar.gz", "z.zip", "zz"]
    assert open(os.path.join(ex, "zz", "b.txt")).read() == "zip body"
    # An absolute cache_subdir is used as it is.
    p3, _ = _run(lambda: get_file("a.txt", url + "a.txt", cache_dir=cache, cache_subdir=ex))
    assert p3 == os.path.join(ex, "a.txt")


def test_archive_members_stay_inside(tmp_path):
    evil = tmp_path / "evil.tar"
    with tarfile.open(evil, "w") as t:
        data = b"x"
        for name in ("../outside.txt", "ok/inside.txt"):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    cache = tmp_path / "cache"
    cache.mkdir()
    with redirect_stdout(io.StringIO()), pytest.warns(UserWarning) as w:
        get_file("evil.tar", "file://" + str(evil), cache_dir=str(cache), extract=True)
    assert [str(x.message) for x in w] == [
        "Skipping invalid path during archive extraction: '../outside.txt'."
    ]
    assert not (cache / "outside.txt").exists()
    assert (cache / "datasets" / "ok" / "inside.txt").read_bytes() == b"x"


def _idx(path, header, body):
    with gzip.open(path, "wb") as f:
        f.write(header + body)


def test_fashion_mnist_reads_idx_files(tmp_path):
    d = tmp_path / "datasets" / "fashion-mnist"
    d.mkdir(parents=True)
    rng = np.random.RandomState(0)
    sets = {}
    for split, n in (("train", 3), ("t10k", 2)):
        x = rng.randint(0, 256, size=(n, 28, 28)).astype(np.uint8)
        y = rng.randint(0, 10, size=n).astype(np.uint8)
        _idx(d / f"{split}-labels-idx1-ubyte.gz", b"\0" * 8, y.tobytes())
        _idx(d / f"{split}-images-idx3-ubyte.gz", b"\0" * 16, x.tobytes())
        sets[split] = (x, y)
    (x_train, y_train), (x_test, y_test) = tf.keras.datasets.fashion_mnist.load_data(
        cache_dir=str(tmp_path)
    )
    np.testing.assert_array_equal(x_train, sets["train"][0])
    np.testing.assert_array_equal(y_train, sets["train"][1])
    np.testing.assert_array_equal(x_test, sets["t10k"][0])
    np.testing.assert_array_equal(y_test, sets["t10k"][1])
    assert x_train.dtype == np.uint8 and x_train.shape == (3, 28, 28)
    # A truncated images file is an error, not a silently short array.
    _idx(d / "t10k-images-idx3-ubyte.gz", b"\0" * 16, b"\0" * 100)
    with pytest.raises(ValueError, match="not the 2 28x28 images"):
        tf.keras.datasets.fashion_mnist.load_data(cache_dir=str(tmp_path))


def test_mnist_and_boston_from_cached_npz(tmp_path, monkeypatch):
    from asyncflow.keras.datasets import boston_housing, mnist

    m = tmp_path / "mnist.npz"
    arrays = {k: np.arange(6, dtype=np.uint8).reshape(1, 2, 3) + i for i, k in enumerate("abcd")}
    np.savez(m, x_train=arrays["a"], y_train=arrays["b"], x_test=arrays["c"], y_test=arrays["d"])
    seen = []
    monkeypatch.setattr(mnist, "get_file", lambda *a, **k: seen.append((a, k)) or str(m))
    (xa, ya), (xc, yc) = mnist.load_data()
    np.testing.assert_array_equal(xc, arrays["c"])
    assert seen[0][0] == ("mnist.npz",) and seen[0][1]["file_hash"].startswith("731c5ac6")

    b = tmp_path / "boston.npz"
    x = np.arange(10 * 13, dtype=np.float64).reshape(10, 13)
    y = np.arange(10, dtype=np.float64)
    np.savez(b, x=x, y=y)
    monkeypatch.setattr(boston_housing, "get_file", lambda *a, **k: str(b))
    (x_train, y_train), (x_test, y_test) = boston_housing.load_data(test_split=0.2, seed=113)
    order = np.arange(10)
    np.random.RandomState(113).shuffle(order)
    np.testing.assert_array_equal(y_train, y[order][:8])
    np.testing.assert_array_equal(x_test, x[order][8:])


def test_pickled_datasets_refused_and_names_served():
    for mod in ("cifar10", "cifar100", "imdb", "reuters"):
        with pytest.raises(NotImplementedError, match="never unpickles"):
            getattr(tf.keras.datasets, mod).load_data()
    labels = tf.keras.datasets.reuters.get_label_names()
    # Recorded from TF 2.21: a 46-tuple starting cocoa, grain, veg-oil and ending lead.
    assert isinstance(labels, tuple) and len(labels) == 46
    assert labels[:3] == ("cocoa", "grain", "veg-oil") and labels[-1] == "lead"
